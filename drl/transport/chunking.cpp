#include "transport/chunking.h"

#include <cstring>
#include <stdexcept>

#include "merge_kernel.h"

namespace shesha::transport {

std::uint16_t ChunkLayout::elems_in(std::uint16_t chunk_index) const noexcept {
    if (chunk_index >= chunk_count) return 0;
    const std::size_t start = offset(chunk_index);
    const std::size_t left = model_elems - start;
    return static_cast<std::uint16_t>(left < chunk_elems ? left : chunk_elems);
}

std::optional<ChunkLayout> make_layout(std::uint32_t model_elems, std::uint32_t chunk_elems, std::string* error) {
    auto fail = [&](const char* why) -> std::optional<ChunkLayout> {
        if (error != nullptr) *error = why;
        return std::nullopt;
    };
    if (model_elems == 0) return fail("model has no elements");
    if (chunk_elems == 0) return fail("chunk_elems must be at least 1");
    if (chunk_elems > proto::kMaxElements) return fail("chunk_elems exceeds proto::kMaxElements (2048)");
    const std::uint64_t count = (std::uint64_t{model_elems} + chunk_elems - 1) / chunk_elems;
    if (count > 0xFFFF) return fail("more than 65535 chunks: raise chunk_elems");
    if (error != nullptr) error->clear();
    ChunkLayout l;
    l.model_elems = model_elems;
    l.chunk_elems = static_cast<std::uint16_t>(chunk_elems);
    l.chunk_count = static_cast<std::uint16_t>(count);
    return l;
}

std::span<const float> chunk_slice(const ChunkLayout& layout, std::span<const float> flat,
                                   std::uint16_t chunk_index) noexcept {
    if (chunk_index >= layout.chunk_count || flat.size() != layout.model_elems) return {};
    return flat.subspan(layout.offset(chunk_index), layout.elems_in(chunk_index));
}

std::span<float> chunk_slice(const ChunkLayout& layout, std::span<float> flat, std::uint16_t chunk_index) noexcept {
    if (chunk_index >= layout.chunk_count || flat.size() != layout.model_elems) return {};
    return flat.subspan(layout.offset(chunk_index), layout.elems_in(chunk_index));
}

void set_chunk_fields(const ChunkLayout& layout, std::uint16_t chunk_index, proto::Header& h) noexcept {
    h.chunk_index = chunk_index;
    h.chunk_count = layout.chunk_count;
    h.elem_count = layout.elems_in(chunk_index);
}

bool all_finite(const std::uint8_t* bytes, std::size_t n) noexcept {
    // Exponent all ones is NaN or infinity. Branch-free accumulation so the loop vectorises.
    std::uint32_t bad = 0;
    for (std::size_t i = 0; i < n; ++i) {
        std::uint32_t u;
        std::memcpy(&u, bytes + 4 * i, sizeof u);
        bad |= static_cast<std::uint32_t>((u & 0x7F800000u) == 0x7F800000u);
    }
    return bad == 0;
}

bool all_finite(std::span<const float> v) noexcept {
    return all_finite(reinterpret_cast<const std::uint8_t*>(v.data()), v.size());
}

std::string_view to_string(ApplyResult r) noexcept {
    switch (r) {
    case ApplyResult::Ok: return "Ok";
    case ApplyResult::WrongType: return "WrongType";
    case ApplyResult::WrongElemType: return "WrongElemType";
    case ApplyResult::WrongCluster: return "WrongCluster";
    case ApplyResult::WrongChunkCount: return "WrongChunkCount";
    case ApplyResult::BadChunkIndex: return "BadChunkIndex";
    case ApplyResult::WrongElemCount: return "WrongElemCount";
    case ApplyResult::LengthMismatch: return "LengthMismatch";
    case ApplyResult::NonFinite: return "NonFinite";
    case ApplyResult::TargetSize: return "TargetSize";
    }
    return "Unknown";
}

std::uint64_t ReassemblerStats::rejected_total() const noexcept {
    std::uint64_t total = 0;
    for (std::uint64_t n : rejected) total += n;
    return total;
}

Reassembler::Reassembler(const ChunkLayout& layout, std::uint16_t cluster_id, proto::MsgType accepted_type,
                         ApplyMode mode)
    : layout_(layout), cluster_id_(cluster_id), type_(accepted_type), mode_(mode), per_chunk_(layout.chunk_count, 0) {
    if (layout.chunk_count == 0 || layout.chunk_elems == 0 ||
        std::size_t{layout.chunk_count} * layout.chunk_elems < layout.model_elems ||
        std::size_t{layout.chunk_count - 1u} * layout.chunk_elems >= layout.model_elems)
        throw std::invalid_argument("Reassembler: inconsistent ChunkLayout (use make_layout)");
}

ApplyResult Reassembler::reject(ApplyResult r) noexcept {
    ++stats_.rejected[static_cast<std::size_t>(r)];
    return r;
}

ApplyResult Reassembler::apply(const proto::Header& h, std::span<const std::uint8_t> payload,
                               std::span<float> target) noexcept {
    if (h.type != type_) return reject(ApplyResult::WrongType);
    if (h.elem_type != proto::ElemType::F32) return reject(ApplyResult::WrongElemType);
    if (h.cluster_id != cluster_id_) return reject(ApplyResult::WrongCluster);
    if (h.chunk_count != layout_.chunk_count) return reject(ApplyResult::WrongChunkCount);
    if (h.chunk_index >= layout_.chunk_count) return reject(ApplyResult::BadChunkIndex);
    const std::uint16_t n = layout_.elems_in(h.chunk_index);
    if (h.elem_count != n) return reject(ApplyResult::WrongElemCount);
    if (payload.size() != std::size_t{n} * sizeof(float)) return reject(ApplyResult::LengthMismatch);
    if (!all_finite(payload.data(), n)) return reject(ApplyResult::NonFinite);
    if (target.size() != layout_.model_elems) return reject(ApplyResult::TargetSize);

    float* dst = target.data() + layout_.offset(h.chunk_index);
    if (mode_ == ApplyMode::Accumulate) {
        // The switch's kernel: one binary32 addition per element, unaligned source allowed.
        core::add_f32(dst, reinterpret_cast<const float*>(payload.data()), n);
    } else {
        std::memcpy(dst, payload.data(), payload.size());
    }
    std::uint32_t& count = per_chunk_[h.chunk_index];
    if (count == 0) ++chunks_covered_;
    count += h.contrib_count;
    ++stats_.applied;
    stats_.contributions += h.contrib_count;
    return ApplyResult::Ok;
}

std::uint32_t Reassembler::contributions(std::uint16_t chunk_index) const noexcept {
    return chunk_index < per_chunk_.size() ? per_chunk_[chunk_index] : 0;
}

void Reassembler::reset() noexcept {
    for (std::uint32_t& c : per_chunk_) c = 0;
    chunks_covered_ = 0;
}

}  // namespace shesha::transport

// Gradient and model chunking: how a flat fp32 vector of model size maps onto Shesha chunks, and
// the receiving side (Reassembler) that applies validated chunk payloads to a flat buffer.
//
// A flat vector of N elements is cut into chunk_count = ceil(N / E) chunks of E elements; chunk k
// covers [k*E, min(N, (k+1)*E)), so only the last chunk may be shorter. The same layout is used
// by the sender (CreditSender), the switch merges chunks of equal (cluster, chunk_index), and the
// learner's Reassembler puts them back at the same offsets.
//
// No DPDK, no libtorch, no clocks: shared by workers, learners, the simulator and the verifier.
// Nothing here allocates or throws after construction.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "protocol.h"

namespace shesha::transport {

struct ChunkLayout {
    std::uint32_t model_elems = 0;  // N: elements of the whole flat vector
    std::uint16_t chunk_elems = 0;  // E: elements per chunk (the last chunk may be shorter)
    std::uint16_t chunk_count = 0;  // ceil(N / E)

    std::size_t offset(std::uint16_t chunk_index) const noexcept {
        return std::size_t{chunk_index} * chunk_elems;
    }
    // Elements in chunk chunk_index (0 if out of range).
    std::uint16_t elems_in(std::uint16_t chunk_index) const noexcept;
};

// Builds the layout, or explains why it is impossible (empty model, E == 0 or > kMaxElements,
// more than 65535 chunks). The error is empty on success.
std::optional<ChunkLayout> make_layout(std::uint32_t model_elems, std::uint32_t chunk_elems,
                                       std::string* error = nullptr);

// The slice of a flat vector that chunk chunk_index covers (empty if the index or the vector's size
// does not fit the layout).
std::span<const float> chunk_slice(const ChunkLayout& layout, std::span<const float> flat,
                                   std::uint16_t chunk_index) noexcept;
std::span<float> chunk_slice(const ChunkLayout& layout, std::span<float> flat,
                             std::uint16_t chunk_index) noexcept;

// Writes chunk_index, chunk_count and elem_count (the other fields are left alone).
void set_chunk_fields(const ChunkLayout& layout, std::uint16_t chunk_index, proto::Header& h) noexcept;

// True if every one of the n fp32 values is finite (no NaN, no +-Inf). Reads raw bytes, so the
// pointer needs no alignment (wire payloads sit at odd offsets).
bool all_finite(const std::uint8_t* bytes, std::size_t n) noexcept;
bool all_finite(std::span<const float> v) noexcept;

// ---- Receiving side -------------------------------------------------------------------------

// Why a chunk was refused. Checked in this order; the first failure is returned and counted.
enum class ApplyResult : std::uint8_t {
    Ok = 0,
    WrongType,        // not the message type this reassembler takes (GRADIENT or MODEL)
    WrongElemType,    // not F32
    WrongCluster,     // cluster_id is not this reassembler's
    WrongChunkCount,  // chunk_count disagrees with the model's layout
    BadChunkIndex,    // chunk_index >= chunk_count
    WrongElemCount,   // elem_count is not the layout's size for that chunk
    LengthMismatch,   // payload bytes != elem_count * 4
    NonFinite,        // a NaN or an infinity in the payload (nothing of the chunk is applied)
    TargetSize,       // the target buffer is not model_elems long (a caller bug)
};
inline constexpr std::size_t kApplyResultCount = 10;
std::string_view to_string(ApplyResult r) noexcept;

enum class ApplyMode : std::uint8_t {
    Accumulate,  // target[slice] += payload (a learner summing gradients)
    Overwrite,   // target[slice] = payload (a worker receiving MODEL parameters)
};

struct ReassemblerStats {
    std::uint64_t applied = 0;        // chunks applied
    std::uint64_t contributions = 0;  // sum of contrib_count over applied chunks
    std::array<std::uint64_t, kApplyResultCount> rejected{};  // by ApplyResult (index 0 unused)
    std::uint64_t rejected_total() const noexcept;
};

// Applies chunk payloads of one cluster to a caller-owned flat buffer of model_elems floats (a
// gradient accumulator or the parameters). Keeps per-chunk contribution counts since the last
// reset() so the learner can tell which parts of the model an update covered.
class Reassembler {
public:
    Reassembler(const ChunkLayout& layout, std::uint16_t cluster_id,
                proto::MsgType accepted_type = proto::MsgType::Gradient,
                ApplyMode mode = ApplyMode::Accumulate);

    // Validates a decoded message (proto::decode already checked the codec-level rules) and
    // applies it to target. Never partially applies a chunk.
    ApplyResult apply(const proto::Header& h, std::span<const std::uint8_t> payload,
                      std::span<float> target) noexcept;
    ApplyResult apply(const proto::Message& m, std::span<float> target) noexcept {
        return apply(m.hdr, m.payload, target);
    }

    // Contributions applied to chunk k since the last reset (0 for out-of-range k).
    std::uint32_t contributions(std::uint16_t chunk_index) const noexcept;
    // Chunks with at least one contribution since the last reset.
    std::uint32_t chunks_covered() const noexcept { return chunks_covered_; }
    bool complete() const noexcept { return chunks_covered_ == layout_.chunk_count; }
    void reset() noexcept;  // forgets the per-chunk counts (not the stats)

    const ChunkLayout& layout() const noexcept { return layout_; }
    const ReassemblerStats& stats() const noexcept { return stats_; }

private:
    ApplyResult reject(ApplyResult r) noexcept;

    ChunkLayout layout_;
    std::uint16_t cluster_id_;
    proto::MsgType type_;
    ApplyMode mode_;
    std::vector<std::uint32_t> per_chunk_;
    std::uint32_t chunks_covered_ = 0;
    ReassemblerStats stats_;
};

}  // namespace shesha::transport

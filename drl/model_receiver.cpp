#include "model_receiver.h"

#include <algorithm>

#include "drl_wire.h"

namespace shesha::drl {

ModelReceiver::ModelReceiver(const transport::ChunkLayout& layout, std::uint16_t cluster_id)
    : reassembler_(layout, cluster_id, proto::MsgType::Model, transport::ApplyMode::Overwrite),
      incoming_(layout.model_elems, 0.0F),
      staging_(layout.model_elems, 0.0F),
      adopted_(layout.model_elems, 0.0F),
      have_chunk_(layout.chunk_count, 0) {}

void ModelReceiver::start_assembly(std::uint32_t version) noexcept {
    if (assembling_ && chunks_staged_ > 0) ++stats_.assemblies_abandoned;
    assembling_ = true;
    assembling_version_ = version;
    chunks_staged_ = 0;
    std::fill(have_chunk_.begin(), have_chunk_.end(), std::uint8_t{0});
}

ModelChunkResult ModelReceiver::on_chunk(const proto::Header& h, std::span<const std::uint8_t> payload) noexcept {
    // Validate first (the Reassembler writes only the chunk's slice of incoming_, and only if
    // every check passes), so a bad chunk can never disturb an assembly in progress.
    if (reassembler_.apply(h, payload, incoming_) != transport::ApplyResult::Ok) return ModelChunkResult::Rejected;

    const std::uint32_t incarnation = h.seq;
    const std::uint32_t version = h.model_version;
    if (!any_incarnation_ || serial_after(incarnation, incarnation_)) {
        if (any_incarnation_) ++stats_.learner_restarts;
        any_incarnation_ = true;
        incarnation_ = incarnation;
        adopted_this_incarnation_ = false;
        start_assembly(version);
    } else if (incarnation != incarnation_) {
        ++stats_.chunks_stale;
        return ModelChunkResult::Stale;
    } else if (adopted_this_incarnation_ && !serial_after(version, adopted_version_)) {
        ++stats_.chunks_stale;
        if (version == adopted_version_ && h.chunk_index == 0) ++stats_.adopted_resent;
        return ModelChunkResult::Stale;
    } else if (!assembling_ || serial_after(version, assembling_version_)) {
        start_assembly(version);
    } else if (version != assembling_version_) {
        ++stats_.chunks_stale;
        return ModelChunkResult::Stale;
    }

    const std::uint16_t k = h.chunk_index;
    if (have_chunk_[k]) {
        ++stats_.chunks_duplicate;
        return ModelChunkResult::Duplicate;
    }
    const auto& layout = reassembler_.layout();
    const auto from = incoming_.begin() + static_cast<std::ptrdiff_t>(layout.offset(k));
    std::copy(from, from + layout.elems_in(k), staging_.begin() + static_cast<std::ptrdiff_t>(layout.offset(k)));
    have_chunk_[k] = 1;
    ++stats_.chunks_staged;
    if (++chunks_staged_ < layout.chunk_count) return ModelChunkResult::Staged;

    adopted_.swap(staging_);
    adopted_version_ = assembling_version_;
    adopted_this_incarnation_ = true;
    has_model_ = true;
    assembling_ = false;
    chunks_staged_ = 0;
    std::fill(have_chunk_.begin(), have_chunk_.end(), std::uint8_t{0});
    ++stats_.versions_adopted;
    return ModelChunkResult::Adopted;
}

}  // namespace shesha::drl

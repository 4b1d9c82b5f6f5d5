// The worker's side of model distribution: assembles MODEL chunks of one published version and
// adopts the version once every chunk has arrived (docs/aom.md, "Model distribution").
//
// Rules, per chunk (after the Reassembler's checks: type MODEL, F32, cluster, layout, finite):
//   - the learner's incarnation (MODEL seq) is compared first: an older incarnation is ignored
//     (a late datagram of a learner that has since restarted); a newer one means the learner
//     restarted: any version of it may be adopted, even one lower than the version held;
//   - within an incarnation, versions not newer than the adopted one are ignored (duplicates,
//     rebroadcasts, reordering); a newer version than the one being assembled restarts assembly;
//     chunks of an older version than the one being assembled are ignored;
//   - when all chunks of the version being assembled are in, the staged parameters are adopted.
// Nothing allocates after construction.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "transport/chunking.h"

namespace shesha::drl {

enum class ModelChunkResult : std::uint8_t {
    Rejected,      // refused by the Reassembler's checks (counted there)
    Stale,         // older incarnation, or a version already adopted or superseded
    Duplicate,     // a chunk already staged for the version being assembled
    Staged,        // stored; the version is not complete yet
    Adopted,       // this chunk completed the version: parameters() changed
};

struct ModelReceiverStats {
    std::uint64_t chunks_staged = 0;
    std::uint64_t chunks_stale = 0;
    std::uint64_t chunks_duplicate = 0;
    std::uint64_t versions_adopted = 0;
    std::uint64_t assemblies_abandoned = 0;  // a newer version arrived before the older completed
    std::uint64_t learner_restarts = 0;      // incarnation changes after the first
    // The learner sent the adopted version again (its chunk 0; a rebroadcast or an answer to a
    // model request): it had nothing newer to publish (drl/update_budget.h).
    std::uint64_t adopted_resent = 0;
};

class ModelReceiver {
public:
    ModelReceiver(const transport::ChunkLayout& layout, std::uint16_t cluster_id);

    ModelChunkResult on_chunk(const proto::Header& h, std::span<const std::uint8_t> payload) noexcept;

    bool has_model() const noexcept { return has_model_; }
    std::uint32_t version() const noexcept { return adopted_version_; }
    std::uint32_t incarnation() const noexcept { return incarnation_; }
    // The adopted parameters (valid once has_model()).
    std::span<const float> parameters() const noexcept { return adopted_; }
    const ModelReceiverStats& stats() const noexcept { return stats_; }
    const transport::ReassemblerStats& reassembler_stats() const noexcept { return reassembler_.stats(); }

private:
    void start_assembly(std::uint32_t version) noexcept;

    transport::Reassembler reassembler_;
    std::vector<float> incoming_;  // validated chunks land here first, then move to staging_
    std::vector<float> staging_;
    std::vector<float> adopted_;
    std::vector<std::uint8_t> have_chunk_;
    std::uint32_t chunks_staged_ = 0;
    bool any_incarnation_ = false;
    std::uint32_t incarnation_ = 0;
    bool has_model_ = false;            // adopted a version (of any incarnation)
    bool adopted_this_incarnation_ = false;
    std::uint32_t adopted_version_ = 0;
    bool assembling_ = false;
    std::uint32_t assembling_version_ = 0;
    ModelReceiverStats stats_;
};

}  // namespace shesha::drl

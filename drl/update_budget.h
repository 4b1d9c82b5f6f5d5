#pragma once
// How many gradients a worker computes on one adopted model (worker.max_updates_per_version), for
// shesha-worker's loop and the simulator's training workers alike.
//
// A newer version refills the budget. So does the learner sending the version the worker already
// holds once more (ModelReceiverStats::adopted_resent: it rebroadcasts only after
// learner.rebroadcast_ms without a publish, and answers model requests): it had nothing newer,
// so the updates computed on that version never reached it (lost with a restarted switch, say) or
// were too few to publish. Without the refill every worker would wait for a version that nothing
// is left to produce (docs/transport.md, "Liveness after loss").
#include <cstdint>

namespace shesha::drl {

class UpdateBudget {
public:
    explicit UpdateBudget(std::uint32_t max_updates_per_version) noexcept : max_(max_updates_per_version) {}

    bool can_compute() const noexcept { return max_ == 0 || used_ < max_; }
    void on_update() noexcept { ++used_; }
    // A newer version adopted; adopted_resent is ModelReceiverStats::adopted_resent now.
    void on_adopted(std::uint64_t adopted_resent) noexcept {
        used_ = 0;
        resent_seen_ = adopted_resent;
    }
    // Call while the budget is spent. True when the learner has sent the adopted version again
    // since it was adopted (or since the last refill): the budget is full again.
    bool refill_if_resent(std::uint64_t adopted_resent) noexcept {
        if (can_compute() || adopted_resent == resent_seen_) return false;
        resent_seen_ = adopted_resent;
        used_ = 0;
        ++refills_;
        return true;
    }
    std::uint32_t used() const noexcept { return used_; }
    std::uint64_t refills() const noexcept { return refills_; }

private:
    std::uint32_t max_;
    std::uint32_t used_ = 0;
    std::uint64_t resent_seen_ = 0;
    std::uint64_t refills_ = 0;
};

}  // namespace shesha::drl

#pragma once
// How many gradients a worker computes on one adopted model (worker.max_updates_per_version), for
// shesha-worker's loop and the simulator's training workers alike.
//
// A newer version refills the budget. So does the learner sending the version the worker already
// holds once more after the budget ran out (ModelReceiverStats::adopted_resent: it rebroadcasts
// only after learner.rebroadcast_ms without a publish, and answers model requests): it had nothing
// newer while the worker waited, so the updates computed on that version never reached it (lost
// with a restarted switch, say) or were too few to publish. Without the refill every worker would
// wait for a version that nothing is left to produce (docs/transport.md, "Liveness after loss").
// A resend that came while budget was left (an answer to a request sent before the model
// arrived, say) says nothing about the updates computed after it, and does not count.
#include <cstdint>

namespace shesha::drl {

class UpdateBudget {
public:
    explicit UpdateBudget(std::uint32_t max_updates_per_version) noexcept : max_(max_updates_per_version) {}

    bool can_compute() const noexcept { return max_ == 0 || used_ < max_; }
    // One gradient computed; adopted_resent is ModelReceiverStats::adopted_resent now.
    void on_update(std::uint64_t adopted_resent) noexcept {
        if (++used_ == max_) resent_at_spent_ = adopted_resent;
    }
    // A newer version adopted.
    void on_adopted() noexcept { used_ = 0; }
    // Call while the budget is spent. True when the learner has sent the adopted version again
    // since the budget ran out: the budget is full again.
    bool refill_if_resent(std::uint64_t adopted_resent) noexcept {
        if (can_compute() || adopted_resent == resent_at_spent_) return false;
        used_ = 0;
        ++refills_;
        return true;
    }
    std::uint32_t used() const noexcept { return used_; }
    std::uint64_t refills() const noexcept { return refills_; }

private:
    std::uint32_t max_;
    std::uint32_t used_ = 0;
    std::uint64_t resent_at_spent_ = 0;
    std::uint64_t refills_ = 0;
};

}  // namespace shesha::drl

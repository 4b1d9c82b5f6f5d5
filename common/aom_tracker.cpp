#include "aom_tracker.h"

#include <algorithm>

namespace shesha::metrics {

void AomTracker::advance(std::uint64_t now_ns) noexcept {
    if (!started_ || now_ns < next_tick_ns_) return;
    const std::uint64_t ticks = (now_ns - next_tick_ns_) / period_ns_ + 1;
    const auto first = static_cast<double>(static_cast<std::int64_t>(next_tick_ns_ - latest_gen_ns_));
    const auto period = static_cast<double>(period_ns_);
    const auto n = static_cast<double>(ticks);
    // Samples first, first + period, ..., first + (ticks - 1) * period.
    sum_ns_ += n * first + period * n * (n - 1.0) / 2.0;
    const std::uint64_t last_tick = next_tick_ns_ + (ticks - 1) * period_ns_;
    const auto last_value = static_cast<std::int64_t>(last_tick - latest_gen_ns_);
    peak_ns_ = samples_ ? std::max(peak_ns_, last_value) : last_value;
    samples_ += ticks;
    next_tick_ns_ = last_tick + period_ns_;
}

void AomTracker::on_receive(std::uint64_t now_ns, std::uint64_t gen_ts_ns) noexcept {
    if (!started_) {
        started_ = true;
        latest_gen_ns_ = gen_ts_ns;
        next_tick_ns_ = now_ns + period_ns_;
        return;
    }
    advance(now_ns);
    latest_gen_ns_ = std::max(latest_gen_ns_, gen_ts_ns);
}

}  // namespace shesha::metrics

// Age-of-Model, chunk-level stand-in (the learner's real AoM comes with a later issue).
//
// Definition, per cluster:  AoM(t) = t - L(t), where L(t) is the latest generation timestamp
// (header ts_latest, CLOCK_REALTIME ns) among all chunks of that cluster received up to time t.
// It is sampled on a 1 ms grid of receive-loop time that starts at the first chunk's arrival
// (t0 + 1 ms, t0 + 2 ms, ...); the report gives the time-average (mean of the samples) and the
// peak (largest sample). A tick that falls between two arrivals sees the L of the earlier one.
//
// Between arrivals AoM grows linearly, so the samples of a quiet stretch are an arithmetic series:
// the tracker accounts for them in closed form when the next arrival (or the final advance) comes.
// The result is identical to waking up every millisecond, without the wake-ups.
#pragma once

#include <cstdint>

namespace shesha::metrics {

class AomTracker {
public:
    static constexpr std::uint64_t kDefaultPeriodNs = 1'000'000;  // 1 ms

    explicit AomTracker(std::uint64_t period_ns = kDefaultPeriodNs) noexcept : period_ns_(period_ns) {}

    // A chunk with generation time gen_ts_ns arrived at now_ns (both CLOCK_REALTIME ns).
    void on_receive(std::uint64_t now_ns, std::uint64_t gen_ts_ns) noexcept;
    // Takes every sample due at or before now_ns. Call before reading the results.
    void advance(std::uint64_t now_ns) noexcept;

    bool started() const noexcept { return started_; }
    std::uint64_t samples() const noexcept { return samples_; }
    // Signed: a sender clock ahead of the receiver's gives negative ages; reported, not hidden.
    double mean_ns() const noexcept { return samples_ ? sum_ns_ / static_cast<double>(samples_) : 0.0; }
    std::int64_t peak_ns() const noexcept { return samples_ ? peak_ns_ : 0; }
    std::uint64_t latest_generation_ns() const noexcept { return latest_gen_ns_; }

private:
    std::uint64_t period_ns_;
    bool started_ = false;
    std::uint64_t latest_gen_ns_ = 0;
    std::uint64_t next_tick_ns_ = 0;
    std::uint64_t samples_ = 0;
    double sum_ns_ = 0.0;
    std::int64_t peak_ns_ = 0;
};

}  // namespace shesha::metrics

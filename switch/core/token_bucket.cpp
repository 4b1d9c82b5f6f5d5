// Egress token bucket (see token_bucket.h). All arithmetic is integer: tokens are milli-bytes of
// wire cost, refills are computed with a 128-bit numerator and an exact remainder.
#include "token_bucket.h"

#include <algorithm>

#include "frame.h"

namespace shesha::core {
namespace {
// rate_bps bits/s = rate_bps / 8 bytes/s = rate_bps * 125 milli-bytes/s.
constexpr std::uint64_t kMilliBytesPerBit = 125;
constexpr std::uint64_t kMilli = 1000;
}  // namespace

TokenBucket::TokenBucket(std::uint64_t rate_bps, std::uint32_t burst_bytes,
                         std::uint64_t ticks_per_second) noexcept
    : rate_bps_(rate_bps),
      burst_milli_bytes_(std::uint64_t{std::max(burst_bytes, kMinBurstBytes)} * kMilli),
      tokens_milli_bytes_(0),
      ticks_per_second_(std::max<std::uint64_t>(ticks_per_second, 1)),
      last_tick_(0) {}

bool TokenBucket::try_consume(std::uint32_t frame_len, std::uint64_t now) noexcept {
    if (rate_bps_ == 0) return true;
    if (shared_ != nullptr) return shared_->try_consume(frame_len, now);
    if (!started_) {
        started_ = true;
        tokens_milli_bytes_ = burst_milli_bytes_;
        refill_remainder_ = 0;
        last_tick_ = now;
    } else if (now > last_tick_ && tokens_milli_bytes_ < burst_milli_bytes_) {
        const unsigned __int128 numerator =
            static_cast<unsigned __int128>(now - last_tick_) * rate_bps_ * kMilliBytesPerBit + refill_remainder_;
        const unsigned __int128 add = numerator / ticks_per_second_;
        const std::uint64_t room = burst_milli_bytes_ - tokens_milli_bytes_;
        if (add >= room) {
            tokens_milli_bytes_ = burst_milli_bytes_;
            refill_remainder_ = 0;
        } else {
            tokens_milli_bytes_ += static_cast<std::uint64_t>(add);
            refill_remainder_ = static_cast<std::uint64_t>(numerator % ticks_per_second_);
        }
        last_tick_ = now;
    } else if (now > last_tick_) {
        last_tick_ = now;  // already full: time passing adds nothing
    }
    // A clock that steps backwards (now < last_tick_) adds nothing and keeps last_tick_.

    const std::uint64_t cost = (std::uint64_t{frame_len} + frame::kWireOverhead) * kMilli;
    if (tokens_milli_bytes_ >= cost) {
        tokens_milli_bytes_ -= cost;
        return true;
    }
    if (cost > burst_milli_bytes_ && tokens_milli_bytes_ == burst_milli_bytes_) {
        tokens_milli_bytes_ = 0;
        return true;
    }
    return false;
}

std::uint64_t TokenBucket::rate_bps() const noexcept { return rate_bps_; }

bool TokenBucket::unlimited() const noexcept { return rate_bps_ == 0; }

}  // namespace shesha::core

// Per-sender FEEDBACK rate limit (see feedback_limiter.h).
#include "feedback_limiter.h"

#include <algorithm>

namespace shesha::core {

FeedbackLimiter::FeedbackLimiter(std::uint32_t slots, std::uint64_t min_interval_ticks)
    : slots_(std::max<std::uint32_t>(slots, 1)), interval_(min_interval_ticks) {}

bool FeedbackLimiter::allow(std::uint32_t src_ip, std::uint64_t now) noexcept {
    // Multiplicative hashing so neighbouring addresses of one rack land in different slots.
    const std::uint64_t h = (std::uint64_t{src_ip} * 0x9E3779B97F4A7C15ull) >> 32;
    Slot& s = slots_[h % slots_.size()];
    // A slot shared by two senders limits both together: never more FEEDBACK than one per interval.
    if (s.used && now >= s.last && now - s.last < interval_) {
        ++suppressed_;
        return false;
    }
    s.used = true;
    s.ip = src_ip;
    s.last = now;
    return true;
}

}  // namespace shesha::core

// Rate limit for switch -> sender FEEDBACK: at most one message per sender (source IP) per
// interval. Fixed-size table; a collision simply shares a slot (a little more limiting, never
// more traffic). No allocation after construction.
#pragma once

#include <cstdint>
#include <vector>

namespace shesha::core {

class FeedbackLimiter {
public:
    FeedbackLimiter(std::uint32_t slots, std::uint64_t min_interval_ticks);
    // True if a FEEDBACK to this sender may be sent now (and records it as sent).
    bool allow(std::uint32_t src_ip, std::uint64_t now) noexcept;
    std::uint64_t suppressed() const noexcept { return suppressed_; }

private:
    struct Slot { std::uint32_t ip = 0; std::uint64_t last = 0; bool used = false; };
    std::vector<Slot> slots_;
    std::uint64_t interval_;
    std::uint64_t suppressed_ = 0;
};

}  // namespace shesha::core

// Egress shaper: a token bucket in bits per second that charges each frame its wire cost
// (frame + FCS + preamble + inter-frame gap, see frame::kWireOverhead), so a shaped port behaves
// like a slower link. Time is in caller ticks (TSC cycles in the switch, simulated ticks elsewhere).
#pragma once

#include <atomic>
#include <cstdint>

namespace shesha::core {

class SharedTokenBucket;

class TokenBucket {
public:
    // Smallest bucket depth: one 9000 B jumbo frame plus VLAN tag and wire overhead, rounded up.
    static constexpr std::uint32_t kMinBurstBytes = 9100;
    // rate_bps == 0 means unlimited. burst_bytes is the bucket depth in wire bytes (at least one
    // maximum frame is enforced).
    TokenBucket(std::uint64_t rate_bps, std::uint32_t burst_bytes, std::uint64_t ticks_per_second) noexcept;
    // Takes the tokens for one frame if available now; otherwise returns false and takes nothing.
    // The first call starts with a full bucket. A frame costlier than the whole bucket is let through
    // when the bucket is full (emptying it), so it cannot block the port for ever.
    bool try_consume(std::uint32_t frame_len, std::uint64_t now) noexcept;
    std::uint64_t rate_bps() const noexcept;
    bool unlimited() const noexcept;
    // From now on try_consume() takes from `shared` instead (several lcores feeding one port).
    void share(SharedTokenBucket* shared) noexcept { shared_ = shared; }

private:
    // Fixed point, no floating point on the data path. Refill per tick is
    // rate_bps * 125 / ticks_per_second milli-bytes (rate/8 bytes * 1000); the division remainder is
    // carried in refill_remainder_ so the long-run rate is exact.
    std::uint64_t rate_bps_;
    std::uint64_t burst_milli_bytes_;      // bucket depth, in 1/1000 wire byte
    std::uint64_t tokens_milli_bytes_;
    std::uint64_t ticks_per_second_;
    std::uint64_t last_tick_;
    std::uint64_t refill_remainder_ = 0;   // numerator left over, in 1/ticks_per_second milli-bytes
    bool started_ = false;
    SharedTokenBucket* shared_ = nullptr;
};

// One port's shaper shared by the forwarding lcores that transmit on it (each on its own TX queue),
// so the port keeps its configured rate however many lcores feed it. try_consume() never waits:
// an lcore that finds another one inside gets no tokens now and tries again in its next round.
// Only shaped ports use it, and they run at the shaper's rate, so the contention is rare.
class SharedTokenBucket {
public:
    SharedTokenBucket(std::uint64_t rate_bps, std::uint32_t burst_bytes, std::uint64_t ticks_per_second) noexcept
        : bucket_(rate_bps, burst_bytes, ticks_per_second) {}
    bool try_consume(std::uint32_t frame_len, std::uint64_t now) noexcept {
        if (busy_.test_and_set(std::memory_order_acquire)) return false;
        const bool ok = bucket_.try_consume(frame_len, now);
        busy_.clear(std::memory_order_release);
        return ok;
    }

private:
    alignas(64) std::atomic_flag busy_;
    TokenBucket bucket_;
};

}  // namespace shesha::core

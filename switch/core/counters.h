// Counters shared between the lcore that writes them and the threads that read them (main lcore
// stats, DPDK telemetry thread). Each counter has exactly one writer; the writer does a plain
// load + add + relaxed store (no lock prefix, no read-modify-write atomics on the data path) and
// readers do relaxed loads, so a 64-bit value is never torn.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "protocol.h"

namespace shesha::core {

inline void bump(std::uint64_t& counter, std::uint64_t n = 1) noexcept {
    std::atomic_ref<std::uint64_t>(counter).store(counter + n, std::memory_order_relaxed);
}
inline void store_relaxed(std::uint64_t& counter, std::uint64_t v) noexcept {
    std::atomic_ref<std::uint64_t>(counter).store(v, std::memory_order_relaxed);
}
inline std::uint64_t load_relaxed(const std::uint64_t& counter) noexcept {
    return std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(counter)).load(std::memory_order_relaxed);
}

// Per ingress port, written by the lcore that polls the port.
struct alignas(64) PortRxCounters {
    std::uint64_t packets = 0;
    std::uint64_t bytes = 0;
    std::uint64_t multi_segment = 0;   // forwarded without looking at the Shesha part
};

// Per RX context (one per RX lcore; the single lcore in one-lcore mode).
struct alignas(64) RxLcoreCounters {
    std::array<std::uint64_t, proto::kDecodeErrorCount> malformed{};  // by DecodeError (index 0 unused)
    std::uint64_t bad_frames = 0;       // IPv4/UDP headers inconsistent (frame::FrameKind::Malformed)
    std::uint64_t shesha_valid = 0;     // Shesha messages that decoded cleanly
    std::uint64_t non_ip = 0;           // frames by class (frame::FrameKind)
    std::uint64_t ip_other = 0;
    std::uint64_t gradient_f32 = 0;     // valid fp32 GRADIENTs (merge candidates)
    std::uint64_t multi_segment = 0;
    std::uint64_t handoff_drops = 0;    // ring to the egress lcore was full
    std::uint64_t rounds = 0;
    std::uint64_t idle_rounds = 0;
};

// Per port, written by the egress-owner lcore.
struct alignas(64) PortTxCounters {
    std::uint64_t packets = 0;
    std::uint64_t bytes = 0;
    std::uint64_t contributions = 0;    // gradient updates carried by the packets sent
    std::uint64_t refused = 0;          // packet-attempts the NIC refused (kept pending, retried)
    std::uint64_t dropped = 0;          // still queued or pending at shutdown: freed, never sent
    std::uint64_t flooded = 0;          // frames received on this port that were flooded
    std::uint64_t filtered = 0;         // destination learned on the ingress port itself: dropped
    std::uint64_t queue_drops = 0;      // tail drops into this port's queue
    std::uint64_t too_big = 0;          // frames longer than this port's mtu allows: dropped
    std::uint64_t dropped_contributions = 0;  // gradient updates in this port's tail drops
};

// Global counters of the egress-owner lcore.
struct alignas(64) EgressCounters {
    std::uint64_t non_member = 0;           // GRADIENTs from sources outside their cluster's allow-list
    std::uint64_t non_member_dropped = 0;
    std::uint64_t malformed_dropped = 0;    // malformed frames dropped per config
    std::uint64_t no_aggregation = 0;       // fp32 GRADIENTs of clusters with aggregation off
    std::uint64_t unknown_cluster = 0;
    std::uint64_t feedback_sent = 0;
    std::uint64_t feedback_suppressed = 0;  // rate limited by FeedbackLimiter
    std::uint64_t feedback_failed = 0;      // no mbuf or the NIC refused it
    std::uint64_t clone_failed = 0;         // flood copies that could not be allocated
    std::uint64_t rounds = 0;
    std::uint64_t idle_rounds = 0;
};

// A struct of uint64_t fields published by its single writer, field by field, for readers on other
// threads. Fields are individually untorn; the set is a best-effort snapshot.
template <typename T>
class Published {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) % 8 == 0);
    static constexpr std::size_t kWords = sizeof(T) / 8;

public:
    void publish(const T& value) noexcept {
        std::array<std::uint64_t, kWords> words;
        std::memcpy(words.data(), &value, sizeof(T));
        for (std::size_t i = 0; i < kWords; ++i) store_relaxed(words_[i], words[i]);
    }
    T read() const noexcept {
        std::array<std::uint64_t, kWords> words;
        for (std::size_t i = 0; i < kWords; ++i) words[i] = load_relaxed(words_[i]);
        T value;
        std::memcpy(static_cast<void*>(&value), words.data(), sizeof(T));
        return value;
    }

private:
    alignas(64) std::array<std::uint64_t, kWords> words_{};
};

// Reads a counter struct written with bump() from another thread.
template <typename T>
T read_counters(const T& live) noexcept {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) % 8 == 0);
    std::array<std::uint64_t, sizeof(T) / 8> words;
    const auto* src = reinterpret_cast<const std::uint64_t*>(&live);
    for (std::size_t i = 0; i < words.size(); ++i) words[i] = load_relaxed(src[i]);
    T value;
    std::memcpy(static_cast<void*>(&value), words.data(), sizeof(T));
    return value;
}

}  // namespace shesha::core

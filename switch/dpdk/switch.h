// The shesha-switch data path: a thin poll-mode adapter between DPDK ports and the DPDK-free core
// (switch/core). The Switch owns no ports: the caller attaches and starts them (init.h for the
// real binary, rte_eth_from_rings in tests) and hands over their port ids, so the same code runs
// on NICs, vdevs and test rings.
//
// Threading (see lcore_loops.h): the "egress owner" (the main lcore) owns the FDB, every
// AggregatingQueue, every TokenBucket and every TX queue. RX is done either by that same lcore
// (config.lcores == 1: poll_round()) or by N-1 RX lcores (rx_round(w)), each polling its share of
// the ports, classifying and decoding, and handing packets to the egress owner through its own
// single-producer/single-consumer rte_ring (egress_round()).
//
// Per packet: classify (frame.h), decode Shesha (protocol.h, malformed counted per reason),
// learn the source MAC, look up the destination (flood unknown/broadcast/multicast to every other
// port), check the cluster policy for fp32 GRADIENTs, enqueue into the egress port's
// AggregatingQueue (merged arrivals are freed here), send FEEDBACK for marked GRADIENTs, and drain
// each queue through its token bucket into rte_eth_tx_burst.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "aggregating_queue.h"
#include "cluster_policy.h"
#include "counters.h"
#include "fdb.h"
#include "feedback_limiter.h"
#include "snapshot.h"
#include "switch_config.h"
#include "token_bucket.h"

struct rte_mbuf;
struct rte_mempool;
struct rte_ring;

namespace shesha::sw {

inline constexpr std::uint32_t kMaxBurst = 512;  // the config allows up to 512

// What the RX stage learned about a packet; travels with the mbuf to the egress owner.
enum class PacketClass : std::uint8_t {
    Plain,         // non-IP, other IP, or a Shesha message that is not an fp32 GRADIENT
    MultiSegment,  // forwarded without looking past the Ethernet header
    Gradient,      // valid fp32 GRADIENT: candidate for merging
    Malformed,     // bad IPv4/UDP headers or a Shesha message that failed to decode
};

struct PacketMeta {
    std::uint16_t in_port = 0;        // port index (position in the Switch's port list)
    PacketClass cls = PacketClass::Plain;
    std::uint8_t shesha = 0;          // 1: a Shesha message that decoded cleanly
    std::uint16_t l3_offset = 0;      // 0 if not IPv4
    std::uint16_t l4_offset = 0;
    std::uint16_t shesha_offset = 0;  // 0 if not a valid Shesha message
    std::uint16_t cluster_id = 0;
    std::uint16_t chunk_index = 0;
    std::uint16_t elem_count = 0;
    std::uint32_t model_version = 0;
    std::uint16_t contributions = 0;  // a GRADIENT's contrib_count (any element type), else 0
    std::uint32_t src_ip = 0;         // host byte order
    std::uint32_t dst_ip = 0;
};

// Element of the RX -> egress rings (rte_ring_create_elem; size is a multiple of 4).
struct Handoff {
    rte_mbuf* mbuf;
    PacketMeta meta;
};
static_assert(sizeof(Handoff) % 4 == 0);

class Switch {
public:
    // ports[i] is the DPDK port id of config.ports[i]; the ports must be configured with one RX
    // and one TX queue and started. pool provides flood copies and FEEDBACK packets.
    // ticks_per_second is the unit of every `now` given to the data path (rte_get_tsc_hz() in the
    // binary; tests may use any clock). Throws core::ConfigError for an inconsistent config (for
    // example a static FDB entry naming an unknown port) and std::runtime_error if rings cannot be
    // created.
    Switch(const core::SwitchConfig& config, std::span<const std::uint16_t> ports, rte_mempool* pool,
           std::uint64_t ticks_per_second);
    ~Switch();  // frees every packet still held (queues, pending TX, rings)
    Switch(const Switch&) = delete;
    Switch& operator=(const Switch&) = delete;

    // --- data path: each entry point is called from exactly one lcore -------------------------
    // One-lcore mode: RX of every port, forwarding, TX. Returns packets received.
    unsigned poll_round(std::uint64_t now) noexcept;
    // Multi-lcore mode, RX lcore number `worker` (0 .. rx_workers()-1): polls its ports and hands
    // the packets to the egress owner. Returns packets received.
    unsigned rx_round(unsigned worker, std::uint64_t now) noexcept;
    // Multi-lcore mode, egress owner: takes handed-over packets, forwards, transmits. Returns
    // packets taken from the rings plus packets transmitted.
    unsigned egress_round(std::uint64_t now) noexcept;
    // Egress-owner housekeeping (FDB aging, publishing state for readers); the rounds call it
    // about every millisecond by themselves; call it directly before snapshot() in tests.
    void publish(std::uint64_t now) noexcept;

    // Frees every packet still held (queued or pending TX) and counts it in tx.dropped. Call after the
    // loops have stopped, from the egress owner.
    void drain() noexcept;

    // --- control ---------------------------------------------------------------------------
    bool multi_lcore() const noexcept { return multi_; }
    unsigned rx_workers() const noexcept { return static_cast<unsigned>(rx_contexts_.size()); }
    void request_stop() noexcept { stop_.store(true, std::memory_order_relaxed); }
    bool stop_requested() const noexcept { return stop_.load(std::memory_order_relaxed); }
    std::uint64_t ticks_per_second() const noexcept { return hz_; }
    const core::SwitchConfig& config() const noexcept { return cfg_; }
    std::size_t port_count() const noexcept { return ports_.size(); }
    std::uint16_t port_id(std::size_t index) const noexcept;

    // Safe from any thread (telemetry, main lcore): reads single-writer counters with relaxed
    // loads and the egress owner's last publish().
    SwitchSnapshot snapshot(std::uint64_t now) const;

private:
    struct PortState;
    struct RxContext;
    // Counts of one RX burst, kept in registers and added to the shared counters once per burst.
    struct RxTally {
        std::uint64_t bytes = 0;
        std::uint64_t non_ip = 0;
        std::uint64_t ip_other = 0;
        std::uint64_t shesha_valid = 0;
        std::uint64_t gradient_f32 = 0;
    };

    void inspect(RxContext& ctx, rte_mbuf* m, std::uint16_t in_index, PacketMeta& meta, RxTally& tally) noexcept;
    void settle_rx(RxContext& ctx, std::uint16_t in_index, std::uint16_t packets, const RxTally& tally) noexcept;
    void free_later(rte_mbuf* m) noexcept;
    void flush_staged(PortState& port, std::uint64_t now) noexcept;
    void finish_forwarding(std::uint64_t now) noexcept;
    void forward(rte_mbuf* m, const PacketMeta& meta, std::uint64_t now) noexcept;
    void learn_source(rte_mbuf* m, std::uint16_t in_index, std::uint64_t now) noexcept;
    void route(rte_mbuf* m, const PacketMeta& meta, std::uint64_t now) noexcept;
    unsigned receive_and_forward(RxContext& ctx, std::uint16_t in_index, std::uint64_t now) noexcept;
    bool admit_gradient(rte_mbuf* m, const PacketMeta& meta, const core::Mac& src, bool& mergeable,
                        std::uint32_t& tolerance) noexcept;
    void flood(rte_mbuf* m, const PacketMeta& meta, bool mergeable, std::uint32_t tolerance, std::uint64_t now) noexcept;
    void enqueue_to(std::uint16_t out_index, rte_mbuf* m, const PacketMeta& meta, bool mergeable,
                    std::uint32_t tolerance, std::uint64_t now) noexcept;
    void enqueue_gradient(std::uint16_t out_index, rte_mbuf* m, const PacketMeta& meta, bool mergeable,
                          std::uint32_t tolerance, std::uint64_t now) noexcept;
    void send_feedback(const PacketMeta& meta, const std::uint8_t* frame, std::uint16_t out_index,
                       std::uint64_t now) noexcept;
    void settle_bypass(PortState& port) noexcept;
    void drop_too_big(PortState& port, rte_mbuf* m) noexcept;
    unsigned transmit(PortState& port, std::uint64_t now) noexcept;
    unsigned transmit_all(std::uint64_t now) noexcept;
    void housekeeping(std::uint64_t now) noexcept;

    core::SwitchConfig cfg_;
    rte_mempool* pool_;
    std::uint64_t hz_;
    std::uint32_t burst_;
    std::uint64_t start_ticks_;
    bool multi_ = false;
    std::atomic<bool> stop_{false};

    std::vector<std::unique_ptr<PortState>> ports_;
    std::vector<std::unique_ptr<RxContext>> rx_contexts_;

    // Owned by the egress owner.
    core::Fdb fdb_;
    core::ClusterPolicy policy_;
    core::FeedbackLimiter limiter_;
    std::unique_ptr<EgressCounters> egress_;
    std::uint64_t last_housekeeping_ = 0;
    std::uint64_t housekeeping_ticks_ = 0;  // hz_ / 1000
    std::vector<std::uint16_t> flood_last_;  // per ingress port: the last port a flood goes to
    // Per forwarding pass (egress owner): flood counts per ingress port and the mbufs to free (merged
    // arrivals, tail drops), both settled by finish_forwarding() once per burst.
    std::vector<std::uint64_t> flooded_pending_;
    std::array<rte_mbuf*, kMaxBurst> to_free_{};
    // Scratch of the egress owner, allocated once (value-initialising a local array costs a memset).
    std::vector<Handoff> egress_handoffs_ = std::vector<Handoff>(kMaxBurst);
    std::vector<core::EnqueueResult> staged_results_ = std::vector<core::EnqueueResult>(kMaxBurst);
    std::uint32_t n_to_free_ = 0;
    std::uint64_t last_aging_ = 0;
    std::uint64_t last_now_ = 0;

    struct FdbView {
        core::FdbStats stats;
        std::uint64_t size;
    };
    Published<FdbView> fdb_view_;
};

}  // namespace shesha::sw

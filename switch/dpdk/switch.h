// The shesha-switch data path adapter: DPDK ports, mbufs, lcores and rings around the DPDK-free
// pipeline (switch/core/pipeline.h), which makes every per-packet decision. The Switch owns no
// ports: the caller attaches and starts them (init.h for the real binary, rte_eth_from_rings in
// tests) and hands over their port ids, so the same code runs on NICs, vdevs and test rings.
//
// Threading (see lcore_loops.h): the "egress owner" (the main lcore) owns the pipeline's
// forwarding state (FDB, queues, token buckets) and every TX queue. RX is done either by that
// same lcore (config.lcores == 1: poll_round()) or by N-1 RX lcores (rx_round(w)), each polling
// its share of the ports and classifying, and handing packets to the egress owner through its own
// single-producer/single-consumer rte_ring (egress_round()).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "counters.h"
#include "pipeline.h"
#include "stats.h"
#include "switch_config.h"

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>

struct rte_ring;

namespace shesha::sw {

using core::kMaxBurst;
using core::PacketClass;
using core::PacketMeta;

// How the pipeline moves mbufs (see the Io contract in pipeline.h).
// The per-packet accessors are inline: the pipeline calls them several times per packet.
struct MbufIo {
    using Handle = rte_mbuf*;
    static std::uint8_t* data(rte_mbuf* m) noexcept { return rte_pktmbuf_mtod(m, std::uint8_t*); }
    static std::uint32_t pkt_len(rte_mbuf* m) noexcept { return rte_pktmbuf_pkt_len(m); }
    static std::uint32_t data_len(rte_mbuf* m) noexcept { return rte_pktmbuf_data_len(m); }
    static bool multi_segment(rte_mbuf* m) noexcept { return m->nb_segs > 1; }
    static void prefetch(rte_mbuf* m) noexcept { rte_prefetch0(rte_pktmbuf_mtod(m, void*)); }
    void free_bulk(rte_mbuf** m, std::uint32_t n) noexcept { rte_pktmbuf_free_bulk(m, n); }
    rte_mbuf* copy(rte_mbuf* m) noexcept { return rte_pktmbuf_copy(m, pool, 0, UINT32_MAX); }
    rte_mbuf* alloc(std::uint32_t len, std::uint8_t** bytes) noexcept;
    // A MODEL copy as DPDK's ipv4_multicast example makes one: a new mbuf with a private copy of
    // the first header_len bytes, chained to an indirect mbuf that shares m's payload (no payload
    // copy per member). m stays the caller's to free.
    rte_mbuf* replicate(rte_mbuf* m, std::uint32_t header_len, std::uint8_t** header) noexcept;
    bool send_now(std::uint16_t port, rte_mbuf* m) noexcept { return rte_eth_tx_burst(port_ids[port], 0, &m, 1) == 1; }
    void free(rte_mbuf* m) noexcept { rte_pktmbuf_free(m); }
    std::uint16_t tx_burst(std::uint16_t port, rte_mbuf** m, std::uint16_t n) noexcept {
        return rte_eth_tx_burst(port_ids[port], 0, m, n);
    }

    rte_mempool* pool = nullptr;        // flood copies and FEEDBACK packets
    std::vector<std::uint16_t> port_ids;  // DPDK port id of each port index
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

    unsigned receive(RxContext& ctx, std::uint16_t in_index, std::uint64_t now) noexcept;
    void housekeeping(std::uint64_t now) noexcept;
    void log_too_big() noexcept;

    core::SwitchConfig cfg_;
    std::uint64_t hz_;
    std::uint32_t burst_;
    std::uint64_t start_ticks_;
    bool multi_ = false;
    std::atomic<bool> stop_{false};

    MbufIo io_;  // before pipeline_: the pipeline frees what it holds through it
    core::Pipeline<MbufIo> pipeline_;
    std::vector<std::unique_ptr<PortState>> ports_;
    std::vector<std::unique_ptr<RxContext>> rx_contexts_;

    std::uint64_t last_housekeeping_ = 0;
    std::uint64_t housekeeping_ticks_ = 0;  // hz_ / 1000
    // Scratch of the egress owner, allocated once (value-initialising a local array costs a memset).
    std::vector<Handoff> egress_handoffs_ = std::vector<Handoff>(kMaxBurst);
    std::uint64_t last_now_ = 0;

    struct FdbView {
        core::FdbStats stats;
        std::uint64_t size;
    };
    Published<FdbView> fdb_view_;
};

}  // namespace shesha::sw

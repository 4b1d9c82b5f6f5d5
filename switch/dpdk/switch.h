// The shesha-switch data path adapter: DPDK ports, mbufs and lcores around the DPDK-free pipeline
// (switch/core/pipeline.h), which makes every per-packet decision. The Switch owns no ports: the
// caller attaches and starts them (init.h for the real binary, rte_eth_from_rings in tests) and
// hands over their port ids, so the same code runs on NICs, vdevs and test rings.
//
// Threading (see lcore_loops.h; docs/switch.md, "Several lcores"): every forwarding lcore runs to
// completion. Lcore i (0 .. lcores-1) has a pipeline of its own (FDB, egress queues, FEEDBACK
// limiter, counters), polls whole receive queues (queue q of a port with at least `lcores`
// queues: lcore q % lcores; the queues of other ports dealt out in turn), and transmits on its own
// TX queue i of every port. No packet
// crosses lcores. What the pipelines must agree on travels as PeerUpdates over one rte_ring per
// lcore (stations learned, workers that joined a replication group), and a shaped port's token
// bucket is shared (core::SharedTokenBucket), so the port keeps its rate. Gradients merge only
// with gradients polled by the same lcore: a cluster's workers on ports of different lcores leave
// as separate frames (docs/switch.md says what that costs).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
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
    bool send_now(std::uint16_t port, rte_mbuf* m) noexcept { return rte_eth_tx_burst(port_ids[port], tx_queue, &m, 1) == 1; }
    void free(rte_mbuf* m) noexcept { rte_pktmbuf_free(m); }
    std::uint16_t tx_burst(std::uint16_t port, rte_mbuf** m, std::uint16_t n) noexcept {
        return rte_eth_tx_burst(port_ids[port], tx_queue, m, n);
    }

    rte_mempool* pool = nullptr;        // flood copies and FEEDBACK packets
    std::vector<std::uint16_t> port_ids;  // DPDK port id of each port index
    std::uint16_t tx_queue = 0;         // this lcore's TX queue on every port
};

static_assert(sizeof(core::PeerUpdate) % 4 == 0, "rte_ring elements are multiples of 4 bytes");
static_assert(std::is_trivially_copyable_v<core::PeerUpdate>, "PeerUpdates cross lcores as bytes through rte_ring");

class Switch {
public:
    // ports[i] is the DPDK port id of config.ports[i]; each port must be configured (setup_port())
    // with config.ports[i].rx_queues RX queues and config.lcores TX queues, and started. pool
    // provides flood copies, MODEL copies and FEEDBACK packets. ticks_per_second is the unit of
    // every `now` given to the data path (rte_get_tsc_hz() in the binary; tests may use any clock).
    // Throws core::ConfigError for an inconsistent config (for example a static FDB entry naming an
    // unknown port, or more lcores than receive queues) and std::runtime_error if rings cannot be
    // created.
    Switch(const core::SwitchConfig& config, std::span<const std::uint16_t> ports, rte_mempool* pool,
           std::uint64_t ticks_per_second);
    ~Switch();  // frees every packet still held (queues, pending TX)
    Switch(const Switch&) = delete;
    Switch& operator=(const Switch&) = delete;

    // --- data path: lcore i calls poll_round(i, ...) and nothing else calls it -----------------
    // One round of forwarding lcore `lcore`: applies its peers' updates, polls its receive queues,
    // forwards, transmits, tells its peers what it learned, and does its housekeeping (FDB aging,
    // publishing state for readers) about every millisecond. Returns packets received.
    unsigned poll_round(unsigned lcore, std::uint64_t now) noexcept;
    // Housekeeping of every lcore now: call only while no lcore runs (tests, after the loops).
    void publish(std::uint64_t now) noexcept;

    // Frees every packet still held (queued or pending TX) and counts it in tx.dropped. Call after the
    // loops have stopped.
    void drain() noexcept;

    // --- control ---------------------------------------------------------------------------
    unsigned lcores() const noexcept { return static_cast<unsigned>(lcores_.size()); }
    // The (port index, queue) pairs lcore `lcore` polls.
    struct RxQueue {
        std::uint16_t port;
        std::uint16_t queue;
    };
    std::span<const RxQueue> rx_queues_of(unsigned lcore) const noexcept;
    void request_stop() noexcept { stop_.store(true, std::memory_order_relaxed); }
    bool stop_requested() const noexcept { return stop_.load(std::memory_order_relaxed); }
    std::uint64_t ticks_per_second() const noexcept { return hz_; }
    const core::SwitchConfig& config() const noexcept { return cfg_; }
    std::size_t port_count() const noexcept { return ports_.size(); }
    std::uint16_t port_id(std::size_t index) const noexcept;

    // Safe from any thread (telemetry, main lcore): reads single-writer counters with relaxed
    // loads and each lcore's last publish(), summed over the lcores.
    SwitchSnapshot snapshot(std::uint64_t now) const;
    // One lcore's share of the switch-wide counters (tests check that the sum is the snapshot's).
    core::SwitchCounters lcore_counters(unsigned lcore) const noexcept;
    // Entries of each lcore's peer-update ring (it holds one fewer): room for two full exports (every
    // station of a full FDB and every replication member), so the once-a-second resync always fits
    // into a ring the peer has drained; at least 4096.
    static std::uint32_t peer_ring_size(const core::SwitchConfig& cfg) noexcept;

private:
    struct PortState;
    struct Lcore;

    void housekeeping(Lcore& lc, std::uint64_t now) noexcept;
    void publish_lcore(Lcore& lc, std::uint64_t now) noexcept;
    void apply_peer_updates(Lcore& lc) noexcept;
    void tell_peers(Lcore& lc, const core::PeerUpdate& u) noexcept;
    void log_too_big(const Lcore& lc) noexcept;

    core::SwitchConfig cfg_;
    std::uint64_t hz_;
    std::uint32_t burst_;
    std::uint64_t start_ticks_;
    std::atomic<bool> stop_{false};

    std::vector<std::unique_ptr<PortState>> ports_;
    std::vector<std::unique_ptr<core::SharedTokenBucket>> shared_shapers_;  // shaped ports, several lcores
    std::vector<std::unique_ptr<Lcore>> lcores_;
    std::uint64_t housekeeping_ticks_ = 0;  // hz_ / 1000
    std::uint64_t peer_export_ticks_ = 0;   // hz_: the once-a-second resync of peers
};

}  // namespace shesha::sw

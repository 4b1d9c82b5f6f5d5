#include "switch.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "merge_kernel.h"

namespace shesha::sw {

// ---- MbufIo: the pipeline's packet operations on mbufs ----------------------------------------

rte_mbuf* MbufIo::alloc(std::uint32_t len, std::uint8_t** bytes) noexcept {
    rte_mbuf* m = rte_pktmbuf_alloc(pool);
    if (unlikely(m == nullptr)) return nullptr;
    auto* out = reinterpret_cast<std::uint8_t*>(rte_pktmbuf_append(m, static_cast<std::uint16_t>(len)));
    if (unlikely(out == nullptr)) {
        rte_pktmbuf_free(m);
        return nullptr;
    }
    *bytes = out;
    return m;
}

rte_mbuf* MbufIo::replicate(rte_mbuf* m, std::uint32_t header_len, std::uint8_t** header) noexcept {
    if (unlikely(header_len == 0 || header_len >= rte_pktmbuf_data_len(m))) return nullptr;
    rte_mbuf* head = rte_pktmbuf_alloc(pool);
    if (unlikely(head == nullptr)) return nullptr;
    rte_mbuf* payload = rte_pktmbuf_clone(m, pool);  // indirect: shares m's data, m's refcnt + 1
    if (unlikely(payload == nullptr)) {
        rte_pktmbuf_free(head);
        return nullptr;
    }
    rte_pktmbuf_adj(payload, static_cast<std::uint16_t>(header_len));
    auto* bytes = reinterpret_cast<std::uint8_t*>(rte_pktmbuf_append(head, static_cast<std::uint16_t>(header_len)));
    if (unlikely(bytes == nullptr || rte_pktmbuf_chain(head, payload) != 0)) {
        rte_pktmbuf_free(payload);
        rte_pktmbuf_free(head);
        return nullptr;
    }
    std::memcpy(bytes, rte_pktmbuf_mtod(m, const std::uint8_t*), header_len);
    *header = bytes;
    return head;
}

// What the adapter keeps per port besides the pipelines' state.
struct Switch::PortState {
    std::uint16_t port_id;
    std::string name;
    std::string device;
    bool too_big_logged = false;
};

// One forwarding lcore: its pipeline (with its own MbufIo, whose tx_queue is the lcore's), the
// receive queues it polls, its inbox of peers' updates, and what it publishes for readers.
struct Switch::Lcore {
    struct QueueView {
        core::QueueStats stats;
        std::uint64_t depth;
        std::uint64_t depth_bytes;
        std::uint64_t capacity;
        std::uint64_t pending;
    };
    struct ShareView {
        std::array<std::uint64_t, kMaxReportedShares> served;
        std::array<std::uint64_t, kMaxReportedShares> contended;
        std::array<std::uint64_t, kMaxReportedShares> served_packets;
        std::array<std::uint64_t, kMaxReportedShares> contended_packets;
    };
    struct PortView {
        Published<QueueView> queue;
        Published<ShareView> shares;  // served/contended of pipeline port.queue.shares()[i]
    };
    struct FdbView {
        core::FdbStats stats;
        std::uint64_t size;
    };

    Lcore(const core::SwitchConfig& cfg, std::uint64_t hz, MbufIo io_of_lcore)
        : io(std::move(io_of_lcore)), pipeline(cfg, hz, io), views(cfg.ports.size()) {}

    MbufIo io;  // before pipeline: the pipeline frees what it holds through it
    core::Pipeline<MbufIo> pipeline;
    SwitchCounters counters;  // this lcore's RX entries of the switch table
    std::vector<RxQueue> rx_queues;
    rte_ring* inbox = nullptr;  // PeerUpdates from the other lcores; null with one lcore
    std::vector<PortView> views;
    Published<FdbView> fdb_view;
    std::uint64_t last_housekeeping = 0;
    std::uint64_t last_export = 0;
    std::uint64_t last_now = 0;

    void publish_port(std::size_t i, std::uint64_t pending) noexcept {
        const auto& pp = pipeline.port(i);
        views[i].queue.publish({pp.queue.stats(), pp.queue.depth(), pp.queue.depth_bytes(), pp.queue.capacity(), pending});
        const auto list = pp.queue.shares();
        if (list.empty()) return;
        ShareView v{};
        for (std::size_t c = 0; c < list.size() && c < kMaxReportedShares; ++c) {
            v.served[c] = list[c].served;
            v.contended[c] = list[c].contended;
            v.served_packets[c] = list[c].served_packets;
            v.contended_packets[c] = list[c].contended_packets;
        }
        views[i].shares.publish(v);
    }
};

namespace {

constexpr std::uint32_t kMinPeerRingSize = 4096;
constexpr unsigned kPeerUpdatesPerRound = 64;

std::atomic<unsigned> g_ring_serial{0};

}  // namespace

Switch::Switch(const core::SwitchConfig& config, std::span<const std::uint16_t> ports, rte_mempool* pool,
               std::uint64_t ticks_per_second)
    : cfg_(config),
      hz_(std::max<std::uint64_t>(ticks_per_second, 1)),
      burst_(std::clamp<std::uint32_t>(config.burst, 1, kMaxBurst)),
      start_ticks_(0) {
    if (ports.size() != cfg_.ports.size())
        throw core::ConfigError(fmt::format("{} ports configured but {} port ids given", cfg_.ports.size(), ports.size()));
    // Whole receive queues per lcore. A port with at least as many queues as lcores hashes on the
    // destination address (setup_port), so its queue q goes to lcore q % N: queue q of every such
    // port carries the same learners' traffic, which then meets on one lcore. The queues of the
    // other ports (whole ports, with one queue each) are dealt out in turn.
    const unsigned n = std::max<std::uint32_t>(cfg_.lcores, 1);
    std::uint64_t queues = 0;
    for (const core::PortConfig& pc : cfg_.ports) queues += pc.rx_queues;
    if (n > queues)
        throw core::ConfigError(fmt::format("lcores: {} but the ports have {} receive queues (ports[].rx_queues): "
                                            "each forwarding lcore polls whole queues",
                                            n, queues));
    for (std::size_t i = 0; i < ports.size(); ++i) {
        auto p = std::make_unique<PortState>();
        p->port_id = ports[i];
        p->name = cfg_.ports[i].name;
        p->device = cfg_.ports[i].device;
        ports_.push_back(std::move(p));
    }
    for (unsigned l = 0; l < n; ++l) {
        MbufIo io;
        io.pool = pool;
        io.port_ids.assign(ports.begin(), ports.end());
        io.tx_queue = static_cast<std::uint16_t>(l);
        lcores_.push_back(std::make_unique<Lcore>(cfg_, hz_, std::move(io)));
    }
    unsigned next = 0;
    for (std::size_t i = 0; i < cfg_.ports.size(); ++i)
        for (std::uint16_t q = 0; q < cfg_.ports[i].rx_queues; ++q) {
            const unsigned l = cfg_.ports[i].rx_queues >= n ? q % n : next++ % n;
            lcores_[l]->rx_queues.push_back({static_cast<std::uint16_t>(i), q});
        }

    for (std::size_t i = 0; i < ports.size(); ++i) {
        rte_ether_addr addr{};
        if (rte_eth_macaddr_get(ports[i], &addr) == 0) {
            frame::MacAddr mac;
            std::memcpy(mac.data(), addr.addr_bytes, 6);
            for (auto& lc : lcores_) lc->pipeline.set_port_mac(i, mac);
        }
    }
    if (n > 1) {
        for (std::size_t i = 0; i < cfg_.ports.size(); ++i) {
            const core::ShaperConfig& shaper = cfg_.ports[i].shaper;
            if (shaper.rate_bps == 0) continue;
            shared_shapers_.push_back(std::make_unique<core::SharedTokenBucket>(shaper.rate_bps, shaper.burst_bytes, hz_));
            for (auto& lc : lcores_) lc->pipeline.port(i).bucket.share(shared_shapers_.back().get());
        }
        for (auto& lc : lcores_) {
            lc->pipeline.start_peer_sync();
            const std::string name = fmt::format("shesha_peer{}", g_ring_serial.fetch_add(1));
            lc->inbox = rte_ring_create_elem(name.c_str(), sizeof(core::PeerUpdate), peer_ring_size(cfg_),
                                             static_cast<int>(rte_socket_id()), RING_F_SC_DEQ);
            if (lc->inbox == nullptr)
                throw std::runtime_error(fmt::format("cannot create ring {}: {}", name, rte_strerror(rte_errno)));
        }
    }
    housekeeping_ticks_ = hz_ / 1000;
    peer_export_ticks_ = hz_;
    publish(0);
}

Switch::~Switch() {
    drain();
    for (auto& lc : lcores_)
        if (lc->inbox != nullptr) rte_ring_free(lc->inbox);
}

std::uint16_t Switch::port_id(std::size_t index) const noexcept { return ports_[index]->port_id; }

std::span<const Switch::RxQueue> Switch::rx_queues_of(unsigned lcore) const noexcept { return lcores_[lcore]->rx_queues; }

// ---- rounds -------------------------------------------------------------------------------------

unsigned Switch::poll_round(unsigned lcore, std::uint64_t now) noexcept {
    Lcore& lc = *lcores_[lcore];
    if (lc.inbox != nullptr) apply_peer_updates(lc);
    unsigned received = 0;
    std::array<rte_mbuf*, kMaxBurst> pkts;
    for (const RxQueue& rq : lc.rx_queues) {
        const std::uint16_t n = rte_eth_rx_burst(ports_[rq.port]->port_id, rq.queue, pkts.data(), static_cast<std::uint16_t>(burst_));
        lc.pipeline.receive_burst(lc.counters, rq.port, pkts.data(), n, now);
        received += n;
    }
    const unsigned sent = lc.pipeline.transmit_all(now);
    if (lc.inbox != nullptr) lc.pipeline.take_peer_updates([&](const core::PeerUpdate& u) { tell_peers(lc, u); });
    lc.counters.add(SwitchCounter::RxRounds);
    const bool idle = received == 0 && sent == 0;
    if (idle) lc.counters.add(SwitchCounter::RxIdleRounds);
    lc.pipeline.count_round(idle);
    housekeeping(lc, now);
    return received;
}

void Switch::apply_peer_updates(Lcore& lc) noexcept {
    // Almost every round finds the inbox empty. The buffer is raw bytes: an array of PeerUpdate
    // would be zeroed on every call (its members have initializers), 2.5 KB per round, which was
    // 2.2 % of each lcore's cycles on null64 with 2 lcores.
    if (rte_ring_empty(lc.inbox)) return;
    alignas(core::PeerUpdate) std::byte raw[kPeerUpdatesPerRound * sizeof(core::PeerUpdate)];
    const unsigned n = rte_ring_sc_dequeue_burst_elem(lc.inbox, raw, sizeof(core::PeerUpdate), kPeerUpdatesPerRound, nullptr);
    for (unsigned i = 0; i < n; ++i) {
        core::PeerUpdate u;
        std::memcpy(&u, raw + i * sizeof u, sizeof u);
        lc.pipeline.apply_peer_update(u);
    }
}

// A full inbox loses the update; the once-a-second export repeats every station and member.
void Switch::tell_peers(Lcore& lc, const core::PeerUpdate& u) noexcept {
    for (auto& peer : lcores_)
        if (peer.get() != &lc && rte_ring_mp_enqueue_elem(peer->inbox, const_cast<core::PeerUpdate*>(&u), sizeof u) != 0)
            lc.pipeline.count_peer_sync_dropped(1);
}

void Switch::housekeeping(Lcore& lc, std::uint64_t now) noexcept {
    lc.last_now = now;
    lc.pipeline.set_clock(now);
    if (now - lc.last_housekeeping < housekeeping_ticks_) return;
    publish_lcore(lc, now);
}

void Switch::publish_lcore(Lcore& lc, std::uint64_t now) noexcept {
    lc.last_housekeeping = now;
    lc.last_now = now;
    lc.pipeline.set_clock(now);
    if (&lc == lcores_.front().get() && start_ticks_ == 0) store_relaxed(start_ticks_, now);
    lc.pipeline.housekeeping(now);
    if (lc.inbox != nullptr && now - lc.last_export >= peer_export_ticks_) {
        lc.pipeline.export_peer_state(lc.last_export, [&](const core::PeerUpdate& u) { tell_peers(lc, u); });
        lc.last_export = now;
    }
    log_too_big(lc);
    for (std::size_t i = 0; i < ports_.size(); ++i) lc.publish_port(i, lc.pipeline.port(i).n_pending);
    lc.fdb_view.publish({lc.pipeline.fdb().stats(), lc.pipeline.fdb().size()});
}

// A frame too big for its egress port is counted by the pipeline; the first one per port is logged.
void Switch::log_too_big(const Lcore& lc) noexcept {
    for (std::size_t i = 0; i < ports_.size(); ++i) {
        PortState& p = *ports_[i];
        const auto& pp = lc.pipeline.port(i);
        if (p.too_big_logged || pp.too_big_first_len == 0) continue;
        p.too_big_logged = true;  // a benign race between lcores: at worst logged twice
        spdlog::warn("port '{}': dropping frames longer than its mtu allows ({} bytes), first one {} bytes "
                     "(counted in tx_too_big; raise the port's mtu, or send smaller chunks)",
                     p.name, pp.max_frame, pp.too_big_first_len);
    }
}

void Switch::publish(std::uint64_t now) noexcept {
    for (auto& lc : lcores_) publish_lcore(*lc, now);
}

void Switch::drain() noexcept {
    for (auto& lc : lcores_) {
        lc->pipeline.drain(lc->last_now);  // the data path's clock (tests use their own)
        for (std::size_t i = 0; i < ports_.size(); ++i) lc->publish_port(i, 0);
    }
}

std::uint32_t Switch::peer_ring_size(const core::SwitchConfig& cfg) noexcept {
    std::uint64_t entries = cfg.fdb_capacity;
    for (const auto& c : cfg.clusters)
        if (c.model_replication) entries += c.model_replication->max_members;
    return static_cast<std::uint32_t>(
        std::bit_ceil(std::clamp<std::uint64_t>(2 * entries + 1, kMinPeerRingSize, std::uint64_t{1} << 24)));
}

core::SwitchCounters Switch::lcore_counters(unsigned lcore) const noexcept {
    const Lcore& lc = *lcores_[lcore];
    core::SwitchCounters c = lc.counters.read();
    c += lc.pipeline.egress().read();
    return c;
}

// ---- snapshot (any thread) -----------------------------------------------------------------------

SwitchSnapshot Switch::snapshot(std::uint64_t now) const {
    SwitchSnapshot s;
    s.tsc_hz = hz_;
    s.taken_tsc = now;
    const std::uint64_t start = load_relaxed(start_ticks_);
    s.uptime_s = (start != 0 && now > start) ? static_cast<double>(now - start) / static_cast<double>(hz_) : 0.0;
    s.simd = std::string(core::to_string(core::active_simd()));
    s.lcores = static_cast<std::uint32_t>(lcores_.size());

    for (std::size_t i = 0; i < ports_.size(); ++i) {
        const PortState* p = ports_[i].get();
        PortSnapshot ps;
        ps.name = p->name;
        ps.device = p->device;
        ps.port_id = p->port_id;
        ps.shaper_rate_bps = lcores_.front()->pipeline.port(i).bucket.rate_bps();
        rte_eth_stats es{};
        if (rte_eth_stats_get(p->port_id, &es) == 0) {
            ps.rx_missed = es.imissed;
            ps.rx_nombuf = es.rx_nombuf;
        }
        // Cluster ids and weights never change after start; the counts come from each lcore.
        const auto shares = lcores_.front()->pipeline.port(i).queue.shares();
        for (std::size_t c = 0; c < shares.size() && c < kMaxReportedShares; ++c)
            ps.clusters.push_back({shares[c].cluster_id, shares[c].weight, 0, 0, 0, 0});
        for (const auto& lc : lcores_) {
            const auto& pp = lc->pipeline.port(i);
            ps.counters += pp.rx.read();
            ps.counters += pp.tx.read();
            const auto view = lc->views[i].queue.read();
            ps.queue += view.stats;
            ps.queue_capacity += view.capacity;
            ps.queue_depth += view.depth;
            ps.queue_depth_bytes += view.depth_bytes;
            ps.tx_pending += view.pending;
            if (shares.empty()) continue;
            const auto counts = lc->views[i].shares.read();
            for (std::size_t c = 0; c < ps.clusters.size(); ++c) {
                ps.clusters[c].served += counts.served[c];
                ps.clusters[c].contended += counts.contended[c];
                ps.clusters[c].served_packets += counts.served_packets[c];
                ps.clusters[c].contended_packets += counts.contended_packets[c];
            }
        }
        core::derive_queue_values(ps, hz_);
        s.ports.push_back(std::move(ps));
    }

    for (unsigned l = 0; l < lcores_.size(); ++l) s.counters += lcore_counters(l);
    s.malformed_total = core::malformed_total(s.counters);
    // Each lcore counts the stations it saw itself; every lcore's table holds them all.
    for (const auto& lc : lcores_) {
        const auto fv = lc->fdb_view.read();
        s.fdb.learned += fv.stats.learned;
        s.fdb.moved += fv.stats.moved;
        s.fdb.aged_out += fv.stats.aged_out;
        s.fdb.table_full += fv.stats.table_full;
        s.fdb_size = std::max<std::uint64_t>(s.fdb_size, fv.size);
    }
    s.fdb_capacity = cfg_.fdb_capacity;
    return s;
}

}  // namespace shesha::sw

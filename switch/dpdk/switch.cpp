#include "switch.h"

#include <algorithm>
#include <atomic>
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

namespace {

constexpr std::uint32_t kHandoffRingSize = 4096;

std::atomic<unsigned> g_ring_serial{0};

}  // namespace

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

// What the adapter keeps per port besides the pipeline's state.
struct Switch::PortState {
    std::uint16_t port_id;
    std::string name;
    std::string device;
    bool too_big_logged = false;

    struct QueueView {
        core::QueueStats stats;
        std::uint64_t depth;
        std::uint64_t depth_bytes;
        std::uint64_t capacity;
        std::uint64_t pending;
    };
    Published<QueueView> view;
    struct ShareView {
        std::array<std::uint64_t, kMaxReportedShares> served;
        std::array<std::uint64_t, kMaxReportedShares> contended;
        std::array<std::uint64_t, kMaxReportedShares> served_packets;
        std::array<std::uint64_t, kMaxReportedShares> contended_packets;
    };
    Published<ShareView> shares;  // served/contended of pipeline port.queue.shares()[i]

    void publish_shares(const core::PortQueue& q) noexcept {
        const auto list = q.shares();
        if (list.empty()) return;
        ShareView v{};
        for (std::size_t i = 0; i < list.size() && i < kMaxReportedShares; ++i) {
            v.served[i] = list[i].served;
            v.contended[i] = list[i].contended;
            v.served_packets[i] = list[i].served_packets;
            v.contended_packets[i] = list[i].contended_packets;
        }
        shares.publish(v);
    }
};

struct Switch::RxContext {
    SwitchCounters counters;  // this context's RX entries of the switch table
    std::vector<std::uint16_t> ports;  // port indexes polled by this context
    rte_ring* ring = nullptr;          // to the egress owner; null in one-lcore mode
    // Per-burst scratch, allocated once: a local array of these would be value-initialised (their
    // members have default initialisers), a memset of several KB every round.
    std::vector<Handoff> handoffs = std::vector<Handoff>(kMaxBurst);
};

namespace {

MbufIo make_io(rte_mempool* pool, std::span<const std::uint16_t> ports) {
    MbufIo io;
    io.pool = pool;
    io.port_ids.assign(ports.begin(), ports.end());
    return io;
}

}  // namespace

Switch::Switch(const core::SwitchConfig& config, std::span<const std::uint16_t> ports, rte_mempool* pool,
               std::uint64_t ticks_per_second)
    : cfg_(config),
      hz_(std::max<std::uint64_t>(ticks_per_second, 1)),
      burst_(std::clamp<std::uint32_t>(config.burst, 1, kMaxBurst)),
      start_ticks_(0),
      io_(make_io(pool, ports)),
      pipeline_((ports.size() == config.ports.size()
                     ? config
                     : throw core::ConfigError(fmt::format("{} ports configured but {} port ids given",
                                                           config.ports.size(), ports.size()))),
                hz_, io_) {
    for (std::size_t i = 0; i < ports.size(); ++i) {
        auto p = std::make_unique<PortState>();
        p->port_id = ports[i];
        p->name = cfg_.ports[i].name;
        p->device = cfg_.ports[i].device;
        rte_ether_addr addr{};
        if (rte_eth_macaddr_get(ports[i], &addr) == 0) {
            frame::MacAddr mac;
            std::memcpy(mac.data(), addr.addr_bytes, 6);
            pipeline_.set_port_mac(i, mac);
        }
        ports_.push_back(std::move(p));
    }
    housekeeping_ticks_ = hz_ / 1000;

    // Spread the ports over the RX contexts; one context without a ring in one-lcore mode.
    multi_ = cfg_.lcores > 1;
    const std::size_t contexts = multi_ ? std::min<std::size_t>(cfg_.lcores - 1, ports.size()) : 1;
    for (std::size_t c = 0; c < contexts; ++c) rx_contexts_.push_back(std::make_unique<RxContext>());
    for (std::size_t i = 0; i < ports.size(); ++i)
        rx_contexts_[i % contexts]->ports.push_back(static_cast<std::uint16_t>(i));
    if (multi_) {
        for (auto& ctx : rx_contexts_) {
            const std::string name = fmt::format("shesha_rx{}", g_ring_serial.fetch_add(1));
            ctx->ring = rte_ring_create_elem(name.c_str(), sizeof(Handoff), kHandoffRingSize,
                                             static_cast<int>(rte_socket_id()), RING_F_SP_ENQ | RING_F_SC_DEQ);
            if (ctx->ring == nullptr)
                throw std::runtime_error(fmt::format("cannot create ring {}: {}", name, rte_strerror(rte_errno)));
        }
    }
    publish(0);
}

Switch::~Switch() {
    drain();
    for (auto& ctx : rx_contexts_)
        if (ctx->ring != nullptr) rte_ring_free(ctx->ring);
}

std::uint16_t Switch::port_id(std::size_t index) const noexcept { return ports_[index]->port_id; }

// ---- rounds -------------------------------------------------------------------------------------

unsigned Switch::receive(RxContext& ctx, std::uint16_t in, std::uint64_t now) noexcept {
    std::array<rte_mbuf*, kMaxBurst> pkts;
    const std::uint16_t n = rte_eth_rx_burst(ports_[in]->port_id, 0, pkts.data(), static_cast<std::uint16_t>(burst_));
    pipeline_.receive_burst(ctx.counters, in, pkts.data(), n, now);
    return n;
}

unsigned Switch::poll_round(std::uint64_t now) noexcept {
    RxContext& ctx = *rx_contexts_.front();
    unsigned received = 0;
    for (std::uint16_t index : ctx.ports) received += receive(ctx, index, now);
    const unsigned sent = pipeline_.transmit_all(now);
    ctx.counters.add(SwitchCounter::RxRounds);
    const bool idle = received == 0 && sent == 0;
    if (idle) ctx.counters.add(SwitchCounter::RxIdleRounds);
    pipeline_.count_round(idle);
    housekeeping(now);
    return received;
}

unsigned Switch::rx_round(unsigned worker, std::uint64_t now) noexcept {
    (void)now;
    RxContext& ctx = *rx_contexts_[worker];
    std::array<rte_mbuf*, kMaxBurst> pkts;
    Handoff* handoffs = ctx.handoffs.data();
    unsigned received = 0;
    for (std::uint16_t index : ctx.ports) {
        const std::uint16_t n = rte_eth_rx_burst(ports_[index]->port_id, 0, pkts.data(), static_cast<std::uint16_t>(burst_));
        if (n == 0) continue;
        core::RxTally tally;
        for (std::uint16_t i = 0; i < n && i < core::kPrefetchAhead; ++i) MbufIo::prefetch(pkts[i]);
        for (std::uint16_t i = 0; i < n; ++i) {
            if (i + core::kPrefetchAhead < n) MbufIo::prefetch(pkts[i + core::kPrefetchAhead]);
            handoffs[i].mbuf = pkts[i];
            pipeline_.classify(ctx.counters, pkts[i], index, handoffs[i].meta, tally);
        }
        pipeline_.settle_rx(ctx.counters, index, n, tally);
        const unsigned queued = rte_ring_sp_enqueue_burst_elem(ctx.ring, handoffs, sizeof(Handoff), n, nullptr);
        if (queued < n) {
            ctx.counters.add(SwitchCounter::HandoffDrops, n - queued);
            for (unsigned i = queued; i < n; ++i) rte_pktmbuf_free(handoffs[i].mbuf);
        }
        received += n;
    }
    ctx.counters.add(SwitchCounter::RxRounds);
    if (received == 0) ctx.counters.add(SwitchCounter::RxIdleRounds);
    return received;
}

unsigned Switch::egress_round(std::uint64_t now) noexcept {
    Handoff* handoffs = egress_handoffs_.data();
    unsigned taken = 0;
    for (auto& ctx : rx_contexts_) {
        const unsigned n = rte_ring_sc_dequeue_burst_elem(ctx->ring, handoffs, sizeof(Handoff), burst_, nullptr);
        // The mbufs and frames were last written by the RX lcore. Each crosses cores: fetch the
        // mbufs two strides ahead and, once they are here, the frames' headers (learning reads the
        // MACs) one stride ahead, so the transfers overlap the work on earlier packets.
        constexpr unsigned kAhead = core::kPrefetchAhead;
        for (unsigned i = 0; i < n && i < 2 * kAhead; ++i) rte_prefetch0(handoffs[i].mbuf);
        for (unsigned i = 0; i < n && i < kAhead; ++i) MbufIo::prefetch(handoffs[i].mbuf);
        pipeline_.forward_classified(n, now, [&](std::uint32_t i, core::PacketMeta& meta) __attribute__((always_inline)) {
            if (i + 2 * kAhead < n) rte_prefetch0(handoffs[i + 2 * kAhead].mbuf);
            if (i + kAhead < n) MbufIo::prefetch(handoffs[i + kAhead].mbuf);
            meta = handoffs[i].meta;
            return handoffs[i].mbuf;
        });
        pipeline_.finish_forwarding(now);
        taken += n;
    }
    const unsigned sent = pipeline_.transmit_all(now);
    pipeline_.count_round(taken == 0 && sent == 0);
    housekeeping(now);
    return taken + sent;
}

void Switch::housekeeping(std::uint64_t now) noexcept {
    last_now_ = now;
    pipeline_.set_clock(now);
    if (now - last_housekeeping_ < housekeeping_ticks_) return;
    publish(now);
}

// A frame too big for its egress port is counted by the pipeline; the first one per port is logged.
void Switch::log_too_big() noexcept {
    for (std::size_t i = 0; i < ports_.size(); ++i) {
        PortState& p = *ports_[i];
        const auto& pp = pipeline_.port(i);
        if (p.too_big_logged || pp.too_big_first_len == 0) continue;
        p.too_big_logged = true;
        spdlog::warn("port '{}': dropping frames longer than its mtu allows ({} bytes), first one {} bytes "
                     "(counted in tx_too_big; raise the port's mtu, or send smaller chunks)",
                     p.name, pp.max_frame, pp.too_big_first_len);
    }
}

void Switch::publish(std::uint64_t now) noexcept {
    last_housekeeping_ = now;
    last_now_ = now;
    pipeline_.set_clock(now);
    if (start_ticks_ == 0) store_relaxed(start_ticks_, now);
    pipeline_.housekeeping(now);
    log_too_big();
    for (std::size_t i = 0; i < ports_.size(); ++i) {
        const auto& pp = pipeline_.port(i);
        ports_[i]->view.publish({pp.queue.stats(), pp.queue.depth(), pp.queue.depth_bytes(), pp.queue.capacity(), pp.n_pending});
        ports_[i]->publish_shares(pp.queue);
    }
    fdb_view_.publish({pipeline_.fdb().stats(), pipeline_.fdb().size()});
}

void Switch::drain() noexcept {
    for (auto& ctx : rx_contexts_) {
        if (ctx->ring == nullptr) continue;
        Handoff h;
        while (rte_ring_sc_dequeue_elem(ctx->ring, &h, sizeof(Handoff)) == 0) rte_pktmbuf_free(h.mbuf);
    }
    pipeline_.drain(last_now_);  // the data path's clock (tests use their own)
    for (std::size_t i = 0; i < ports_.size(); ++i) {
        const auto& pp = pipeline_.port(i);
        ports_[i]->view.publish({pp.queue.stats(), pp.queue.depth(), pp.queue.depth_bytes(), pp.queue.capacity(), 0});
        ports_[i]->publish_shares(pp.queue);
    }
}

// ---- snapshot (any thread) -----------------------------------------------------------------------

SwitchSnapshot Switch::snapshot(std::uint64_t now) const {
    SwitchSnapshot s;
    s.tsc_hz = hz_;
    s.taken_tsc = now;
    const std::uint64_t start = load_relaxed(start_ticks_);
    s.uptime_s = (start != 0 && now > start) ? static_cast<double>(now - start) / static_cast<double>(hz_) : 0.0;
    s.simd = std::string(core::to_string(core::active_simd()));
    s.lcores = cfg_.lcores;

    for (std::size_t i = 0; i < ports_.size(); ++i) {
        const PortState* p = ports_[i].get();
        const auto& pp = pipeline_.port(i);
        PortSnapshot ps;
        ps.name = p->name;
        ps.device = p->device;
        ps.port_id = p->port_id;
        ps.shaper_rate_bps = pp.bucket.rate_bps();
        ps.counters = pp.rx.read();
        ps.counters += pp.tx.read();
        rte_eth_stats es{};
        if (rte_eth_stats_get(p->port_id, &es) == 0) {
            ps.rx_missed = es.imissed;
            ps.rx_nombuf = es.rx_nombuf;
        }
        const auto view = p->view.read();
        ps.queue = view.stats;
        ps.queue_capacity = view.capacity;
        ps.queue_depth = view.depth;
        ps.queue_depth_bytes = view.depth_bytes;
        ps.tx_pending = view.pending;
        // Cluster ids and weights never change after start; the counts come from the egress owner.
        const auto shares = pp.queue.shares();
        if (!shares.empty()) {
            const auto counts = p->shares.read();
            for (std::size_t c = 0; c < shares.size() && c < kMaxReportedShares; ++c)
                ps.clusters.push_back({shares[c].cluster_id, shares[c].weight, counts.served[c], counts.contended[c],
                                       counts.served_packets[c], counts.contended_packets[c]});
        }
        core::derive_queue_values(ps, hz_);
        s.ports.push_back(std::move(ps));
    }

    for (const auto& ctx : rx_contexts_) s.counters += ctx->counters.read();
    s.counters += pipeline_.egress().read();
    s.malformed_total = core::malformed_total(s.counters);
    const FdbView fv = fdb_view_.read();
    s.fdb = fv.stats;
    s.fdb_size = fv.size;
    s.fdb_capacity = cfg_.fdb_capacity;
    return s;
}

}  // namespace shesha::sw

#include "switch.h"
#include "big_endian.h"

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

#include "frame.h"
#include "merge_kernel.h"
#include "protocol.h"

namespace shesha::sw {

namespace {

constexpr std::uint32_t kHandoffRingSize = 4096;
constexpr std::uint32_t kFeedbackLimiterSlots = 1024;
constexpr std::uint16_t kPrefetchAhead = 8;  // packets whose headers are prefetched ahead of classification

std::uint64_t us_to_ticks(std::uint64_t us, std::uint64_t hz) noexcept {
    return static_cast<std::uint64_t>(static_cast<unsigned __int128>(us) * hz / 1'000'000);
}


std::uint16_t clamp16(std::uint64_t v) noexcept {
    return static_cast<std::uint16_t>(std::min<std::uint64_t>(v, 0xFFFF));
}

core::Mac mac_at(const std::uint8_t* p) noexcept {
    core::Mac m;
    std::memcpy(m.data(), p, m.size());
    return m;
}

std::vector<core::ClusterRule> rules_from(const core::SwitchConfig& cfg) {
    std::vector<core::ClusterRule> rules;
    rules.reserve(cfg.clusters.size());
    for (const auto& c : cfg.clusters) {
        core::ClusterRule r;
        r.cluster_id = c.id;
        r.aggregation = c.aggregation;
        r.version_tolerance = c.version_tolerance;
        r.allowed_macs = c.member_macs;
        r.allowed_ips = c.member_ips;
        r.allowed_bindings = c.member_bindings;
        rules.push_back(std::move(r));
    }
    return rules;
}

core::QueueConfig queue_config_from(const core::SwitchConfig& cfg, const core::PortConfig& p, std::uint64_t hz) {
    core::QueueConfig q;
    q.capacity_packets = p.queue_packets;
    q.capacity_bytes = p.queue_bytes;
    q.aggregation = cfg.aggregation;
    q.mark_depth_packets = p.marking.depth_packets;
    q.mark_sojourn_ticks = us_to_ticks(p.marking.sojourn_us, hz);
    q.mark_ip_ecn = p.marking.ip_ecn;
    return q;
}

std::atomic<unsigned> g_ring_serial{0};

}  // namespace

// Everything about one port. RX counters are written by the lcore that polls the port, the rest
// by the egress owner; each group sits on its own cache lines.
struct Switch::PortState {
    PortState(const core::SwitchConfig& cfg, const core::PortConfig& pc, std::uint16_t id, std::uint64_t hz)
        : port_id(id), name(pc.name), device(pc.device),
          max_frame(pc.mtu + core::kFrameOverhead),
          queue(queue_config_from(cfg, pc, hz)),
          bucket(pc.shaper.rate_bps, pc.shaper.burst_bytes, hz),
          // A queue with a byte limit below the largest single-segment frame could tail-drop a frame
          // that finds it empty; such a port never bypasses, so bypassing never changes an outcome.
          bypass_ok(bucket.unlimited() && queue.config().capacity_bytes >= 0xFFFF) {}

    std::uint16_t port_id;
    std::string name;
    std::string device;
    const std::uint32_t max_frame;  // the largest frame this port may send (mtu + 18)
    std::atomic<bool> too_big_logged{false};
    frame::MacAddr mac{};

    PortRxCounters rx;

    // Egress owner only.
    core::AggregatingQueue queue;
    core::TokenBucket bucket;
    // The transmit batch. [0, n_pending) left the queue in an earlier round and were refused by the
    // NIC: they go first, in order. [n_pending, n_tx) bypassed the queue during this round's RX:
    // arrivals that could not merge, found the queue empty on an unshaped port with nothing refused
    // pending, and would have been dequeued in this round's transmit() anyway (bypass_bytes of
    // frame bytes, counted by the queue in transmit()). transmit() appends what it dequeues.
    std::array<rte_mbuf*, kMaxBurst> tx_burst{};
    std::array<std::uint32_t, kMaxBurst> tx_len{};
    std::array<std::uint16_t, kMaxBurst> tx_contrib{};
    std::uint32_t n_pending = 0;
    std::uint32_t n_tx = 0;
    std::uint64_t bypass_bytes = 0;
    const bool bypass_ok;  // unshaped, and a queue that takes any single frame when empty
    // Arrivals that are not gradients wait here during a forwarding pass and enter the queue with
    // one enqueue_burst() (see enqueue_to); nothing stays staged between passes.
    std::vector<core::Arrival> staged = std::vector<core::Arrival>(kMaxBurst);
    std::uint32_t n_staged = 0;
    std::int64_t mark_ewma = 0;   // recent mark fraction, permille << 10 (for FEEDBACK)
    PortTxCounters tx;

    struct QueueView {
        core::QueueStats stats;
        std::uint64_t depth;
        std::uint64_t depth_bytes;
        std::uint64_t capacity;
        std::uint64_t pending;
    };
    Published<QueueView> view;
};

struct Switch::RxContext {
    RxLcoreCounters counters;
    std::vector<std::uint16_t> ports;  // port indexes polled by this context
    rte_ring* ring = nullptr;          // to the egress owner; null in one-lcore mode
    // Per-burst scratch, allocated once: a local array of these would be value-initialised (their
    // members have default initialisers), a memset of several KB every round.
    std::vector<Handoff> handoffs = std::vector<Handoff>(kMaxBurst);
};

Switch::Switch(const core::SwitchConfig& config, std::span<const std::uint16_t> ports, rte_mempool* pool,
               std::uint64_t ticks_per_second)
    : cfg_(config),
      pool_(pool),
      hz_(std::max<std::uint64_t>(ticks_per_second, 1)),
      burst_(std::clamp<std::uint32_t>(config.burst, 1, kMaxBurst)),
      start_ticks_(0),
      fdb_(config.fdb_capacity, std::uint64_t{config.mac_aging_s} * hz_),
      policy_(rules_from(config), config.non_member),
      limiter_(kFeedbackLimiterSlots, us_to_ticks(config.feedback_interval_us, hz_)),
      egress_(std::make_unique<EgressCounters>()) {
    if (ports.size() != cfg_.ports.size())
        throw core::ConfigError(fmt::format("{} ports configured but {} port ids given", cfg_.ports.size(), ports.size()));
    if (ports.empty()) throw core::ConfigError("no ports configured");

    for (std::size_t i = 0; i < ports.size(); ++i) {
        auto p = std::make_unique<PortState>(cfg_, cfg_.ports[i], ports[i], hz_);
        rte_ether_addr addr{};
        if (rte_eth_macaddr_get(ports[i], &addr) == 0) std::memcpy(p->mac.data(), addr.addr_bytes, 6);
        ports_.push_back(std::move(p));
    }

    for (const auto& e : cfg_.static_fdb) {
        auto it = std::find_if(cfg_.ports.begin(), cfg_.ports.end(), [&](const auto& pc) { return pc.name == e.port; });
        if (it == cfg_.ports.end())
            throw core::ConfigError(fmt::format("static FDB entry {} names unknown port '{}'", core::format_mac(e.mac), e.port));
        if (!fdb_.add_static(e.mac, static_cast<std::uint16_t>(it - cfg_.ports.begin())))
            throw core::ConfigError("static FDB entries exceed the FDB capacity");
    }

    housekeeping_ticks_ = hz_ / 1000;
    flooded_pending_.assign(ports_.size(), 0);
    flood_last_.assign(ports_.size(), core::kNoPort);
    for (std::size_t in = 0; in < ports_.size(); ++in)
        for (std::size_t p = ports_.size(); p-- > 0;)
            if (p != in) {
                flood_last_[in] = static_cast<std::uint16_t>(p);
                break;
            }

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

// ---- RX stage: classify and decode (stateless but for counters) ------------------------------

// Common outcomes are counted in the burst's tally (see settle_rx), rare ones directly. Inlined
// into the burst loops; frames that are not IPv4 skip frame::classify (which would say NonIp too).
[[gnu::always_inline]] inline void Switch::inspect(RxContext& ctx, rte_mbuf* m, std::uint16_t in_index, PacketMeta& meta, RxTally& tally) noexcept {
    meta = PacketMeta{};
    meta.in_port = in_index;
    tally.bytes += rte_pktmbuf_pkt_len(m);

    if (unlikely(m->nb_segs > 1)) {
        // Only the Ethernet header is used; the payload is not contiguous, so it is never merged.
        meta.cls = PacketClass::MultiSegment;
        bump(ports_[in_index]->rx.multi_segment);
        bump(ctx.counters.multi_segment);
        return;
    }

    const auto* data = rte_pktmbuf_mtod(m, const std::uint8_t*);
    const std::uint16_t data_len = rte_pktmbuf_data_len(m);
    if (data_len < frame::kEthHeaderSize ||
        (be::load16(data + 12) != frame::kEtherTypeIpv4 && be::load16(data + 12) != frame::kEtherTypeVlan)) {
        meta.cls = PacketClass::Plain;
        ++tally.non_ip;
        return;
    }
    const frame::FrameInfo info = frame::classify({data, data_len}, cfg_.udp_port);
    switch (info.kind) {
    case frame::FrameKind::NonIp:
        meta.cls = PacketClass::Plain;
        ++tally.non_ip;
        return;
    case frame::FrameKind::IpOther:
        meta.cls = PacketClass::Plain;
        ++tally.ip_other;
        meta.l3_offset = info.l3_offset;
        return;
    case frame::FrameKind::Malformed:
        meta.cls = PacketClass::Malformed;
        bump(ctx.counters.bad_frames);
        return;
    case frame::FrameKind::Shesha:
        break;
    }

    meta.l3_offset = info.l3_offset;
    meta.l4_offset = info.l4_offset;
    meta.src_ip = info.src_ip;
    meta.dst_ip = info.dst_ip;
    proto::Message msg;
    const proto::DecodeError err = proto::decode({data + info.payload_offset, info.payload_len}, msg);
    if (err != proto::DecodeError::Ok) {
        meta.cls = PacketClass::Malformed;
        bump(ctx.counters.malformed[static_cast<std::size_t>(err)]);
        return;
    }
    ++tally.shesha_valid;
    meta.shesha = 1;
    meta.shesha_offset = info.payload_offset;
    meta.cluster_id = msg.hdr.cluster_id;
    meta.chunk_index = msg.hdr.chunk_index;
    meta.elem_count = msg.hdr.elem_count;
    meta.model_version = msg.hdr.model_version;
    if (msg.hdr.type == proto::MsgType::Gradient) meta.contributions = msg.hdr.contrib_count;
    if (msg.hdr.type == proto::MsgType::Gradient && msg.hdr.elem_type == proto::ElemType::F32) {
        meta.cls = PacketClass::Gradient;
        ++tally.gradient_f32;
    } else {
        meta.cls = PacketClass::Plain;
    }
}

void Switch::settle_rx(RxContext& ctx, std::uint16_t in_index, std::uint16_t packets, const RxTally& tally) noexcept {
    PortRxCounters& rx = ports_[in_index]->rx;
    bump(rx.packets, packets);
    bump(rx.bytes, tally.bytes);
    if (tally.non_ip != 0) bump(ctx.counters.non_ip, tally.non_ip);
    if (tally.ip_other != 0) bump(ctx.counters.ip_other, tally.ip_other);
    if (tally.shesha_valid != 0) bump(ctx.counters.shesha_valid, tally.shesha_valid);
    if (tally.gradient_f32 != 0) bump(ctx.counters.gradient_f32, tally.gradient_f32);
}

// ---- forwarding stage (egress owner) ----------------------------------------------------------

// Inlined into the burst loops: the common case (a plain frame to a known port, or flooded between
// two ports) runs without a call; policy checks and flood copies are out of line.
[[gnu::always_inline]] inline void Switch::forward(rte_mbuf* m, const PacketMeta& meta, std::uint64_t now) noexcept {
    learn_source(m, meta.in_port, now);
    route(m, meta, now);
}

[[gnu::always_inline]] inline void Switch::learn_source(rte_mbuf* m, std::uint16_t in, std::uint64_t now) noexcept {
    const core::MacKey src = core::mac_key(rte_pktmbuf_mtod(m, const std::uint8_t*) + 6);
    // The all-zero address is no station's (net_null and broken senders use it): never learned, so
    // frames to it flood instead of being pinned to whichever port sent one last.
    if (src != 0) fdb_.learn(src, in, now);
}

// Everything after learning: policy, lookup, filtering, flooding, enqueueing.
[[gnu::always_inline]] inline void Switch::route(rte_mbuf* m, const PacketMeta& meta, std::uint64_t now) noexcept {
    const std::uint16_t in = meta.in_port;
    const auto* eth = rte_pktmbuf_mtod(m, const std::uint8_t*);
    const core::MacKey dst = core::mac_key(eth);

    if (meta.cls == PacketClass::Malformed && cfg_.malformed == core::MalformedAction::Drop) {
        bump(egress_->malformed_dropped);
        rte_pktmbuf_free(m);
        return;
    }

    bool mergeable = false;
    std::uint32_t tolerance = 0;
    if (meta.cls == PacketClass::Gradient && !admit_gradient(m, meta, mac_at(eth + 6), mergeable, tolerance)) return;

    const std::uint16_t out = core::is_multicast(dst) ? core::kNoPort : fdb_.lookup(dst, now);
    if (out == in) {  // the destination lives behind the ingress port: never send it back
        bump(ports_[in]->tx.filtered);
        rte_pktmbuf_free(m);
        return;
    }
    if (out != core::kNoPort) {
        enqueue_to(out, m, meta, mergeable, tolerance, now);
        return;
    }
    if (ports_.size() == 2 && flood_last_[in] != core::kNoPort) {
        // Two ports: the flood is the original to the other port, no copies.
        ++flooded_pending_[in];
        enqueue_to(flood_last_[in], m, meta, mergeable, tolerance, now);
        return;
    }
    flood(m, meta, mergeable, tolerance, now);
}

// Cluster policy for an fp32 GRADIENT: whether it may merge, with which version tolerance, and
// whether it travels at all (false: dropped and freed here).
bool Switch::admit_gradient(rte_mbuf* m, const PacketMeta& meta, const core::Mac& src, bool& mergeable,
                            std::uint32_t& tolerance) noexcept {
    switch (policy_.check(meta.cluster_id, src, meta.src_ip, tolerance)) {
    case core::MergeVerdict::Merge:
        mergeable = cfg_.aggregation;
        break;
    case core::MergeVerdict::NoAggregation:
        bump(egress_->no_aggregation);
        break;
    case core::MergeVerdict::UnknownCluster:
        bump(egress_->unknown_cluster);
        break;
    case core::MergeVerdict::NotMember:
        bump(egress_->non_member);
        if (policy_.non_member_action() == core::NonMemberAction::Drop) {
            bump(egress_->non_member_dropped);
            rte_pktmbuf_free(m);
            return false;
        }
        break;
    }
    return true;
}

void Switch::flood(rte_mbuf* m, const PacketMeta& meta, bool mergeable, std::uint32_t tolerance,
                   std::uint64_t now) noexcept {
    const std::uint16_t in = meta.in_port;
    // Flood: a private copy for every other port but the last, which gets the original (queues
    // write into their packets when merging or marking, so copies must not share data).
    const std::uint16_t n = static_cast<std::uint16_t>(ports_.size());
    const std::uint16_t last = flood_last_[in];
    if (last == core::kNoPort) {  // a single port: nowhere to flood to
        bump(ports_[in]->tx.filtered);
        rte_pktmbuf_free(m);
        return;
    }
    ++flooded_pending_[in];
    for (std::uint16_t p = 0; p < n; ++p) {
        if (p == in) continue;
        if (p == last) {
            enqueue_to(p, m, meta, mergeable, tolerance, now);
            break;
        }
        rte_mbuf* copy = rte_pktmbuf_copy(m, pool_, 0, UINT32_MAX);
        if (unlikely(copy == nullptr)) {
            bump(egress_->clone_failed);
            continue;
        }
        enqueue_to(p, copy, meta, mergeable, tolerance, now);
    }
}

// A frame larger than the egress port's MTU allows: counted and freed, never sent (and so never
// counted as sent and then lost on the wire). Logged once per port.
void Switch::drop_too_big(PortState& port, rte_mbuf* m) noexcept {
    bump(port.tx.too_big);
    if (!port.too_big_logged.exchange(true, std::memory_order_relaxed))
        spdlog::warn("port '{}': dropping frames longer than its mtu allows ({} bytes), first one {} bytes "
                     "(counted in tx_too_big; raise the port's mtu, or send smaller chunks)",
                     port.name, port.max_frame, rte_pktmbuf_pkt_len(m));
    rte_pktmbuf_free(m);
}

// Only a GRADIENT's enqueue has effects beyond its own packet (FEEDBACK reads the queue's state
// right after it). Every other arrival is staged and enqueued with the rest of its burst in order,
// and a GRADIENT first flushes its port's staged arrivals, so every queue sees the same sequence
// of enqueues, at the same instant, as one enqueue() per packet would give.
[[gnu::always_inline]] inline void Switch::enqueue_to(std::uint16_t out_index, rte_mbuf* m, const PacketMeta& meta,
                                                      bool mergeable, std::uint32_t tolerance, std::uint64_t now) noexcept {
    PortState& port = *ports_[out_index];
    if (unlikely(rte_pktmbuf_pkt_len(m) > port.max_frame)) {
        drop_too_big(port, m);
        return;
    }
    if (meta.cls != PacketClass::Gradient) {
        if (unlikely(port.n_staged == kMaxBurst)) flush_staged(port, now);
        core::Arrival& s = port.staged[port.n_staged++];
        s.handle = m;
        s.frame = rte_pktmbuf_mtod(m, std::uint8_t*);
        s.frame_len = rte_pktmbuf_pkt_len(m);
        const bool offsets = meta.cls == PacketClass::Plain;  // not MultiSegment or Malformed
        s.l3_offset = offsets ? meta.l3_offset : 0;
        s.l4_offset = offsets ? meta.l4_offset : 0;
        s.shesha_offset = offsets ? meta.shesha_offset : 0;
        s.contributions = offsets ? meta.contributions : 0;
        s.mergeable = false;  // only GRADIENTs merge; the merge fields below are then unused
        return;
    }
    enqueue_gradient(out_index, m, meta, mergeable, tolerance, now);
}

void Switch::enqueue_gradient(std::uint16_t out_index, rte_mbuf* m, const PacketMeta& meta, bool mergeable,
                              std::uint32_t tolerance, std::uint64_t now) noexcept {
    PortState& port = *ports_[out_index];
    flush_staged(port, now);
    core::Arrival a;
    a.handle = m;
    a.frame = rte_pktmbuf_mtod(m, std::uint8_t*);
    a.frame_len = rte_pktmbuf_pkt_len(m);
    if (meta.cls != PacketClass::MultiSegment && meta.cls != PacketClass::Malformed) {
        a.l3_offset = meta.l3_offset;
        a.l4_offset = meta.l4_offset;
        a.shesha_offset = meta.shesha_offset;
    }
    a.contributions = meta.contributions;
    a.mergeable = mergeable;
    a.cluster_id = meta.cluster_id;
    a.chunk_index = meta.chunk_index;
    a.elem_count = meta.elem_count;
    a.model_version = meta.model_version;
    a.dst_ip = meta.dst_ip;
    a.version_tolerance = tolerance;

    const core::EnqueueResult r = port.queue.enqueue(a, now);
    port.mark_ewma += ((r.marked ? (std::int64_t{1000} << 10) : 0) - port.mark_ewma) / 32;

    if (r.marked && cfg_.feedback && meta.cls == PacketClass::Gradient && r.status != core::EnqueueStatus::DroppedFull)
        send_feedback(meta, a.frame, out_index, now);

    switch (r.status) {
    case core::EnqueueStatus::Queued:
        break;
    case core::EnqueueStatus::Merged:
        free_later(m);
        break;
    case core::EnqueueStatus::DroppedFull:
        bump(port.tx.queue_drops);
        free_later(m);
        break;
    }
}

void Switch::flush_staged(PortState& port, std::uint64_t now) noexcept {
    const std::uint32_t n = port.n_staged;
    if (n == 0) return;
    port.n_staged = 0;
    core::EnqueueResult* results = staged_results_.data();
    const std::uint32_t exceptions = port.queue.enqueue_burst(port.staged.data(), n, now, results);
    std::int64_t ewma = port.mark_ewma;
    if (exceptions == 0 && ewma == 0) return;  // all queued, none marked: nothing to free or update
    std::uint64_t drops = 0;
    for (std::uint32_t i = 0; i < n; ++i) {
        if (ewma == 0 && results[i].status == core::EnqueueStatus::Queued && !results[i].marked) continue;  // nothing changes
        const core::EnqueueResult r = results[i];
        ewma += ((r.marked ? (std::int64_t{1000} << 10) : 0) - ewma) / 32;
        if (unlikely(r.status != core::EnqueueStatus::Queued)) {
            drops += r.status == core::EnqueueStatus::DroppedFull;
            free_later(static_cast<rte_mbuf*>(port.staged[i].handle));
        }
    }
    port.mark_ewma = ewma;
    if (drops != 0) bump(port.tx.queue_drops, drops);
}

// Merged arrivals and tail drops are freed in bulk at the end of the burst.
void Switch::free_later(rte_mbuf* m) noexcept {
    if (unlikely(n_to_free_ == to_free_.size())) {
        rte_pktmbuf_free_bulk(to_free_.data(), n_to_free_);
        n_to_free_ = 0;
    }
    to_free_[n_to_free_++] = m;
}

void Switch::finish_forwarding(std::uint64_t now) noexcept {
    for (auto& p : ports_) flush_staged(*p, now);
    if (n_to_free_ != 0) {
        rte_pktmbuf_free_bulk(to_free_.data(), n_to_free_);
        n_to_free_ = 0;
    }
    for (std::size_t i = 0; i < flooded_pending_.size(); ++i) {
        if (flooded_pending_[i] == 0) continue;
        bump(ports_[i]->tx.flooded, flooded_pending_[i]);
        flooded_pending_[i] = 0;
    }
}

// FEEDBACK to the sender of a marked GRADIENT: a new packet out of the ingress port, bypassing
// every queue. The switch has no address of its own, so it answers from the address the gradient
// was sent to (the learner's IP) and the Shesha port: a worker's socket connected to the learner
// receives it.
void Switch::send_feedback(const PacketMeta& meta, const std::uint8_t* frame, std::uint16_t out_index,
                           std::uint64_t now) noexcept {
    if (!limiter_.allow(meta.src_ip, now)) {
        bump(egress_->feedback_suppressed);
        return;
    }
    proto::Header grad;
    if (proto::decode_header({frame + meta.shesha_offset, proto::kHeaderSize}, grad) != proto::DecodeError::Ok) {
        bump(egress_->feedback_failed);
        return;
    }
    rte_mbuf* fb = rte_pktmbuf_alloc(pool_);
    if (unlikely(fb == nullptr)) {
        bump(egress_->feedback_failed);
        return;
    }
    constexpr std::size_t kPayload = proto::kHeaderSize + proto::kFeedbackBodySize;
    constexpr std::size_t kFrameLen = frame::kUdpPayloadOffset + kPayload;
    auto* out = reinterpret_cast<std::uint8_t*>(rte_pktmbuf_append(fb, kFrameLen));
    if (unlikely(out == nullptr)) {
        rte_pktmbuf_free(fb);
        bump(egress_->feedback_failed);
        return;
    }

    const PortState& queue_port = *ports_[out_index];
    const core::AggregatingQueue& q = queue_port.queue;
    const core::QueueStats& qs = q.stats();
    proto::FeedbackBody body;
    body.port_id = out_index;
    body.queue_capacity = clamp16(q.capacity());
    body.queue_depth = clamp16(q.depth());
    body.mark_permille = clamp16(static_cast<std::uint64_t>(std::max<std::int64_t>(queue_port.mark_ewma, 0) >> 10));
    body.queue_bytes = static_cast<std::uint32_t>(std::min<std::uint64_t>(q.depth_bytes(), 0xFFFFFFFFu));
    // The triggering packet has just arrived: report the wait it faces, the backlog's wire time
    // at the shaped rate (0 on an unshaped port).
    const std::uint64_t rate = queue_port.bucket.rate_bps();
    if (rate != 0) {
        const std::uint64_t wire_bits = (q.depth_bytes() + std::uint64_t{q.depth()} * frame::kWireOverhead) * 8;
        body.sojourn_us = static_cast<std::uint32_t>(
            std::min<unsigned __int128>(static_cast<unsigned __int128>(wire_bits) * 1'000'000 / rate, 0xFFFFFFFFu));
    }
    body.merge_permille = qs.mergeable_arrivals ? clamp16(qs.merged * 1000 / qs.mergeable_arrivals) : 0;
    body.drops = static_cast<std::uint32_t>(qs.dropped);

    proto::Header h;
    h.type = proto::MsgType::Feedback;
    h.elem_type = proto::ElemType::None;
    h.flags = 0;
    h.cluster_id = grad.cluster_id;
    h.worker_id = grad.worker_id;
    h.model_version = grad.model_version;
    h.seq = grad.seq;
    h.chunk_index = grad.chunk_index;
    h.chunk_count = grad.chunk_count;
    h.elem_count = 0;
    h.contrib_count = 1;
    h.ts_earliest_ns = grad.ts_latest_ns;
    h.ts_latest_ns = grad.ts_latest_ns;
    std::uint8_t* payload = out + frame::kUdpPayloadOffset;
    proto::encode_header(h, {payload, proto::kHeaderSize});
    proto::encode_feedback(body, {payload + proto::kHeaderSize, proto::kFeedbackBodySize});

    const PortState& in_port = *ports_[meta.in_port];
    frame::Endpoints ep;
    ep.src_mac = in_port.mac;
    std::memcpy(ep.dst_mac.data(), frame + 6, 6);
    ep.src_ip = meta.dst_ip;
    ep.dst_ip = meta.src_ip;
    ep.src_port = cfg_.udp_port;
    ep.dst_port = be::load16(frame + meta.l4_offset);  // the gradient's UDP source port
    if (frame::build_udp_frame(ep, kPayload, {out, kFrameLen}) == 0) {
        rte_pktmbuf_free(fb);
        bump(egress_->feedback_failed);
        return;
    }
    if (rte_eth_tx_burst(in_port.port_id, 0, &fb, 1) != 1) {
        rte_pktmbuf_free(fb);
        bump(egress_->feedback_failed);
        return;
    }
    bump(egress_->feedback_sent);
}

// ---- TX stage ---------------------------------------------------------------------------------

// The packets that bypassed the empty queue this round count as its arrivals and departures.
void Switch::settle_bypass(PortState& port) noexcept {
    const std::uint32_t bypassed = port.n_tx - port.n_pending;
    if (bypassed == 0) return;
    port.queue.count_bypass(bypassed, port.bypass_bytes);
    port.bypass_bytes = 0;
}

unsigned Switch::transmit(PortState& port, std::uint64_t now) noexcept {
    settle_bypass(port);
    // Packets the NIC refused last time go first, then this round's bypassed ones, then the queue's.
    rte_mbuf** burst = port.tx_burst.data();
    std::uint32_t* lens = port.tx_len.data();
    std::uint16_t* contrib = port.tx_contrib.data();
    std::uint32_t n = port.n_tx;
    if (port.bucket.unlimited()) {
        // No shaper: take the whole burst from the queue at once, straight into the TX arrays.
        static_assert(sizeof(rte_mbuf*) == sizeof(void*));
        n += port.queue.dequeue_burst(now, reinterpret_cast<void**>(burst + n), lens + n, contrib + n,
                                      burst_ - std::min(n, burst_));
    } else {
        while (n < burst_) {
            const std::uint32_t len = port.queue.front_len();
            if (len == 0 || !port.bucket.try_consume(len, now)) break;
            core::Departure d;
            if (!port.queue.dequeue(now, d)) break;
            burst[n] = static_cast<rte_mbuf*>(d.handle);
            lens[n] = d.frame_len;
            contrib[n] = d.contributions;
            ++n;
        }
    }
    if (n == 0) return 0;

    const std::uint16_t sent = rte_eth_tx_burst(port.port_id, 0, burst, static_cast<std::uint16_t>(n));
    std::uint64_t bytes = 0, contributions = 0;
    for (std::uint16_t i = 0; i < sent; ++i) {
        bytes += lens[i];
        contributions += contrib[i];
    }
    bump(port.tx.packets, sent);
    bump(port.tx.bytes, bytes);
    bump(port.tx.contributions, contributions);
    port.n_pending = port.n_tx = n - sent;
    if (port.n_pending != 0) {
        bump(port.tx.refused, port.n_pending);
        std::memmove(burst, burst + sent, port.n_pending * sizeof(*burst));
        std::memmove(lens, lens + sent, port.n_pending * sizeof(*lens));
        std::memmove(contrib, contrib + sent, port.n_pending * sizeof(*contrib));
    }
    return sent;
}

unsigned Switch::transmit_all(std::uint64_t now) noexcept {
    unsigned sent = 0;
    for (auto& p : ports_) sent += transmit(*p, now);
    return sent;
}

// ---- rounds -------------------------------------------------------------------------------------

// One RX burst of one port in one-lcore mode: classify, learn and forward each packet, with
// headers prefetched a few packets ahead. The common case, a frame that is not a GRADIENT going to
// exactly one port (a known destination, or a flood between two ports), is appended to that
// port's staged arrivals with the staging cursor kept in registers; it is what route() would do.
// Everything else takes route() itself, with the cursor written back first.
unsigned Switch::receive_and_forward(RxContext& ctx, std::uint16_t in, std::uint64_t now) noexcept {
    std::array<rte_mbuf*, kMaxBurst> pkts;
    const std::uint16_t n = rte_eth_rx_burst(ports_[in]->port_id, 0, pkts.data(), static_cast<std::uint16_t>(burst_));
    if (n == 0) return 0;
    RxTally tally;
    std::uint64_t flooded = 0;
    const std::uint16_t flood_to = ports_.size() == 2 ? flood_last_[in] : core::kNoPort;
    // The cursor: the port appended to, its staged arrivals and its transmit batch. tx_open is how
    // far the batch may grow by bypassing (0 when the port must queue: see PortState::tx_burst).
    PortState* stage_port = nullptr;
    core::Arrival* stage = nullptr;
    std::uint32_t staged = 0;
    rte_mbuf** tx = nullptr;
    std::uint32_t* tx_len = nullptr;
    std::uint16_t* tx_contrib = nullptr;
    std::uint32_t n_tx = 0, n_tx_loaded = 0, tx_open = 0;
    std::uint64_t bypass_bytes = 0;
    const auto write_back = [&] {
        stage_port->n_staged = staged;
        stage_port->n_tx = n_tx;
        stage_port->bypass_bytes = bypass_bytes;
        // Each bypassing arrival decays the recent mark fraction as an unmarked queued one would
        // (flush_staged), in arrival order: before anything later reaches this port's queue.
        for (std::uint32_t k = n_tx_loaded; k < n_tx && stage_port->mark_ewma != 0; ++k)
            stage_port->mark_ewma -= stage_port->mark_ewma / 32;
    };
    for (std::uint16_t i = 0; i < n && i < kPrefetchAhead; ++i) rte_prefetch0(rte_pktmbuf_mtod(pkts[i], void*));
    for (std::uint16_t i = 0; i < n; ++i) {
        if (i + kPrefetchAhead < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + kPrefetchAhead], void*));
        rte_mbuf* m = pkts[i];
        PacketMeta meta;
        inspect(ctx, m, in, meta, tally);
        learn_source(m, in, now);
        if (meta.cls == PacketClass::Plain) {
            const core::MacKey dst = core::mac_key(rte_pktmbuf_mtod(m, const std::uint8_t*));
            std::uint16_t out = core::is_multicast(dst) ? core::kNoPort : fdb_.lookup(dst, now);
            const bool flood = out == core::kNoPort;
            if (flood) out = flood_to;
            if (out != core::kNoPort && out != in) {
                PortState* port = ports_[out].get();
                if (port != stage_port) {
                    if (stage_port != nullptr) write_back();
                    stage_port = port;
                    stage = port->staged.data();
                    staged = port->n_staged;
                    tx = port->tx_burst.data();
                    tx_len = port->tx_len.data();
                    tx_contrib = port->tx_contrib.data();
                    n_tx = n_tx_loaded = port->n_tx;
                    bypass_bytes = port->bypass_bytes;
                    tx_open = port->bypass_ok && port->n_pending == 0 && staged == 0 && port->queue.depth() == 0
                                  ? burst_ : 0;
                }
                flooded += flood;
                const std::uint32_t len = rte_pktmbuf_pkt_len(m);
                if (unlikely(len > port->max_frame)) {
                    drop_too_big(*port, m);
                    continue;
                }
                if (n_tx < tx_open) {
                    tx[n_tx] = m;
                    tx_len[n_tx] = len;
                    tx_contrib[n_tx] = meta.contributions;
                    ++n_tx;
                    bypass_bytes += len;
                    continue;
                }
                if (unlikely(staged == kMaxBurst)) {
                    write_back();
                    n_tx_loaded = n_tx;
                    flush_staged(*stage_port, now);
                    staged = 0;
                }
                core::Arrival& a = stage[staged++];
                a.handle = m;
                a.frame = rte_pktmbuf_mtod(m, std::uint8_t*);
                a.frame_len = len;
                a.l3_offset = meta.l3_offset;
                a.l4_offset = meta.l4_offset;
                a.shesha_offset = meta.shesha_offset;
                a.contributions = meta.contributions;
                a.mergeable = false;
                continue;
            }
        }
        if (stage_port != nullptr) {
            write_back();
            stage_port = nullptr;
        }
        route(m, meta, now);
    }
    if (stage_port != nullptr) write_back();
    flooded_pending_[in] += flooded;
    settle_rx(ctx, in, n, tally);
    finish_forwarding(now);
    return n;
}

unsigned Switch::poll_round(std::uint64_t now) noexcept {
    RxContext& ctx = *rx_contexts_.front();
    unsigned received = 0;
    for (std::uint16_t index : ctx.ports) received += receive_and_forward(ctx, index, now);
    const unsigned sent = transmit_all(now);
    bump(ctx.counters.rounds);
    bump(egress_->rounds);
    if (received == 0 && sent == 0) {
        bump(ctx.counters.idle_rounds);
        bump(egress_->idle_rounds);
    }
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
        RxTally tally;
        for (std::uint16_t i = 0; i < n && i < kPrefetchAhead; ++i) rte_prefetch0(rte_pktmbuf_mtod(pkts[i], void*));
        for (std::uint16_t i = 0; i < n; ++i) {
            if (i + kPrefetchAhead < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + kPrefetchAhead], void*));
            handoffs[i].mbuf = pkts[i];
            inspect(ctx, pkts[i], index, handoffs[i].meta, tally);
        }
        settle_rx(ctx, index, n, tally);
        const unsigned queued = rte_ring_sp_enqueue_burst_elem(ctx.ring, handoffs, sizeof(Handoff), n, nullptr);
        if (queued < n) {
            bump(ctx.counters.handoff_drops, n - queued);
            for (unsigned i = queued; i < n; ++i) rte_pktmbuf_free(handoffs[i].mbuf);
        }
        received += n;
    }
    bump(ctx.counters.rounds);
    if (received == 0) bump(ctx.counters.idle_rounds);
    return received;
}

unsigned Switch::egress_round(std::uint64_t now) noexcept {
    Handoff* handoffs = egress_handoffs_.data();
    unsigned taken = 0;
    for (auto& ctx : rx_contexts_) {
        const unsigned n = rte_ring_sc_dequeue_burst_elem(ctx->ring, handoffs, sizeof(Handoff), burst_, nullptr);
        for (unsigned i = 0; i < n; ++i) forward(handoffs[i].mbuf, handoffs[i].meta, now);
        finish_forwarding(now);
        taken += n;
    }
    const unsigned sent = transmit_all(now);
    bump(egress_->rounds);
    if (taken == 0 && sent == 0) bump(egress_->idle_rounds);
    housekeeping(now);
    return taken + sent;
}

void Switch::housekeeping(std::uint64_t now) noexcept {
    last_now_ = now;
    if (now - last_housekeeping_ < housekeeping_ticks_) return;
    publish(now);
}

void Switch::publish(std::uint64_t now) noexcept {
    last_housekeeping_ = now;
    last_now_ = now;
    if (start_ticks_ == 0) store_relaxed(start_ticks_, now);
    if (now - last_aging_ >= hz_) {
        fdb_.age(now);
        last_aging_ = now;
    }
    for (auto& p : ports_) {
        p->view.publish({p->queue.stats(), p->queue.depth(), p->queue.depth_bytes(), p->queue.capacity(), p->n_pending});
    }
    fdb_view_.publish({fdb_.stats(), fdb_.size()});
}

void Switch::drain() noexcept {
    for (auto& ctx : rx_contexts_) {
        if (ctx->ring == nullptr) continue;
        Handoff h;
        while (rte_ring_sc_dequeue_elem(ctx->ring, &h, sizeof(Handoff)) == 0) rte_pktmbuf_free(h.mbuf);
    }
    const std::uint64_t now = last_now_;  // the data path's clock (tests use their own)
    for (auto& p : ports_) {
        core::Departure d;
        while (p->queue.dequeue(now, d)) {
            bump(p->tx.dropped);
            rte_pktmbuf_free(static_cast<rte_mbuf*>(d.handle));
        }
        settle_bypass(*p);  // bypassed packets were dequeued, so they count as dropped here too
        if (p->n_tx != 0) {
            bump(p->tx.dropped, p->n_tx);
            for (std::uint32_t i = 0; i < p->n_tx; ++i) rte_pktmbuf_free(p->tx_burst[i]);
            p->n_pending = p->n_tx = 0;
        }
        p->view.publish({p->queue.stats(), p->queue.depth(), p->queue.depth_bytes(), p->queue.capacity(), 0});
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
    const double us_per_tick = 1e6 / static_cast<double>(hz_);

    for (const auto& p : ports_) {
        PortSnapshot ps;
        ps.name = p->name;
        ps.device = p->device;
        ps.port_id = p->port_id;
        ps.shaper_rate_bps = p->bucket.rate_bps();
        const PortRxCounters rx = read_counters(p->rx);
        ps.rx_packets = rx.packets;
        ps.rx_bytes = rx.bytes;
        ps.rx_multi_segment = rx.multi_segment;
        rte_eth_stats es{};
        if (rte_eth_stats_get(p->port_id, &es) == 0) {
            ps.rx_missed = es.imissed;
            ps.rx_nombuf = es.rx_nombuf;
        }
        ps.tx = read_counters(p->tx);
        const auto view = p->view.read();
        ps.queue = view.stats;
        ps.queue_capacity = view.capacity;
        ps.queue_depth = view.depth;
        ps.queue_depth_bytes = view.depth_bytes;
        ps.tx_pending = view.pending;
        const auto& q = ps.queue;
        ps.mean_depth = q.depth_samples ? static_cast<double>(q.depth_sum) / static_cast<double>(q.depth_samples) : 0.0;
        ps.mean_sojourn_us = q.dequeued ? static_cast<double>(q.sojourn_sum_ticks) / static_cast<double>(q.dequeued) * us_per_tick : 0.0;
        ps.max_sojourn_us = static_cast<double>(q.sojourn_max_ticks) * us_per_tick;
        ps.merge_ratio = q.mergeable_arrivals ? static_cast<double>(q.merged) / static_cast<double>(q.mergeable_arrivals) : 0.0;
        s.ports.push_back(std::move(ps));
    }

    for (const auto& ctx : rx_contexts_) {
        const RxLcoreCounters c = read_counters(ctx->counters);
        for (std::size_t i = 0; i < c.malformed.size(); ++i) s.malformed[i] += c.malformed[i];
        s.bad_frames += c.bad_frames;
        s.shesha_valid += c.shesha_valid;
        s.non_ip += c.non_ip;
        s.ip_other += c.ip_other;
        s.gradient_f32 += c.gradient_f32;
        s.multi_segment += c.multi_segment;
        s.handoff_drops += c.handoff_drops;
    }
    s.malformed_total = s.bad_frames;
    for (std::size_t i = 1; i < s.malformed.size(); ++i) s.malformed_total += s.malformed[i];
    s.egress = read_counters(*egress_);
    const FdbView fv = fdb_view_.read();
    s.fdb = fv.stats;
    s.fdb_size = fv.size;
    s.fdb_capacity = cfg_.fdb_capacity;
    return s;
}

}  // namespace shesha::sw

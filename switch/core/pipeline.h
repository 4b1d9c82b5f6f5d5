// The switch pipeline: every per-packet decision of shesha-switch, with no DPDK in it. The DPDK
// adapter (switch/dpdk), the simulator (tools/sim) and the verifier's replay (through shesha-sim)
// all run this same code, so what they report describes the real switch.
//
// Per packet: classify (frame.h) and decode Shesha (protocol.h, malformed counted per reason),
// learn the source MAC, look up the destination (flood unknown/broadcast/multicast to every other
// port, filter a destination behind the ingress port), admit fp32 GRADIENTs by cluster policy
// (members may merge, with their cluster's version tolerance; non-members forwarded unmerged or
// dropped), refuse frames over the egress port's MTU, enqueue into the egress port's
// AggregatingQueue (merge, tail drop, CE mark), keep the per-port recent mark fraction, build
// rate-limited FEEDBACK for marked GRADIENTs, and drain each queue through its token bucket.
//
// The pipeline does not own packets or talk to devices. It is a template over an `Io` that moves
// packets for it (DPDK mbufs in the switch, pooled buffers in the simulator, vectors in tests):
//
//   struct Io {
//     using Handle = ...;                                   // opaque packet
//     static std::uint8_t* data(Handle);                    // first (contiguous) segment
//     static std::uint32_t pkt_len(Handle);                 // whole frame
//     static std::uint32_t data_len(Handle);                // bytes at data()
//     static bool multi_segment(Handle);
//     static void prefetch(Handle);
//     void free_bulk(Handle*, std::uint32_t n);
//     Handle copy(Handle);                                  // private copy for a flood, or null
//     Handle alloc(std::uint32_t len, std::uint8_t** bytes);  // a new frame to fill, or null
//     bool send_now(std::uint16_t port, Handle);            // FEEDBACK out of a port, bypassing queues
//     void free(Handle);
//     std::uint16_t tx_burst(std::uint16_t port, Handle*, std::uint16_t n);  // poll mode only
//   };
//
// Threading: one "egress owner" runs forward_*(), transmit_all()/dequeue_one() and housekeeping();
// classify() is const and may run on other threads (RX lcores), writing only the RX counters it is
// given and the ingress port's RX counters. Counters have one writer each (counters.h).
//
// Two ways to drain the queues: poll mode (transmit_all(): bursts to Io::tx_burst, NIC refusals kept
// and retried first) for the switch, and pull mode (dequeue_one(): one departure when the caller's
// link is free) for the simulator. In poll mode, a frame that cannot merge and finds its unshaped
// port's queue empty skips the queue and joins the transmit batch directly (counted by the queue
// as enqueued and dequeued at once); that changes no outcome, only the cost.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "aggregating_queue.h"
#include "big_endian.h"
#include "cluster_policy.h"
#include "counters.h"
#include "fdb.h"
#include "feedback_limiter.h"
#include "frame.h"
#include "merge_kernel.h"
#include "port_queue.h"
#include "protocol.h"
#include "switch_config.h"
#include "token_bucket.h"


namespace shesha::core {

inline constexpr std::uint32_t kMaxBurst = 512;          // the config allows up to 512
inline constexpr std::uint32_t kFeedbackLimiterSlots = 1024;
inline constexpr std::uint16_t kPrefetchAhead = 8;       // packets whose headers are prefetched ahead
inline constexpr std::int64_t kMarkEwmaDivisor = 32;     // recent mark fraction: gain 1/32 per arrival

// What classification learned about a packet; travels with it to the forwarding stage.
enum class PacketClass : std::uint8_t {
    Plain,         // non-IP, other IP, or a Shesha message that is not an fp32 GRADIENT
    MultiSegment,  // forwarded without looking past the Ethernet header
    Gradient,      // valid fp32 GRADIENT: candidate for merging
    Malformed,     // bad IPv4/UDP headers or a Shesha message that failed to decode
};

struct PacketMeta {
    std::uint16_t in_port = 0;        // port index (position in the config's port list)
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

// Counts of one RX burst, kept in registers and added to the shared counters once per burst.
struct RxTally {
    std::uint64_t bytes = 0;
    std::uint64_t non_ip = 0;
    std::uint64_t ip_other = 0;
    std::uint64_t shesha_valid = 0;
    std::uint64_t gradient_f32 = 0;
};

// Mode switches for the embedding program.
struct PipelineOptions {
    bool poll_mode = true;  // false: pull mode (dequeue_one), no queue bypass, no Io::tx_burst
};

inline std::uint64_t us_to_ticks(std::uint64_t us, std::uint64_t hz) noexcept {
    return static_cast<std::uint64_t>(static_cast<unsigned __int128>(us) * hz / 1'000'000);
}

inline QueueConfig queue_config_from(const SwitchConfig& cfg, const PortConfig& p, std::uint64_t hz) {
    QueueConfig q;
    q.capacity_packets = p.queue_packets;
    q.capacity_bytes = p.queue_bytes;
    q.aggregation = cfg.aggregation;
    q.mark_depth_packets = p.marking.depth_packets;
    q.mark_sojourn_ticks = us_to_ticks(p.marking.sojourn_us, hz);
    q.mark_ip_ecn = p.marking.ip_ecn;
    return q;
}

std::vector<ClusterRule> cluster_rules_from(const SwitchConfig& cfg);
std::vector<SchedulingClass> scheduling_classes_from(const SwitchConfig& cfg);

// The FEEDBACK answering a marked GRADIENT (header `grad`, sent from src_mac/src_ip/src_port to
// the learner at dst_ip): the frame's bytes, ready to send out of the gradient's ingress port.
// Returns the frame length (kFeedbackFrameLen), 0 on a build failure.
inline constexpr std::size_t kFeedbackPayloadLen = proto::kHeaderSize + proto::kFeedbackBodySize;
inline constexpr std::size_t kFeedbackFrameLen = frame::kUdpPayloadOffset + kFeedbackPayloadLen;
std::size_t build_feedback_frame(const proto::Header& grad, const proto::FeedbackBody& body,
                                 const frame::Endpoints& ep, std::span<std::uint8_t> out) noexcept;

// The FEEDBACK body describing an egress queue right after an arrival: depth, capacity, recent mark
// fraction, the backlog's wire time at the shaped rate (0 on an unshaped port), merge ratio, drops.
proto::FeedbackBody feedback_body(std::uint16_t port_index, const AggregatingQueue& q, std::int64_t mark_ewma,
                                  std::uint64_t shaper_rate_bps) noexcept;

template <class Io>
class Pipeline {
public:
    using Handle = typename Io::Handle;

    // Everything about one port. RX counters are written by whoever classifies the port's frames,
    // the rest by the egress owner; each group sits on its own cache lines.
    struct Port {
        Port(const SwitchConfig& cfg, const PortConfig& pc, std::uint64_t hz, std::uint32_t burst, bool poll_mode)
            : name(pc.name),
              max_frame(pc.mtu + kFrameOverhead),
              queue(queue_config_from(cfg, pc, hz), pc.scheduling.value_or(cfg.scheduling), scheduling_classes_from(cfg), 1,
                    cfg.fair_lag, cfg.chunk_follow),
              bucket(pc.shaper.rate_bps, pc.shaper.burst_bytes, hz),
              // A queue with a byte limit below the largest single-segment frame could tail-drop a
              // frame that finds it empty; such a port never bypasses, so bypassing never changes
              // an outcome.
              bypass_ok(poll_mode && bucket.unlimited() && queue.config().capacity_bytes >= 0xFFFF),
              mark_depth(queue.config().mark_depth_packets),
              tx_burst(poll_mode ? burst : 0),
              tx_len(poll_mode ? burst : 0),
              tx_contrib(poll_mode ? burst : 0),
              staged(burst) {}

        std::string name;
        const std::uint32_t max_frame;  // the largest frame this port may send (mtu + 18)
        frame::MacAddr mac{};           // FEEDBACK leaves with this source MAC

        PortCounters rx;  // written by whoever classifies this port's frames

        // Egress owner only.
        PortQueue queue;  // one aggregating queue, or one per cluster under DRR
        TokenBucket bucket;
        const bool bypass_ok;  // unshaped, poll mode, and a queue that takes any single frame when empty
        const std::uint32_t mark_depth;  // queue.config().mark_depth_packets, kept here for the RX loop (0: off)
        // The transmit batch (poll mode). [0, n_pending) left the queue in an earlier round and were
        // refused by the NIC: they go first, in order. [n_pending, n_tx) bypassed the queue during
        // this round's RX: arrivals that could not merge, found the queue empty on an unshaped port
        // with nothing refused pending, and would have been dequeued in this round's transmit()
        // anyway (bypass_bytes of frame bytes, counted by the queue in transmit()). transmit()
        // appends what it dequeues.
        std::vector<Handle> tx_burst;
        std::vector<std::uint32_t> tx_len;
        std::vector<std::uint16_t> tx_contrib;
        std::uint32_t n_pending = 0;
        std::uint32_t n_tx = 0;
        std::uint64_t bypass_bytes = 0;
        // Arrivals that are not gradients wait here during a forwarding pass and enter the queue
        // with one enqueue_burst() (see enqueue_to); nothing stays staged between passes.
        std::vector<Arrival> staged;
        std::uint32_t n_staged = 0;
        bool listed_for_flush = false;  // in the pipeline's list of ports to flush this pass
        std::int64_t mark_ewma = 0;  // recent mark fraction, permille << 10 (for FEEDBACK)
        std::uint32_t too_big_first_len = 0;  // length of the first frame refused as too big
        PortCounters tx;  // written by the egress owner
    };

    // io must outlive the pipeline. Throws ConfigError for an inconsistent config (a static FDB
    // entry naming an unknown port, too many static entries).
    Pipeline(const SwitchConfig& cfg, std::uint64_t ticks_per_second, Io& io, PipelineOptions options = {})
        : cfg_(cfg),
          io_(io),
          hz_(std::max<std::uint64_t>(ticks_per_second, 1)),
          burst_(std::clamp<std::uint32_t>(cfg.burst, 1, kMaxBurst)),
          poll_mode_(options.poll_mode),
          fdb_(cfg.fdb_capacity, std::uint64_t{cfg.mac_aging_s} * hz_),
          policy_(cluster_rules_from(cfg), cfg.non_member),
          limiter_(kFeedbackLimiterSlots, us_to_ticks(cfg.feedback_interval_us, hz_)),
          to_free_(burst_ + 1) {
        if (cfg_.ports.empty()) throw ConfigError("no ports configured");
        for (const auto& pc : cfg_.ports) ports_.push_back(std::make_unique<Port>(cfg_, pc, hz_, burst_, poll_mode_));
        for (const auto& e : cfg_.static_fdb) {
            auto it = std::find_if(cfg_.ports.begin(), cfg_.ports.end(), [&](const auto& pc) { return pc.name == e.port; });
            if (it == cfg_.ports.end())
                throw ConfigError("static FDB entry " + format_mac(e.mac) + " names unknown port '" + e.port + "'");
            if (!fdb_.add_static(e.mac, static_cast<std::uint16_t>(it - cfg_.ports.begin())))
                throw ConfigError("static FDB entries exceed the FDB capacity");
        }
        flooded_pending_.assign(ports_.size(), 0);
        staging_.assign(ports_.size(), 0);
        flooding_.assign(ports_.size(), 0);
        flood_last_.assign(ports_.size(), kNoPort);
        for (std::size_t in = 0; in < ports_.size(); ++in)
            for (std::size_t p = ports_.size(); p-- > 0;)
                if (p != in) {
                    flood_last_[in] = static_cast<std::uint16_t>(p);
                    break;
                }
    }
    ~Pipeline() { drain(); }
    Pipeline(const Pipeline&) = delete;
    Pipeline& operator=(const Pipeline&) = delete;

    // ---- classification (const: any thread) ------------------------------------------------

    // Classifies and decodes one frame that arrived on port `in`. Common outcomes are counted in
    // the burst's tally (settle_rx), rare ones directly in rx.
    [[gnu::always_inline]] inline void classify(SwitchCounters& rx, Handle h, std::uint16_t in, PacketMeta& meta,
                                                RxTally& tally) const noexcept {
        meta = PacketMeta{};
        meta.in_port = in;
        tally.bytes += Io::pkt_len(h);

        if (Io::multi_segment(h)) [[unlikely]] {
            // Only the Ethernet header is used; the payload is not contiguous, so it is never merged.
            meta.cls = PacketClass::MultiSegment;
            ports_[in]->rx.add(PortCounter::RxMultiSegment);
            rx.add(SwitchCounter::MultiSegment);
            return;
        }

        const std::uint8_t* data = Io::data(h);
        const std::uint32_t data_len = Io::data_len(h);
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
            rx.add(SwitchCounter::BadFrames);
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
            rx.add(malformed_counter(err));
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

    // Adds one classified burst of `packets` frames of port `in` to the counters.
    void settle_rx(SwitchCounters& rx, std::uint16_t in, std::uint32_t packets, const RxTally& tally) const noexcept {
        PortCounters& prx = ports_[in]->rx;
        prx.add(PortCounter::RxPackets, packets);
        prx.add(PortCounter::RxBytes, tally.bytes);
        if (tally.non_ip != 0) rx.add(SwitchCounter::NonIp, tally.non_ip);
        if (tally.ip_other != 0) rx.add(SwitchCounter::IpOther, tally.ip_other);
        if (tally.shesha_valid != 0) rx.add(SwitchCounter::Shesha, tally.shesha_valid);
        if (tally.gradient_f32 != 0) rx.add(SwitchCounter::GradientF32, tally.gradient_f32);
    }

    // ---- forwarding (egress owner) ----------------------------------------------------------

    // One received burst of port `in`, classified and forwarded here (one-lcore mode, simulator).
    // The common case, a frame that is not a GRADIENT going to exactly one port (a known
    // destination, or a flood between two ports), is appended to that port's staged arrivals (or
    // its transmit batch) with the cursor kept in registers; it is what route() would do.
    // Everything else takes route() itself, with the cursor written back first.
    void receive_burst(SwitchCounters& rx, std::uint16_t in, Handle* pkts, std::uint32_t n, std::uint64_t now) noexcept {
        if (n == 0) return;
        RxTally tally;
        std::uint64_t flooded = 0;
        const std::uint16_t flood_to = ports_.size() == 2 ? flood_last_[in] : kNoPort;
        // The cursor: the port appended to, its staged arrivals and its transmit batch. tx_open is
        // how far the batch may grow by bypassing (0 when the port must queue: see Port::tx_burst).
        Port* stage_port = nullptr;
        Arrival* stage = nullptr;
        std::uint32_t staged = 0;
        Handle* tx = nullptr;
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
                stage_port->mark_ewma -= stage_port->mark_ewma / kMarkEwmaDivisor;
        };
        // Senders come in trains: a learn that repeats the previous frame's (same sender, port and
        // now) changes nothing (Fdb::learn says when), and until some learn runs, the FDB answers
        // the previous frame's destination the same way. So both are kept in registers.
        MacKey burst_src = kNoMacKey;  // the previous frame's source, if learning it again is a no-op
        MacKey burst_dst = kNoMacKey;  // the last destination looked up since the last learn
        std::uint16_t burst_out = kNoPort;
        for (std::uint32_t i = 0; i < n && i < kPrefetchAhead; ++i) Io::prefetch(pkts[i]);
        for (std::uint32_t i = 0; i < n; ++i) {
            if (i + kPrefetchAhead < n) Io::prefetch(pkts[i + kPrefetchAhead]);
            const Handle m = pkts[i];
            PacketMeta meta;
            classify(rx, m, in, meta, tally);
            if (const MacKey src = mac_key(Io::data(m) + 6); src != burst_src) {
                burst_dst = kNoMacKey;
                burst_src = learn_source(src, in, now) ? src : kNoMacKey;
            }
            // A GRADIENT of a cluster member takes the cursor too (see stages_gradient), with its
            // policy verdict looked up here; any other verdict goes through route().
            const bool gradient = meta.cls == PacketClass::Gradient;
            std::uint32_t tolerance = 0;
            if (meta.cls == PacketClass::Plain ||
                (gradient && policy_cache_.check(meta.cluster_id, Io::data(m) + 6, meta.src_ip, tolerance) ==
                                 MergeVerdict::Merge)) {
                const MacKey dst = mac_key(Io::data(m));
                if (dst != burst_dst) {
                    burst_dst = dst;
                    burst_out = is_multicast(dst) ? kNoPort : fdb_.lookup(dst, now);
                }
                std::uint16_t out = burst_out;
                const bool flood = out == kNoPort;
                if (flood) out = flood_to;
                if (out != kNoPort && out != in && (!gradient || stages_gradient(out, stage_port, staged))) {
                    Port* port = ports_[out].get();
                    if (port != stage_port) {
                        if (stage_port != nullptr) write_back();
                        stage_port = port;
                        note_staging(out);
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
                    const std::uint32_t len = Io::pkt_len(m);
                    if (len > port->max_frame) [[unlikely]] {
                        drop_too_big(*port, m);
                        continue;
                    }
                    if (gradient) {
                        // A GRADIENT never bypasses (it waits for a merge partner), and nothing
                        // behind it may overtake it to the transmitter.
                        tx_open = n_tx;
                    } else if (n_tx < tx_open) {
                        tx[n_tx] = m;
                        tx_len[n_tx] = len;
                        tx_contrib[n_tx] = meta.contributions;
                        ++n_tx;
                        bypass_bytes += len;
                        continue;
                    }
                    if (staged == burst_) [[unlikely]] {
                        write_back();
                        n_tx_loaded = n_tx;
                        flush_staged(*stage_port, now);
                        staged = 0;
                    }
                    Arrival& a = stage[staged++];
                    a.handle = handle_ptr(m);
                    a.frame = Io::data(m);
                    a.frame_len = len;
                    a.l3_offset = meta.l3_offset;
                    a.l4_offset = meta.l4_offset;
                    a.shesha_offset = meta.shesha_offset;
                    a.contributions = meta.contributions;
                    a.mergeable = gradient && cfg_.aggregation;
                    if (gradient) set_merge_fields(a, meta, tolerance);
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
        if (flooded != 0) note_flooded(in, flooded);
        settle_rx(rx, in, n, tally);
        finish_forwarding(now);
    }

    // Whether a GRADIENT for port `out` may be staged like any other arrival instead of enqueued
    // at once (enqueue_gradient): when its enqueue cannot mark it, because even with every arrival
    // staged ahead of it queued, the depth it finds stays below the marking depth (under DRR the
    // port's total depth bounds its class's). Unmarked, its enqueue has no effect beyond its own
    // packet (no FEEDBACK), so the queue sees the same enqueues, in the same order, either way. The
    // cursor's count is the live one for the port it has open.
    [[gnu::always_inline]] inline bool stages_gradient(std::uint16_t out, const Port* cursor_port,
                                                       std::uint32_t cursor_staged) const noexcept {
        const Port& port = *ports_[out];
        const std::uint32_t staged = &port == cursor_port ? cursor_staged : port.n_staged;
        return port.mark_depth == 0 || port.queue.depth() + staged < port.mark_depth;
    }

    // Forwards packets classified elsewhere (an RX lcore's classify()); then finish_forwarding().
    [[gnu::always_inline]] inline void forward(Handle m, const PacketMeta& meta, std::uint64_t now) noexcept {
        learn_source(mac_key(Io::data(m) + 6), meta.in_port, now);
        route(m, meta, now);
    }

    // Ends a forwarding pass: staged arrivals enter their queues, merged and dropped arrivals are
    // freed, flood counts settled.
    // Only the ports touched in the pass are visited, so a pass costs the same on 2 ports as on
    // the thousands of a simulated ToR.
    void finish_forwarding(std::uint64_t now) noexcept {
        for (std::uint32_t i = 0; i < n_staging_; ++i) {
            Port& p = *ports_[staging_[i]];
            p.listed_for_flush = false;
            flush_staged(p, now);
        }
        n_staging_ = 0;
        if (n_to_free_ != 0) {
            io_.free_bulk(to_free_.data(), n_to_free_);
            n_to_free_ = 0;
        }
        for (std::uint32_t i = 0; i < n_flooding_; ++i) {
            const std::uint16_t in = flooding_[i];
            ports_[in]->tx.add(PortCounter::Flooded, flooded_pending_[in]);
            flooded_pending_[in] = 0;
        }
        n_flooding_ = 0;
    }

    // ---- egress ------------------------------------------------------------------------------

    // Poll mode: hands each port's batch (refused first, then bypassed, then dequeued through the
    // token bucket) to Io::tx_burst. Returns packets sent.
    unsigned transmit_all(std::uint64_t now) noexcept {
        unsigned sent = 0;
        for (std::size_t i = 0; i < ports_.size(); ++i) sent += transmit(static_cast<std::uint16_t>(i), now);
        return sent;
    }

    // Pull mode: the head of port's queue if its shaper allows it now; false if empty or shaped
    // out. The departure counts as sent (tx_packets/bytes/contributions).
    bool dequeue_one(std::uint16_t port_index, std::uint64_t now, Departure& out) noexcept {
        Port& port = *ports_[port_index];
        const std::uint32_t len = port.queue.front_len();
        if (len == 0 || !port.bucket.try_consume(len, now)) return false;
        if (!port.queue.dequeue(now, out)) return false;
        port.tx.add(PortCounter::TxPackets);
        port.tx.add(PortCounter::TxBytes, out.frame_len);
        port.tx.add(PortCounter::TxContributions, out.contributions);
        return true;
    }

    // Egress-owner housekeeping: FDB aging about once a second.
    void housekeeping(std::uint64_t now) noexcept {
        if (now - last_aging_ >= hz_) {
            fdb_.age(now);
            last_aging_ = now;
        }
    }

    // Frees every packet still held (queued or pending TX), counting it in tx_dropped. Call after
    // the loops have stopped, from the egress owner; `now` is the data path's last clock.
    void drain(std::uint64_t now) noexcept {
        for (auto& p : ports_) {
            Departure d;
            while (p->queue.dequeue(now, d)) {
                p->tx.add(PortCounter::TxDropped);
                io_.free(from_ptr(d.handle));
            }
            settle_bypass(*p);  // bypassed packets were dequeued, so they count as dropped here too
            if (p->n_tx != 0) {
                p->tx.add(PortCounter::TxDropped, p->n_tx);
                for (std::uint32_t i = 0; i < p->n_tx; ++i) io_.free(p->tx_burst[i]);
                p->n_pending = p->n_tx = 0;
            }
        }
    }
    void drain() noexcept { drain(last_now_); }
    void set_clock(std::uint64_t now) noexcept { last_now_ = now; }

    // ---- state (egress owner, or published by it) ------------------------------------------
    std::size_t port_count() const noexcept { return ports_.size(); }
    Port& port(std::size_t i) noexcept { return *ports_[i]; }
    const Port& port(std::size_t i) const noexcept { return *ports_[i]; }
    const Fdb& fdb() const noexcept { return fdb_; }
    const SwitchCounters& egress() const noexcept { return egress_; }
    const SwitchConfig& config() const noexcept { return cfg_; }
    std::uint64_t ticks_per_second() const noexcept { return hz_; }
    std::uint32_t burst() const noexcept { return burst_; }
    void set_port_mac(std::size_t i, const frame::MacAddr& mac) noexcept { ports_[i]->mac = mac; }

    // Counts work rounds (for the idle fraction in the stats).
    void count_round(bool idle) noexcept {
        egress_.add(SwitchCounter::EgressRounds);
        if (idle) egress_.add(SwitchCounter::EgressIdleRounds);
    }

private:
    // AggregatingQueue holds void* handles.
    static_assert(std::is_pointer_v<Handle>, "Io::Handle must be a pointer");
    static void* handle_ptr(Handle h) noexcept { return static_cast<void*>(h); }
    static Handle from_ptr(void* p) noexcept { return static_cast<Handle>(p); }

    // A port whose staged arrivals finish_forwarding() must flush (listed at most once per pass:
    // a port is listed when its stage is empty, and only finish_forwarding() empties it for good).
    void note_staging(std::uint16_t port) noexcept {
        Port& p = *ports_[port];
        if (p.listed_for_flush) return;
        p.listed_for_flush = true;
        staging_[n_staging_++] = port;
    }
    void note_flooded(std::uint16_t in, std::uint64_t n) noexcept {
        if (flooded_pending_[in] == 0) flooding_[n_flooding_++] = in;
        flooded_pending_[in] += n;
    }

    // Learns a frame's source; returns true when learning it again now would change nothing (see
    // Fdb::learn).
    [[gnu::always_inline]] inline bool learn_source(MacKey src, std::uint16_t in, std::uint64_t now) noexcept {
        // The all-zero address is no station's (net_null and broken senders use it): never learned,
        // so frames to it flood instead of being pinned to whichever port sent one last.
        return src == 0 || fdb_.learn(src, in, now);
    }

    // Everything after learning: policy, lookup, filtering, flooding, enqueueing.
    [[gnu::always_inline]] inline void route(Handle m, const PacketMeta& meta, std::uint64_t now) noexcept {
        const std::uint16_t in = meta.in_port;
        const std::uint8_t* eth = Io::data(m);
        const MacKey dst = mac_key(eth);

        if (meta.cls == PacketClass::Malformed && cfg_.malformed == MalformedAction::Drop) {
            egress_.add(SwitchCounter::MalformedDropped);
            io_.free(m);
            return;
        }

        bool mergeable = false;
        std::uint32_t tolerance = 0;
        if (meta.cls == PacketClass::Gradient && !admit_gradient(m, meta, eth + 6, mergeable, tolerance)) return;

        const std::uint16_t out = is_multicast(dst) ? kNoPort : fdb_.lookup(dst, now);
        if (out == in) {  // the destination lives behind the ingress port: never send it back
            ports_[in]->tx.add(PortCounter::Filtered);
            io_.free(m);
            return;
        }
        if (out != kNoPort) {
            enqueue_to(out, m, meta, mergeable, tolerance, now);
            return;
        }
        if (ports_.size() == 2 && flood_last_[in] != kNoPort) {
            // Two ports: the flood is the original to the other port, no copies.
            note_flooded(in, 1);
            enqueue_to(flood_last_[in], m, meta, mergeable, tolerance, now);
            return;
        }
        flood(m, meta, mergeable, tolerance, now);
    }

    // Cluster policy for an fp32 GRADIENT: whether it may merge, with which version tolerance,
    // and whether it travels at all (false: dropped and freed here).
    bool admit_gradient(Handle m, const PacketMeta& meta, const std::uint8_t* src_mac, bool& mergeable,
                        std::uint32_t& tolerance) noexcept {
        switch (policy_cache_.check(meta.cluster_id, src_mac, meta.src_ip, tolerance)) {
        case MergeVerdict::Merge:
            mergeable = cfg_.aggregation;
            break;
        case MergeVerdict::NoAggregation:
            egress_.add(SwitchCounter::NoAggregation);
            break;
        case MergeVerdict::UnknownCluster:
            egress_.add(SwitchCounter::UnknownCluster);
            break;
        case MergeVerdict::NotMember:
            egress_.add(SwitchCounter::NonMember);
            if (policy_.non_member_action() == NonMemberAction::Drop) {
                egress_.add(SwitchCounter::NonMemberDropped);
                io_.free(m);
                return false;
            }
            break;
        }
        return true;
    }

    void flood(Handle m, const PacketMeta& meta, bool mergeable, std::uint32_t tolerance, std::uint64_t now) noexcept {
        const std::uint16_t in = meta.in_port;
        // A private copy for every other port but the last, which gets the original (queues write
        // into their packets when merging or marking, so copies must not share data).
        const std::uint16_t n = static_cast<std::uint16_t>(ports_.size());
        const std::uint16_t last = flood_last_[in];
        if (last == kNoPort) {  // a single port: nowhere to flood to
            ports_[in]->tx.add(PortCounter::Filtered);
            io_.free(m);
            return;
        }
        note_flooded(in, 1);
        for (std::uint16_t p = 0; p < n; ++p) {
            if (p == in) continue;
            if (p == last) {
                enqueue_to(p, m, meta, mergeable, tolerance, now);
                break;
            }
            const Handle copy = io_.copy(m);
            if (!copy) [[unlikely]] {
                egress_.add(SwitchCounter::CloneFailed);
                continue;
            }
            enqueue_to(p, copy, meta, mergeable, tolerance, now);
        }
    }

    // A frame larger than the egress port's MTU allows: counted and freed, never sent (and so
    // never counted as sent and then lost on the wire). The adapter logs the first one per port.
    void drop_too_big(Port& port, Handle m) noexcept {
        port.tx.add(PortCounter::TxTooBig);
        if (port.too_big_first_len == 0) port.too_big_first_len = Io::pkt_len(m);
        io_.free(m);
    }

    // Only a GRADIENT's enqueue has effects beyond its own packet (FEEDBACK reads the queue's
    // state right after it). Every other arrival is staged and enqueued with the rest of its burst
    // in order, and a GRADIENT first flushes its port's staged arrivals, so every queue sees the
    // same sequence of enqueues, at the same instant, as one enqueue() per packet would give.
    [[gnu::always_inline]] inline void enqueue_to(std::uint16_t out_index, Handle m, const PacketMeta& meta,
                                                  bool mergeable, std::uint32_t tolerance, std::uint64_t now) noexcept {
        Port& port = *ports_[out_index];
        if (Io::pkt_len(m) > port.max_frame) [[unlikely]] {
            drop_too_big(port, m);
            return;
        }
        if (meta.cls != PacketClass::Gradient) {
            if (port.n_staged == burst_) [[unlikely]] flush_staged(port, now);
            if (port.n_staged == 0) note_staging(out_index);
            Arrival& s = port.staged[port.n_staged++];
            s.handle = handle_ptr(m);
            s.frame = Io::data(m);
            s.frame_len = Io::pkt_len(m);
            const bool offsets = meta.cls == PacketClass::Plain;  // not MultiSegment or Malformed
            s.l3_offset = offsets ? meta.l3_offset : 0;
            s.l4_offset = offsets ? meta.l4_offset : 0;
            s.shesha_offset = offsets ? meta.shesha_offset : 0;
            s.contributions = offsets ? meta.contributions : 0;
            s.mergeable = false;  // only GRADIENTs merge; the merge fields are then unused
            return;
        }
        enqueue_gradient(out_index, m, meta, mergeable, tolerance, now);
    }

    // What the queue's merge rule reads from a GRADIENT's Arrival (unused unless it is mergeable).
    [[gnu::always_inline]] static inline void set_merge_fields(Arrival& a, const PacketMeta& meta,
                                                               std::uint32_t tolerance) noexcept {
        a.cluster_id = meta.cluster_id;
        a.chunk_index = meta.chunk_index;
        a.elem_count = meta.elem_count;
        a.model_version = meta.model_version;
        a.dst_ip = meta.dst_ip;
        a.version_tolerance = tolerance;
    }

    void enqueue_gradient(std::uint16_t out_index, Handle m, const PacketMeta& meta, bool mergeable,
                          std::uint32_t tolerance, std::uint64_t now) noexcept {
        Port& port = *ports_[out_index];
        flush_staged(port, now);
        Arrival a;
        a.handle = handle_ptr(m);
        a.frame = Io::data(m);
        a.frame_len = Io::pkt_len(m);
        a.l3_offset = meta.l3_offset;
        a.l4_offset = meta.l4_offset;
        a.shesha_offset = meta.shesha_offset;
        a.contributions = meta.contributions;
        a.mergeable = mergeable;
        set_merge_fields(a, meta, tolerance);

        const EnqueueResult r = port.queue.enqueue(a, now);
        port.mark_ewma += ((r.marked ? (std::int64_t{1000} << 10) : 0) - port.mark_ewma) / kMarkEwmaDivisor;

        if (r.marked && cfg_.feedback && r.status != EnqueueStatus::DroppedFull) send_feedback(meta, a.frame, out_index, now);

        switch (r.status) {
        case EnqueueStatus::Queued:
            break;
        case EnqueueStatus::Merged:
            free_later(m);
            break;
        case EnqueueStatus::DroppedFull:
            port.tx.add(PortCounter::QueueDrops);
            port.tx.add(PortCounter::TxDroppedContributions, meta.contributions);
            free_later(m);
            break;
        }
    }

    void flush_staged(Port& port, std::uint64_t now) noexcept {
        const std::uint32_t n = port.n_staged;
        if (n == 0) return;
        port.n_staged = 0;
        EnqueueResult* results = staged_results_.data();
        const std::uint32_t exceptions = port.queue.enqueue_burst(port.staged.data(), n, now, results);
        std::int64_t ewma = port.mark_ewma;
        if (exceptions == 0 && ewma == 0) return;  // all queued, none marked: nothing to free or update
        std::uint64_t drops = 0, lost = 0;
        for (std::uint32_t i = 0; i < n; ++i) {
            if (ewma == 0 && results[i].status == EnqueueStatus::Queued && !results[i].marked) continue;  // nothing changes
            const EnqueueResult r = results[i];
            ewma += ((r.marked ? (std::int64_t{1000} << 10) : 0) - ewma) / kMarkEwmaDivisor;
            if (r.status != EnqueueStatus::Queued) [[unlikely]] {
                if (r.status == EnqueueStatus::DroppedFull) {
                    ++drops;
                    lost += port.staged[i].contributions;
                }
                free_later(from_ptr(port.staged[i].handle));
            }
        }
        port.mark_ewma = ewma;
        if (drops != 0) {
            port.tx.add(PortCounter::QueueDrops, drops);
            port.tx.add(PortCounter::TxDroppedContributions, lost);
        }
    }

    // Merged arrivals and tail drops are freed in bulk at the end of the pass.
    void free_later(Handle m) noexcept {
        if (n_to_free_ == to_free_.size()) [[unlikely]] {
            io_.free_bulk(to_free_.data(), n_to_free_);
            n_to_free_ = 0;
        }
        to_free_[n_to_free_++] = m;
    }

    // FEEDBACK to the sender of a marked GRADIENT: a new packet out of the ingress port, bypassing
    // every queue. The switch has no address of its own, so it answers from the address the
    // gradient was sent to (the learner's IP) and the Shesha port: a worker's socket connected to
    // the learner receives it.
    void send_feedback(const PacketMeta& meta, const std::uint8_t* frame, std::uint16_t out_index, std::uint64_t now) noexcept {
        if (!limiter_.allow(meta.src_ip, now)) {
            egress_.add(SwitchCounter::FeedbackSuppressed);
            return;
        }
        proto::Header grad;
        if (proto::decode_header({frame + meta.shesha_offset, proto::kHeaderSize}, grad) != proto::DecodeError::Ok) {
            egress_.add(SwitchCounter::FeedbackFailed);
            return;
        }
        std::uint8_t* out = nullptr;
        const Handle fb = io_.alloc(static_cast<std::uint32_t>(kFeedbackFrameLen), &out);
        if (!fb) [[unlikely]] {
            egress_.add(SwitchCounter::FeedbackFailed);
            return;
        }
        const Port& queue_port = *ports_[out_index];
        // Under DRR the sender's congestion is its own class's backlog.
        const AggregatingQueue& q = queue_port.queue.class_queue(queue_port.queue.class_of(meta.cluster_id));
        const proto::FeedbackBody body = feedback_body(out_index, q, queue_port.mark_ewma, queue_port.bucket.rate_bps());
        frame::Endpoints ep;
        ep.src_mac = ports_[meta.in_port]->mac;
        std::memcpy(ep.dst_mac.data(), frame + 6, 6);
        ep.src_ip = meta.dst_ip;
        ep.dst_ip = meta.src_ip;
        ep.src_port = cfg_.udp_port;
        ep.dst_port = be::load16(frame + meta.l4_offset);  // the gradient's UDP source port
        if (build_feedback_frame(grad, body, ep, {out, kFeedbackFrameLen}) == 0 || !io_.send_now(meta.in_port, fb)) {
            io_.free(fb);
            egress_.add(SwitchCounter::FeedbackFailed);
            return;
        }
        egress_.add(SwitchCounter::FeedbackSent);
    }

    // The packets that bypassed the empty queue this round count as its arrivals and departures.
    void settle_bypass(Port& port) noexcept {
        const std::uint32_t bypassed = port.n_tx - port.n_pending;
        if (bypassed == 0) return;
        port.queue.count_bypass(bypassed, port.bypass_bytes);
        port.bypass_bytes = 0;
    }

    unsigned transmit(std::uint16_t index, std::uint64_t now) noexcept {
        Port& port = *ports_[index];
        settle_bypass(port);
        // Packets the NIC refused last time go first, then this round's bypassed ones, then the queue's.
        Handle* burst = port.tx_burst.data();
        std::uint32_t* lens = port.tx_len.data();
        std::uint16_t* contrib = port.tx_contrib.data();
        std::uint32_t n = port.n_tx;
        if (port.bucket.unlimited()) {
            // No shaper: take the whole burst from the queue at once, straight into the TX arrays.
            static_assert(sizeof(Handle) == sizeof(void*));
            n += port.queue.dequeue_burst(now, reinterpret_cast<void**>(burst + n), lens + n, contrib + n,
                                          burst_ - std::min(n, burst_));
        } else {
            while (n < burst_) {
                const std::uint32_t len = port.queue.front_len();
                if (len == 0 || !port.bucket.try_consume(len, now)) break;
                Departure d;
                if (!port.queue.dequeue(now, d)) break;
                burst[n] = from_ptr(d.handle);
                lens[n] = d.frame_len;
                contrib[n] = d.contributions;
                ++n;
            }
        }
        if (n == 0) return 0;

        const std::uint16_t sent = io_.tx_burst(index, burst, static_cast<std::uint16_t>(n));
        std::uint64_t bytes = 0, contributions = 0;
        for (std::uint16_t i = 0; i < sent; ++i) {
            bytes += lens[i];
            contributions += contrib[i];
        }
        port.tx.add(PortCounter::TxPackets, sent);
        port.tx.add(PortCounter::TxBytes, bytes);
        port.tx.add(PortCounter::TxContributions, contributions);
        port.n_pending = port.n_tx = n - sent;
        if (port.n_pending != 0) {
            port.tx.add(PortCounter::TxRefused, port.n_pending);
            std::memmove(burst, burst + sent, port.n_pending * sizeof(*burst));
            std::memmove(lens, lens + sent, port.n_pending * sizeof(*lens));
            std::memmove(contrib, contrib + sent, port.n_pending * sizeof(*contrib));
        }
        return sent;
    }

    SwitchConfig cfg_;
    Io& io_;
    std::uint64_t hz_;
    std::uint32_t burst_;
    bool poll_mode_;
    std::vector<std::unique_ptr<Port>> ports_;
    Fdb fdb_;
    ClusterPolicy policy_;
    PolicyVerdictCache policy_cache_{policy_};  // after policy_: it points at it
    FeedbackLimiter limiter_;
    SwitchCounters egress_;  // the egress owner's entries
    std::vector<std::uint16_t> flood_last_;  // per ingress port: the last port a flood goes to
    // Per forwarding pass: flood counts per ingress port and the packets to free (merged arrivals,
    // tail drops), both settled by finish_forwarding() once per pass.
    std::vector<std::uint64_t> flooded_pending_;
    std::vector<std::uint16_t> staging_;   // ports with staged arrivals this pass
    std::uint32_t n_staging_ = 0;
    std::vector<std::uint16_t> flooding_;  // ingress ports with flood counts this pass
    std::uint32_t n_flooding_ = 0;
    std::vector<Handle> to_free_;
    std::vector<EnqueueResult> staged_results_ = std::vector<EnqueueResult>(kMaxBurst);
    std::uint32_t n_to_free_ = 0;
    std::uint64_t last_aging_ = 0;
    std::uint64_t last_now_ = 0;
};

}  // namespace shesha::core

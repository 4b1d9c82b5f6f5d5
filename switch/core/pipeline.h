// The switch pipeline: every per-packet decision of shesha-switch, with no DPDK in it. The DPDK
// adapter (switch/dpdk), the simulator (tools/sim) and the verifier's replay (through shesha-sim)
// all run this same code, so what they report describes the real switch.
//
// A received frame passes six stages, each in its own header with its contract:
//   1. classification (classify.h): what the frame is; Shesha decoded, malformed counted per reason;
//   2. L2 learn and lookup (l2.h): learn the source MAC, find the destination's port, or flood
//      (unknown/broadcast/multicast to every other port), filter a destination behind the ingress;
//   3. admission (admission.h): the cluster policy's verdict on an fp32 GRADIENT (members may merge,
//      with their cluster's version tolerance; non-members forwarded unmerged or dropped);
//   4. the egress queue (egress_queue.h): frames over the port's MTU refused; staged or entered at
//      once into the port's AggregatingQueue (merge, tail drop, CE mark), mark fraction kept;
//   5. FEEDBACK (feedback.h): rate-limited, for every marked GRADIENT;
//      and, for MODEL frames when configured, replication (replication.h): one copy per member;
//   6. the TX batch (tx_batch.h): each queue drained through its token bucket to the transmitter.
// This file composes them. There is one forwarding path, forward_packet(): receive_burst() runs it
// on a burst it classifies, forward_classified() on frames classified elsewhere, and
// forward() on a single frame, as a burst of one.
//
// The pipeline does not own packets or talk to devices. It is a template over an `Io` that moves
// packets for it (DPDK mbufs in the switch, pooled buffers in the simulator, memory_io.h in tests
// and shesha-replay):
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
//     Handle replicate(Handle, std::uint32_t header_len, std::uint8_t** header);
//                          // a copy whose first header_len bytes are its own (written through
//                          // *header) and whose payload may be shared with the original, or null
//     Handle alloc(std::uint32_t len, std::uint8_t** bytes);  // a new frame to fill, or null
//     bool send_now(std::uint16_t port, Handle);            // FEEDBACK out of a port, bypassing queues
//     void free(Handle);
//     std::uint16_t tx_burst(std::uint16_t port, Handle*, std::uint16_t n);  // poll mode only
//   };
//
// Threading: one "forwarding thread" (in the switch, each forwarding lcore has a Pipeline of its
// own) runs the forward_*() family, transmit_all()/dequeue_one() and housekeeping(); classify() is
// const and may run on other threads, writing only the RX counters it is given and the ingress
// port's RX counters.
// Counters have one writer each (counters.h).
//
// Two ways to drain the queues: poll mode (transmit_all(): bursts to Io::tx_burst, NIC refusals kept
// and retried first) for the switch, and pull mode (dequeue_one(): one departure when the caller's
// link is free) for the simulator. In poll mode, a frame that cannot merge and finds its unshaped
// port's queue empty skips the queue and joins the transmit batch directly (counted by the queue
// as enqueued and dequeued at once); that changes no outcome, only the cost.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "admission.h"
#include "aggregating_queue.h"
#include "classify.h"
#include "counters.h"
#include "egress_queue.h"
#include "fdb.h"
#include "feedback.h"
#include "l2.h"
#include "port.h"
#include "replication.h"
#include "switch_config.h"
#include "tx_batch.h"

namespace shesha::core {

inline constexpr std::uint16_t kPrefetchAhead = 8;  // packets whose headers are prefetched ahead
inline constexpr std::uint32_t kPrefetchMinLen = 512;  // ... in bursts whose first frame is this long

// What one forwarding lcore's pipeline tells the others when the switch runs several (each with
// a pipeline of its own, switch/dpdk): a station its FDB learned, or a worker that joined one of
// its replication groups. Trivially copyable, for rte_ring elements.
struct PeerUpdate {
    enum class Kind : std::uint32_t { Learn, Join };
    Kind kind = Kind::Learn;
    FdbLearn learn;
    ReplicationStage::Join join;
};

// Mode switches for the embedding program.
struct PipelineOptions {
    bool poll_mode = true;  // false: pull mode (dequeue_one), no queue bypass, no Io::tx_burst
};

template <class Io>
class Pipeline {
public:
    using Handle = typename Io::Handle;
    using Port = core::Port<Handle>;

    // io must outlive the pipeline. Throws ConfigError for an inconsistent config (a static FDB
    // entry naming an unknown port, too many static entries).
    Pipeline(const SwitchConfig& cfg, std::uint64_t ticks_per_second, Io& io, PipelineOptions options = {})
        : cfg_(with_ports(cfg)),
          io_(io),
          ticks_per_second_(std::max<std::uint64_t>(ticks_per_second, 1)),
          burst_(std::clamp<std::uint32_t>(cfg.burst, 1, kMaxBurst)),
          l2_(cfg_, ticks_per_second_),
          admission_(cfg_),
          replication_(cfg_),
          feedback_(us_to_ticks(cfg.feedback_interval_us, ticks_per_second_), cfg.udp_port),
          to_free_(io, burst_ + 1) {
        for (const auto& pc : cfg_.ports) ports_.push_back(std::make_unique<Port>(cfg_, pc, ticks_per_second_, burst_, options.poll_mode));
        two_ports_ = ports_.size() == 2;
        flooded_pending_.assign(ports_.size(), 0);
        staging_.assign(ports_.size(), 0);
        flooding_.assign(ports_.size(), 0);
    }
    ~Pipeline() { drain(); }
    Pipeline(const Pipeline&) = delete;
    Pipeline& operator=(const Pipeline&) = delete;

    // ---- stage 1, classification (const: any thread) --------------------------------------------

    // Classifies one frame that arrived on port `in` (classify.h).
    [[gnu::always_inline]] inline void classify(SwitchCounters& rx, Handle h, std::uint16_t in, PacketMeta& meta,
                                                RxTally& tally) const noexcept {
        classify_frame<Io>(h, in, cfg_.udp_port, ports_[in]->rx, rx, meta, tally);
    }
    // Adds one classified burst of `packets` frames of port `in` to the counters.
    void settle_rx(SwitchCounters& rx, std::uint16_t in, std::uint32_t packets, const RxTally& tally) const noexcept {
        core::settle_rx(ports_[in]->rx, rx, packets, tally);
    }

    // ---- forwarding (the forwarding thread) ------------------------------------------------------

    // One received burst of port `in`, classified and forwarded here (one-lcore mode, simulator),
    // then finish_forwarding().
    void receive_burst(SwitchCounters& rx, std::uint16_t in, Handle* pkts, std::uint32_t n, std::uint64_t now) noexcept {
        if (n == 0) return;
        RxTally tally;
        PortCounters& port_rx = ports_[in]->rx;
        // Prefetching pays only where the burst's frames are large enough that the PMD's copies of
        // them push the first ones out of L1 before they are forwarded; for small frames it is
        // only a dependent load of the mbuf per frame (pcap64 1.056x without, grad1k 0.985x).
        const std::uint32_t ahead = Io::pkt_len(pkts[0]) >= kPrefetchMinLen ? kPrefetchAhead : 0;
        for (std::uint32_t i = 0; i < n && i < ahead; ++i) Io::prefetch(pkts[i]);
        forward_pass(
            n, now, true,
            [&](std::uint32_t i, PacketMeta& meta) __attribute__((always_inline)) {
                if (i + ahead < n && ahead != 0) Io::prefetch(pkts[i + ahead]);
                classify_frame<Io>(pkts[i], in, cfg_.udp_port, port_rx, rx, meta, tally);
                return pkts[i];
            },
            // Small plain frames come in trains (one flow, one header): the frames after this one
            // that forward_packet() would forward as it did this one take forward_train() instead.
            [&](std::uint32_t next, const PacketMeta& meta, Pass& pass) __attribute__((always_inline)) {
                return ahead == 0 && meta.train && pass.l2.out != kNoPort ? forward_train(pkts, next, n, in, pass, tally)
                                                                          : next;
            });
        core::settle_rx(port_rx, rx, n, tally);
        finish_forwarding(now);
    }

    // Frames classified elsewhere (classify()): packet_at(i, meta) returns frame i
    // and fills its meta (give the lambda __attribute__((always_inline)): it runs per packet).
    // Call finish_forwarding() after the last.
    template <class PacketAt>
    [[gnu::always_inline]] inline void forward_classified(std::uint32_t n, std::uint64_t now, PacketAt&& packet_at) noexcept {
        forward_pass(n, now, false, packet_at, OneByOne{});
    }

    // One frame classified elsewhere, as a burst of one. Call finish_forwarding() after the last.
    void forward(Handle m, const PacketMeta& meta, std::uint64_t now) noexcept {
        forward_pass(
            1, now, false,
            [&](std::uint32_t, PacketMeta& out) __attribute__((always_inline)) {
                out = meta;
                return m;
            },
            OneByOne{});
    }

    // Ends a forwarding pass: staged arrivals enter their queues, merged and dropped arrivals are
    // freed, flood counts settled. Only the ports touched in the pass are visited, so a pass costs
    // the same on 2 ports as on the thousands of a simulated ToR.
    void finish_forwarding(std::uint64_t now) noexcept {
        for (std::uint32_t i = 0; i < n_staging_; ++i) {
            Port& p = *ports_[staging_[i]];
            p.listed_for_flush = false;
            p.flush_staged(now, p.tx, to_free_, staged_results_.data());
        }
        n_staging_ = 0;
        to_free_.flush();
        for (std::uint32_t i = 0; i < n_flooding_; ++i) {
            const std::uint16_t in = flooding_[i];
            ports_[in]->tx.add(PortCounter::Flooded, flooded_pending_[in]);
            flooded_pending_[in] = 0;
        }
        n_flooding_ = 0;
    }

    // ---- stage 6, the TX batch -------------------------------------------------------------------

    // Poll mode: hands each port's batch (refused first, then bypassed, then dequeued through the
    // token bucket) to Io::tx_burst. Returns packets sent.
    unsigned transmit_all(std::uint64_t now) noexcept {
        unsigned sent = 0;
        for (std::size_t i = 0; i < ports_.size(); ++i) {
            Port& p = *ports_[i];
            sent += p.transmit(io_, static_cast<std::uint16_t>(i), p.queue, p.bucket, p.tx, burst_, now);
        }
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

    // ---- several forwarding lcores, one pipeline each (see PeerUpdate) ----------------------------
    // After start_peer_sync(), take_peer_updates() hands over what changed since its last call
    // (new stations, moves, joins), and export_peer_state() everything a peer must refresh: the
    // stations this pipeline saw since `since` (all of them after a lost update) and every group
    // member. apply_peer_update() applies another pipeline's update.
    void start_peer_sync() noexcept {
        l2_.fdb().start_journal();
        replication_.start_journal();
    }
    template <class Sink>
    void take_peer_updates(Sink&& sink) {
        l2_.fdb().take_journal([&](const FdbLearn& l) { sink(PeerUpdate{PeerUpdate::Kind::Learn, l, {}}); });
        replication_.take_journal([&](const ReplicationStage::Join& j) { sink(PeerUpdate{PeerUpdate::Kind::Join, {}, j}); });
    }
    template <class Sink>
    void export_peer_state(std::uint64_t since, Sink&& sink) {
        l2_.fdb().export_local(since, [&](const FdbLearn& l) { sink(PeerUpdate{PeerUpdate::Kind::Learn, l, {}}); });
        replication_.export_members([&](const ReplicationStage::Join& j) { sink(PeerUpdate{PeerUpdate::Kind::Join, {}, j}); });
    }
    void apply_peer_update(const PeerUpdate& u) noexcept {
        if (u.kind == PeerUpdate::Kind::Learn)
            l2_.fdb().learn_from_peer(u.learn);
        else
            replication_.join_from_peer(u.join);
    }
    const ReplicationStage& replication() const noexcept { return replication_; }
    // Counts an update a peer could not be told (its ring was full).
    void count_peer_sync_dropped(std::uint64_t n) noexcept { egress_.add(SwitchCounter::PeerSyncDropped, n); }

    // Forwarding-thread housekeeping: FDB aging about once a second.
    void housekeeping(std::uint64_t now) noexcept { l2_.housekeeping(now); }

    // Frees every packet still held (queued or pending TX), counting it in tx_dropped. Call after
    // the loops have stopped, from the forwarding thread; `now` is the data path's last clock.
    void drain(std::uint64_t now) noexcept {
        for (auto& p : ports_) {
            Departure d;
            while (p->queue.dequeue(now, d)) {
                p->tx.add(PortCounter::TxDropped);
                io_.free(static_cast<Handle>(d.handle));
            }
            p->drop_all(io_, p->queue, p->tx);
        }
    }
    void drain() noexcept { drain(last_now_); }
    void set_clock(std::uint64_t now) noexcept { last_now_ = now; }

    // ---- state (forwarding thread, or published by it) -------------------------------------------
    std::size_t port_count() const noexcept { return ports_.size(); }
    Port& port(std::size_t i) noexcept { return *ports_[i]; }
    const Port& port(std::size_t i) const noexcept { return *ports_[i]; }
    const Fdb& fdb() const noexcept { return l2_.fdb(); }
    const SwitchCounters& egress() const noexcept { return egress_; }
    const SwitchConfig& config() const noexcept { return cfg_; }
    std::uint64_t ticks_per_second() const noexcept { return ticks_per_second_; }
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

    static const SwitchConfig& with_ports(const SwitchConfig& cfg) {
        if (cfg.ports.empty()) throw ConfigError("no ports configured");
        return cfg;
    }

    // What a forwarding pass keeps in registers: the staging cursor, the burst's L2 memo, and the
    // flood count of the ingress port it last counted for. Only a pass over a burst this thread
    // received lets frames bypass an empty queue (bypass: see the file comment).
    struct Pass {
        explicit Pass(bool bypass) noexcept : cursor(bypass) {}
        StageCursor<Handle> cursor;
        L2Burst l2;
        std::uint16_t flood_in = kNoPort;  // the ingress port whose floods are being counted
        std::uint16_t flood_to = kNoPort;  // where its floods go (two ports only)
        std::uint64_t flooded = 0;
    };

    // A pass's next frame after frame i - 1 is frame i (then_at below: forward_train() may take
    // some frames past it).
    struct OneByOne {
        std::uint32_t operator()(std::uint32_t next, const PacketMeta&, Pass&) const noexcept { return next; }
    };

    // packet_at(i, meta) gives frame i and its meta; after it, then_at(i + 1, meta, pass) says
    // which frame comes next.
    template <class PacketAt, class ThenAt>
    [[gnu::always_inline]] inline void forward_pass(std::uint32_t n, std::uint64_t now, bool bypass,
                                                    PacketAt&& packet_at, ThenAt&& then_at) noexcept {
        Pass pass(bypass);
        for (std::uint32_t i = 0; i < n;) {
            PacketMeta meta;
            const Handle m = packet_at(i, meta);
            forward_packet(m, meta, now, pass);
            i = then_at(i + 1, meta, pass);
        }
        pass.cursor.close();
        if (pass.flooded != 0) add_floods(pass.flood_in, pass.flooded);
    }

    // Frames from `i` on that forward_packet() would bypass to the pass's open TX batch exactly as
    // it did the frame before: single-segment IPv4 UDP not to the Shesha port (classified IpOther
    // by classify_ipv4_udp_fast), from the burst's memoized source to its memoized destination,
    // which lives behind the open batch's port, no longer than that port's max_frame. Stages them
    // with the counts the general path would make, and returns the first frame that is not such a
    // frame. Exact: tests/test_pipeline.cpp compares it with forwarding frame by frame. Out of
    // line, so that its loop gets registers of its own.
    [[gnu::noinline]] std::uint32_t forward_train(Handle* pkts, std::uint32_t i, std::uint32_t n, std::uint16_t in,
                                                  Pass& pass, RxTally& tally) noexcept {
        StageCursor<Handle>& c = pass.cursor;
        const std::uint16_t out = pass.l2.out;
        if (i == n || c.port == nullptr || out == kNoPort || out == in || c.port != ports_[out].get() ||
            c.n_tx >= c.bypass_limit)
            return i;
        // A memo that holds no key (kNoMacKey) matches no frame: keys use 48 bits.
        if (pass.l2.src == kNoMacKey || pass.l2.dst == kNoMacKey) return i;
        const TrainHead head = train_head(pass.l2.dst, pass.l2.src);
        const std::uint32_t max_frame = c.port->max_frame;
        const std::uint16_t udp_port = cfg_.udp_port;
        Handle* const tx = c.tx;
        std::uint32_t* const tx_len = c.tx_len;
        std::uint16_t* const tx_contrib = c.tx_contrib;
        // Frame i goes to batch slot i + shift.
        const std::uint32_t first = i;
        const std::uint32_t shift = c.n_tx - i;
        const std::uint32_t end = std::min<std::uint32_t>(n, c.bypass_limit - shift);
        std::uint64_t bytes = 0;
        // Train frames mostly repeat the last one's header: a frame whose deciding bytes and lengths
        // equal the last accepted frame's is accepted on one compare (same inputs, same decision).
        // 0 lengths: no frame accepted yet (a train frame holds at least kTrainMinLen bytes).
        std::uint64_t last_ip = 0, last_lens = 0;
        std::uint32_t last_udp = 0;
        for (; i < end; ++i) {
            const Handle m = pkts[i];
            const std::uint32_t len = Io::pkt_len(m);
            const std::uint32_t data_len = Io::data_len(m);
            if (Io::multi_segment(m) || data_len < kTrainMinLen) break;
            const TrainWords w = load_train_words(Io::data(m));
            const std::uint64_t lens = (std::uint64_t{len} << 32) | data_len;
            if (((w.w0 ^ head.lo) | ((w.w1 & kTrainHeadMask) ^ head.hi) | ((w.w2 & kTrainIpMask) ^ last_ip) |
                 (w.udp ^ last_udp) | (lens ^ last_lens)) != 0) {
                if (len > max_frame || !is_plain_udp_train_frame(w, data_len, head, udp_port)) break;
                last_ip = w.w2 & kTrainIpMask;
                last_udp = w.udp;
                last_lens = lens;
            }
            tx[i + shift] = m;
            tx_len[i + shift] = len;
            tx_contrib[i + shift] = 0;
            bytes += len;
        }
        tally.bytes += bytes;
        tally.ip_other += i - first;
        c.bypass_bytes += bytes;
        c.n_tx = i + shift;
        return i;
    }

    // The forwarding path of one classified frame: stages 2 to 5.
    [[gnu::always_inline]] inline void forward_packet(Handle m, const PacketMeta& meta, std::uint64_t now, Pass& pass) noexcept {
        const std::uint16_t in = meta.in_port;
        if (meta.cls == PacketClass::Runt) [[unlikely]] {  // counted by classification
            io_.free(m);
            return;
        }
        const std::uint8_t* eth = Io::data(m);
        pass.l2.learn(l2_, mac_key(eth + 6), in, now);

        Admission admission;
        if (meta.cls != PacketClass::Plain) {
            if (meta.cls == PacketClass::Gradient) {
                admission = admission_.admit(meta, eth + 6, egress_);
                if (!admission.pass) [[unlikely]] {
                    io_.free(m);
                    return;
                }
            } else if (meta.cls == PacketClass::Model) {
                if (replication_.enabled() && model_replicated_here(m, meta, now, pass)) return;
            } else if (meta.cls == PacketClass::CreditBatch) {
                if (replication_.enabled() && credit_batch_expanded_here(m, meta, now, pass)) return;
            } else if (meta.cls == PacketClass::Malformed && cfg_.malformed == MalformedAction::Drop) {
                egress_.add(SwitchCounter::MalformedDropped);
                io_.free(m);
                return;
            }
        }

        std::uint16_t out = pass.l2.lookup(l2_, mac_key(eth), now);
        if (out == in) [[unlikely]] {  // the destination lives behind the ingress port: never send it back
            ports_[in]->tx.add(PortCounter::Filtered);
            io_.free(m);
            return;
        }
        if (out == kNoPort) {
            if (!two_ports_) [[unlikely]] {
                pass.cursor.close();
                flood(m, meta, admission, now);
                return;
            }
            // Two ports: the flood is the original to the other port, no copies.
            if (in != pass.flood_in) [[unlikely]] {
                if (pass.flooded != 0) add_floods(pass.flood_in, pass.flooded);
                pass.flood_in = in;
                pass.flood_to = l2_.flood_peer(in);
                pass.flooded = 0;
            }
            out = pass.flood_to;
            ++pass.flooded;
        }
        enqueue_to(out, m, meta, admission, now, pass.cursor);
    }

    // Stage 4's door for one frame bound for port `out`.
    [[gnu::always_inline]] inline void enqueue_to(std::uint16_t out, Handle m, const PacketMeta& meta,
                                                  const Admission& admission, std::uint64_t now,
                                                  StageCursor<Handle>& cursor) noexcept {
        Port& port = *ports_[out];
        const std::uint32_t len = Io::pkt_len(m);
        if (len > port.max_frame) [[unlikely]] {
            drop_too_big(port, m);
            return;
        }
        if (meta.cls == PacketClass::Gradient && !port.gradient_may_stage(cursor.staged_on(port))) {
            if (cursor.port == &port) cursor.close();
            enqueue_gradient_now(out, m, len, meta, admission, now);
            return;
        }
        if (cursor.port != &port) {
            cursor.close();
            cursor.open(port, burst_);
            list_for_flush(out);
        }
        // Well-formed frames bypass an idle port's queue; a GRADIENT only where the TX batch can
        // merge it with the pass's others as the queue would (batch_merge.h): one class, no shares,
        // no version tolerance. Once one frame is staged, nothing behind it may overtake it.
        if (cursor.n_tx < cursor.bypass_limit &&
            (meta.cls == PacketClass::Plain || meta.cls == PacketClass::Model || meta.cls == PacketClass::CreditBatch ||
             (meta.cls == PacketClass::Gradient && port.gradient_bypass_ok && admission.tolerance == 0))) {
            if (meta.cls == PacketClass::Gradient && admission.mergeable && port.batch_merging &&
                merged_in_batch(port, cursor, m, len, meta, true))
                return;
            cursor.tx[cursor.n_tx] = m;
            cursor.tx_len[cursor.n_tx] = len;
            cursor.tx_contrib[cursor.n_tx] = meta.contributions;
            ++cursor.n_tx;
            cursor.bypass_bytes += len;
            return;
        }
        cursor.bypass_limit = cursor.n_tx;
        // A GRADIENT staged after others of this pass bypassed (a malformed frame closed the bypass,
        // or the batch is full) still merges into the batch's packet of its key, as in the queue.
        if (meta.cls == PacketClass::Gradient && admission.mergeable && port.batch_merges.size() != 0 &&
            admission.tolerance == 0 && merged_in_batch(port, cursor, m, len, meta, false))
            return;
        if (cursor.staged == burst_) [[unlikely]] {
            cursor.write_back();
            port.flush_staged(now, port.tx, to_free_, staged_results_.data());
            cursor.staged = 0;
        }
        fill_arrival(cursor.stage[cursor.staged++], static_cast<void*>(m), Io::data(m), len, meta, admission.mergeable,
                     admission.tolerance);
    }

    // A mergeable GRADIENT for a port whose TX batch merges (batch_merge.h): added into the batch's
    // newest packet with its key and destination, as the queue would have (true: consumed).
    // Otherwise, when `bypassing`, it becomes that key's packet (the caller appends it to the
    // batch); when staged for the queue instead, a batch packet that refused it stops being its
    // key's newest (the queue's packet takes over, as it would in the queue), and the queue counts
    // the arrival.
    [[gnu::always_inline]] inline bool merged_in_batch(Port& port, StageCursor<Handle>& cursor, Handle m,
                                                       std::uint32_t len, const PacketMeta& meta, bool bypassing) noexcept {
        BatchMergeCounts& counts = port.batch_merge_counts;
        std::uint8_t* frame = Io::data(m);
        if (!gradient_fits(meta.shesha_offset, meta.elem_count, len)) [[unlikely]] {  // as the queue: never a merge partner
            counts.mergeable += bypassing;
            return false;
        }
        const GradientLayout layout{meta.elem_count, len, meta.shesha_offset};
        const std::uint64_t key = merge_key(meta.cluster_id, meta.chunk_index, meta.model_version);
        BatchMergeIndex::Leader* l = port.batch_merges.find(key, meta.dst_ip);
        if (l != nullptr && l->frame != nullptr) {
            const std::uint32_t sum = std::uint32_t{cursor.tx_contrib[l->tx_index]} + meta.contributions;
            if (may_merge(l->layout, cursor.tx_contrib[l->tx_index], layout, meta.contributions)) [[likely]] {
                merge_gradient_into(l->frame + l->layout.shesha_offset, frame + meta.shesha_offset, meta.elem_count,
                                    static_cast<std::uint16_t>(sum));
                if (l->l4_offset != 0) clear_udp_checksum_inline(l->frame + l->l4_offset);
                cursor.tx_contrib[l->tx_index] = static_cast<std::uint16_t>(sum);
                ++counts.mergeable;
                ++counts.merged;
                counts.merged_bytes += len;
                // A merged arrival decays the recent mark fraction, as an unmarked one in the queue.
                if (port.mark_ewma != 0) update_mark_ewma(port.mark_ewma, false);
                to_free_.add(m);
                return true;
            }
            ++counts.refused;
        }
        if (bypassing) {
            ++counts.mergeable;
            port.batch_merges.put(key, meta.dst_ip, {frame, layout, cursor.n_tx, meta.l4_offset});
        } else if (l != nullptr) {
            l->frame = nullptr;  // superseded by the packet this arrival becomes in the queue
        }
        return false;
    }

    // A GRADIENT that may be marked enters its queue at once, so FEEDBACK sees the queue right
    // after it (stage 5).
    void enqueue_gradient_now(std::uint16_t out, Handle m, std::uint32_t len, const PacketMeta& meta,
                              const Admission& admission, std::uint64_t now) noexcept {
        Port& port = *ports_[out];
        Arrival a;
        fill_arrival(a, static_cast<void*>(m), Io::data(m), len, meta, admission.mergeable, admission.tolerance);
        const EnqueueResult r = port.enqueue_now(a, now, port.tx, to_free_, staged_results_.data());
        if (r.marked && cfg_.feedback && r.status != EnqueueStatus::DroppedFull) {
            // Under DRR the sender's congestion is its own class's backlog.
            const MarkedAt at{out, port.queue.class_queue(port.queue.class_of(meta.cluster_id)), port.mark_ewma,
                              port.bucket.rate_bps()};
            feedback_.send(io_, meta, a.frame, at, ports_[meta.in_port]->mac, now, egress_);
        }
    }

    // Stage 4 for MODEL frames when replication is configured (replication.h): a model request
    // joins its worker and travels on (false); a MODEL to a configured group is replicated to the
    // group's members, or dropped when forged (true: consumed here).
    bool model_replicated_here(Handle m, const PacketMeta& meta, std::uint64_t now, Pass& pass) noexcept {
        if (meta.elem_count == 0) {
            if (ReplicationGroup* g = replication_.group_of_cluster(meta.cluster_id))
                replication_.join(*g, meta, Io::data(m), admission_.is_member(meta, Io::data(m) + 6), egress_);
            return false;
        }
        ReplicationGroup* g = replication_.group_at(meta.dst_ip);
        if (g == nullptr) return false;
        pass.cursor.close();
        if (!ReplicationStage::admit(*g, meta)) {
            egress_.add(SwitchCounter::ModelNotMember);
            io_.free(m);
            return true;
        }
        egress_.add(SwitchCounter::ModelReplicated);
        const std::uint32_t header_len = replica_header_len(meta);
        StageCursor<Handle> cursor(false);
        g->fabric_owed.clear();
        for (const GroupMember& member : g->members) {
            const std::uint16_t out = member_port(member, meta, now, SwitchCounter::ModelMemberPortUnknown);
            if (out == kNoPort) continue;
            if (g->is_fabric(out)) {  // the switch behind it copies for this member
                if (std::find(g->fabric_owed.begin(), g->fabric_owed.end(), out) == g->fabric_owed.end())
                    g->fabric_owed.push_back(out);
                continue;
            }
            std::uint8_t* header = nullptr;
            const Handle copy = io_.replicate(m, header_len, &header);
            if (!copy) [[unlikely]] {
                egress_.add(SwitchCounter::ModelCopyFailed);
                continue;
            }
            ReplicationStage::rewrite(header, meta, member);
            PacketMeta copy_meta = meta;
            copy_meta.dst_ip = member.ip;
            egress_.add(SwitchCounter::ModelCopies);
            enqueue_to(out, copy, copy_meta, Admission{}, now, cursor);
        }
        // One unchanged group frame per fabric port with members behind it (a private header, as
        // the members' copies: a queue may write into its packet's header).
        for (const std::uint16_t out : g->fabric_owed) {
            std::uint8_t* header = nullptr;
            const Handle copy = io_.replicate(m, header_len, &header);
            if (!copy) [[unlikely]] {
                egress_.add(SwitchCounter::ModelCopyFailed);
                continue;
            }
            egress_.add(SwitchCounter::ModelFabricCopies);
            enqueue_to(out, copy, meta, Admission{}, now, cursor);
        }
        cursor.close();
        io_.free(m);
        return true;
    }

    // The port a copy for a group member leaves by, from the FDB now; kNoPort, counted, for a member
    // the FDB does not know (never flooded) and for one behind the learner's own port.
    std::uint16_t member_port(const GroupMember& member, const PacketMeta& meta, std::uint64_t now,
                              SwitchCounter unknown) noexcept {
        const std::uint16_t out = l2_.lookup(member.mac_key, now);
        if (out == kNoPort) {
            egress_.add(unknown);
        } else if (out == meta.in_port) {  // never back out of the learner's own port
            ports_[meta.in_port]->tx.add(PortCounter::Filtered);
            return kNoPort;
        }
        return out;
    }

    // Stage 4 for a CREDIT_BATCH when replication is configured (replication.h): one CREDIT per
    // entry to the member it names, when the batch comes from the group's learner (true: consumed
    // here); a batch to an address that is no group travels on like any datagram (false).
    bool credit_batch_expanded_here(Handle m, const PacketMeta& meta, std::uint64_t now, Pass& pass) noexcept {
        const ReplicationGroup* g = replication_.group_at(meta.dst_ip);
        if (g == nullptr) return false;
        pass.cursor.close();
        if (!ReplicationStage::admit(*g, meta)) {  // (multi-segment frames never classify as CreditBatch)
            egress_.add(SwitchCounter::CreditBatchNotMember);
            io_.free(m);
            return true;
        }
        egress_.add(SwitchCounter::CreditBatches);
        const std::uint8_t* batch = Io::data(m);
        const std::uint8_t* first_entry = batch + replica_header_len(meta);
        const std::uint32_t len = ReplicationStage::credit_copy_len(meta);
        const std::uint32_t entries = meta.elem_count;  // decode() checked the body holds them
        StageCursor<Handle> cursor(false);
        for (std::uint32_t i = 0; i < entries; ++i) {
            const std::uint32_t worker = be::load32(first_entry + i * proto::kCreditBatchEntrySize);
            const GroupMember* member = g->member_by_worker(worker);
            if (member == nullptr) {
                egress_.add(SwitchCounter::CreditWorkerUnknown);
                continue;
            }
            const std::uint16_t out = member_port(*member, meta, now, SwitchCounter::CreditMemberPortUnknown);
            if (out == kNoPort) continue;
            std::uint8_t* bytes = nullptr;
            const Handle copy = io_.alloc(len, &bytes);
            if (!copy) [[unlikely]] {
                egress_.add(SwitchCounter::CreditCopyFailed);
                continue;
            }
            if (!ReplicationStage::credit_copy(bytes, batch, meta, i, *member)) {
                egress_.add(SwitchCounter::CreditBadEntry);
                io_.free(copy);
                continue;
            }
            PacketMeta copy_meta = meta;
            copy_meta.cls = PacketClass::Plain;
            copy_meta.dst_ip = member->ip;
            copy_meta.elem_count = 0;
            egress_.add(SwitchCounter::CreditCopies);
            enqueue_to(out, copy, copy_meta, Admission{}, now, cursor);
        }
        cursor.close();
        io_.free(m);
        return true;
    }

    // A flood to more than one other port: a private copy for every other port but the last, which
    // gets the original (queues write into their packets when merging or marking, so copies must
    // not share data).
    void flood(Handle m, const PacketMeta& meta, const Admission& admission, std::uint64_t now) noexcept {
        const std::uint16_t in = meta.in_port;
        const std::uint16_t last = l2_.flood_peer(in);
        if (last == kNoPort) {  // a single port: nowhere to flood to
            ports_[in]->tx.add(PortCounter::Filtered);
            io_.free(m);
            return;
        }
        add_floods(in, 1);
        StageCursor<Handle> cursor(false);
        const auto n = static_cast<std::uint16_t>(ports_.size());
        for (std::uint16_t p = 0; p < n; ++p) {
            if (p == in) continue;
            if (p == last) {
                enqueue_to(p, m, meta, admission, now, cursor);
                break;
            }
            const Handle copy = io_.copy(m);
            if (!copy) [[unlikely]] {
                egress_.add(SwitchCounter::CloneFailed);
                continue;
            }
            enqueue_to(p, copy, meta, admission, now, cursor);
        }
        cursor.close();
    }

    // A frame larger than the egress port's MTU allows: counted and freed, never sent (and so
    // never counted as sent and then lost on the wire). The adapter logs the first one per port.
    void drop_too_big(Port& port, Handle m) noexcept {
        port.tx.add(PortCounter::TxTooBig);
        if (port.too_big_first_len == 0) port.too_big_first_len = Io::pkt_len(m);
        io_.free(m);
    }

    // A port whose staged arrivals finish_forwarding() must flush (listed at most once per pass:
    // a port is listed when its stage is empty, and only finish_forwarding() empties it for good).
    void list_for_flush(std::uint16_t port) noexcept {
        Port& p = *ports_[port];
        if (p.listed_for_flush) return;
        p.listed_for_flush = true;
        staging_[n_staging_++] = port;
    }
    void add_floods(std::uint16_t in, std::uint64_t n) noexcept {
        if (flooded_pending_[in] == 0) flooding_[n_flooding_++] = in;
        flooded_pending_[in] += n;
    }

    SwitchConfig cfg_;
    Io& io_;
    std::uint64_t ticks_per_second_;
    std::uint32_t burst_;
    std::vector<std::unique_ptr<Port>> ports_;
    bool two_ports_ = false;  // a flood is then the original to the other port, never a copy
    L2Stage l2_;
    AdmissionStage admission_;
    ReplicationStage replication_;
    FeedbackStage feedback_;
    SwitchCounters egress_;  // the forwarding thread's entries
    // Per forwarding pass: the ports with staged arrivals, flood counts per ingress port, and the
    // packets to free (merged arrivals, tail drops), all settled by finish_forwarding().
    std::vector<std::uint16_t> staging_;
    std::uint32_t n_staging_ = 0;
    std::vector<std::uint64_t> flooded_pending_;
    std::vector<std::uint16_t> flooding_;
    std::uint32_t n_flooding_ = 0;
    DeferredFree<Io> to_free_;
    std::vector<EnqueueResult> staged_results_ = std::vector<EnqueueResult>(kMaxBurst);
    std::uint64_t last_now_ = 0;
};

}  // namespace shesha::core

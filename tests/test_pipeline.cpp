// The switch pipeline (switch/core/pipeline.h) without DPDK or root: frames are byte vectors, a
// port's output is what the pipeline hands to tx_burst or send_now, and time is a fake clock
// (1 tick = 1 ns), so shaping, merging, marking and rate limiting are deterministic. These are the
// forwarding tests of the DPDK ring test (tests/dpdk/test_switch_ring.cpp), run on the pipeline
// itself; the DPDK test keeps the same scenarios as smoke tests of the adapter.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "big_endian.h"
#include "forwarding_frames.h"
#include "frame.h"
#include "gradient_pattern.h"
#include "memory_io.h"
#include "pipeline.h"
#include "protocol.h"

using namespace shesha;
using namespace shesha::testing;

namespace {

constexpr std::uint64_t kHz = 1'000'000'000;  // fake clock: 1 tick = 1 ns

// Packet I/O over heap frames (switch/core/memory_io.h), counting what is alive so a test can
// check nothing leaks.
using Frame = core::MemoryFrame;
using VecIo = core::MemoryIo;

const std::vector<std::uint8_t>& bytes_of(const Frame* f) { return f->bytes; }

// What the tests read back, with the names the switch's stats use.
struct TxView {
    std::uint64_t packets, bytes, contributions, refused, dropped, flooded, filtered, queue_drops, too_big;
};
struct EgressView {
    std::uint64_t malformed_dropped, non_member, non_member_dropped, no_aggregation, unknown_cluster, feedback_sent,
        feedback_suppressed, feedback_failed, clone_failed;
};
struct PortView {
    std::uint64_t rx_packets = 0;
    TxView tx{};
    core::QueueStats queue;
    std::uint64_t queue_depth = 0;
    std::uint64_t tx_pending = 0;
    double merge_ratio = 0;
};
struct View {
    std::vector<PortView> ports;
    std::array<std::uint64_t, proto::kDecodeErrorCount> malformed{};
    std::uint64_t malformed_total = 0, bad_frames = 0, shesha_valid = 0, non_ip = 0, ip_other = 0, gradient_f32 = 0,
                  runts = 0;
    EgressView egress{};
    core::FdbStats fdb;
    std::uint64_t fdb_size = 0;
};

// n ports (p0, p1, ...), their pipeline driven as shesha-switch's one-lcore loop drives it.
struct Rig {
    explicit Rig(std::size_t n) : ports(n) {}

    core::SwitchConfig config() const {
        core::SwitchConfig cfg;
        cfg.burst = 32;
        for (std::size_t i = 0; i < ports; ++i) {
            core::PortConfig p;
            p.name = fmt::format("p{}", i);
            p.device = "vector";
            p.queue_packets = 64;
            cfg.ports.push_back(p);
        }
        cfg.clusters.push_back({7, true, 0, {}, {host_ip(1), host_ip(2), host_ip(3), host_ip(4)}});
        return cfg;
    }
    void start(const core::SwitchConfig& cfg) {
        io.sent.assign(ports, {});
        in.assign(ports, {});
        pipeline = std::make_unique<core::Pipeline<VecIo>>(cfg, kHz, io);
        for (std::size_t i = 0; i < ports; ++i) pipeline->set_port_mac(i, {0x02, 0xAA, 0, 0, 0, static_cast<std::uint8_t>(i)});
    }
    void inject(std::size_t port, const std::vector<std::uint8_t>& frame) { in[port].push_back(io.make(frame)); }
    // One round: every port's RX burst (up to `burst` frames) in port order, then every port's TX.
    // per_packet: each frame classified, then forwarded through route() one by one, as the
    // two-lcore mode's egress lcore does, instead of receive_burst()'s staging cursor.
    void round(std::uint64_t now) {
        for (std::size_t p = 0; p < ports; ++p) {
            const std::size_t n = std::min<std::size_t>(in[p].size(), pipeline->burst());
            std::vector<Frame*> burst(in[p].begin(), in[p].begin() + static_cast<long>(n));
            in[p].erase(in[p].begin(), in[p].begin() + static_cast<long>(n));
            const auto in_port = static_cast<std::uint16_t>(p);
            if (per_packet) {
                if (n == 0) continue;
                core::RxTally tally;
                std::vector<core::PacketMeta> metas(n);
                for (std::size_t i = 0; i < n; ++i) pipeline->classify(rx, burst[i], in_port, metas[i], tally);
                pipeline->settle_rx(rx, in_port, static_cast<std::uint32_t>(n), tally);
                for (std::size_t i = 0; i < n; ++i) pipeline->forward(burst[i], metas[i], now);
                pipeline->finish_forwarding(now);
            } else {
                pipeline->receive_burst(rx, in_port, burst.data(), static_cast<std::uint32_t>(n), now);
            }
        }
        pipeline->transmit_all(now);
        pipeline->housekeeping(now);
        pipeline->set_clock(now);
    }
    std::vector<Frame*> take(std::size_t port) { return io.take(port); }
    void free_all(const std::vector<Frame*>& v) {
        for (Frame* f : v) io.free(f);
    }
    View view() const {
        View v;
        for (std::size_t i = 0; i < ports; ++i) {
            const auto& p = pipeline->port(i);
            PortView pv;
            using enum core::PortCounter;
            pv.rx_packets = p.rx[RxPackets];
            pv.tx = {p.tx[TxPackets], p.tx[TxBytes], p.tx[TxContributions], p.tx[TxRefused], p.tx[TxDropped],
                     p.tx[Flooded],   p.tx[Filtered], p.tx[QueueDrops],    p.tx[TxTooBig]};
            pv.queue = p.queue.stats();
            pv.queue_depth = p.queue.depth();
            pv.tx_pending = p.n_pending;
            pv.merge_ratio = pv.queue.mergeable_arrivals ? double(pv.queue.merged) / double(pv.queue.mergeable_arrivals) : 0;
            v.ports.push_back(pv);
        }
        using enum core::SwitchCounter;
        for (int e = 1; e < proto::kDecodeErrorCount; ++e)
            v.malformed[static_cast<std::size_t>(e)] = rx[core::malformed_counter(static_cast<proto::DecodeError>(e))];
        v.bad_frames = rx[BadFrames];
        v.malformed_total = core::malformed_total(rx);
        v.shesha_valid = rx[Shesha];
        v.non_ip = rx[NonIp];
        v.ip_other = rx[IpOther];
        v.gradient_f32 = rx[GradientF32];
        v.runts = rx[Runts];
        const core::SwitchCounters& e = pipeline->egress();
        v.egress = {e[MalformedDropped], e[NonMember],     e[NonMemberDropped], e[NoAggregation], e[UnknownCluster],
                    e[FeedbackSent],     e[FeedbackSuppressed], e[FeedbackFailed], e[CloneFailed]};
        v.fdb = pipeline->fdb().stats();
        v.fdb_size = pipeline->fdb().size();
        return v;
    }
    // Frees everything still held; true if no frame leaked.
    bool finish() {
        for (auto& q : in) free_all(std::exchange(q, {}));
        pipeline.reset();
        for (std::size_t p = 0; p < ports; ++p) free_all(take(p));
        return io.alive == 0;
    }

    std::size_t ports;
    bool per_packet = false;
    VecIo io;
    core::SwitchCounters rx;
    std::vector<std::vector<Frame*>> in;
    std::unique_ptr<core::Pipeline<VecIo>> pipeline;
};

// A fixed pseudo-random sequence per seed (an LCG), so a failure repeats: next(bound) is below bound.
struct Lcg {
    explicit Lcg(std::uint32_t seed) : state(seed * 2654435761u) {}
    std::uint32_t operator()(std::uint32_t bound) {
        state = state * 1664525u + 1013904223u;
        return (state >> 8) % bound;
    }
    std::uint32_t state;
};

// The same frame into two rigs' port.
void inject_both(Rig& a, Rig& b, std::size_t port, const std::vector<std::uint8_t>& f) {
    a.inject(port, f);
    b.inject(port, f);
}

// One round of two rigs fed the same frames: every port must send the same bytes in the same
// order. Returns how many frames were compared.
std::uint64_t round_and_compare(Rig& fast, Rig& slow, std::uint64_t now) {
    fast.round(now);
    slow.round(now);
    std::uint64_t compared = 0;
    for (std::size_t p = 0; p < fast.ports; ++p) {
        const auto a = fast.take(p), b = slow.take(p);
        REQUIRE(a.size() == b.size());
        for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(bytes_of(a[i]) == bytes_of(b[i]));
        compared += a.size();
        fast.free_all(a);
        slow.free_all(b);
    }
    return compared;
}

}  // namespace

TEST_CASE("L2 learning, unicast forwarding and flooding", "[pipeline]") {
    Rig rig(3);
    const core::SwitchConfig cfg = rig.config();
    rig.start(cfg);
    {
        std::uint64_t now = kHz;

        // A broadcasts on p0: one copy each on p1 and p2, none back on p0; A is learned on p0.
        const auto bcast = l2_frame(mac(0xa), kBroadcast, 1);
        rig.inject(0, bcast);
        rig.round(now);
        auto p0 = rig.take(0), p1 = rig.take(1), p2 = rig.take(2);
        CHECK(p0.empty());
        REQUIRE(p1.size() == 1);
        REQUIRE(p2.size() == 1);
        CHECK(bytes_of(p1[0]) == bcast);
        CHECK(bytes_of(p2[0]) == bcast);
        CHECK(p1[0] != p2[0]);  // a private copy per port
        rig.free_all(p1);
        rig.free_all(p2);

        // B on p1 sends to A: unicast to p0 only; B is learned on p1.
        const auto b_to_a = udp_frame(mac(0xb), mac(0xa), host_ip(0xb), host_ip(0xa), 9999, std::vector<std::uint8_t>(100, 7));
        rig.inject(1, b_to_a);
        rig.round(++now);
        p0 = rig.take(0), p1 = rig.take(1), p2 = rig.take(2);
        REQUIRE(p0.size() == 1);
        CHECK(bytes_of(p0[0]) == b_to_a);
        CHECK(p1.empty());
        CHECK(p2.empty());
        rig.free_all(p0);

        // A to B: p1 only.
        const auto a_to_b = udp_frame(mac(0xa), mac(0xb), host_ip(0xa), host_ip(0xb), 9999, std::vector<std::uint8_t>(80, 3));
        rig.inject(0, a_to_b);
        rig.round(++now);
        p0 = rig.take(0), p1 = rig.take(1), p2 = rig.take(2);
        CHECK(p0.empty());
        REQUIRE(p1.size() == 1);
        CHECK(bytes_of(p1[0]) == a_to_b);
        CHECK(p2.empty());
        rig.free_all(p1);

        // A to an unknown unicast address: flooded to p1 and p2.
        rig.inject(0, l2_frame(mac(0xa), mac(0xc), 2));
        rig.round(++now);
        p0 = rig.take(0), p1 = rig.take(1), p2 = rig.take(2);
        CHECK(p0.empty());
        CHECK(p1.size() == 1);
        CHECK(p2.size() == 1);
        rig.free_all(p1);
        rig.free_all(p2);

        // B shows up on p0 and sends to A, who lives behind p0: B moves, the frame is filtered.
        rig.inject(0, l2_frame(mac(0xb), mac(0xa), 3));
        rig.round(++now);
        CHECK(rig.take(0).empty());
        CHECK(rig.take(1).empty());
        CHECK(rig.take(2).empty());

        const auto st = rig.view();
        CHECK(st.ports[0].rx_packets == 4);
        CHECK(st.ports[1].rx_packets == 1);
        CHECK(st.ports[0].tx.packets == 1);
        CHECK(st.ports[1].tx.packets == 3);
        CHECK(st.ports[2].tx.packets == 2);
        CHECK(st.ports[0].tx.flooded == 2);
        CHECK(st.ports[0].tx.filtered == 1);
        CHECK(st.fdb.learned == 2);
        CHECK(st.fdb.moved == 1);
        CHECK(st.fdb_size == 2);
        CHECK(st.malformed_total == 0);
        CHECK(st.non_ip == 3);
        CHECK(st.ip_other == 2);
        CHECK(st.shesha_valid == 0);
    }
    CHECK(rig.finish());  // nothing leaked
}

TEST_CASE("frames for an idle unshaped port bypass its empty queue, in order and counted", "[pipeline]") {
    // unshaped: everything bypasses, the GRADIENT too (one class, no version tolerance);
    // shaped: nothing does; tolerant: the GRADIENT's cluster has a version tolerance, so it takes a
    // queue slot (the TX batch merges exact versions only) and what follows it queues behind it.
    enum Mode { Unshaped, Shaped, Tolerant };
    const Mode mode = GENERATE(Unshaped, Shaped, Tolerant);
    INFO("mode " << mode);
    Rig rig(2);
    core::SwitchConfig cfg = rig.config();
    if (mode == Shaped) {
        cfg.ports[1].shaper.rate_bps = 100'000'000'000;  // never the limit here, but a shaper
        cfg.ports[1].shaper.burst_bytes = 1'000'000;
    }
    if (mode == Tolerant) cfg.clusters[0].version_tolerance = 2;
    rig.start(cfg);
    const frame::MacAddr learner = mac(0x50);
    const std::uint32_t learner_ip = host_ip(0x50);
    {
        std::uint64_t now = kHz;
        rig.inject(1, l2_frame(learner, kBroadcast, 0));  // the learner announces itself on p1
        rig.round(now);
        rig.free_all(rig.take(0));

        // 40 plain frames: a full 32-frame burst then 8, each leaving in its own round.
        for (int i = 0; i < 40; ++i) rig.inject(0, l2_frame(mac(1), learner, static_cast<std::uint8_t>(i + 1)));
        rig.round(++now);
        rig.round(++now);
        // Then 3 plain frames, a GRADIENT and 3 more plain frames in one burst.
        for (int i = 0; i < 3; ++i) rig.inject(0, l2_frame(mac(1), learner, static_cast<std::uint8_t>(41 + i)));
        const auto grad = gradient_frame(1, learner, learner_ip, 7, 0);
        rig.inject(0, grad);
        for (int i = 0; i < 3; ++i) rig.inject(0, l2_frame(mac(1), learner, static_cast<std::uint8_t>(44 + i)));
        rig.round(++now);

        const auto out = rig.take(1);
        REQUIRE(out.size() == 47);
        for (std::size_t i = 0; i < out.size(); ++i) {
            INFO("frame " << i);
            if (i == 43) {
                CHECK(bytes_of(out[i]) == grad);
            } else {
                const std::uint8_t tag = static_cast<std::uint8_t>(i < 43 ? i + 1 : i);
                CHECK(bytes_of(out[i]) == l2_frame(mac(1), learner, tag));
            }
        }
        rig.free_all(out);

        const auto st = rig.view();
        const auto& q = st.ports[1].queue;
        CHECK(q.bypassed == (mode == Unshaped ? 47u : mode == Tolerant ? 43u : 0u));
        CHECK(q.enqueued == 47);
        CHECK(q.dequeued == 47);
        CHECK(q.depth_samples == 47);
        CHECK(q.mergeable_arrivals == 1);
        CHECK(q.merged == 0);
        CHECK(q.enqueued_bytes == 46 * 60 + grad.size());
        CHECK(q.dequeued_bytes == q.enqueued_bytes);
        CHECK(st.ports[1].queue_depth == 0);
        CHECK(st.ports[1].tx.packets == 47);
        CHECK(st.ports[1].tx.bytes == 46 * 60 + grad.size());
        CHECK(st.ports[1].tx.contributions == 1);  // the one GRADIENT; plain frames carry no update
        if (mode == Unshaped) {
            CHECK(q.depth_sum == 0);  // every frame found depth 0
            CHECK(q.depth_max == 0);
        } else if (mode == Tolerant) {
            // Bypassing frames found depth 0; the gradient found the queue empty, the 3 after it
            // found 1, 2, 3 waiting.
            CHECK(q.depth_sum == 1 + 2 + 3);
            CHECK(q.depth_max == 3);
        } else {
            // Everything queued: 0..31, 0..7, then 0..6.
            CHECK(q.depth_sum == 31 * 32 / 2 + 7 * 8 / 2 + 6 * 7 / 2);
            CHECK(q.depth_max == 31);
        }
    }
    CHECK(rig.finish());  // nothing leaked
}

// Merging in the TX batch (batch_merge.h) must give what the queue gives: the same frames, bytes
// and order, and the same merge counters. The queued reference is a port with a shaper that never
// limits (shaped ports never bypass).
TEST_CASE("GRADIENTs meeting in one pass at an idle port merge in the TX batch exactly as in the queue", "[pipeline]") {
    struct Result {
        std::vector<std::vector<std::uint8_t>> frames;
        core::QueueStats queue;
        std::uint64_t tx_packets = 0, tx_contributions = 0;
    };
    const frame::MacAddr learner = mac(0x50);
    const std::uint32_t learner_ip = host_ip(0x50);
    const frame::MacAddr learner2 = mac(0x51);
    const std::uint32_t learner2_ip = host_ip(0x51);
    auto run = [&](bool shaped) {
        Rig rig(2);
        core::SwitchConfig cfg = rig.config();
        cfg.drop_copies = false;  // the second pass repeats the first's frames
        if (shaped) {
            cfg.ports[1].shaper.rate_bps = 100'000'000'000;
            cfg.ports[1].shaper.burst_bytes = 1'000'000;
        }
        rig.start(cfg);
        Result r;
        std::uint64_t now = kHz;
        rig.inject(1, l2_frame(learner, kBroadcast, 0));
        rig.inject(1, l2_frame(learner2, kBroadcast, 0));
        rig.round(now);
        rig.free_all(rig.take(0));
        // Two bursts. Chunks 0-2 from workers 1-4 interleaved with plain frames; a second learner
        // (same keys, other destination: never merged with the first's); a 32-element GRADIENT with
        // chunk 1's key (refused: layout differs) that then becomes chunk 1's newest packet; a
        // non-member (host 9: forwarded unmerged); chunk 3 alone.
        for (int pass = 0; pass < 2; ++pass) {
            for (std::uint8_t w = 1; w <= 4; ++w) {
                for (std::uint16_t c = 0; c < 3; ++c) rig.inject(0, gradient_frame(w, learner, learner_ip, 7, c));
                rig.inject(0, l2_frame(mac(1), learner, static_cast<std::uint8_t>(w)));
                if (w == 2) {
                    rig.inject(0, gradient_frame(3, learner, learner_ip, 7, 1, 32));
                    // A malformed Shesha message (forwarded) is staged, and so is everything after it:
                    // workers 3 and 4 then merge into the batch's packets from the queue's side.
                    rig.inject(0, udp_frame(mac(1), learner, host_ip(1), learner_ip, proto::kDefaultUdpPort,
                                            std::vector<std::uint8_t>(8, 0)));
                }
            }
            rig.inject(0, gradient_frame(1, learner2, learner2_ip, 7, 0));
            rig.inject(0, gradient_frame(2, learner2, learner2_ip, 7, 0));
            rig.inject(0, gradient_frame(9, learner, learner_ip, 7, 0));
            rig.inject(0, gradient_frame(4, learner, learner_ip, 7, 3));
            REQUIRE(rig.in[0].size() <= 32);  // one burst
            rig.round(++now);
            for (Frame* m : rig.take(1)) r.frames.push_back(bytes_of(m)), rig.free_all({m});
        }
        const auto st = rig.view();
        r.queue = st.ports[1].queue;
        r.tx_packets = st.ports[1].tx.packets;
        r.tx_contributions = st.ports[1].tx.contributions;
        CHECK(rig.finish());
        return r;
    };
    const Result batch = run(false);
    const Result queued = run(true);
    CHECK(batch.queue.bypassed == 2 * 6);  // per pass, up to the malformed frame: worker 1's chunks
                                            // 0-2, 2 plain frames and the 32-element GRADIENT
    CHECK(batch.queue.bypassed < batch.queue.enqueued);
    CHECK(queued.queue.bypassed == 0);
    REQUIRE(batch.frames.size() == queued.frames.size());
    for (std::size_t i = 0; i < batch.frames.size(); ++i) {
        INFO("frame " << i);
        CHECK(batch.frames[i] == queued.frames[i]);
    }
    for (const Result* r : {&batch, &queued}) {
        // Per pass, 22 frames: chunks 0 and 2 each leave as one packet of 4 (3 merges each); chunk 1
        // as workers 1+2, then the 32-element one (refused by 1+2's packet), then workers 3+4 (3's
        // refused by the 32-element one, its newest packet, then 4 merged into 3): 2 merges, 2
        // refusals; learner2's two as one (1 merge); the non-member and chunk 3 alone; 4 plain
        // frames and the malformed one.
        CHECK(r->queue.mergeable_arrivals == 2 * 16);
        CHECK(r->queue.merged == 2 * 9);
        CHECK(r->queue.merge_refused == 2 * 2);
        CHECK(r->tx_packets == 2 * 13);
        CHECK(r->tx_contributions == 2 * 17);
    }
    CHECK(batch.queue.merged == queued.queue.merged);
    CHECK(batch.queue.bytes_saved == queued.queue.bytes_saved);
    CHECK(batch.tx_packets == queued.tx_packets);
    CHECK(batch.queue.enqueued == queued.queue.enqueued);
    CHECK(batch.queue.dequeued_bytes == queued.queue.dequeued_bytes);
    // Exact sums: every sent GRADIENT verifies against the pattern of its contributions.
    int gradients = 0, malformed = 0;
    for (const auto& f : batch.frames) {
        const auto info = frame::classify(f, proto::kDefaultUdpPort);
        if (info.kind != frame::FrameKind::Shesha) continue;
        proto::Message msg;
        if (proto::decode({f.data() + info.payload_offset, info.payload_len}, msg) != proto::DecodeError::Ok) {
            ++malformed;
            continue;
        }
        ++gradients;
        std::vector<float> elems(msg.hdr.elem_count);
        std::memcpy(elems.data(), msg.payload.data(), elems.size() * 4);
        CHECK(pattern::verify(elems.data(), elems.size(), 7, msg.hdr.chunk_index, msg.hdr.contrib_count) ==
              pattern::Check::Ok);
    }
    CHECK(malformed == 2);
    CHECK(gradients == static_cast<int>(batch.tx_packets) - 8 - 2);
}

TEST_CASE("k compatible gradients queued behind a shaped port leave as one exact sum", "[pipeline]") {
    Rig rig(2);
    core::SwitchConfig cfg = rig.config();
    cfg.ports[1].shaper.rate_bps = 1'000'000;  // 1 Mbit/s towards the learner
    cfg.ports[1].shaper.burst_bytes = 9100;
    rig.start(cfg);
    const frame::MacAddr learner = mac(0x50);
    const std::uint32_t learner_ip = host_ip(0x50);
    {
        std::uint64_t now = kHz;
        // The learner announces itself on p1.
        rig.inject(1, l2_frame(learner, kBroadcast, 0));
        rig.round(now);
        rig.free_all(rig.take(0));

        // Eight 1400 B fillers exhaust the 9100 B bucket: six leave (6 x 1424 wire bytes), two wait.
        for (int i = 0; i < 8; ++i)
            rig.inject(0, udp_frame(mac(1), learner, host_ip(1), learner_ip, 9999,
                                    std::vector<std::uint8_t>(1400 - frame::kUdpPayloadOffset, 0x11)));
        rig.round(now);
        REQUIRE(rig.view().ports[1].queue_depth == 2);

        // Four workers' gradients for the same (cluster, chunk, version), one per round, time frozen.
        constexpr int k = 4;
        std::uint32_t grad_len = 0;
        for (int w = 1; w <= k; ++w) {
            const auto g = gradient_frame(static_cast<std::uint8_t>(w), learner, learner_ip, 7, 2);
            grad_len = static_cast<std::uint32_t>(g.size());
            rig.inject(0, g);
            rig.round(now);
        }
        auto st = rig.view();
        CHECK(st.ports[1].queue_depth == 3);
        CHECK(st.ports[1].queue.mergeable_arrivals == k);
        CHECK(st.ports[1].queue.merged == k - 1);
        CHECK(st.ports[1].queue.bytes_saved == (k - 1) * grad_len);
        CHECK(st.gradient_f32 == k);
        CHECK(st.shesha_valid == k);
        CHECK(st.ip_other == 8);

        // Let time pass: everything leaves.
        std::vector<Frame*> out;
        for (int i = 0; i < 50 && out.size() < 9; ++i) {
            now += kHz / 10;
            rig.round(now);
            for (Frame* m : rig.take(1)) out.push_back(m);
        }
        REQUIRE(out.size() == 9);  // 8 fillers + 1 merged gradient
        int gradients = 0;
        for (Frame* m : out) {
            const auto f = bytes_of(m);
            const auto info = frame::classify(f, proto::kDefaultUdpPort);
            if (info.kind != frame::FrameKind::Shesha) continue;
            ++gradients;
            proto::Message msg;
            REQUIRE(proto::decode({f.data() + info.payload_offset, info.payload_len}, msg) == proto::DecodeError::Ok);
            CHECK(msg.hdr.contrib_count == k);
            CHECK((msg.hdr.flags & proto::flag::kMerged) != 0);
            CHECK(msg.hdr.ts_earliest_ns == 1001);
            CHECK(msg.hdr.ts_latest_ns == 1004);
            std::vector<float> elems(msg.hdr.elem_count);
            std::memcpy(elems.data(), msg.payload.data(), elems.size() * 4);
            CHECK(elems[0] == static_cast<float>(k));
            CHECK(pattern::verify(elems.data(), elems.size(), 7, 2, msg.hdr.contrib_count) == pattern::Check::Ok);
        }
        CHECK(gradients == 1);
        rig.free_all(out);
        st = rig.view();
        CHECK(st.ports[1].tx.packets == 9);
        CHECK(st.ports[1].tx.contributions == k);  // the 8 plain frames carry no update
        CHECK(st.ports[1].queue.dequeued == 9);
        CHECK(st.ports[1].merge_ratio == Approx(0.75));
        CHECK(rig.take(0).empty());

    }
    CHECK(rig.finish());
}

TEST_CASE("a copy of a gradient is dropped, never merged; a reordered one merges; a late one travels alone", "[pipeline]") {
    Rig rig(2);
    core::SwitchConfig cfg = rig.config();
    cfg.ports[1].shaper.rate_bps = 1'000'000;
    cfg.ports[1].shaper.burst_bytes = 9100;
    rig.start(cfg);
    {
        const frame::MacAddr learner = mac(0x50);
        const std::uint32_t learner_ip = host_ip(0x50);
        std::uint64_t now = kHz;
        rig.inject(1, l2_frame(learner, kBroadcast, 0));
        rig.round(now);
        rig.free_all(rig.take(0));
        for (int i = 0; i < 8; ++i)  // two fillers wait behind the shaper
            rig.inject(0, udp_frame(mac(1), learner, host_ip(1), learner_ip, 9999,
                                    std::vector<std::uint8_t>(1400 - frame::kUdpPayloadOffset, 0x22)));
        rig.round(now);
        const auto update = [&](std::uint8_t worker, std::uint32_t seq) {
            proto::Header h = gradient_header(7, 2, worker, 64);
            h.seq = seq;
            return udp_frame(mac(worker), learner, host_ip(worker), learner_ip, proto::kDefaultUdpPort, gradient_payload(h));
        };
        const auto counter = [&](core::SwitchCounter c) { return rig.pipeline->egress()[c]; };
        const auto send = [&](std::uint8_t worker, std::uint32_t seq) {
            rig.inject(0, update(worker, seq));
            rig.round(now);
        };
        send(1, 500);  // worker 1's update 500: waits
        send(1, 500);  // a copy made on the link: dropped
        CHECK(counter(core::SwitchCounter::GradientCopiesDropped) == 1);
        send(2, 40);   // worker 2's update: merges into worker 1's
        send(1, 502);  // worker 1's later update, then the one before it, reordered: both merge
        send(1, 501);
        send(1, 501);  // a copy of the reordered one: dropped too
        send(1, 502 - 64);  // 64 behind its newest: cannot be told from a copy, travels unmerged
        send(1, 502 - 2000);  // far behind: worker 1 restarted, a new window; merges
        const auto st = rig.view();
        CHECK(counter(core::SwitchCounter::GradientCopiesDropped) == 2);
        CHECK(counter(core::SwitchCounter::GradientLateUnmerged) == 1);
        CHECK(st.ports[1].queue.mergeable_arrivals == 5);
        CHECK(st.ports[1].queue.merged == 4);
        CHECK(st.ports[1].queue_depth == 2 + 2);  // fillers, the merged chunk, the late one

        std::vector<Frame*> out;
        for (int i = 0; i < 50 && out.size() < 12; ++i) {
            now += kHz / 10;
            rig.round(now);
            for (Frame* m : rig.take(1)) out.push_back(m);
        }
        std::vector<std::pair<std::uint32_t, std::uint16_t>> gradients;  // (seq, contributions) in order
        for (Frame* m : out) {
            const auto f = bytes_of(m);
            const auto info = frame::classify(f, proto::kDefaultUdpPort);
            if (info.kind != frame::FrameKind::Shesha) continue;
            proto::Message msg;
            REQUIRE(proto::decode({f.data() + info.payload_offset, info.payload_len}, msg) == proto::DecodeError::Ok);
            CHECK(msg.hdr.worker_id == 1);
            gradients.emplace_back(msg.hdr.seq, msg.hdr.contrib_count);
        }
        CHECK(gradients == std::vector<std::pair<std::uint32_t, std::uint16_t>>{{500, 5}, {502 - 64, 1}});
        rig.free_all(out);
    }
    CHECK(rig.finish());
}

TEST_CASE("with aggregation.drop_copies false a copy merges like any gradient (replayed captures)", "[pipeline]") {
    Rig rig(2);
    core::SwitchConfig cfg = rig.config();
    cfg.ports[1].shaper.rate_bps = 1'000'000;
    cfg.ports[1].shaper.burst_bytes = 9100;
    cfg.drop_copies = false;
    rig.start(cfg);
    {
        const frame::MacAddr learner = mac(0x50);
        std::uint64_t now = kHz;
        rig.inject(1, l2_frame(learner, kBroadcast, 0));
        rig.round(now);
        rig.free_all(rig.take(0));
        for (int i = 0; i < 8; ++i)
            rig.inject(0, udp_frame(mac(1), learner, host_ip(1), host_ip(0x50), 9999,
                                    std::vector<std::uint8_t>(1400 - frame::kUdpPayloadOffset, 0x22)));
        rig.round(now);
        for (int copy = 0; copy < 2; ++copy) {
            rig.inject(0, gradient_frame(1, learner, host_ip(0x50), 7, 2));
            rig.round(now);
        }
        const auto st = rig.view();
        CHECK(rig.pipeline->egress()[core::SwitchCounter::GradientCopiesDropped] == 0);
        CHECK(st.ports[1].queue.mergeable_arrivals == 2);
        CHECK(st.ports[1].queue.merged == 1);
        for (int i = 0; i < 50; ++i) {
            now += kHz / 10;
            rig.round(now);
            rig.free_all(rig.take(1));
        }
    }
    CHECK(rig.finish());
}

TEST_CASE("the admission stage's seq table holds a rack's every (cluster, worker, chunk) at once", "[pipeline]") {
    core::RecentGradients recent;
    core::PacketMeta m;
    const auto check = [&](std::uint16_t cluster, std::uint32_t worker, std::uint16_t chunk, std::uint32_t seq) {
        m.cluster_id = cluster;
        m.worker_id = worker;
        m.chunk_index = chunk;
        m.seq = seq;
        return recent.check(m);
    };
    // The lab's largest rack: two clusters of ten workers, 19 chunks each (380 keys).
    int fresh = 0, copies = 0;
    for (int pass = 0; pass < 2; ++pass)
        for (std::uint16_t c = 1; c <= 2; ++c)
            for (std::uint32_t w = 0; w < 10; ++w)
                for (std::uint16_t k = 0; k < 19; ++k) {
                    const core::RepeatVerdict v = check(c, w, k, 1000 + w);
                    fresh += v == core::RepeatVerdict::New;
                    copies += v == core::RepeatVerdict::Copy;
                }
    CHECK(fresh == 380);
    CHECK(copies == 380);  // every copy caught: no key was pushed out by another
    CHECK(check(1, 3, 5, 1003 + 1) == core::RepeatVerdict::New);  // the next update
    CHECK(check(1, 3, 5, 1003 - 1) == core::RepeatVerdict::New);  // reordered: never seen
    CHECK(check(1, 3, 5, 1003 - 1) == core::RepeatVerdict::Copy);
    CHECK(check(1, 3, 5, 1004 - 64) == core::RepeatVerdict::Late);
    CHECK(check(1, 3, 5, 1004 - 1024) == core::RepeatVerdict::New);  // a restarted sender
    CHECK(check(1, 3, 5, 1004 - 1024) == core::RepeatVerdict::Copy);
    CHECK(check(1, 3, 5, 1004) == core::RepeatVerdict::New);  // far ahead of the new run: new
}

TEST_CASE("malformed Shesha messages are counted per reason and forwarded or dropped", "[pipeline]") {
    const bool drop = GENERATE(false, true);
    INFO("drop " << drop);
    Rig rig(2);
    core::SwitchConfig cfg = rig.config();
    cfg.malformed = drop ? core::MalformedAction::Drop : core::MalformedAction::Forward;
    rig.start(cfg);
    {
        const frame::MacAddr learner = mac(0x50);
        auto good = gradient_payload(gradient_header(7, 0, 1, 16));
        auto bad_magic = good;
        bad_magic[0] = 0x12;
        auto short_msg = std::vector<std::uint8_t>(good.begin(), good.begin() + 20);
        auto bad_length = std::vector<std::uint8_t>(good.begin(), good.end() - 4);  // 15 elements, header says 16
        const std::vector<std::vector<std::uint8_t>> frames = {
            udp_frame(mac(1), learner, host_ip(1), host_ip(0x50), proto::kDefaultUdpPort, bad_magic),
            udp_frame(mac(1), learner, host_ip(1), host_ip(0x50), proto::kDefaultUdpPort, short_msg),
            udp_frame(mac(1), learner, host_ip(1), host_ip(0x50), proto::kDefaultUdpPort, bad_length),
        };
        for (const auto& f : frames) rig.inject(0, f);
        rig.round(kHz);
        const auto out = rig.take(1);
        if (drop) {
            CHECK(out.empty());
        } else {
            REQUIRE(out.size() == 3);
            for (std::size_t i = 0; i < 3; ++i) CHECK(bytes_of(out[i]) == frames[i]);  // unchanged
        }
        rig.free_all(out);
        const auto st = rig.view();
        CHECK(st.malformed[static_cast<int>(proto::DecodeError::BadMagic)] == 1);
        CHECK(st.malformed[static_cast<int>(proto::DecodeError::ShortPacket)] == 1);
        CHECK(st.malformed[static_cast<int>(proto::DecodeError::LengthMismatch)] == 1);
        CHECK(st.malformed_total == 3);
        CHECK(st.egress.malformed_dropped == (drop ? 3u : 0u));
        CHECK(st.shesha_valid == 0);
    }
    CHECK(rig.finish());
}

TEST_CASE("a gradient from a non-member is never merged", "[pipeline]") {
    const bool drop = GENERATE(false, true);
    INFO("drop " << drop);
    Rig rig(2);
    core::SwitchConfig cfg = rig.config();
    cfg.non_member = drop ? core::NonMemberAction::Drop : core::NonMemberAction::ForwardUnmerged;
    cfg.ports[1].shaper.rate_bps = 1'000'000;
    cfg.ports[1].shaper.burst_bytes = 9100;
    rig.start(cfg);
    {
        const frame::MacAddr learner = mac(0x50);
        std::uint64_t now = kHz;
        rig.inject(1, l2_frame(learner, kBroadcast, 0));
        rig.round(now);
        rig.free_all(rig.take(0));
        for (int i = 0; i < 8; ++i)
            rig.inject(0, udp_frame(mac(1), learner, host_ip(1), host_ip(0x50), 9999,
                                    std::vector<std::uint8_t>(1400 - frame::kUdpPayloadOffset, 0x22)));
        rig.round(now);
        // Member worker 1, then host 9 (not on the allow-list) with a compatible gradient.
        rig.inject(0, gradient_frame(1, learner, host_ip(0x50), 7, 1));
        rig.round(now);
        rig.inject(0, gradient_frame(9, learner, host_ip(0x50), 7, 1));
        rig.round(now);
        auto st = rig.view();
        CHECK(st.egress.non_member == 1);
        CHECK(st.egress.non_member_dropped == (drop ? 1u : 0u));
        CHECK(st.ports[1].queue.merged == 0);
        CHECK(st.ports[1].queue.mergeable_arrivals == 1);
        CHECK(st.ports[1].queue_depth == (drop ? 3u : 4u));

        std::vector<Frame*> out;
        for (int i = 0; i < 50 && out.size() < (drop ? 9u : 10u); ++i) {
            now += kHz / 10;
            rig.round(now);
            for (Frame* m : rig.take(1)) out.push_back(m);
        }
        std::vector<std::uint32_t> workers;
        for (Frame* m : out) {
            const auto f = bytes_of(m);
            const auto info = frame::classify(f, proto::kDefaultUdpPort);
            if (info.kind != frame::FrameKind::Shesha) continue;
            proto::Message msg;
            REQUIRE(proto::decode({f.data() + info.payload_offset, info.payload_len}, msg) == proto::DecodeError::Ok);
            CHECK(msg.hdr.contrib_count == 1);
            workers.push_back(msg.hdr.worker_id);
        }
        CHECK(workers == (drop ? std::vector<std::uint32_t>{1} : std::vector<std::uint32_t>{1, 9}));
        rig.free_all(out);
    }
    CHECK(rig.finish());
}

TEST_CASE("a marked gradient triggers a rate-limited FEEDBACK to its sender", "[pipeline]") {
    Rig rig(2);
    core::SwitchConfig cfg = rig.config();
    cfg.feedback = true;
    cfg.feedback_interval_us = 1000;
    cfg.ports[1].shaper.rate_bps = 1'000'000;
    cfg.ports[1].shaper.burst_bytes = 9100;
    cfg.ports[1].marking.depth_packets = 1;  // mark arrivals that find anything waiting
    rig.start(cfg);
    const frame::MacAddr p0_mac{0x02, 0xAA, 0, 0, 0, 0};
    const frame::MacAddr learner = mac(0x50);
    {
        std::uint64_t now = kHz;
        rig.inject(1, l2_frame(learner, kBroadcast, 0));
        rig.round(now);
        rig.free_all(rig.take(0));
        for (int i = 0; i < 8; ++i)
            rig.inject(0, udp_frame(mac(1), learner, host_ip(1), host_ip(0x50), 9999,
                                    std::vector<std::uint8_t>(1400 - frame::kUdpPayloadOffset, 0x33)));
        rig.round(now);
        // Fillers 2..8 found packets waiting and were marked, but they are not gradients: no FEEDBACK.
        REQUIRE(rig.take(0).empty());

        const auto g = gradient_frame(1, learner, host_ip(0x50), 7, 3, 32);
        rig.inject(0, g);
        rig.round(now);
        auto fb = rig.take(0);
        REQUIRE(fb.size() == 1);
        const auto f = bytes_of(fb[0]);
        rig.free_all(fb);

        // Ethernet: from p0's MAC back to worker 1.
        CHECK(std::equal(f.begin(), f.begin() + 6, mac(1).begin()));
        CHECK(std::memcmp(f.data() + 6, p0_mac.data(), 6) == 0);
        CHECK(!std::equal(f.begin() + 6, f.begin() + 12, learner.begin()));
        // IPv4/UDP: from the learner's address and the Shesha port to the worker's address and port.
        const std::uint8_t* ip_hdr = f.data() + frame::kEthHeaderSize;
        CHECK(be::load32(ip_hdr + 12) == host_ip(0x50));
        CHECK(be::load32(ip_hdr + 16) == host_ip(1));
        CHECK(be::load16(ip_hdr + 10) == frame::ipv4_header_checksum(ip_hdr, 20));
        const std::uint8_t* udp = ip_hdr + 20;
        CHECK(be::load16(udp) == proto::kDefaultUdpPort);
        CHECK(be::load16(udp + 2) == kWorkerPort);
        CHECK(be::load16(udp + 6) == frame::udp_checksum(ip_hdr, udp, be::load16(udp + 4)));

        proto::Message msg;
        REQUIRE(proto::decode({f.data() + frame::kUdpPayloadOffset, f.size() - frame::kUdpPayloadOffset}, msg) ==
                proto::DecodeError::Ok);
        CHECK(msg.hdr.type == proto::MsgType::Feedback);
        CHECK(msg.hdr.cluster_id == 7);
        CHECK(msg.hdr.worker_id == 1);
        CHECK(msg.hdr.chunk_index == 3);
        CHECK(msg.hdr.seq == 101);
        proto::FeedbackBody body;
        REQUIRE(proto::decode_feedback(msg.payload, body));
        CHECK(body.port_id == 1);
        CHECK(body.queue_capacity == 64);
        CHECK(body.queue_depth == 3);  // two fillers + the gradient
        CHECK(body.queue_bytes == 2 * 1400 + g.size());
        CHECK(body.drops == 0);
        CHECK(body.sojourn_us == (2 * 1424 + g.size() + 24) * 8);  // backlog wire time at 1 Mbit/s

        // Same sender within the interval: suppressed. Another sender: its own FEEDBACK.
        rig.inject(0, gradient_frame(1, learner, host_ip(0x50), 7, 0, 32));
        rig.round(now);
        CHECK(rig.take(0).empty());
        rig.inject(0, gradient_frame(2, learner, host_ip(0x50), 7, 0, 32));
        rig.round(now);
        fb = rig.take(0);
        REQUIRE(fb.size() == 1);
        CHECK(be::load32(fb[0]->bytes.data() + frame::kEthHeaderSize + 16) == host_ip(2));
        rig.free_all(fb);
        // After the interval, worker 1 hears again.
        now += kHz / 500;  // 2 ms; the shaper sends a little meanwhile, the queue stays congested
        rig.inject(0, gradient_frame(1, learner, host_ip(0x50), 7, 1, 32));
        rig.round(now);
        fb = rig.take(0);
        CHECK(fb.size() == 1);
        rig.free_all(fb);

        const auto st = rig.view();
        CHECK(st.egress.feedback_sent == 3);
        CHECK(st.egress.feedback_suppressed == 1);
        CHECK(st.egress.feedback_failed == 0);
        rig.free_all(rig.take(1));
    }
    CHECK(rig.finish());
}

TEST_CASE("tx_contributions counts each gradient's contrib_count, merged or not, and nothing for other frames", "[pipeline]") {
    const bool aggregation = GENERATE(false, true);
    INFO("aggregation " << aggregation);
    Rig rig(2);
    core::SwitchConfig cfg = rig.config();
    cfg.aggregation = aggregation;
    rig.start(cfg);
    const frame::MacAddr learner = mac(0x50);
    const std::uint32_t learner_ip = host_ip(0x50);
    {
        std::uint64_t now = kHz;
        rig.inject(1, l2_frame(learner, kBroadcast, 0));
        rig.round(now);
        rig.free_all(rig.take(0));
        // A member's sender-merged gradient of 3 updates, a non-member's of 2, one plain gradient
        // of another (unknown) cluster, 5 plain frames and a CREDIT-like control message.
        auto member = gradient_header(7, 0, 1, 64);
        member.contrib_count = 3;
        member.flags = proto::flag::kSenderMerged;
        rig.inject(0, udp_frame(mac(1), learner, host_ip(1), learner_ip, proto::kDefaultUdpPort, gradient_payload(member)));
        auto outsider = gradient_header(7, 1, 9, 64);
        outsider.contrib_count = 2;
        outsider.flags = proto::flag::kSenderMerged;
        rig.inject(0, udp_frame(mac(9), learner, host_ip(9), learner_ip, proto::kDefaultUdpPort, gradient_payload(outsider)));
        rig.inject(0, gradient_frame(2, learner, learner_ip, 99, 0));
        for (int i = 0; i < 5; ++i) rig.inject(0, l2_frame(mac(1), learner, static_cast<std::uint8_t>(i + 1)));
        rig.round(now);
        rig.round(now + 1);
        const auto out = rig.take(1);
        CHECK(out.size() == 8);
        rig.free_all(out);
        const auto st = rig.view();
        CHECK(st.ports[1].tx.packets == 8);
        CHECK(st.ports[1].tx.contributions == 3 + 2 + 1);
    }
    CHECK(rig.finish());
}

TEST_CASE("a MAC@IP member binding refuses a non-member that borrows a member's IP", "[pipeline]") {
    Rig rig(2);
    core::SwitchConfig cfg = rig.config();
    cfg.clusters[0].member_ips.clear();
    cfg.clusters[0].member_bindings = {{mac(1), host_ip(1)}, {mac(2), host_ip(2)}};
    cfg.ports[1].shaper.rate_bps = 1'000'000;
    cfg.ports[1].shaper.burst_bytes = 9100;  // six fillers leave, the rest wait and may merge
    rig.start(cfg);
    const frame::MacAddr learner = mac(0x50);
    const std::uint32_t learner_ip = host_ip(0x50);
    {
        std::uint64_t now = kHz;
        rig.inject(1, l2_frame(learner, kBroadcast, 0));
        rig.round(now);
        rig.free_all(rig.take(0));
        for (int i = 0; i < 8; ++i)
            rig.inject(0, udp_frame(mac(1), learner, host_ip(1), learner_ip, 9999,
                                    std::vector<std::uint8_t>(1400 - frame::kUdpPayloadOffset, 0x22)));
        rig.round(now);
        REQUIRE(rig.view().ports[1].queue_depth == 2);
        // Member 1 (its own MAC and IP), then host 9 sending with member 1's IP, then member 2.
        rig.inject(0, gradient_frame(1, learner, learner_ip, 7, 1));
        rig.round(now);
        rig.inject(0, udp_frame(mac(9), learner, host_ip(1), learner_ip, proto::kDefaultUdpPort,
                                gradient_payload(gradient_header(7, 1, 9, 64))));
        rig.round(now);
        rig.inject(0, gradient_frame(2, learner, learner_ip, 7, 1));
        rig.round(now);
        const auto st = rig.view();
        CHECK(st.egress.non_member == 1);
        CHECK(st.ports[1].queue.mergeable_arrivals == 2);
        CHECK(st.ports[1].queue.merged == 1);  // member 2 into member 1, never the borrower
        CHECK(st.ports[1].queue_depth == 4);   // 2 fillers, member 1 (+2), the borrower's
    }
}

TEST_CASE("every received frame ends in exactly one counted fate", "[pipeline]") {
    // Three ports: p0 the workers' side, p1 the learner (shaped, 64-packet queue: merges and tail
    // drops), p2 a host on a small-mtu port (frames too big for it). Malformed frames and
    // non-members are dropped by configuration; a frame to a MAC learned on its own ingress port is
    // filtered; broadcasts flood (one extra copy each with three ports).
    Rig rig(3);
    core::SwitchConfig cfg = rig.config();
    cfg.malformed = core::MalformedAction::Drop;
    cfg.non_member = core::NonMemberAction::Drop;
    cfg.ports[1].shaper.rate_bps = 10'000'000;
    cfg.ports[1].shaper.burst_bytes = 9100;
    cfg.ports[2].mtu = 576;
    rig.start(cfg);
    const frame::MacAddr learner = mac(0x50), host = mac(0x60);
    const std::uint32_t learner_ip = host_ip(0x50);
    std::uint64_t now = kHz;
    {
        rig.inject(1, l2_frame(learner, kBroadcast, 0));  // floods to p0 and p2
        rig.inject(2, l2_frame(host, kBroadcast, 0));     // floods to p0 and p1
        rig.inject(0, l2_frame(mac(1), kBroadcast, 0));   // floods to p1 and p2: mac(1) learned on p0
        rig.round(now);
        for (int round = 0; round < 6; ++round) {
            for (int i = 0; i < 12; ++i)  // fillers toward the learner: the queue fills, then tail drops
                rig.inject(0, udp_frame(mac(1), learner, host_ip(1), learner_ip, 9999,
                                        std::vector<std::uint8_t>(1400 - frame::kUdpPayloadOffset, 0x11)));
            for (int w = 1; w <= 4; ++w) rig.inject(0, gradient_frame(static_cast<std::uint8_t>(w), learner, learner_ip, 7, round % 4));
            rig.inject(0, gradient_frame(9, learner, learner_ip, 7, 0));  // a non-member: dropped
            auto bad = gradient_payload(gradient_header(7, 0, 1, 16));
            bad[0] = 0x12;
            rig.inject(0, udp_frame(mac(1), learner, host_ip(1), learner_ip, proto::kDefaultUdpPort, bad));  // malformed
            rig.inject(0, l2_frame(mac(2), mac(1), 9));       // to a station behind p0 itself: filtered
            rig.inject(0, udp_frame(mac(1), host, host_ip(1), host_ip(0x60), 9999,
                                    std::vector<std::uint8_t>(1000, 0x22)));  // too big for p2's mtu 576
            rig.inject(0, std::vector<std::uint8_t>(static_cast<std::size_t>(round) * 2 + 1, 0xEE));  // a runt: dropped
            rig.round(now);
            rig.free_all(rig.take(0));
            rig.free_all(rig.take(1));
            rig.free_all(rig.take(2));
        }
        for (int i = 0; i < 200; ++i) {  // let the shaped port drain
            now += kHz / 100;
            rig.round(now);
            for (std::size_t p = 0; p < 3; ++p) rig.free_all(rig.take(p));
        }
        const auto st = rig.view();
        std::uint64_t received = 0, copies = 0, sent = 0, merged = 0, tail_dropped = 0, filtered = 0, too_big = 0,
                      waiting = 0;
        for (const auto& p : st.ports) {
            received += p.rx_packets;
            copies += p.tx.flooded;  // three ports: each flood makes one copy beyond the original
            sent += p.tx.packets;
            merged += p.queue.merged;
            tail_dropped += p.queue.dropped;
            filtered += p.tx.filtered;
            too_big += p.tx.too_big;
            waiting += p.queue_depth + p.tx_pending;
        }
        // Rounds 4 and 5 send chunks 0 and 1 again under the same (worker, seq): copies, dropped.
        const std::uint64_t copies_dropped = rig.pipeline->egress()[core::SwitchCounter::GradientCopiesDropped];
        const std::uint64_t dropped_by_policy = st.egress.malformed_dropped + st.egress.non_member_dropped + copies_dropped;
        INFO("received " << received << " copies " << copies << " sent " << sent << " merged " << merged << " tail "
                         << tail_dropped << " filtered " << filtered << " too_big " << too_big << " policy "
                         << dropped_by_policy << " waiting " << waiting << " clone_failed " << st.egress.clone_failed);
        CHECK(received == 3 + 6 * 21);
        CHECK(st.runts == 6);
        CHECK(merged > 0);
        CHECK(tail_dropped > 0);
        CHECK(too_big == 6);
        CHECK(filtered == 6);
        CHECK(copies_dropped == 2 * 4);
        CHECK(dropped_by_policy == 12 + 8);
        CHECK(st.egress.clone_failed == 0);
        CHECK(waiting == 0);
        CHECK(received + copies == sent + merged + tail_dropped + filtered + too_big + dropped_by_policy + st.runts);
    }
    CHECK(rig.finish());
}

TEST_CASE("receive_burst's staging cursor and per-packet route() give identical outputs and counters", "[pipeline]") {
    // The one-lcore fast path stages GRADIENTs of members like other frames when their enqueue
    // cannot mark them (port below its marking depth). On random traffic with marking, FEEDBACK,
    // shaping, DRR (with bounded lag and chunk following) and version tolerance, it must send the
    // same bytes, in the same order, with the same counters, as route() per packet.
    struct Variant {
        const char* name;
        std::uint32_t mark_depth;
        core::Scheduling scheduling;
        std::uint32_t tolerance;
        bool aggregation;
        std::uint32_t fair_lag = 0;
        bool chunk_follow = false;
    };
    const std::vector<Variant> variants = {
        {"fifo, no marking", 0, core::Scheduling::Fifo, 0, true},
        {"fifo, marking at 6", 6, core::Scheduling::Fifo, 0, true},
        {"fifo, marking at 20, tolerance 2", 20, core::Scheduling::Fifo, 2, true},
        {"drr, marking at 6", 6, core::Scheduling::Drr, 1, true},
        {"drr, no marking", 0, core::Scheduling::Drr, 0, true},
        {"drr, marking at 20, bounded lag 4, chunk following", 20, core::Scheduling::Drr, 1, true, 4, true},
        {"fifo, aggregation off", 6, core::Scheduling::Fifo, 0, false},
    };
    for (const Variant& v : variants) {
        for (std::uint32_t seed = 1; seed <= 4; ++seed) {
            DYNAMIC_SECTION(v.name << ", seed " << seed) {
                Rig fast(3), slow(3);
                slow.per_packet = true;
                core::SwitchConfig cfg = fast.config();
                cfg.aggregation = v.aggregation;
                cfg.feedback = true;
                cfg.feedback_interval_us = 50;
                cfg.scheduling = v.scheduling;
                cfg.fair_lag = v.fair_lag;
                cfg.chunk_follow = v.chunk_follow;
                cfg.clusters[0].version_tolerance = v.tolerance;
                cfg.clusters.push_back({8, true, v.tolerance, {}, {host_ip(5), host_ip(6)}});
                cfg.ports[1].shaper.rate_bps = 1'000'000'000;  // the learner's port: a queue builds up
                cfg.ports[1].shaper.burst_bytes = 4000;
                cfg.ports[1].marking.depth_packets = v.mark_depth;
                fast.start(cfg);
                slow.start(cfg);
                const frame::MacAddr learner = mac(0x50);
                const std::uint32_t learner_ip = host_ip(0x50);
                Lcg next(seed);
                const auto both = [&](std::size_t port, const std::vector<std::uint8_t>& f) { inject_both(fast, slow, port, f); };
                std::uint64_t now = kHz;
                both(1, l2_frame(learner, kBroadcast, 0));
                both(2, l2_frame(mac(0x60), kBroadcast, 0));
                std::uint64_t compared = 0;
                std::uint32_t update_seq = 0;  // every gradient a new update: a repeated seq is a copy
                for (int round = 0; round < 120; ++round) {
                    const std::uint32_t arrivals = next(40);
                    for (std::uint32_t i = 0; i < arrivals; ++i) {
                        const std::uint32_t kind = next(10);
                        if (kind < 7) {  // a GRADIENT: members of cluster 7 or 8, or a non-member
                            const std::uint8_t worker = static_cast<std::uint8_t>(1 + next(7));
                            const std::uint16_t cluster = worker <= 4 ? 7 : 8;
                            proto::Header h = gradient_header(cluster, static_cast<std::uint16_t>(next(3)), worker, 16);
                            h.model_version = 5 + next(4);
                            h.seq = ++update_seq;
                            const auto dst = next(8) == 0 ? mac(0x60) : learner;
                            both(0, udp_frame(mac(worker), dst, host_ip(worker), learner_ip, proto::kDefaultUdpPort,
                                              gradient_payload(h)));
                        } else if (kind < 9) {
                            both(0, udp_frame(mac(1), learner, host_ip(1), learner_ip, 9999,
                                              std::vector<std::uint8_t>(100 + next(500), 0x11)));
                        } else {
                            both(next(2) == 0 ? 0 : 2, l2_frame(mac(next(2) == 0 ? 1 : 0x61), kBroadcast, 3));
                        }
                    }
                    now += next(3) == 0 ? 0 : next(20'000);
                    compared += round_and_compare(fast, slow, now);
                }
                const View a = fast.view(), b = slow.view();
                CHECK(compared > 800);
                std::uint64_t merged = 0, marked = 0, feedback = a.egress.feedback_sent;
                for (std::size_t p = 0; p < 3; ++p) {
                    const PortView &x = a.ports[p], &y = b.ports[p];
                    CHECK(x.rx_packets == y.rx_packets);
                    CHECK(x.tx.packets == y.tx.packets);
                    CHECK(x.tx.bytes == y.tx.bytes);
                    CHECK(x.tx.contributions == y.tx.contributions);
                    CHECK(x.tx.flooded == y.tx.flooded);
                    CHECK(x.tx.queue_drops == y.tx.queue_drops);
                    CHECK(x.queue.enqueued == y.queue.enqueued);
                    CHECK(x.queue.dequeued == y.queue.dequeued);
                    CHECK(x.queue.merged == y.queue.merged);
                    CHECK(x.queue.mergeable_arrivals == y.queue.mergeable_arrivals);
                    CHECK(x.queue.merge_refused == y.queue.merge_refused);
                    CHECK(x.queue.dropped == y.queue.dropped);
                    CHECK(x.queue.marked == y.queue.marked);
                    CHECK(x.queue_depth == y.queue_depth);
                    merged += x.queue.merged;
                    marked += x.queue.marked;
                }
                CHECK(a.egress.feedback_sent == b.egress.feedback_sent);
                CHECK(a.egress.feedback_suppressed == b.egress.feedback_suppressed);
                CHECK(a.egress.non_member == b.egress.non_member);
                // The workload exercises what it is meant to.
                CHECK((merged > 0) == v.aggregation);
                CHECK((marked > 0) == (v.mark_depth != 0));
                CHECK((feedback > 0) == (v.mark_depth != 0));
                CHECK(fast.finish());
                CHECK(slow.finish());
            }
        }
    }
}

TEST_CASE("receive_burst's per-burst learn and lookup memo matches learning every frame", "[pipeline]") {
    // receive_burst skips a learn that repeats the previous frame's sender and reuses the previous
    // lookup until a learn runs. With an FDB of 3 entries for 6 stations (so learns fail with
    // table_full), trains of one sender, stations that move between ports inside a burst, and
    // destinations that become known mid-burst, it must forward, filter and flood exactly as
    // per-packet learning and lookup do, with the same FDB counters.
    for (std::uint32_t seed = 1; seed <= 6; ++seed) {
        DYNAMIC_SECTION("seed " << seed) {
            Rig fast(3), slow(3);
            slow.per_packet = true;
            core::SwitchConfig cfg = fast.config();
            cfg.fdb_capacity = 3;
            cfg.mac_aging_s = 1;
            fast.start(cfg);
            slow.start(cfg);
            Lcg next(seed);
            std::uint64_t now = kHz;
            std::uint64_t compared = 0;
            for (int round = 0; round < 200; ++round) {
                for (std::size_t port = 0; port < 3; ++port) {
                    std::uint32_t left = next(40);
                    while (left != 0) {
                        // A train: one sender, one destination (sometimes broadcast), 1-8 frames.
                        const std::uint8_t src = static_cast<std::uint8_t>(1 + next(6));
                        const frame::MacAddr dst = next(6) == 0 ? kBroadcast : mac(static_cast<std::uint8_t>(1 + next(6)));
                        for (std::uint32_t k = std::min(left, 1 + next(8)); k != 0; --k, --left) {
                            const auto f = l2_frame(mac(src), dst, static_cast<std::uint8_t>(round));
                            fast.inject(port, f);
                            slow.inject(port, f);
                        }
                    }
                }
                now += next(4) == 0 ? 0 : next(kHz / 2);  // sometimes the same instant, sometimes past the aging time
                compared += round_and_compare(fast, slow, now);
            }
            const View a = fast.view(), b = slow.view();
            CHECK(compared > 2000);
            for (std::size_t p = 0; p < 3; ++p) {
                CHECK(a.ports[p].tx.packets == b.ports[p].tx.packets);
                CHECK(a.ports[p].tx.flooded == b.ports[p].tx.flooded);
                CHECK(a.ports[p].tx.filtered == b.ports[p].tx.filtered);
            }
            CHECK(a.fdb.learned == b.fdb.learned);
            CHECK(a.fdb.moved == b.fdb.moved);
            CHECK(a.fdb.table_full == b.fdb.table_full);
            CHECK(a.fdb_size == b.fdb_size);
            // The workload exercises what it is meant to.
            CHECK(a.fdb.table_full > 100);
            CHECK(a.fdb.moved > 10);
            std::uint64_t filtered = 0;
            for (const auto& p : a.ports) filtered += p.tx.filtered;
            CHECK(filtered > 10);
            CHECK(fast.finish());
            CHECK(slow.finish());
        }
    }
}

TEST_CASE("receive_burst's trains of plain UDP frames forward exactly as frame by frame", "[pipeline]") {
    // forward_train() takes the frames after a plain one that would be bypassed to the same TX
    // batch as it was, checking each frame's header against the last accepted one's. Trains of
    // one flow, with frames mutated in the bytes that decide (addresses, EtherType, IHL, lengths,
    // fragment, protocol, UDP port and length), truncated, longer than a port's mtu, Shesha
    // messages, frames to an unknown station or back to the ingress port, must leave as forwarding
    // frame by frame leaves them, with the same counters, on 2 ports and on 3.
    for (std::size_t ports : {std::size_t{2}, std::size_t{3}}) {
        for (std::uint32_t seed = 1; seed <= 4; ++seed) {
            DYNAMIC_SECTION(ports << " ports, seed " << seed) {
                Rig fast(ports), slow(ports);
                slow.per_packet = true;
                core::SwitchConfig cfg = fast.config();
                cfg.ports[1].mtu = 200;  // station 9's port: some train frames are too long for it
                fast.start(cfg);
                slow.start(cfg);
                Lcg next(seed);
                const auto both = [&](std::size_t port, const std::vector<std::uint8_t>& f) { inject_both(fast, slow, port, f); };
                // Stations 1 and 2 behind port 0, 9 behind port 1; 7 is never heard from.
                std::uint64_t now = kHz;
                both(0, l2_frame(mac(1), kBroadcast, 0));
                both(0, l2_frame(mac(2), kBroadcast, 0));
                both(1, l2_frame(mac(9), kBroadcast, 0));
                static constexpr std::uint8_t kHot[] = {0, 5, 6, 11, 12, 13, 14, 16, 17, 20, 21, 23, 36, 37, 38, 39};
                std::uint64_t compared = 0;
                for (int round = 0; round < 150; ++round) {
                    for (std::size_t port = 0; port < 2; ++port) {
                        std::uint32_t left = next(48);
                        while (left != 0) {
                            const std::uint8_t src = port == 0 ? static_cast<std::uint8_t>(1 + next(2)) : 9;
                            const std::uint32_t d = next(8);
                            const std::uint8_t dst = d == 0 ? 7 : d == 1 ? static_cast<std::uint8_t>(3 - src) : port == 0 ? 9 : 1;
                            const std::uint16_t udp_port = next(10) == 0 ? proto::kDefaultUdpPort : 9999;
                            const auto base = udp_frame(mac(src), mac(dst), host_ip(src), host_ip(dst), udp_port,
                                                        std::vector<std::uint8_t>(18 + next(4) * 60, 0x5A));
                            for (std::uint32_t k = std::min(left, 1 + next(12)); k != 0; --k, --left) {
                                std::vector<std::uint8_t> f = base;
                                if (next(6) == 0) {
                                    const std::uint8_t at = kHot[next(sizeof kHot)];
                                    f[at] = static_cast<std::uint8_t>(f[at] + (next(2) == 0 ? 1 : 0xFF));
                                }
                                if (next(20) == 0) f.resize(next(static_cast<std::uint32_t>(f.size())));
                                both(port, f);
                            }
                        }
                    }
                    now += next(3) == 0 ? 0 : next(50'000);
                    compared += round_and_compare(fast, slow, now);
                }
                const View a = fast.view(), b = slow.view();
                CHECK(compared > 4000);
                for (std::size_t p = 0; p < ports; ++p) {
                    CHECK(a.ports[p].rx_packets == b.ports[p].rx_packets);
                    CHECK(a.ports[p].tx.packets == b.ports[p].tx.packets);
                    CHECK(a.ports[p].tx.bytes == b.ports[p].tx.bytes);
                    CHECK(a.ports[p].tx.flooded == b.ports[p].tx.flooded);
                    CHECK(a.ports[p].tx.filtered == b.ports[p].tx.filtered);
                    CHECK(a.ports[p].tx.too_big == b.ports[p].tx.too_big);
                    CHECK(a.ports[p].queue.enqueued == b.ports[p].queue.enqueued);
                }
                CHECK(a.ip_other == b.ip_other);
                CHECK(a.non_ip == b.non_ip);
                CHECK(a.bad_frames == b.bad_frames);
                CHECK(a.runts == b.runts);
                CHECK(a.shesha_valid == b.shesha_valid);
                CHECK(a.malformed_total == b.malformed_total);
                CHECK(a.fdb.learned == b.fdb.learned);
                CHECK(a.fdb.moved == b.fdb.moved);
                // The workload exercises what it is meant to: trains, and each way out of one.
                CHECK(a.ip_other > 3000);
                CHECK(a.non_ip > 50);
                CHECK(a.bad_frames > 20);
                CHECK(a.runts > 10);
                CHECK(a.ports[1].tx.too_big > 50);
                CHECK(a.ports[0].tx.filtered + a.ports[1].tx.filtered > 50);
                std::uint64_t flooded = 0;
                for (const auto& p : a.ports) flooded += p.tx.flooded;
                CHECK(flooded > 50);
                CHECK(fast.finish());
                CHECK(slow.finish());
            }
        }
    }
}

// ---- classification's fast paths (classify.h) against the general parser and decoder -----------

namespace {

// xorshift64*: a fixed sequence, so a failure repeats.
struct Rng {
    std::uint64_t s;
    std::uint64_t next() {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        return s * 0x2545F4914F6CDD1Dull;
    }
    std::uint32_t below(std::uint32_t n) { return static_cast<std::uint32_t>(next() % n); }
};

// A byte value a mutation writes: often one that sits on a check's boundary.
std::uint8_t mutated_byte(Rng& rng, std::uint8_t old) {
    static constexpr std::uint8_t kEdges[] = {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x07, 0x08, 0x0F, 0x10, 0x11,
                                              0x1F, 0x20, 0x3F, 0x40, 0x45, 0x46, 0x53, 0x48, 0x7F, 0x80, 0x81, 0xFF};
    switch (rng.below(3)) {
    case 0: return static_cast<std::uint8_t>(old + 1);
    case 1: return static_cast<std::uint8_t>(old - 1);
    default: return kEdges[rng.below(sizeof kEdges)];
    }
}

}  // namespace

TEST_CASE("the IPv4/UDP fast path of classification decides exactly as frame::classify, or defers", "[pipeline][classify]") {
    const auto shesha = gradient_frame(1, mac(9), host_ip(9), 1, 0, 64);
    const auto other = udp_frame(mac(1), mac(9), host_ip(1), host_ip(9), 9, std::vector<std::uint8_t>(18, 0xAB));
    Rng rng{0x9E3779B97F4A7C15ull};
    std::uint64_t decided = 0, decided_shesha = 0, deferred = 0;
    for (int iter = 0; iter < 200'000; ++iter) {
        std::vector<std::uint8_t> f = (iter & 1) ? shesha : other;
        const int mutations = iter < 2 ? 0 : static_cast<int>(rng.below(4));
        for (int k = 0; k < mutations; ++k) {
            // Mostly the header bytes the checks read (EtherType, IPv4 version/IHL, lengths, flags
            // and fragment offset, protocol, UDP ports and length), sometimes any of the first 50.
            static constexpr std::uint8_t kHot[] = {12, 13, 14, 16, 17, 20, 21, 23, 36, 37, 38, 39};
            const std::size_t at = rng.below(4) != 0 ? kHot[rng.below(sizeof kHot)] : rng.below(50);
            f[at] = mutated_byte(rng, f[at]);
        }
        if (iter >= 2 && rng.below(4) == 0) f.resize(rng.below(static_cast<std::uint32_t>(f.size()) + 1));
        const frame::FrameInfo want = frame::classify(f, proto::kDefaultUdpPort);
        frame::FrameInfo got;
        if (!core::classify_ipv4_udp_fast(f.data(), static_cast<std::uint32_t>(f.size()), proto::kDefaultUdpPort, got)) {
            ++deferred;
            continue;
        }
        ++decided;
        INFO("iteration " << iter);
        REQUIRE(got.kind == want.kind);
        REQUIRE(got.l3_offset == want.l3_offset);
        if (want.kind == frame::FrameKind::Shesha) {
            ++decided_shesha;
            REQUIRE(got.l4_offset == want.l4_offset);
            REQUIRE(got.payload_offset == want.payload_offset);
            REQUIRE(got.payload_len == want.payload_len);
            REQUIRE(got.src_ip == want.src_ip);
            REQUIRE(got.dst_ip == want.dst_ip);
            REQUIRE(got.src_port == want.src_port);
            REQUIRE(got.dst_port == want.dst_port);
            REQUIRE(got.ecn == want.ecn);
        }
    }
    // Both paths ran, and the fast one took both kinds of frame.
    CHECK(decided > 50'000);
    CHECK(decided_shesha > 20'000);
    CHECK(deferred > 50'000);
}

TEST_CASE("a train frame is exactly a frame the IPv4/UDP fast path calls IpOther, between the train's stations",
          "[pipeline][classify]") {
    const auto shesha = gradient_frame(1, mac(9), host_ip(9), 1, 0, 64);
    const auto other = udp_frame(mac(1), mac(9), host_ip(1), host_ip(9), 9, std::vector<std::uint8_t>(18, 0xAB));
    const core::TrainHead head = core::train_head(core::mac_key(mac(9)), core::mac_key(mac(1)));
    Rng rng{0xC2B2AE3D27D4EB4Full};
    std::uint64_t accepted = 0, refused_ip_other = 0, refused = 0;
    for (int iter = 0; iter < 200'000; ++iter) {
        std::vector<std::uint8_t> f = (iter % 4 == 1) ? shesha : other;
        const int mutations = iter < 2 ? 0 : static_cast<int>(rng.below(4));
        for (int k = 0; k < mutations; ++k) {
            // The bytes the checks read (addresses, EtherType, IHL, lengths, fragment, protocol, UDP
            // port and length), sometimes any of the first 50.
            static constexpr std::uint8_t kHot[] = {0, 3, 5, 6, 9, 11, 12, 13, 14, 15, 16, 17, 20, 21, 23, 36, 37, 38, 39};
            const std::size_t at = rng.below(4) != 0 ? kHot[rng.below(sizeof kHot)] : rng.below(50);
            f[at] = mutated_byte(rng, f[at]);
        }
        if (iter >= 2 && rng.below(4) == 0) f.resize(rng.below(static_cast<std::uint32_t>(f.size()) + 1));
        const auto len = static_cast<std::uint32_t>(f.size());
        frame::FrameInfo info;
        const bool ip_other = core::classify_ipv4_udp_fast(f.data(), len, proto::kDefaultUdpPort, info) &&
                              info.kind == frame::FrameKind::IpOther;
        const bool want = ip_other && core::mac_key(f.data()) == core::mac_key(mac(9)) &&
                          core::mac_key(f.data() + 6) == core::mac_key(mac(1));
        INFO("iteration " << iter);
        REQUIRE(core::is_plain_udp_train_frame(f.data(), len, head, proto::kDefaultUdpPort) == want);
        if (want) ++accepted;
        else if (ip_other) ++refused_ip_other;
        else ++refused;
    }
    // Both answers, and refusals for the addresses alone.
    CHECK(accepted > 30'000);
    CHECK(refused_ip_other > 5'000);
    CHECK(refused > 50'000);
}

TEST_CASE("the fp32 GRADIENT fast path of classification accepts exactly what proto::decode accepts", "[pipeline][classify]") {
    proto::Header h = gradient_header(3, 1, 2, 16);
    h.ts_earliest_ns = 0x0000'0100'0000'0000ull;
    h.ts_latest_ns = 0x0000'0100'0000'0001ull;
    const std::vector<std::uint8_t> base = gradient_payload(h);
    Rng rng{12345};
    std::uint64_t accepted = 0, rejected_valid_other = 0, rejected_invalid = 0;
    for (int iter = 0; iter < 200'000; ++iter) {
        std::vector<std::uint8_t> p = base;
        const int mutations = iter == 0 ? 0 : static_cast<int>(rng.below(4));
        for (int k = 0; k < mutations; ++k) {
            const std::size_t at = rng.below(proto::kHeaderSize);
            p[at] = mutated_byte(rng, p[at]);
        }
        if (iter != 0 && rng.below(5) == 0) {
            const std::uint32_t n = rng.below(static_cast<std::uint32_t>(p.size()) + 8);
            p.resize(n, 0);
        }
        proto::Message msg;
        const bool ok = proto::decode(p, msg) == proto::DecodeError::Ok;
        const bool want = ok && msg.hdr.type == proto::MsgType::Gradient && msg.hdr.elem_type == proto::ElemType::F32;
        core::PacketMeta meta;
        const bool got = core::decode_gradient_f32_fast(p.data(), static_cast<std::uint32_t>(p.size()), meta);
        INFO("iteration " << iter);
        REQUIRE(got == want);
        if (got) {
            ++accepted;
            CHECK(meta.cluster_id == msg.hdr.cluster_id);
            CHECK(meta.chunk_index == msg.hdr.chunk_index);
            CHECK(meta.elem_count == msg.hdr.elem_count);
            CHECK(meta.model_version == msg.hdr.model_version);
            CHECK(meta.contributions == msg.hdr.contrib_count);
            CHECK(meta.worker_id == msg.hdr.worker_id);
            CHECK(meta.seq == msg.hdr.seq);
        } else if (ok) {
            ++rejected_valid_other;
        } else {
            ++rejected_invalid;
        }
    }
    CHECK(accepted > 20'000);
    CHECK(rejected_valid_other > 100);
    CHECK(rejected_invalid > 20'000);
}

TEST_CASE("the TX batch's merge index answers as a map of each key's newest packet, through its last-key memo", "[pipeline]") {
    // find() first checks the last key put or found, then probes: the answers must be those of a
    // plain map from (key, destination) to the newest packet registered, with superseded packets
    // (frame set to nullptr) and batches ending (clear) mixed in.
    core::BatchMergeIndex index(32);
    std::map<std::pair<std::uint64_t, std::uint32_t>, std::uint32_t> want;  // -> tx_index, or UINT32_MAX if superseded
    std::vector<std::uint8_t> frames(64);
    Rng rng{777};
    std::uint32_t n_batch = 0;
    std::uint64_t hits = 0;
    for (int op = 0; op < 100'000; ++op) {
        const std::uint64_t key = core::merge_key(1, static_cast<std::uint16_t>(rng.below(6)), rng.below(2));
        const std::uint32_t dst = rng.below(2);
        const std::uint32_t what = rng.below(10);
        if (what == 0 || n_batch == 32) {
            index.clear();
            want.clear();
            n_batch = 0;
            continue;
        }
        core::BatchMergeIndex::Leader* l = index.find(key, dst);
        const auto it = want.find({key, dst});
        REQUIRE((l != nullptr) == (it != want.end()));
        if (l != nullptr) {
            ++hits;
            REQUIRE((l->frame == nullptr) == (it->second == UINT32_MAX));
            if (l->frame != nullptr) REQUIRE(l->tx_index == it->second);
        }
        if (what <= 5) {  // a new batch packet becomes the key's newest
            index.put(key, dst, {frames.data() + n_batch, {}, n_batch, 0});
            want[{key, dst}] = n_batch++;
        } else if (what == 6 && l != nullptr) {  // superseded by a queued packet
            l->frame = nullptr;
            want[{key, dst}] = UINT32_MAX;
        }
    }
    CHECK(hits > 10'000);
}

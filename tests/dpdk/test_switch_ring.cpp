// DPDK smoke test of the shesha-switch data path without NICs: EAL without hugepages or PCI,
// ports made with rte_eth_from_rings on rings this test owns, frames injected into the RX rings
// and read back from the TX rings. Time is a fake clock (1 tick = 1 ns) passed to the rounds, so
// shaping, merging and rate limiting are deterministic. Exits 77 (skipped) if EAL cannot start for
// lack of privileges.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "big_endian.h"
#include "forwarding_frames.h"
#include "frame.h"
#include "gradient_pattern.h"
#include "init.h"
#include "protocol.h"
#include "stats.h"
#include "switch.h"

using namespace shesha;
using namespace shesha::testing;

namespace {

constexpr std::uint64_t kHz = 1'000'000'000;  // fake clock: 1 tick = 1 ns
constexpr std::size_t kMaxTestLcores = 2;     // TX queues each test port offers

rte_mempool* g_pool = nullptr;

void ensure_eal() {
    static bool done = false;
    if (done) return;
    const std::string prefix = fmt::format("shesha-test-{}", ::getpid());
    // --no-shconf: no shared config file; --no-huge leaves no hugepage files either.
    std::vector<std::string> args = {"test_switch_ring", "--no-huge", "-m", "256", "--no-pci", "--no-shconf",
                                     "--no-telemetry", "--file-prefix", prefix, "-l", "0", "--log-level", "lib.eal:error"};
    std::string error;
    bool ok = false;
    try {
        ok = sw::init_eal(args, error);
    } catch (const sw::InitError& e) {
        // Anything else than missing privileges is a real failure; EAL cannot be retried either way.
        if (geteuid() == 0) {
            std::fprintf(stderr, "FAIL: %s\n", e.what());
            std::exit(1);
        }
        error = e.what();
    }
    if (!ok) {
        std::fprintf(stderr, "SKIP (needs privileges): %s\n", error.c_str());
        std::exit(77);
    }
    // Leave no /var/run/dpdk/<prefix> behind.
    std::atexit([] {
        const std::string dir = rte_eal_get_runtime_dir();
        rte_eal_cleanup();
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    });
    spdlog::set_level(spdlog::level::warn);
    g_pool = rte_pktmbuf_pool_create("test_pool", 4095, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
    REQUIRE(g_pool != nullptr);
    done = true;
}


std::vector<std::uint8_t> bytes_of(const rte_mbuf* m) {
    const auto* p = rte_pktmbuf_mtod(m, const std::uint8_t*);
    return {p, p + rte_pktmbuf_data_len(m)};
}

rte_mbuf* mbuf_from(const std::vector<std::uint8_t>& frame) {
    rte_mbuf* m = rte_pktmbuf_alloc(g_pool);
    REQUIRE(m != nullptr);
    auto* p = reinterpret_cast<std::uint8_t*>(rte_pktmbuf_append(m, static_cast<std::uint16_t>(frame.size())));
    REQUIRE(p != nullptr);
    std::memcpy(p, frame.data(), frame.size());
    return m;
}

// Three (or n) ring ports, created fresh for each test and torn down at the end.
struct Rig {
    explicit Rig(std::size_t n) {
        ensure_eal();
        static int serial = 0;
        for (std::size_t i = 0; i < n; ++i) {
            const std::string base = fmt::format("t{}", serial++);
            rte_ring* rx = rte_ring_create((base + "rx").c_str(), 1024, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
            // Every forwarding lcore has a TX queue of its own on each port; here they all feed
            // the port's one ring (multi-producer), so a test reads one port's output in one place.
            rte_ring* tx = rte_ring_create((base + "tx").c_str(), 1024, 0, RING_F_SC_DEQ);
            REQUIRE(rx != nullptr);
            REQUIRE(tx != nullptr);
            std::array<rte_ring*, kMaxTestLcores> txs;
            txs.fill(tx);
            const int id = rte_eth_from_rings(fmt::format("net_ring_{}", base).c_str(), &rx, 1, txs.data(), kMaxTestLcores, 0);
            REQUIRE(id >= 0);
            rx_rings.push_back(rx);
            tx_rings.push_back(tx);
            ids.push_back(static_cast<std::uint16_t>(id));
        }
        avail_before = rte_mempool_avail_count(g_pool);
    }
    ~Rig() {
        for (std::size_t i = 0; i < ids.size(); ++i) {
            free_all(take(i));
            void* m;
            while (rte_ring_dequeue(rx_rings[i], &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
            rte_eth_dev_stop(ids[i]);
            rte_eth_dev_close(ids[i]);
            rte_ring_free(rx_rings[i]);
            rte_ring_free(tx_rings[i]);
        }
    }

    core::SwitchConfig config(std::uint32_t lcores = 1) const {
        core::SwitchConfig cfg;
        cfg.lcores = lcores;
        cfg.burst = 32;
        for (std::size_t i = 0; i < ids.size(); ++i) {
            core::PortConfig p;
            p.name = fmt::format("p{}", i);
            p.device = "net_ring";
            p.queue_packets = 64;
            cfg.ports.push_back(p);
        }
        cfg.clusters.push_back({7, true, 0, {}, {host_ip(1), host_ip(2), host_ip(3), host_ip(4)}});
        return cfg;
    }

    // Configures and starts the ports with the library's own setup.
    void start(const core::SwitchConfig& cfg) {
        for (std::size_t i = 0; i < ids.size(); ++i)
            sw::setup_port(ids[i], cfg.ports[i], g_pool, static_cast<std::uint16_t>(cfg.lcores), 0);
    }

    void inject(std::size_t port, const std::vector<std::uint8_t>& frame) {
        rte_mbuf* m = mbuf_from(frame);
        REQUIRE(rte_ring_enqueue(rx_rings[port], m) == 0);
    }

    std::vector<rte_mbuf*> take(std::size_t port) {
        std::vector<rte_mbuf*> out;
        void* m;
        while (rte_ring_dequeue(tx_rings[port], &m) == 0) out.push_back(static_cast<rte_mbuf*>(m));
        return out;
    }

    static void free_all(const std::vector<rte_mbuf*>& v) {
        for (rte_mbuf* m : v) rte_pktmbuf_free(m);
    }

    std::vector<rte_ring*> rx_rings, tx_rings;
    std::vector<std::uint16_t> ids;
    unsigned avail_before = 0;
};

// One round of every forwarding lcore, in turn, all on this thread.
void run_round(sw::Switch& s, std::uint64_t now) {
    for (unsigned l = 0; l < s.lcores(); ++l) s.poll_round(l, now);
}

sw::SwitchSnapshot snap(sw::Switch& s, std::uint64_t now) {
    s.publish(now);
    return s.snapshot(now);
}

// Port 1 (towards the learner) shaped to 1 Mbit/s with a 9100 B bucket.
void shape_learner_port(core::SwitchConfig& cfg) {
    cfg.ports[1].shaper.rate_bps = 1'000'000;
    cfg.ports[1].shaper.burst_bytes = 9100;
}

// The learner announces itself on p1; then eight 1400 B fillers from p0 exhaust the shaped port's
// bucket: six leave (6 x 1424 wire bytes), two wait, so whatever follows queues behind them.
void announce_learner_and_fill(Rig& rig, sw::Switch& s, std::uint64_t now, const frame::MacAddr& learner,
                               std::uint32_t learner_ip) {
    rig.inject(1, l2_frame(learner, kBroadcast, 0));
    run_round(s, now);
    Rig::free_all(rig.take(0));
    for (int i = 0; i < 8; ++i)
        rig.inject(0, udp_frame(mac(1), learner, host_ip(1), learner_ip, 9999,
                                std::vector<std::uint8_t>(1400 - frame::kUdpPayloadOffset, 0x11)));
    run_round(s, now);
}

}  // namespace

TEST_CASE("L2 learning, unicast forwarding and flooding", "[dpdk]") {
    const std::uint32_t lcores = GENERATE(1u, 2u);
    INFO("lcores " << lcores);
    Rig rig(3);
    const core::SwitchConfig cfg = rig.config(lcores);
    rig.start(cfg);
    {
        sw::Switch s(cfg, rig.ids, g_pool, kHz);
        REQUIRE(s.lcores() == lcores);
        std::uint64_t now = kHz;

        // A broadcasts on p0: one copy each on p1 and p2, none back on p0; A is learned on p0.
        const auto bcast = l2_frame(mac(0xa), kBroadcast, 1);
        rig.inject(0, bcast);
        run_round(s, now);
        auto p0 = rig.take(0), p1 = rig.take(1), p2 = rig.take(2);
        CHECK(p0.empty());
        REQUIRE(p1.size() == 1);
        REQUIRE(p2.size() == 1);
        CHECK(bytes_of(p1[0]) == bcast);
        CHECK(bytes_of(p2[0]) == bcast);
        CHECK(p1[0] != p2[0]);  // a private copy per port
        Rig::free_all(p1);
        Rig::free_all(p2);

        // B on p1 sends to A: unicast to p0 only; B is learned on p1.
        const auto b_to_a = udp_frame(mac(0xb), mac(0xa), host_ip(0xb), host_ip(0xa), 9999, std::vector<std::uint8_t>(100, 7));
        rig.inject(1, b_to_a);
        run_round(s, ++now);
        p0 = rig.take(0), p1 = rig.take(1), p2 = rig.take(2);
        REQUIRE(p0.size() == 1);
        CHECK(bytes_of(p0[0]) == b_to_a);
        CHECK(p1.empty());
        CHECK(p2.empty());
        Rig::free_all(p0);

        // A to B: p1 only.
        const auto a_to_b = udp_frame(mac(0xa), mac(0xb), host_ip(0xa), host_ip(0xb), 9999, std::vector<std::uint8_t>(80, 3));
        rig.inject(0, a_to_b);
        run_round(s, ++now);
        p0 = rig.take(0), p1 = rig.take(1), p2 = rig.take(2);
        CHECK(p0.empty());
        REQUIRE(p1.size() == 1);
        CHECK(bytes_of(p1[0]) == a_to_b);
        CHECK(p2.empty());
        Rig::free_all(p1);

        // A to an unknown unicast address: flooded to p1 and p2.
        rig.inject(0, l2_frame(mac(0xa), mac(0xc), 2));
        run_round(s, ++now);
        p0 = rig.take(0), p1 = rig.take(1), p2 = rig.take(2);
        CHECK(p0.empty());
        CHECK(p1.size() == 1);
        CHECK(p2.size() == 1);
        Rig::free_all(p1);
        Rig::free_all(p2);

        // B shows up on p0 and sends to A, who lives behind p0: B moves, the frame is filtered.
        rig.inject(0, l2_frame(mac(0xb), mac(0xa), 3));
        run_round(s, ++now);
        CHECK(rig.take(0).empty());
        CHECK(rig.take(1).empty());
        CHECK(rig.take(2).empty());

        const auto st = snap(s, now);
        CHECK(st.ports[0][core::PortCounter::RxPackets] == 4);
        CHECK(st.ports[1][core::PortCounter::RxPackets] == 1);
        CHECK(st.ports[0][core::PortCounter::TxPackets] == 1);
        CHECK(st.ports[1][core::PortCounter::TxPackets] == 3);
        CHECK(st.ports[2][core::PortCounter::TxPackets] == 2);
        CHECK(st.ports[0][core::PortCounter::Flooded] == 2);
        CHECK(st.ports[0][core::PortCounter::Filtered] == 1);
        CHECK(st.fdb.learned == 2);
        CHECK(st.fdb.moved == 1);
        CHECK(st.fdb_size == 2);
        CHECK(st.malformed_total == 0);
        CHECK(st[core::SwitchCounter::NonIp] == 3);
        CHECK(st[core::SwitchCounter::IpOther] == 2);
        CHECK(st[core::SwitchCounter::Shesha] == 0);
    }
    CHECK(rte_mempool_avail_count(g_pool) == rig.avail_before);  // nothing leaked
}

TEST_CASE("frames for an idle unshaped port bypass its empty queue, in order and counted", "[dpdk]") {
    const std::uint32_t lcores = GENERATE(1u, 2u);
    // unshaped: everything bypasses, the GRADIENT too (one class, no version tolerance: the TX
    // batch merges it as the queue would, core/batch_merge.h); shaped: nothing does; tolerant: the
    // GRADIENT's cluster has a version tolerance, so it takes a queue slot and what follows it
    // queues behind it.
    enum Mode { Unshaped, Shaped, Tolerant };
    const Mode mode = GENERATE(Unshaped, Shaped, Tolerant);
    const bool shaped = mode == Shaped;
    INFO("lcores " << lcores << " mode " << mode);
    Rig rig(2);
    core::SwitchConfig cfg = rig.config(lcores);
    if (shaped) {
        cfg.ports[1].shaper.rate_bps = 100'000'000'000;  // never the limit here, but a shaper
        cfg.ports[1].shaper.burst_bytes = 1'000'000;
    }
    if (mode == Tolerant) cfg.clusters[0].version_tolerance = 2;
    rig.start(cfg);
    const frame::MacAddr learner = mac(0x50);
    const std::uint32_t learner_ip = host_ip(0x50);
    {
        sw::Switch s(cfg, rig.ids, g_pool, kHz);
        std::uint64_t now = kHz;
        rig.inject(1, l2_frame(learner, kBroadcast, 0));  // the learner announces itself on p1
        run_round(s, now);
        Rig::free_all(rig.take(0));

        // 40 plain frames: a full 32-frame burst then 8, each leaving in its own round.
        for (int i = 0; i < 40; ++i) rig.inject(0, l2_frame(mac(1), learner, static_cast<std::uint8_t>(i + 1)));
        run_round(s, ++now);
        run_round(s, ++now);
        // Then 3 plain frames, a GRADIENT and 3 more plain frames in one burst.
        for (int i = 0; i < 3; ++i) rig.inject(0, l2_frame(mac(1), learner, static_cast<std::uint8_t>(41 + i)));
        const auto grad = gradient_frame(1, learner, learner_ip, 7, 0);
        rig.inject(0, grad);
        for (int i = 0; i < 3; ++i) rig.inject(0, l2_frame(mac(1), learner, static_cast<std::uint8_t>(44 + i)));
        run_round(s, ++now);

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
        Rig::free_all(out);

        const auto st = snap(s, now);
        const auto& q = st.ports[1].queue;
        CHECK(q.bypassed == (mode == Unshaped ? 47u : mode == Tolerant ? 43u : 0u));
        CHECK(q.enqueued == 47);
        CHECK(q.dequeued == 47);
        CHECK(q.depth_samples == 47);
        CHECK(q.mergeable_arrivals == 1);
        CHECK(q.enqueued_bytes == 46 * 60 + grad.size());
        CHECK(q.dequeued_bytes == q.enqueued_bytes);
        CHECK(st.ports[1].queue_depth == 0);
        CHECK(st.ports[1][core::PortCounter::TxPackets] == 47);
        CHECK(st.ports[1][core::PortCounter::TxBytes] == 46 * 60 + grad.size());
        CHECK(st.ports[1][core::PortCounter::TxContributions] == 1);  // the one GRADIENT; plain frames carry no update
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
        CHECK(sw::stats_to_json(st, cfg).find(fmt::format("\"bypassed\": {}", q.bypassed)) != std::string::npos);
    }
    CHECK(rte_mempool_avail_count(g_pool) == rig.avail_before);  // nothing leaked
}

TEST_CASE("k compatible gradients queued behind a shaped port leave as one exact sum", "[dpdk]") {
    const std::uint32_t lcores = GENERATE(1u, 2u);
    INFO("lcores " << lcores);
    Rig rig(2);
    core::SwitchConfig cfg = rig.config(lcores);
    shape_learner_port(cfg);
    rig.start(cfg);
    const frame::MacAddr learner = mac(0x50);
    const std::uint32_t learner_ip = host_ip(0x50);
    {
        sw::Switch s(cfg, rig.ids, g_pool, kHz);
        std::uint64_t now = kHz;
        announce_learner_and_fill(rig, s, now, learner, learner_ip);
        REQUIRE(snap(s, now).ports[1].queue_depth == 2);

        // Four workers' gradients for the same (cluster, chunk, version), one per round, time frozen.
        constexpr int k = 4;
        std::uint32_t grad_len = 0;
        for (int w = 1; w <= k; ++w) {
            const auto g = gradient_frame(static_cast<std::uint8_t>(w), learner, learner_ip, 7, 2);
            grad_len = static_cast<std::uint32_t>(g.size());
            rig.inject(0, g);
            run_round(s, now);
        }
        auto st = snap(s, now);
        CHECK(st.ports[1].queue_depth == 3);
        CHECK(st.ports[1].queue.mergeable_arrivals == k);
        CHECK(st.ports[1].queue.merged == k - 1);
        CHECK(st.ports[1].queue.bytes_saved == (k - 1) * grad_len);
        CHECK(st[core::SwitchCounter::GradientF32] == k);
        CHECK(st[core::SwitchCounter::Shesha] == k);
        CHECK(st[core::SwitchCounter::IpOther] == 8);

        // Let time pass: everything leaves.
        std::vector<rte_mbuf*> out;
        for (int i = 0; i < 50 && out.size() < 9; ++i) {
            now += kHz / 10;
            run_round(s, now);
            for (rte_mbuf* m : rig.take(1)) out.push_back(m);
        }
        REQUIRE(out.size() == 9);  // 8 fillers + 1 merged gradient
        int gradients = 0;
        for (rte_mbuf* m : out) {
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
        Rig::free_all(out);
        st = snap(s, now);
        CHECK(st.ports[1][core::PortCounter::TxPackets] == 9);
        CHECK(st.ports[1][core::PortCounter::TxContributions] == k);  // the 8 plain frames carry no update
        CHECK(st.ports[1].queue.dequeued == 9);
        CHECK(st.ports[1].merge_ratio == Approx(0.75));
        CHECK(rig.take(0).empty());

        const std::string json = sw::stats_to_json(st, cfg);
        CHECK(json.find("\"schema\": \"shesha-switch-stats/1\"") != std::string::npos);
        CHECK(json.find("\"merged\": 3,") != std::string::npos);
    }
    CHECK(rte_mempool_avail_count(g_pool) == rig.avail_before);
}

TEST_CASE("malformed Shesha messages are counted per reason and forwarded or dropped", "[dpdk]") {
    const bool drop = GENERATE(false, true);
    INFO("drop " << drop);
    Rig rig(2);
    core::SwitchConfig cfg = rig.config();
    cfg.malformed = drop ? core::MalformedAction::Drop : core::MalformedAction::Forward;
    rig.start(cfg);
    {
        sw::Switch s(cfg, rig.ids, g_pool, kHz);
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
        run_round(s, kHz);
        const auto out = rig.take(1);
        if (drop) {
            CHECK(out.empty());
        } else {
            REQUIRE(out.size() == 3);
            for (std::size_t i = 0; i < 3; ++i) CHECK(bytes_of(out[i]) == frames[i]);  // unchanged
        }
        Rig::free_all(out);
        const auto st = snap(s, kHz);
        CHECK(st[core::malformed_counter(proto::DecodeError::BadMagic)] == 1);
        CHECK(st[core::malformed_counter(proto::DecodeError::ShortPacket)] == 1);
        CHECK(st[core::malformed_counter(proto::DecodeError::LengthMismatch)] == 1);
        CHECK(st.malformed_total == 3);
        CHECK(st[core::SwitchCounter::MalformedDropped] == (drop ? 3u : 0u));
        CHECK(st[core::SwitchCounter::Shesha] == 0);
    }
    CHECK(rte_mempool_avail_count(g_pool) == rig.avail_before);
}

TEST_CASE("a gradient from a non-member is never merged", "[dpdk]") {
    const bool drop = GENERATE(false, true);
    INFO("drop " << drop);
    Rig rig(2);
    core::SwitchConfig cfg = rig.config();
    cfg.non_member = drop ? core::NonMemberAction::Drop : core::NonMemberAction::ForwardUnmerged;
    cfg.ports[1].shaper.rate_bps = 1'000'000;
    cfg.ports[1].shaper.burst_bytes = 9100;
    rig.start(cfg);
    {
        sw::Switch s(cfg, rig.ids, g_pool, kHz);
        const frame::MacAddr learner = mac(0x50);
        std::uint64_t now = kHz;
        rig.inject(1, l2_frame(learner, kBroadcast, 0));
        run_round(s, now);
        Rig::free_all(rig.take(0));
        for (int i = 0; i < 8; ++i)
            rig.inject(0, udp_frame(mac(1), learner, host_ip(1), host_ip(0x50), 9999,
                                    std::vector<std::uint8_t>(1400 - frame::kUdpPayloadOffset, 0x22)));
        run_round(s, now);
        // Member worker 1, then host 9 (not on the allow-list) with a compatible gradient.
        rig.inject(0, gradient_frame(1, learner, host_ip(0x50), 7, 1));
        run_round(s, now);
        rig.inject(0, gradient_frame(9, learner, host_ip(0x50), 7, 1));
        run_round(s, now);
        auto st = snap(s, now);
        CHECK(st[core::SwitchCounter::NonMember] == 1);
        CHECK(st[core::SwitchCounter::NonMemberDropped] == (drop ? 1u : 0u));
        CHECK(st.ports[1].queue.merged == 0);
        CHECK(st.ports[1].queue.mergeable_arrivals == 1);
        CHECK(st.ports[1].queue_depth == (drop ? 3u : 4u));

        std::vector<rte_mbuf*> out;
        for (int i = 0; i < 50 && out.size() < (drop ? 9u : 10u); ++i) {
            now += kHz / 10;
            run_round(s, now);
            for (rte_mbuf* m : rig.take(1)) out.push_back(m);
        }
        std::vector<std::uint32_t> workers;
        for (rte_mbuf* m : out) {
            const auto f = bytes_of(m);
            const auto info = frame::classify(f, proto::kDefaultUdpPort);
            if (info.kind != frame::FrameKind::Shesha) continue;
            proto::Message msg;
            REQUIRE(proto::decode({f.data() + info.payload_offset, info.payload_len}, msg) == proto::DecodeError::Ok);
            CHECK(msg.hdr.contrib_count == 1);
            workers.push_back(msg.hdr.worker_id);
        }
        CHECK(workers == (drop ? std::vector<std::uint32_t>{1} : std::vector<std::uint32_t>{1, 9}));
        Rig::free_all(out);
    }
    CHECK(rte_mempool_avail_count(g_pool) == rig.avail_before);
}

TEST_CASE("a marked gradient triggers a rate-limited FEEDBACK to its sender", "[dpdk]") {
    const std::uint32_t lcores = GENERATE(1u, 2u);
    INFO("lcores " << lcores);
    Rig rig(2);
    core::SwitchConfig cfg = rig.config(lcores);
    cfg.feedback = true;
    cfg.feedback_interval_us = 1000;
    cfg.ports[1].shaper.rate_bps = 1'000'000;
    cfg.ports[1].shaper.burst_bytes = 9100;
    cfg.ports[1].marking.depth_packets = 1;  // mark arrivals that find anything waiting
    rig.start(cfg);
    rte_ether_addr p0_mac{};
    REQUIRE(rte_eth_macaddr_get(rig.ids[0], &p0_mac) == 0);
    const frame::MacAddr learner = mac(0x50);
    {
        sw::Switch s(cfg, rig.ids, g_pool, kHz);
        std::uint64_t now = kHz;
        rig.inject(1, l2_frame(learner, kBroadcast, 0));
        run_round(s, now);
        Rig::free_all(rig.take(0));
        for (int i = 0; i < 8; ++i)
            rig.inject(0, udp_frame(mac(1), learner, host_ip(1), host_ip(0x50), 9999,
                                    std::vector<std::uint8_t>(1400 - frame::kUdpPayloadOffset, 0x33)));
        run_round(s, now);
        // Fillers 2..8 found packets waiting and were marked, but they are not gradients: no FEEDBACK.
        REQUIRE(rig.take(0).empty());

        const auto g = gradient_frame(1, learner, host_ip(0x50), 7, 3, 32);
        rig.inject(0, g);
        run_round(s, now);
        auto fb = rig.take(0);
        REQUIRE(fb.size() == 1);
        const auto f = bytes_of(fb[0]);
        Rig::free_all(fb);

        // Ethernet: from p0's MAC back to worker 1.
        CHECK(std::equal(f.begin(), f.begin() + 6, mac(1).begin()));
        CHECK(std::memcmp(f.data() + 6, p0_mac.addr_bytes, 6) == 0);
        // (ring ports cannot change their all-zero MAC, so also check it is not the learner's)
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
        run_round(s, now);
        CHECK(rig.take(0).empty());
        rig.inject(0, gradient_frame(2, learner, host_ip(0x50), 7, 0, 32));
        run_round(s, now);
        fb = rig.take(0);
        REQUIRE(fb.size() == 1);
        CHECK(be::load32(rte_pktmbuf_mtod(fb[0], const std::uint8_t*) + frame::kEthHeaderSize + 16) == host_ip(2));
        Rig::free_all(fb);
        // After the interval, worker 1 hears again.
        now += kHz / 500;  // 2 ms; the shaper sends a little meanwhile, the queue stays congested
        rig.inject(0, gradient_frame(1, learner, host_ip(0x50), 7, 1, 32));
        run_round(s, now);
        fb = rig.take(0);
        CHECK(fb.size() == 1);
        Rig::free_all(fb);

        const auto st = snap(s, now);
        CHECK(st[core::SwitchCounter::FeedbackSent] == 3);
        CHECK(st[core::SwitchCounter::FeedbackSuppressed] == 1);
        CHECK(st[core::SwitchCounter::FeedbackFailed] == 0);
        Rig::free_all(rig.take(1));
    }
    CHECK(rte_mempool_avail_count(g_pool) == rig.avail_before);
}

TEST_CASE("each cluster's share of a port: contributions served, and served while another cluster waited", "[dpdk]") {
    const std::uint32_t lcores = GENERATE(1u, 2u);
    const bool drr = GENERATE(false, true);
    INFO("lcores " << lcores << " drr " << drr);
    Rig rig(2);
    core::SwitchConfig cfg = rig.config(lcores);
    cfg.clusters.push_back({8, true, 0, {}, {host_ip(5), host_ip(6)}});
    if (drr) cfg.scheduling = core::Scheduling::Drr;
    shape_learner_port(cfg);
    rig.start(cfg);
    const frame::MacAddr learner = mac(0x50);
    const std::uint32_t learner_ip = host_ip(0x50);
    {
        sw::Switch s(cfg, rig.ids, g_pool, kHz);
        std::uint64_t now = kHz;
        announce_learner_and_fill(rig, s, now, learner, learner_ip);
        // Behind the two waiting fillers: two chunks of cluster 7, one of cluster 8.
        rig.inject(0, gradient_frame(1, learner, learner_ip, 7, 0));
        rig.inject(0, gradient_frame(2, learner, learner_ip, 7, 1));
        rig.inject(0, gradient_frame(5, learner, learner_ip, 8, 0));
        run_round(s, now);
        std::size_t sent = 0;
        for (int i = 0; i < 50 && sent < 11; ++i) {
            now += kHz / 10;
            run_round(s, now);
            const auto out = rig.take(1);
            sent += out.size();
            Rig::free_all(out);
        }
        REQUIRE(sent == 11);
        const auto st = snap(s, now);
        REQUIRE(st.ports[1].clusters.size() == 2);
        const auto& c7 = st.ports[1].clusters[0];
        const auto& c8 = st.ports[1].clusters[1];
        CHECK(c7.cluster_id == 7);
        CHECK(c8.cluster_id == 8);
        CHECK(c7.served == 2);
        CHECK(c8.served == 1);
        // FIFO: both of cluster 7's leave ahead of cluster 8's. DRR: 7, 8, then 7 alone.
        CHECK(c7.contended == (drr ? 1u : 2u));
        CHECK(c8.contended == (drr ? 1u : 0u));
        // One contribution per packet here, so the packet counts are the same.
        CHECK(c7.served_packets == 2);
        CHECK(c8.served_packets == 1);
        CHECK(c7.contended_packets == c7.contended);
        CHECK(c8.contended_packets == c8.contended);
        CHECK(st.ports[0].clusters.size() == 2);
        CHECK(st.ports[0].clusters[0].served == 0);
        const std::string json = sw::stats_to_json(st, cfg);
        CHECK(json.find(fmt::format("\"contended_contributions\": {}", c7.contended)) != std::string::npos);
        CHECK(json.find(fmt::format("\"contended_packets\": {}", c7.contended_packets)) != std::string::npos);
        const std::string prom = sw::stats_to_prometheus(st, cfg, "tor");
        CHECK(prom.find(fmt::format("shesha_port_cluster_served_contributions_total{{switch=\"tor\",port=\"p1\",cluster=\"7\"}} 2")) !=
              std::string::npos);
        CHECK(prom.find(fmt::format("shesha_port_cluster_served_packets_total{{switch=\"tor\",port=\"p1\",cluster=\"7\"}} 2")) !=
              std::string::npos);
    }
    CHECK(rte_mempool_avail_count(g_pool) == rig.avail_before);
}

TEST_CASE("tx_contributions counts each gradient's contrib_count, merged or not, and nothing for other frames", "[dpdk]") {
    const std::uint32_t lcores = GENERATE(1u, 2u);
    const bool aggregation = GENERATE(false, true);
    INFO("lcores " << lcores << " aggregation " << aggregation);
    Rig rig(2);
    core::SwitchConfig cfg = rig.config(lcores);
    cfg.aggregation = aggregation;
    rig.start(cfg);
    const frame::MacAddr learner = mac(0x50);
    const std::uint32_t learner_ip = host_ip(0x50);
    {
        sw::Switch s(cfg, rig.ids, g_pool, kHz);
        std::uint64_t now = kHz;
        rig.inject(1, l2_frame(learner, kBroadcast, 0));
        run_round(s, now);
        Rig::free_all(rig.take(0));
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
        run_round(s, now);
        run_round(s, now + 1);
        const auto out = rig.take(1);
        CHECK(out.size() == 8);
        Rig::free_all(out);
        const auto st = snap(s, now + 1);
        CHECK(st.ports[1][core::PortCounter::TxPackets] == 8);
        CHECK(st.ports[1][core::PortCounter::TxContributions] == 3 + 2 + 1);
    }
    CHECK(rte_mempool_avail_count(g_pool) == rig.avail_before);
}

TEST_CASE("a MAC@IP member binding refuses a non-member that borrows a member's IP", "[dpdk]") {
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
        sw::Switch s(cfg, rig.ids, g_pool, kHz);
        std::uint64_t now = kHz;
        rig.inject(1, l2_frame(learner, kBroadcast, 0));
        run_round(s, now);
        Rig::free_all(rig.take(0));
        for (int i = 0; i < 8; ++i)
            rig.inject(0, udp_frame(mac(1), learner, host_ip(1), learner_ip, 9999,
                                    std::vector<std::uint8_t>(1400 - frame::kUdpPayloadOffset, 0x22)));
        run_round(s, now);
        REQUIRE(snap(s, now).ports[1].queue_depth == 2);
        // Member 1 (its own MAC and IP), then host 9 sending with member 1's IP, then member 2.
        rig.inject(0, gradient_frame(1, learner, learner_ip, 7, 1));
        run_round(s, now);
        rig.inject(0, udp_frame(mac(9), learner, host_ip(1), learner_ip, proto::kDefaultUdpPort,
                                gradient_payload(gradient_header(7, 1, 9, 64))));
        run_round(s, now);
        rig.inject(0, gradient_frame(2, learner, learner_ip, 7, 1));
        run_round(s, now);
        const auto st = snap(s, now);
        CHECK(st[core::SwitchCounter::NonMember] == 1);
        CHECK(st.ports[1].queue.mergeable_arrivals == 2);
        CHECK(st.ports[1].queue.merged == 1);  // member 2 into member 1, never the borrower
        CHECK(st.ports[1].queue_depth == 4);   // 2 fillers, member 1 (+2), the borrower's
    }
}

TEST_CASE("every received frame ends in exactly one counted fate", "[dpdk]") {
    // Three ports: p0 the workers' side, p1 the learner (shaped, 64-packet queue: merges and tail
    // drops), p2 a host on a small-mtu port (frames too big for it). Malformed frames and
    // non-members are dropped by configuration; a frame to a MAC learned on its own ingress port is
    // filtered; broadcasts flood (one extra copy each with three ports).
    const std::uint32_t lcores = GENERATE(1u, 2u);
    INFO("lcores " << lcores);
    Rig rig(3);
    core::SwitchConfig cfg = rig.config(lcores);
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
        sw::Switch s(cfg, rig.ids, g_pool, kHz);
        rig.inject(1, l2_frame(learner, kBroadcast, 0));  // floods to p0 and p2
        rig.inject(2, l2_frame(host, kBroadcast, 0));     // floods to p0 and p1
        rig.inject(0, l2_frame(mac(1), kBroadcast, 0));   // floods to p1 and p2: mac(1) learned on p0
        run_round(s, now);
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
            run_round(s, now);
            Rig::free_all(rig.take(0));
            Rig::free_all(rig.take(1));
            Rig::free_all(rig.take(2));
        }
        for (int i = 0; i < 200; ++i) {  // let the shaped port drain
            now += kHz / 100;
            run_round(s, now);
            for (std::size_t p = 0; p < 3; ++p) Rig::free_all(rig.take(p));
        }
        const auto st = snap(s, now);
        std::uint64_t received = 0, copies = 0, sent = 0, merged = 0, tail_dropped = 0, filtered = 0, too_big = 0,
                      waiting = 0;
        for (const auto& p : st.ports) {
            received += p[core::PortCounter::RxPackets];
            copies += p[core::PortCounter::Flooded];  // three ports: each flood makes one copy beyond the original
            sent += p[core::PortCounter::TxPackets];
            merged += p.queue.merged;
            tail_dropped += p.queue.dropped;
            filtered += p[core::PortCounter::Filtered];
            too_big += p[core::PortCounter::TxTooBig];
            waiting += p.queue_depth + p.tx_pending;
        }
        // Rounds 4 and 5 send chunks 0 and 1 again under the same (worker, seq): copies, dropped.
        const std::uint64_t copies_dropped = st[core::SwitchCounter::GradientCopiesDropped];
        const std::uint64_t dropped_by_policy = st[core::SwitchCounter::MalformedDropped] +
                                                st[core::SwitchCounter::NonMemberDropped] + copies_dropped;
        INFO("received " << received << " copies " << copies << " sent " << sent << " merged " << merged << " tail "
                         << tail_dropped << " filtered " << filtered << " too_big " << too_big << " policy "
                         << dropped_by_policy << " waiting " << waiting << " clone_failed " << st[core::SwitchCounter::CloneFailed]);
        CHECK(received == 3 + 6 * 20);
        CHECK(merged > 0);
        CHECK(tail_dropped > 0);
        CHECK(too_big == 6);
        CHECK(filtered == 6);
        CHECK(copies_dropped == 2 * 4);
        CHECK(dropped_by_policy == 12 + 8);
        CHECK(st[core::SwitchCounter::CloneFailed] == 0);
        CHECK(waiting == 0);
        CHECK(received + copies == sent + merged + tail_dropped + filtered + too_big + dropped_by_policy);
    }
    CHECK(rte_mempool_avail_count(g_pool) == rig.avail_before);
}

TEST_CASE("MODEL replication: one copy per member, its payload shared by indirect mbufs, none leaked", "[dpdk]") {
    // p0 the learner (host 9), p1..p4 members 1..4, p5 host 5 (not a member). With two lcores,
    // the joins of p1 and p3 arrive on lcore 1 and reach the learner's lcore 0 as peer updates.
    const std::uint32_t lcores = GENERATE(1u, 2u);
    INFO("lcores " << lcores);
    Rig rig(6);
    core::SwitchConfig cfg = rig.config(lcores);
    cfg.clusters[0].model_replication = core::ModelReplicationConfig{kGroup, host_ip(kLearnerHost), 64};
    rig.start(cfg);
    {
        sw::Switch s(cfg, rig.ids, g_pool, kHz);
        std::uint64_t now = kHz;
        for (std::uint8_t w = 1; w <= 4; ++w) rig.inject(w, model_request(w));
        rig.inject(5, model_request(5));  // not a member: refused, still forwarded
        run_round(s, now);
        for (std::size_t p = 0; p < 6; ++p) Rig::free_all(rig.take(p));
        rig.inject(0, l2_frame(mac(kLearnerHost), mac(1), 0x55));
        run_round(s, ++now);
        for (std::size_t p = 0; p < 6; ++p) Rig::free_all(rig.take(p));

        const auto original = group_model();
        const unsigned in_use_before = rte_mempool_in_use_count(g_pool);
        rig.inject(0, original);
        run_round(s, ++now);
        CHECK(rig.take(0).empty());
        CHECK(rig.take(5).empty());
        for (std::uint8_t w = 1; w <= 4; ++w) {
            INFO("worker " << int(w));
            const auto out = rig.take(w);
            REQUIRE(out.size() == 1);
            rte_mbuf* copy = out[0];
            // A private header, chained to an indirect mbuf on the original's data.
            CHECK(copy->nb_segs == 2);
            CHECK(rte_pktmbuf_data_len(copy) == frame::kUdpPayloadOffset + proto::kHeaderSize);
            REQUIRE(copy->next != nullptr);
            CHECK(RTE_MBUF_CLONED(copy->next));
            REQUIRE(rte_pktmbuf_pkt_len(copy) == original.size());
            std::vector<std::uint8_t> bytes(original.size());
            REQUIRE(rte_pktmbuf_read(copy, 0, static_cast<std::uint32_t>(bytes.size()), bytes.data()) != nullptr);
            CHECK(std::equal(bytes.begin(), bytes.begin() + 6, mac(w).begin()));
            const std::uint8_t* ip = bytes.data() + frame::kEthHeaderSize;
            CHECK(be::load32(ip + 16) == host_ip(w));
            CHECK(be::load16(ip + 10) == frame::ipv4_header_checksum(ip, 20));
            CHECK(be::load16(ip + 20 + 2) == worker_port(w));
            CHECK(be::load32(bytes.data() + frame::kUdpPayloadOffset + proto::off::kWorkerId) == 100u + w);
            const std::size_t body = frame::kUdpPayloadOffset + proto::kHeaderSize;
            CHECK(std::equal(bytes.begin() + static_cast<long>(body), bytes.end(), original.begin() + static_cast<long>(body)));
            Rig::free_all(out);
        }
        // The original's data went back with the last copy: the pool holds what it held before.
        CHECK(rte_mempool_in_use_count(g_pool) == in_use_before);

        const auto st = snap(s, now);
        CHECK(st[core::SwitchCounter::ModelJoined] == 4);
        CHECK(st[core::SwitchCounter::ModelJoinRefused] == 1);
        CHECK(st[core::SwitchCounter::ModelReplicated] == 1);
        CHECK(st[core::SwitchCounter::ModelCopies] == 4);
        // The counters reach the stats JSON and the Prometheus text.
        const std::string json = sw::stats_to_json(st, cfg);
        CHECK_THAT(json, Catch::Contains("\"replication\": {\"model_replicated\": 1, \"model_copies\": 4,"));
        CHECK_THAT(sw::stats_to_prometheus(st, cfg, "t"), Catch::Contains("shesha_replication_model_copies_total{switch=\"t\"} 4"));
    }
    CHECK(rte_mempool_avail_count(g_pool) == rig.avail_before);  // nothing leaked
}

TEST_CASE("two lcores: each polls whole ports, merges what it polled, shares the shaper; stats sum the lcores", "[dpdk]") {
    // p0 and p2 belong to lcore 0, p1 (the learner, shaped) and p3 to lcore 1. Workers 1 and 2 send
    // on p0 and p2, workers 3 and 4 on p3.
    Rig rig(4);
    core::SwitchConfig cfg = rig.config(2);
    shape_learner_port(cfg);
    rig.start(cfg);
    const frame::MacAddr learner = mac(0x50);
    const std::uint32_t learner_ip = host_ip(0x50);
    {
        sw::Switch s(cfg, rig.ids, g_pool, kHz);
        REQUIRE(s.lcores() == 2);
        auto ports_of = [&](unsigned l) {
            std::vector<std::uint16_t> ports;
            for (const auto& rq : s.rx_queues_of(l)) {
                CHECK(rq.queue == 0);
                ports.push_back(rq.port);
            }
            return ports;
        };
        CHECK(ports_of(0) == std::vector<std::uint16_t>{0, 2});
        CHECK(ports_of(1) == std::vector<std::uint16_t>{1, 3});
        std::uint64_t now = kHz;
        rig.inject(1, l2_frame(learner, kBroadcast, 0));  // lcore 1 learns the learner; lcore 0 hears of it
        run_round(s, now);
        for (std::size_t p = 0; p < 4; ++p) Rig::free_all(rig.take(p));

        // One bucket for the port, whichever lcore sends: of 4 + 4 fillers from both lcores' ports,
        // 6 leave (6 x 1424 wire bytes fit in 9100 B), not 6 per lcore.
        for (int i = 0; i < 4; ++i) {
            const std::vector<std::uint8_t> body(1400 - frame::kUdpPayloadOffset, 0x11);
            rig.inject(0, udp_frame(mac(1), learner, host_ip(1), learner_ip, 9999, body));
            rig.inject(3, udp_frame(mac(3), learner, host_ip(3), learner_ip, 9999, body));
        }
        run_round(s, now);
        const auto fillers = rig.take(1);
        CHECK(fillers.size() == 6);
        Rig::free_all(fillers);
        CHECK(rig.take(0).empty());  // lcore 0 knew where the learner is: no flood
        CHECK(snap(s, now).ports[1].queue_depth == 2);

        // Gradients of one (cluster, chunk, version): each lcore merges the ones it polled.
        rig.inject(0, gradient_frame(1, learner, learner_ip, 7, 2));
        rig.inject(2, gradient_frame(2, learner, learner_ip, 7, 2));
        rig.inject(3, gradient_frame(3, learner, learner_ip, 7, 2));
        rig.inject(3, gradient_frame(4, learner, learner_ip, 7, 2));
        run_round(s, now);
        std::vector<rte_mbuf*> out;
        for (int i = 0; i < 50 && out.size() < 4; ++i) {
            now += kHz / 10;
            run_round(s, now);
            for (rte_mbuf* m : rig.take(1)) out.push_back(m);
        }
        REQUIRE(out.size() == 4);  // 2 fillers + one merged gradient per lcore
        std::vector<std::pair<std::uint64_t, std::uint64_t>> merged;  // (ts_earliest, ts_latest) of each
        for (rte_mbuf* m : out) {
            const auto f = bytes_of(m);
            const auto info = frame::classify(f, proto::kDefaultUdpPort);
            if (info.kind != frame::FrameKind::Shesha) continue;
            proto::Message msg;
            REQUIRE(proto::decode({f.data() + info.payload_offset, info.payload_len}, msg) == proto::DecodeError::Ok);
            CHECK(msg.hdr.contrib_count == 2);
            std::vector<float> elems(msg.hdr.elem_count);
            std::memcpy(elems.data(), msg.payload.data(), elems.size() * 4);
            CHECK(elems[0] == 2.0f);
            CHECK(pattern::verify(elems.data(), elems.size(), 7, 2, msg.hdr.contrib_count) == pattern::Check::Ok);
            merged.emplace_back(msg.hdr.ts_earliest_ns, msg.hdr.ts_latest_ns);
        }
        std::sort(merged.begin(), merged.end());
        CHECK(merged == std::vector<std::pair<std::uint64_t, std::uint64_t>>{{1001, 1002}, {1003, 1004}});
        Rig::free_all(out);

        // Every table the snapshot shows is the sum of the lcores' own.
        const auto st = snap(s, now);
        core::SwitchCounters sum = s.lcore_counters(0);
        sum += s.lcore_counters(1);
        CHECK(st.counters.values == sum.values);
        CHECK(s.lcore_counters(0)[core::SwitchCounter::GradientF32] == 2);
        CHECK(s.lcore_counters(1)[core::SwitchCounter::GradientF32] == 2);
        CHECK(st[core::SwitchCounter::PeerSyncDropped] == 0);
        CHECK(st.ports[1][core::PortCounter::TxPackets] == 6 + 4);
        CHECK(st.ports[1][core::PortCounter::TxContributions] == 4);
        CHECK(st.ports[1].queue.merged == 2);
        CHECK(st.ports[1].queue.mergeable_arrivals == 4);
        CHECK(st.ports[0][core::PortCounter::RxPackets] == 5);
        CHECK(st.ports[3][core::PortCounter::RxPackets] == 6);
        CHECK(st.fdb_size == 5);  // the learner and workers 1-4, in both lcores' tables
        CHECK(st.lcores == 2);
    }
    CHECK(rte_mempool_avail_count(g_pool) == rig.avail_before);
}

TEST_CASE("two lcores: peer updates lost to a full ring are counted, and the once-a-second export repairs them", "[dpdk]") {
    // p0 and p2 belong to lcore 0, p1 and p3 to lcore 1. 32 stations flap between p0 and p2 while
    // lcore 1 never polls, so its peer ring fills; then they settle on p0, and those updates are lost.
    Rig rig(4);
    core::SwitchConfig cfg = rig.config(2);
    cfg.fdb_capacity = 64;  // a small FDB: its ring has the minimum size
    rig.start(cfg);
    const std::uint32_t ring_usable = sw::Switch::peer_ring_size(cfg) - 1;  // a DPDK ring keeps one free
    REQUIRE(ring_usable == 4095);
    const frame::MacAddr learner = mac(0x50);
    auto station = [](int k) { return frame::MacAddr{0x02, 0, 0, 1, 0, static_cast<std::uint8_t>(k)}; };
    auto free_outputs = [&] {
        for (std::size_t p = 0; p < 4; ++p) Rig::free_all(rig.take(p));
    };
    {
        sw::Switch s(cfg, rig.ids, g_pool, kHz);
        std::uint64_t now = kHz;
        rig.inject(3, l2_frame(learner, kBroadcast, 0));  // both lcores learn the learner (on p3)
        run_round(s, now);
        run_round(s, now);
        free_outputs();

        // Each round of lcore 0 alone: 32 stations on p0, then on p2: 64 moves, 64 peer updates.
        const int rounds = static_cast<int>((ring_usable + 1) / 64);  // the last update of the last round is lost
        for (int r = 0; r < rounds; ++r) {
            for (int k = 0; k < 32; ++k) rig.inject(0, l2_frame(station(k), learner, static_cast<std::uint8_t>(k)));
            for (int k = 0; k < 32; ++k) rig.inject(2, l2_frame(station(k), learner, static_cast<std::uint8_t>(k)));
            s.poll_round(0, now);
            free_outputs();
        }
        // They settle on p0, one tick later: 32 more updates, all lost.
        for (int k = 0; k < 32; ++k) rig.inject(0, l2_frame(station(k), learner, static_cast<std::uint8_t>(k)));
        s.poll_round(0, now + 1);
        free_outputs();
        const std::uint64_t updates = 64ull * rounds + 32;
        CHECK(s.lcore_counters(0)[core::SwitchCounter::PeerSyncDropped] == updates - ring_usable);
        CHECK(s.lcore_counters(1)[core::SwitchCounter::PeerSyncDropped] == 0);
        CHECK(snap(s, now + 1)[core::SwitchCounter::PeerSyncDropped] == updates - ring_usable);

        // Lcore 1 drains its ring (64 a round), then sends one frame to each station from p1.
        auto where_lcore1_sends = [&](std::uint64_t t) {
            std::array<std::size_t, 4> out{};
            for (int k = 0; k < 32; ++k) rig.inject(1, l2_frame(learner, station(k), static_cast<std::uint8_t>(k)));
            s.poll_round(1, t);
            for (std::size_t p = 0; p < 4; ++p) {
                const auto v = rig.take(p);
                out[p] = v.size();
                Rig::free_all(v);
            }
            return out;
        };
        for (unsigned i = 0; i < ring_usable / 64 + 2; ++i) s.poll_round(1, now + 1);
        free_outputs();
        const auto before = where_lcore1_sends(now + 1);
        CHECK(before[0] + before[2] == 32);  // known stations: no flood to p3
        CHECK(before[3] == 0);
        CHECK(before[2] == 31);  // the last kept updates put stations 0-30 on p2 (their last p2 move)
        CHECK(before[0] == 1);   // and station 31 on p0 (its p2 move was the first lost)

        // A second later lcore 0 exports every station it saw since its last export; lcore 1 applies
        // them at the start of its next round.
        run_round(s, now + kHz);
        free_outputs();
        const auto after = where_lcore1_sends(now + kHz);
        CHECK(after[0] == 32);
        CHECK(after[2] == 0);
        CHECK(after[3] == 0);
        CHECK(s.lcore_counters(0)[core::SwitchCounter::PeerSyncDropped] == updates - ring_usable);  // none since
    }
    CHECK(rte_mempool_avail_count(g_pool) == rig.avail_before);  // nothing leaked
}

TEST_CASE("a port with fewer TX queues than lcores is refused, naming lcores and the limit", "[dpdk]") {
    ensure_eal();
    rte_ring* rx = rte_ring_create("one_q_rx", 64, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
    rte_ring* tx = rte_ring_create("one_q_tx", 64, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
    REQUIRE(rx != nullptr);
    REQUIRE(tx != nullptr);
    const int id = rte_eth_from_rings("net_ring_one_q", &rx, 1, &tx, 1, 0);
    REQUIRE(id >= 0);
    core::PortConfig port;
    port.name = "p0";
    port.device = "net_ring_one_q";
    try {
        sw::setup_port(static_cast<std::uint16_t>(id), port, g_pool, 2, 0);
        FAIL("setup_port accepted 2 TX queues on a one-queue port");
    } catch (const sw::InitError& e) {
        const std::string what = e.what();
        CHECK(what.find("lcores: 2 needs 2 TX queues") != std::string::npos);
        CHECK(what.find("offers 1") != std::string::npos);
    }
    rte_eth_dev_close(static_cast<std::uint16_t>(id));
    rte_ring_free(rx);
    rte_ring_free(tx);
}

TEST_CASE("rx_queues above 1 on a PMD without RSS is refused, naming rx_queues and the driver", "[dpdk]") {
    ensure_eal();
    std::array<rte_ring*, 2> rx{}, tx{};
    for (int q = 0; q < 2; ++q) {
        rx[q] = rte_ring_create(fmt::format("norss_rx{}", q).c_str(), 64, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
        tx[q] = rte_ring_create(fmt::format("norss_tx{}", q).c_str(), 64, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
        REQUIRE(rx[q] != nullptr);
        REQUIRE(tx[q] != nullptr);
    }
    const int id = rte_eth_from_rings("net_ring_norss", rx.data(), 2, tx.data(), 2, 0);
    REQUIRE(id >= 0);
    core::PortConfig port;
    port.name = "p0";
    port.device = "net_ring_norss";
    port.rx_queues = 2;
    try {
        sw::setup_port(static_cast<std::uint16_t>(id), port, g_pool, 2, 0);
        FAIL("setup_port accepted rx_queues: 2 without RSS");
    } catch (const sw::InitError& e) {
        const std::string what = e.what();
        CHECK(what.find("rx_queues: 2 needs RSS on IPv4") != std::string::npos);
        CHECK(what.find("net_ring") != std::string::npos);
    }
    rte_eth_dev_close(static_cast<std::uint16_t>(id));
    for (int q = 0; q < 2; ++q) {
        rte_ring_free(rx[q]);
        rte_ring_free(tx[q]);
    }
}

TEST_CASE("two lcores: queue q of every multi-queue port goes to lcore q % 2, single-queue ports go whole", "[dpdk]") {
    // p0 and p1 have two receive queues (as with RSS on the destination address, a learner's
    // traffic reaches the same queue number on every port); p2 has one.
    ensure_eal();
    std::vector<rte_ring*> rings;
    std::vector<std::uint16_t> ids;
    core::SwitchConfig cfg;
    cfg.lcores = 2;
    for (int p = 0; p < 3; ++p) {
        const std::uint16_t rxq = p < 2 ? 2 : 1;
        std::array<rte_ring*, 2> rx{}, tx{};
        for (int q = 0; q < 2; ++q) {
            rx[q] = rte_ring_create(fmt::format("mq{}rx{}", p, q).c_str(), 256, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
            tx[q] = rte_ring_create(fmt::format("mq{}tx{}", p, q).c_str(), 256, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
            REQUIRE(rx[q] != nullptr);
            REQUIRE(tx[q] != nullptr);
            rings.push_back(rx[q]);
            rings.push_back(tx[q]);
        }
        const int id = rte_eth_from_rings(fmt::format("net_ring_mq{}", p).c_str(), rx.data(), rxq, tx.data(), 2, 0);
        REQUIRE(id >= 0);
        ids.push_back(static_cast<std::uint16_t>(id));
        rte_eth_conf conf{};
        REQUIRE(rte_eth_dev_configure(ids.back(), rxq, 2, &conf) == 0);
        for (std::uint16_t q = 0; q < rxq; ++q) REQUIRE(rte_eth_rx_queue_setup(ids.back(), q, 256, 0, nullptr, g_pool) == 0);
        for (std::uint16_t q = 0; q < 2; ++q) REQUIRE(rte_eth_tx_queue_setup(ids.back(), q, 256, 0, nullptr) == 0);
        REQUIRE(rte_eth_dev_start(ids.back()) == 0);
        core::PortConfig pc;
        pc.name = fmt::format("p{}", p);
        pc.device = "net_ring";
        pc.rx_queues = rxq;
        cfg.ports.push_back(pc);
    }
    {
        sw::Switch s(cfg, ids, g_pool, kHz);
        auto queues_of = [&](unsigned l) {
            std::vector<std::pair<int, int>> out;
            for (const auto& rq : s.rx_queues_of(l)) out.emplace_back(rq.port, rq.queue);
            return out;
        };
        CHECK(queues_of(0) == std::vector<std::pair<int, int>>{{0, 0}, {1, 0}, {2, 0}});
        CHECK(queues_of(1) == std::vector<std::pair<int, int>>{{0, 1}, {1, 1}});

        // A frame in p1's queue 1 is lcore 1's: lcore 0's round does not see it.
        REQUIRE(rte_ring_enqueue(rings[2 * 2 + 2], mbuf_from(l2_frame(mac(1), kBroadcast, 1))) == 0);  // p1, rx ring 1
        CHECK(s.poll_round(0, kHz) == 0);
        CHECK(s.poll_round(1, kHz) == 1);
        s.publish(kHz);
        CHECK(s.lcore_counters(1)[core::SwitchCounter::NonIp] == 1);
        CHECK(s.lcore_counters(0)[core::SwitchCounter::NonIp] == 0);
    }
    for (std::uint16_t id : ids) {
        rte_eth_dev_stop(id);
        rte_eth_dev_close(id);
    }
    for (rte_ring* r : rings) {
        void* m;
        while (rte_ring_dequeue(r, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
        rte_ring_free(r);
    }
}

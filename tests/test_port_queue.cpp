// PortQueue: FIFO scheduling is one AggregatingQueue; DRR shares a port's packets among clusters by
// weight, whatever each cluster's packet sizes or merge history; a packet's contributions ride free.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <deque>
#include <span>
#include <vector>

#include "port_queue.h"

using namespace shesha::core;

namespace {

// Arrivals that never merge (distinct chunk keys, mergeable false) and are never marked: only their
// scheduling class, length and contributions matter here.
struct Packets {
    std::deque<std::vector<std::uint8_t>> frames;
    Arrival make(std::uint16_t cluster, std::uint16_t contributions, std::uint32_t len = 200) {
        auto& f = frames.emplace_back(len, 0);
        Arrival a;
        a.handle = f.data();
        a.frame = f.data();
        a.frame_len = len;
        a.contributions = contributions;
        a.cluster_id = cluster;
        a.chunk_index = static_cast<std::uint16_t>(frames.size());
        return a;
    }
};

QueueConfig config(std::uint32_t packets = 256) {
    QueueConfig c;
    c.capacity_packets = packets;
    c.capacity_bytes = 1u << 24;
    return c;
}

// Dequeues n packets and returns, per cluster, the contributions served.
std::vector<std::uint64_t> serve(PortQueue& q, int n, std::uint16_t clusters) {
    std::vector<std::uint64_t> served(clusters + 1, 0);
    for (int i = 0; i < n; ++i) {
        REQUIRE(q.front_len() != 0);
        Departure d;
        REQUIRE(q.dequeue(0, d));
        const std::uint16_t c = *static_cast<std::uint16_t*>(d.handle);
        served[c] += d.contributions;
    }
    return served;
}

}  // namespace

TEST_CASE("FIFO scheduling: one queue, arrival order, every cluster together", "[port_queue]") {
    const std::vector<SchedulingClass> classes{{1, 1}, {2, 1}};
    PortQueue q(config(), Scheduling::Fifo, classes);
    Packets p;
    REQUIRE(q.class_count() == 1);
    for (int i = 0; i < 6; ++i) REQUIRE(q.enqueue(p.make(static_cast<std::uint16_t>(1 + i % 2), 1), 0).status == EnqueueStatus::Queued);
    CHECK(q.depth() == 6);
    for (int i = 0; i < 6; ++i) {
        Departure d;
        REQUIRE(q.dequeue(0, d));
        CHECK(d.handle == p.frames[static_cast<std::size_t>(i)].data());
    }
    CHECK(q.depth() == 0);
}

TEST_CASE("DRR shares packets equally between two backlogged clusters; merged updates ride free", "[port_queue]") {
    const std::vector<SchedulingClass> classes{{1, 1}, {2, 1}};
    PortQueue q(config(), Scheduling::Drr, classes);
    REQUIRE(q.class_count() == 3);
    Packets p;
    // Cluster 1: 80 single updates. Cluster 2: 20 packets of 4 merged updates each.
    for (int i = 0; i < 80; ++i) {
        auto a = p.make(1, 1);
        *reinterpret_cast<std::uint16_t*>(a.frame) = 1;
        REQUIRE(q.enqueue(a, 0).status == EnqueueStatus::Queued);
    }
    for (int i = 0; i < 20; ++i) {
        auto a = p.make(2, 4);
        *reinterpret_cast<std::uint16_t*>(a.frame) = 2;
        REQUIRE(q.enqueue(a, 0).status == EnqueueStatus::Queued);
    }
    CHECK(q.depth() == 100);
    // Each turn one packet of each: cluster 2's 4-update packets cost a turn like any other, so its
    // merges carry 4x the updates through (counting contributions would have given it 1 turn in 5).
    const auto served = serve(q, 25, 2);
    CHECK(served[1] == 13);
    CHECK(served[2] == 48);
    CHECK(q.class_served(q.class_of(1)) == 13);  // packets
    CHECK(q.class_served(q.class_of(2)) == 12);
    // A FIFO port would have sent 25 of cluster 1's packets first: 25 updates to 0.
}

TEST_CASE("DRR weights: 2:1 shares of packets, and an emptied class forfeits its credit", "[port_queue]") {
    const std::vector<SchedulingClass> classes{{1, 2}, {2, 1}};
    PortQueue q(config(), Scheduling::Drr, classes);
    Packets p;
    for (int i = 0; i < 60; ++i) {
        for (std::uint16_t c : {std::uint16_t{1}, std::uint16_t{2}}) {
            auto a = p.make(c, 1);
            *reinterpret_cast<std::uint16_t*>(a.frame) = c;
            REQUIRE(q.enqueue(a, 0).status == EnqueueStatus::Queued);
        }
    }
    const auto served = serve(q, 36, 2);
    CHECK(served[1] == 24);
    CHECK(served[2] == 12);
    // Drain cluster 2 entirely, then new arrivals of cluster 2 start from zero credit.
    const auto rest = serve(q, 120 - 36, 2);
    CHECK(rest[1] + served[1] == 60);
    CHECK(rest[2] + served[2] == 60);
    CHECK(q.depth() == 0);
    CHECK(q.front_len() == 0);
}

TEST_CASE("DRR: other traffic and unknown clusters share the default class; classes are isolated", "[port_queue]") {
    const std::vector<SchedulingClass> classes{{1, 1}, {2, 1}};
    PortQueue q(config(8), Scheduling::Drr, classes);
    Packets p;
    CHECK(q.class_of(1) != 0);
    CHECK(q.class_of(2) != 0);
    CHECK(q.class_of(1) != q.class_of(2));
    CHECK(q.class_of(99) == 0);
    // Non-gradients (no contributions) go to the default class even if they name a cluster.
    CHECK(q.enqueue(p.make(1, 0), 0).status == EnqueueStatus::Queued);
    CHECK(q.class_queue(0).depth() == 1);
    // Cluster 1 fills its own 8 slots and tail-drops; cluster 2 still gets in.
    int drops = 0;
    for (int i = 0; i < 12; ++i) drops += q.enqueue(p.make(1, 1), 0).status == EnqueueStatus::DroppedFull;
    CHECK(drops == 4);
    CHECK(q.enqueue(p.make(2, 1), 0).status == EnqueueStatus::Queued);
    CHECK(q.depth() == 1 + 8 + 1);
    CHECK(q.stats().dropped == 4);
    CHECK(q.stats().enqueued == 10);
}

TEST_CASE("DRR: front_len commits the choice that dequeue takes (the shaper's contract)", "[port_queue]") {
    const std::vector<SchedulingClass> classes{{1, 1}, {2, 1}};
    PortQueue q(config(), Scheduling::Drr, classes);
    Packets p;
    for (int i = 0; i < 10; ++i) {
        REQUIRE(q.enqueue(p.make(1, 1, 100), 0).status == EnqueueStatus::Queued);
        REQUIRE(q.enqueue(p.make(2, 1, 300), 0).status == EnqueueStatus::Queued);
    }
    for (int i = 0; i < 20; ++i) {
        const std::uint32_t len = q.front_len();
        REQUIRE(len == q.front_len());  // asking again changes nothing
        Departure d;
        REQUIRE(q.dequeue(0, d));
        CHECK(d.frame_len == len);
    }
}

// Bounded-lag round robin (fair_lag > 0, docs/queue.md): one packet per class per turn while no
// class is more than fair_lag packets (per unit of weight) ahead of the least-served backlogged one.
namespace {

Arrival tagged(Packets& p, std::uint16_t cluster, std::uint16_t contributions) {
    Arrival a = p.make(cluster, contributions);
    *reinterpret_cast<std::uint16_t*>(a.frame) = cluster;
    return a;
}

std::uint16_t next_cluster(PortQueue& q, std::uint16_t* contributions = nullptr) {
    Departure d;
    REQUIRE(q.dequeue(0, d));
    if (contributions) *contributions = d.contributions;
    return *static_cast<std::uint16_t*>(d.handle);
}

}  // namespace

TEST_CASE("Bounded lag: one packet per class per turn, whatever it carries", "[port_queue]") {
    const std::vector<SchedulingClass> classes{{1, 1}, {2, 1}};
    PortQueue q(config(), Scheduling::Drr, classes, 1, 8);
    CHECK(q.fair_lag() == 8);
    Packets p;
    // The DRR test's workload: cluster 1 sends 80 single updates, cluster 2 20 packets of 4.
    for (int i = 0; i < 80; ++i) REQUIRE(q.enqueue(tagged(p, 1, 1), 0).status == EnqueueStatus::Queued);
    for (int i = 0; i < 20; ++i) REQUIRE(q.enqueue(tagged(p, 2, 4), 0).status == EnqueueStatus::Queued);
    // The classes alternate while both are backlogged: 20 packets each, 20 and 80 updates.
    std::int64_t updates1 = 0, updates2 = 0;
    for (int i = 0; i < 40; ++i) {
        std::uint16_t k = 0;
        const std::uint16_t c = next_cluster(q, &k);
        CHECK(c == (i % 2 == 0 ? 1 : 2));
        (c == 1 ? updates1 : updates2) += k;
    }
    CHECK(updates1 == 20);
    CHECK(updates2 == 80);
    CHECK(q.class_served(q.class_of(1)) == 20);
    CHECK(q.class_served(q.class_of(2)) == 20);
    CHECK(q.class_service(q.class_of(1)) == 20 * PortQueue::kServiceScale);
    CHECK(q.class_service(q.class_of(2)) == 20 * PortQueue::kServiceScale);
    // Then cluster 1 alone.
    while (q.depth() != 0) CHECK(next_cluster(q) == 1);
    CHECK(q.class_served(q.class_of(1)) == 80);
}

TEST_CASE("Bounded lag: 2:1 weights, per unit of weight", "[port_queue]") {
    const std::vector<SchedulingClass> classes{{1, 2}, {2, 1}};
    PortQueue q(config(), Scheduling::Drr, classes, 1, 4);
    Packets p;
    for (int i = 0; i < 60; ++i) {
        REQUIRE(q.enqueue(tagged(p, 1, 1), 0).status == EnqueueStatus::Queued);
        REQUIRE(q.enqueue(tagged(p, 2, 1), 0).status == EnqueueStatus::Queued);
    }
    // Alternate until the weight-1 cluster is 4 packets per weight ahead (10 vs 20/2), then
    // two of cluster 1 per one of cluster 2.
    const auto served = serve(q, 36, 2);
    CHECK(served[1] == 21);
    CHECK(served[2] == 15);
    CHECK(q.class_service(q.class_of(1)) == 21 * (PortQueue::kServiceScale / 2));
    CHECK(q.class_service(q.class_of(2)) == 15 * PortQueue::kServiceScale);
    std::uint64_t total1 = served[1], total2 = served[2];
    for (int i = 0; i < 30; ++i) {
        const std::uint16_t c = next_cluster(q);
        (c == 1 ? total1 : total2) += 1;
    }
    CHECK(total1 == 41);  // 2:1 from here on: 20 and 10 more
    CHECK(total2 == 25);
}

TEST_CASE("Bounded lag: a class that becomes backlogged banks nothing from its idle time", "[port_queue]") {
    const std::vector<SchedulingClass> classes{{1, 1}, {2, 1}};
    PortQueue q(config(), Scheduling::Drr, classes, 1, 2);
    Packets p;
    for (int i = 0; i < 60; ++i) REQUIRE(q.enqueue(tagged(p, 1, 1), 0).status == EnqueueStatus::Queued);
    for (int i = 0; i < 50; ++i) CHECK(next_cluster(q) == 1);
    CHECK(q.class_service(q.class_of(2)) == 0);
    // Cluster 2 arrives: it starts level with cluster 1, not 50 packets behind it.
    for (int i = 0; i < 20; ++i) REQUIRE(q.enqueue(tagged(p, 2, 1), 0).status == EnqueueStatus::Queued);
    CHECK(q.class_service(q.class_of(2)) == 50 * PortQueue::kServiceScale);
    std::vector<std::uint16_t> order;
    for (int i = 0; i < 10; ++i) order.push_back(next_cluster(q));
    CHECK(order == std::vector<std::uint16_t>{2, 1, 2, 1, 2, 1, 2, 1, 2, 1});
    CHECK(q.class_queue(q.class_of(2)).depth() == 15);
}

TEST_CASE("Bounded lag: after the whole port went idle, the class that joins first banks nothing either",
          "[port_queue]") {
    // The verifier's counterexample (tools/verify/examples/regressions/aom-fair-lag-t8.json): cluster
    // 2 is served alone, the port empties, and both come back with cluster 1 first. Before the fix
    // cluster 1 found no backlogged class to be raised to, kept service 0 against cluster 2's 5 and
    // was served 3 packets in a row.
    const std::vector<SchedulingClass> classes{{1, 1}, {2, 1}};
    PortQueue q(config(), Scheduling::Drr, classes, 1, 1);
    Packets p;
    for (int i = 0; i < 5; ++i) REQUIRE(q.enqueue(tagged(p, 2, 1), 0).status == EnqueueStatus::Queued);
    for (int i = 0; i < 5; ++i) CHECK(next_cluster(q) == 2);
    REQUIRE(q.depth() == 0);
    for (int i = 0; i < 4; ++i) {
        REQUIRE(q.enqueue(tagged(p, 1, 1), 0).status == EnqueueStatus::Queued);
        REQUIRE(q.enqueue(tagged(p, 2, 1), 0).status == EnqueueStatus::Queued);
    }
    CHECK(q.class_service(q.class_of(1)) == 5 * PortQueue::kServiceScale);  // raised to the highest service
    std::vector<std::uint16_t> order;
    for (int i = 0; i < 8; ++i) order.push_back(next_cluster(q));
    CHECK(order == std::vector<std::uint16_t>{1, 2, 1, 2, 1, 2, 1, 2});
}

TEST_CASE("Bounded lag: front_len commits the choice; FIFO ignores fair_lag; random workloads keep the bound",
          "[port_queue]") {
    const std::vector<SchedulingClass> classes{{1, 1}, {2, 1}, {3, 1}};
    CHECK(PortQueue(config(), Scheduling::Fifo, classes, 1, 8).fair_lag() == 0);
    CHECK(PortQueue(config(), Scheduling::Drr, classes).fair_lag() == 0);  // DRR is the default
    PortQueue q(config(1024), Scheduling::Drr, classes, 1, 6);
    Packets p;
    std::uint32_t rng = 12345;
    auto next = [&] {
        rng = rng * 1103515245u + 12345u;
        return (rng >> 16) & 0x7FFF;
    };
    std::int64_t served[4] = {0, 0, 0, 0};
    for (int i = 0; i < 300; ++i)
        for (std::uint16_t c = 1; c <= 3; ++c)
            REQUIRE(q.enqueue(tagged(p, c, static_cast<std::uint16_t>(1 + next() % 9)), 0).status == EnqueueStatus::Queued);
    for (int i = 0; i < 600; ++i) {
        const std::uint32_t len = q.front_len();
        REQUIRE(len == q.front_len());
        Departure d;
        REQUIRE(q.dequeue(0, d));
        CHECK(d.frame_len == len);
        served[*static_cast<std::uint16_t*>(d.handle)] += 1;
        // Every class is still backlogged (300 packets each, 600 departures in all), whatever its
        // packets' contributions (1..9).
        for (int a = 1; a <= 3; ++a)
            for (int b = 1; b <= 3; ++b) CHECK(served[a] - served[b] <= 6 + 1);  // fair_lag plus one packet
    }
}

// ---- per-cluster shares (ClusterShare) ---------------------------------------------------------

namespace {

const ClusterShare& share_of(const PortQueue& q, std::uint16_t cluster) {
    for (const ClusterShare& s : q.shares())
        if (s.cluster_id == cluster) return s;
    FAIL("no share for cluster " << cluster);
    static ClusterShare none;
    return none;
}

}  // namespace

TEST_CASE("shares: FIFO counts served and contended contributions per cluster", "[port_queue][shares]") {
    const std::vector<SchedulingClass> classes{{1, 1}, {2, 1}, {3, 2}};
    PortQueue q(config(), Scheduling::Fifo, classes);
    Packets p;
    REQUIRE(q.shares().size() == 3);
    CHECK(share_of(q, 3).weight == 2);
    // Queue: 1(x2) 1(x1) 2(x3) 9(x1, a cluster not configured) and one non-gradient.
    REQUIRE(q.enqueue(p.make(1, 2), 0).status == EnqueueStatus::Queued);
    REQUIRE(q.enqueue(p.make(1, 1), 0).status == EnqueueStatus::Queued);
    REQUIRE(q.enqueue(p.make(2, 3), 0).status == EnqueueStatus::Queued);
    REQUIRE(q.enqueue(p.make(9, 1), 0).status == EnqueueStatus::Queued);
    REQUIRE(q.enqueue(p.make(2, 0), 0).status == EnqueueStatus::Queued);  // contributions 0: not a gradient
    Departure d;
    // Both 1's leave while cluster 2 waits: contended. Then cluster 2 leaves alone: not contended.
    for (int i = 0; i < 5; ++i) REQUIRE(q.dequeue(0, d));
    CHECK(share_of(q, 1).served == 3);
    CHECK(share_of(q, 1).contended == 3);
    CHECK(share_of(q, 1).served_packets == 2);
    CHECK(share_of(q, 1).contended_packets == 2);
    CHECK(share_of(q, 2).served == 3);
    CHECK(share_of(q, 2).contended == 0);
    CHECK(share_of(q, 2).served_packets == 1);
    CHECK(share_of(q, 2).contended_packets == 0);
    CHECK(share_of(q, 3).served == 0);
    CHECK(share_of(q, 3).served_packets == 0);
    CHECK(q.depth() == 0);
}

TEST_CASE("shares: enqueue_burst and dequeue_burst count like single calls, drops never count", "[port_queue][shares]") {
    const std::vector<SchedulingClass> classes{{1, 1}, {2, 1}};
    PortQueue q(config(8), Scheduling::Fifo, classes);
    Packets p;
    // 10 arrivals alternating clusters into 8 slots: the last two are tail drops.
    std::vector<Arrival> burst;
    for (int i = 0; i < 10; ++i) burst.push_back(p.make(static_cast<std::uint16_t>(1 + i % 2), 1));
    std::vector<EnqueueResult> results(burst.size());
    CHECK(q.enqueue_burst(burst.data(), static_cast<std::uint32_t>(burst.size()), 0, results.data()) == 2);
    REQUIRE(q.depth() == 8);
    std::vector<void*> handles(8);
    std::vector<std::uint32_t> lens(8);
    std::vector<std::uint16_t> contrib(8);
    CHECK(q.dequeue_burst(0, handles.data(), lens.data(), contrib.data(), 8) == 8);
    // Order 1 2 1 2 1 2 1 2: every departure but the last finds the other cluster waiting.
    CHECK(share_of(q, 1).served == 4);
    CHECK(share_of(q, 1).contended == 4);
    CHECK(share_of(q, 2).served == 4);
    CHECK(share_of(q, 2).contended == 3);
}

TEST_CASE("shares: DRR gives two backlogged clusters equal contended packets", "[port_queue][shares]") {
    const std::vector<SchedulingClass> classes{{1, 1}, {2, 1}};
    PortQueue q(config(), Scheduling::Drr, classes);
    Packets p;
    // Cluster 1 sends 60 single updates, cluster 2 ten packets of 3 merged updates. FIFO would serve
    // them in arrival order; DRR alternates packets while both wait.
    for (int i = 0; i < 60; ++i) REQUIRE(q.enqueue(p.make(1, 1), 0).status == EnqueueStatus::Queued);
    for (int i = 0; i < 10; ++i) REQUIRE(q.enqueue(p.make(2, 3), 0).status == EnqueueStatus::Queued);
    Departure d;
    while (q.dequeue(0, d)) {
    }
    CHECK(share_of(q, 1).served == 60);
    CHECK(share_of(q, 2).served == 30);
    CHECK(share_of(q, 1).served_packets == 60);
    CHECK(share_of(q, 2).served_packets == 10);
    // While both were backlogged each sent 10 packets (cluster 2's carrying 30 updates, cluster 1's
    // 10); cluster 1's last 50 went alone.
    CHECK(share_of(q, 2).contended_packets == 10);
    CHECK(share_of(q, 1).contended_packets == 10);
    CHECK(share_of(q, 2).contended == 30);
    CHECK(share_of(q, 1).contended == 10);
}

TEST_CASE("shares: not counted with fewer than two clusters", "[port_queue][shares]") {
    const std::vector<SchedulingClass> one{{1, 1}};
    PortQueue q(config(), Scheduling::Fifo, one);
    CHECK(q.shares().empty());
    const std::vector<SchedulingClass> dup{{1, 1}, {1, 2}};
    PortQueue d(config(), Scheduling::Fifo, dup);
    CHECK(d.shares().empty());
}

TEST_CASE("known_empty: only while the queue certainly holds nothing, under FIFO, shares and DRR", "[port_queue]") {
    const std::vector<SchedulingClass> two{{1, 1}, {2, 1}};
    const std::vector<SchedulingClass> one{{1, 1}};
    struct Mode {
        Scheduling scheduling;
        std::span<const SchedulingClass> classes;
    };
    for (const Mode mode : {Mode{Scheduling::Fifo, one}, Mode{Scheduling::Fifo, two}, Mode{Scheduling::Drr, two}}) {
        PortQueue q(config(64), mode.scheduling, mode.classes);
        Packets p;
        void* handles[64];
        std::uint32_t lens[64];
        std::uint16_t contributions[64];
        REQUIRE(q.known_empty());
        REQUIRE(q.dequeue_burst(0, handles, lens, contributions, 8) == 0);
        REQUIRE(q.known_empty());
        q.enqueue(p.make(1, 1), 0);
        REQUIRE_FALSE(q.known_empty());
        q.enqueue(p.make(2, 1), 0);
        // A burst that takes exactly what waits may leave more behind as far as it knows.
        REQUIRE(q.dequeue_burst(0, handles, lens, contributions, 1) == 1);
        REQUIRE_FALSE(q.known_empty());
        REQUIRE(q.dequeue_burst(0, handles, lens, contributions, 1) == 1);
        REQUIRE_FALSE(q.known_empty());
        REQUIRE(q.depth() == 0);
        // Fewer than asked for: empty.
        REQUIRE(q.dequeue_burst(0, handles, lens, contributions, 8) == 0);
        REQUIRE(q.known_empty());
        Arrival burst[3] = {p.make(1, 1), p.make(2, 1), p.make(1, 1)};
        EnqueueResult results[3];
        q.enqueue_burst(burst, 3, 0, results);
        REQUIRE_FALSE(q.known_empty());
        // Single dequeues never claim it (pull mode asks depth()).
        Departure d;
        while (q.dequeue(0, d)) {}
        REQUIRE(q.depth() == 0);
        REQUIRE_FALSE(q.known_empty());
        // Random work: known_empty() implies depth() == 0, and a burst short of max sets it.
        std::srand(7);
        for (int i = 0; i < 2000; ++i) {
            if (std::rand() % 2 == 0) {
                q.enqueue(p.make(static_cast<std::uint16_t>(1 + std::rand() % 3), 1), 0);
                REQUIRE_FALSE(q.known_empty());
            } else {
                const std::uint32_t max = static_cast<std::uint32_t>(std::rand() % 4);
                const bool before = q.known_empty();
                const std::uint32_t got = q.dequeue_burst(0, handles, lens, contributions, max);
                // A burst of 0 learns nothing and leaves the flag as it was.
                REQUIRE(q.known_empty() == (max == 0 ? before : got < max));
            }
            if (q.known_empty()) REQUIRE(q.depth() == 0);
        }
    }
}

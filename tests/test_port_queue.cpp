// PortQueue: FIFO scheduling is one AggregatingQueue; DRR shares a port's updates among clusters by
// weight, counted in contributions, whatever each cluster's packet sizes or merge history.
#include <catch2/catch.hpp>

#include <cstdint>
#include <deque>
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

TEST_CASE("DRR shares contributions equally between two backlogged clusters, merged or not", "[port_queue]") {
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
    // Each turn: 4 single packets of cluster 1, then one 4-update packet of cluster 2.
    const auto served = serve(q, 25, 2);
    CHECK(served[1] == 20);
    CHECK(served[2] == 20);
    CHECK(q.class_served(q.class_of(1)) == 20);
    CHECK(q.class_served(q.class_of(2)) == 20);
    // A FIFO port would have sent 25 of cluster 1's packets first: 25 updates to 0.
}

TEST_CASE("DRR weights: 2:1 shares of contributions, and an emptied class forfeits its credit", "[port_queue]") {
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

// Fdb: learning, moves, static entries, aging, capacity, and deletion that keeps every remaining
// entry reachable (checked against std::map under random churn).
#include <catch2/catch.hpp>

#include <map>
#include <random>

#include "fdb.h"

using namespace shesha::core;

namespace {
Mac mac(std::uint32_t n) {
    // Locally administered unicast, the low bytes vary: many share a prefix like real vendor MACs.
    return Mac{0x02, 0x42, static_cast<std::uint8_t>(n >> 24), static_cast<std::uint8_t>(n >> 16),
               static_cast<std::uint8_t>(n >> 8), static_cast<std::uint8_t>(n)};
}
}  // namespace

TEST_CASE("learn and look up", "[fdb]") {
    Fdb fdb(16, 1000);
    CHECK(fdb.lookup(mac(1), 0) == kNoPort);
    fdb.learn(mac(1), 3, 10);
    fdb.learn(mac(2), 4, 10);
    CHECK(fdb.lookup(mac(1), 20) == 3);
    CHECK(fdb.lookup(mac(2), 20) == 4);
    CHECK(fdb.lookup(mac(3), 20) == kNoPort);
    CHECK(fdb.size() == 2);
    CHECK(fdb.stats().learned == 2);
    fdb.learn(mac(1), 3, 30);  // refresh, same port
    CHECK(fdb.stats().learned == 2);
    CHECK(fdb.stats().moved == 0);
    fdb.learn(mac(1), 5, 40);  // station moved
    CHECK(fdb.lookup(mac(1), 40) == 5);
    CHECK(fdb.stats().moved == 1);
    CHECK(fdb.size() == 2);
}

TEST_CASE("multicast sources are never learned", "[fdb]") {
    Fdb fdb(16, 1000);
    const Mac mc{0x01, 0x00, 0x5E, 0x00, 0x00, 0x01};
    const Mac bcast{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
    CHECK(is_multicast(mc));
    CHECK(is_multicast(bcast));
    CHECK_FALSE(is_multicast(mac(1)));
    fdb.learn(mc, 1, 0);
    fdb.learn(bcast, 1, 0);
    CHECK(fdb.size() == 0);
    CHECK(fdb.stats().learned == 0);
    CHECK(fdb.lookup(mc, 0) == kNoPort);
}

TEST_CASE("static entries never age and are never moved", "[fdb]") {
    Fdb fdb(16, 100);
    REQUIRE(fdb.add_static(mac(7), 2));
    fdb.learn(mac(7), 9, 50);  // learning must not move it
    CHECK(fdb.lookup(mac(7), 50) == 2);
    CHECK(fdb.stats().moved == 0);
    CHECK(fdb.stats().learned == 0);
    CHECK(fdb.lookup(mac(7), 1'000'000) == 2);
    CHECK(fdb.age(1'000'000) == 0);
    CHECK(fdb.size() == 1);
    // A dynamic entry can be pinned as static.
    fdb.learn(mac(8), 1, 0);
    REQUIRE(fdb.add_static(mac(8), 4));
    CHECK(fdb.size() == 2);
    CHECK(fdb.lookup(mac(8), 1'000'000) == 4);
}

TEST_CASE("aged dynamic entries are unknown before and after the sweep", "[fdb]") {
    Fdb fdb(16, 100);
    fdb.learn(mac(1), 1, 0);
    fdb.learn(mac(2), 2, 50);
    CHECK(fdb.lookup(mac(1), 100) == 1);        // exactly the aging time: still known
    CHECK(fdb.lookup(mac(1), 101) == kNoPort);  // older: flood, even before age() runs
    CHECK(fdb.lookup(mac(2), 101) == 2);
    CHECK(fdb.age(101) == 1);
    CHECK(fdb.stats().aged_out == 1);
    CHECK(fdb.size() == 1);
    CHECK(fdb.lookup(mac(2), 150) == 2);
    // Relearning an aged entry that was not swept yet is a new learning, not a move.
    fdb.learn(mac(2), 3, 500);
    CHECK(fdb.stats().moved == 0);
    CHECK(fdb.stats().learned == 3);
    CHECK(fdb.lookup(mac(2), 500) == 3);
}

TEST_CASE("aging 0 means never age", "[fdb]") {
    Fdb fdb(4, 0);
    fdb.learn(mac(1), 1, 0);
    CHECK(fdb.lookup(mac(1), ~std::uint64_t{0}) == 1);
    CHECK(fdb.age(~std::uint64_t{0}) == 0);
}

TEST_CASE("a full table refuses and counts, and has room again after aging", "[fdb]") {
    Fdb fdb(4, 100);
    for (std::uint32_t i = 0; i < 4; ++i) fdb.learn(mac(i), 1, i < 2 ? 0 : 150);
    CHECK(fdb.size() == 4);
    fdb.learn(mac(10), 1, 150);
    CHECK(fdb.stats().table_full == 1);
    CHECK(fdb.lookup(mac(10), 150) == kNoPort);
    CHECK_FALSE(fdb.add_static(mac(11), 1));
    fdb.learn(mac(3), 2, 150);  // known entries still refresh when full
    CHECK(fdb.lookup(mac(3), 150) == 2);
    CHECK(fdb.age(150) == 2);
    fdb.learn(mac(10), 1, 150);
    CHECK(fdb.lookup(mac(10), 150) == 1);
    CHECK(fdb.size() == 3);
    CHECK(fdb.stats().table_full == 1);
}

TEST_CASE("random churn matches a reference map", "[fdb]") {
    // Small table, heavy collisions: deletions must keep every remaining entry reachable.
    constexpr std::size_t kCapacity = 64;
    constexpr std::uint64_t kAging = 50;
    Fdb fdb(kCapacity, kAging);
    struct Ref { std::uint16_t port; std::uint64_t seen; bool is_static; };
    std::map<std::uint32_t, Ref> ref;
    std::mt19937 rng(99);
    std::uint64_t now = 0;
    std::uint64_t table_full = 0, aged = 0;
    for (int step = 0; step < 20000; ++step) {
        now += rng() % 3;
        const std::uint32_t id = rng() % 200;
        const std::uint16_t port = static_cast<std::uint16_t>(rng() % 8);
        const int op = static_cast<int>(rng() % 100);
        if (op < 70) {
            fdb.learn(mac(id), port, now);
            auto it = ref.find(id);
            if (it != ref.end()) {
                if (!it->second.is_static) it->second = {port, now, false};
            } else if (ref.size() < kCapacity) {
                ref[id] = {port, now, false};
            } else {
                ++table_full;
            }
        } else if (op < 71) {
            const bool ok = fdb.add_static(mac(id), port);
            auto it = ref.find(id);
            if (it != ref.end() || ref.size() < kCapacity) {
                REQUIRE(ok);
                ref[id] = {port, 0, true};
            } else {
                REQUIRE_FALSE(ok);
            }
        } else if (op < 80) {
            std::size_t expect = 0;
            for (auto it = ref.begin(); it != ref.end();) {
                if (!it->second.is_static && now - it->second.seen > kAging) {
                    it = ref.erase(it);
                    ++expect;
                } else {
                    ++it;
                }
            }
            REQUIRE(fdb.age(now) == expect);
            aged += expect;
        }
        // Check every id both ways.
        if (step % 50 == 0) {
            for (std::uint32_t q = 0; q < 200; ++q) {
                auto it = ref.find(q);
                std::uint16_t want = kNoPort;
                if (it != ref.end() && (it->second.is_static || now - it->second.seen <= kAging))
                    want = it->second.port;
                REQUIRE(fdb.lookup(mac(q), now) == want);
            }
        }
        REQUIRE(fdb.size() == ref.size());
    }
    CHECK(fdb.stats().table_full == table_full);
    CHECK(fdb.stats().aged_out == aged);
    CHECK(table_full > 0);
    CHECK(aged > 100);
}

TEST_CASE("repeated learns and lookups within one instant stay exact", "[fdb]") {
    // The FDB remembers its learns (one per MAC slot) and its last lookup for the same `now` (a burst). Few stations,
    // a table that fills, frequent same-instant repeats, moves, aging and static entries: every
    // answer and counter must match a model that has no memo.
    constexpr std::size_t kCapacity = 3;
    constexpr std::uint64_t kAging = 4;
    Fdb fdb(kCapacity, kAging);
    struct Ref { std::uint16_t port; std::uint64_t seen; bool is_static; };
    std::map<std::uint32_t, Ref> ref;
    FdbStats want;
    std::mt19937 rng(7);
    std::uint64_t now = 1;
    auto expired = [&](const Ref& r) { return !r.is_static && now > r.seen && now - r.seen > kAging; };
    for (int step = 0; step < 20000; ++step) {
        if (rng() % 8 == 0) now += 1 + rng() % 3;
        const std::uint32_t id = rng() % 5;
        const std::uint16_t port = static_cast<std::uint16_t>(rng() % 3);
        const int op = static_cast<int>(rng() % 100);
        if (op < 50) {
            // learn() says whether repeating it now would change nothing: false only when it counted table_full.
            const bool repeat_is_noop = fdb.learn(mac(id), port, now);
            const std::uint64_t full_before = want.table_full;
            auto it = ref.find(id);
            if (it != ref.end()) {
                if (!it->second.is_static) {
                    if (expired(it->second)) ++want.learned;
                    else if (it->second.port != port) ++want.moved;
                    it->second = {port, now, false};
                }
            } else if (ref.size() < kCapacity) {
                ref[id] = {port, now, false};
                ++want.learned;
            } else {
                ++want.table_full;
            }
            REQUIRE(repeat_is_noop == (want.table_full == full_before));
        } else if (op < 51 && id == 0) {  // one station may become static; the rest keep churning
            if (ref.count(id) != 0 || ref.size() < kCapacity) {
                REQUIRE(fdb.add_static(mac(id), port));
                ref[id] = {port, 0, true};
            }
        } else if (op < 56) {
            std::size_t expect = 0;
            for (auto it = ref.begin(); it != ref.end();) {
                if (expired(it->second)) {
                    it = ref.erase(it);
                    ++expect;
                } else {
                    ++it;
                }
            }
            REQUIRE(fdb.age(now) == expect);
            want.aged_out += expect;
        }
        const std::uint32_t q = rng() % 5;
        auto it = ref.find(q);
        const std::uint16_t expect_port = (it != ref.end() && !expired(it->second)) ? it->second.port : kNoPort;
        REQUIRE(fdb.lookup(mac(q), now) == expect_port);
        REQUIRE(fdb.stats().learned == want.learned);
        REQUIRE(fdb.stats().moved == want.moved);
        REQUIRE(fdb.stats().table_full == want.table_full);
        REQUIRE(fdb.stats().aged_out == want.aged_out);
    }
    CHECK(want.learned > 100);
    CHECK(want.moved > 100);
    CHECK(want.table_full > 100);
    CHECK(want.aged_out > 50);
}

TEST_CASE("peer sync: the journal keeps changes, peers' learns apply newest first, exports refresh", "[fdb]") {
    Fdb a(16, 1000), b(16, 1000);
    a.start_journal();
    b.start_journal();
    auto journal_of = [](Fdb& f) {
        std::vector<std::pair<MacKey, std::uint16_t>> out;
        f.take_journal([&](const FdbLearn& l) { out.emplace_back(l.key, l.port); });
        return out;
    };

    // A new station and a move are journaled; a refresh on the same port is not.
    a.learn(mac(1), 3, 10);
    a.learn(mac(1), 3, 20);
    a.learn(mac(2), 4, 20);
    a.learn(mac(1), 5, 30);
    CHECK(journal_of(a) == std::vector<std::pair<MacKey, std::uint16_t>>{
                               {mac_key(mac(1)), 3}, {mac_key(mac(2)), 4}, {mac_key(mac(1)), 5}});
    CHECK(journal_of(a).empty());  // taken once

    // b applies them: known, counted in no statistic, and not journaled again (no echo).
    b.learn_from_peer(FdbLearn{mac_key(mac(1)), 30, 5});
    b.learn_from_peer(FdbLearn{mac_key(mac(2)), 20, 4});
    CHECK(b.lookup(mac(1), 40) == 5);
    CHECK(b.lookup(mac(2), 40) == 4);
    CHECK(b.size() == 2);
    CHECK(b.stats().learned == 0);
    CHECK(journal_of(b).empty());

    // An older sighting loses to a newer one; static entries ignore peers.
    b.learn(mac(2), 7, 50);  // b saw station 2 itself, later
    b.learn_from_peer(FdbLearn{mac_key(mac(2)), 45, 4});
    CHECK(b.lookup(mac(2), 60) == 7);
    REQUIRE(b.add_static(mac(9), 1));
    b.learn_from_peer(FdbLearn{mac_key(mac(9)), 60, 2});
    CHECK(b.lookup(mac(9), 60) == 1);

    // export_local lists what this FDB saw itself since `since` (not what peers told it).
    std::vector<MacKey> exported;
    b.export_local(40, [&](const FdbLearn& l) { exported.push_back(l.key); });
    CHECK(exported == std::vector<MacKey>{mac_key(mac(2))});
    exported.clear();
    b.export_local(51, [&](const FdbLearn& l) { exported.push_back(l.key); });
    CHECK(exported.empty());

    // A peer-learned entry ages like any other unless refreshed by a later export.
    b.learn_from_peer(FdbLearn{mac_key(mac(1)), 900, 5});  // a refresh from the peer's export
    CHECK(b.age(1500) == 1);  // station 2, last seen at 50
    CHECK(b.lookup(mac(1), 1500) == 5);
    CHECK(b.age(2000) == 1);  // station 1, last seen at 900
    CHECK(b.lookup(mac(9), 2000) == 1);  // static
}

TEST_CASE("peer sync: a journal overflow makes the next export list every local station", "[fdb]") {
    Fdb f(256, 0);
    f.start_journal();
    for (std::uint32_t i = 1; i <= 100; ++i) f.learn(mac(i), 1, 10);
    std::size_t journaled = 0;
    f.take_journal([&](const FdbLearn&) { ++journaled; });
    CHECK(journaled == 64);  // the journal's capacity: the rest overflowed
    std::size_t exported = 0;
    f.export_local(1000, [&](const FdbLearn&) { ++exported; });  // nothing new since 1000, but...
    CHECK(exported == 100);  // ...the overflow asks for all of them once
    exported = 0;
    f.export_local(1000, [&](const FdbLearn&) { ++exported; });
    CHECK(exported == 0);
}

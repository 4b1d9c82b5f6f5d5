// L2 forwarding database: static entries plus MAC learning with aging. Fixed capacity, open
// addressing, no allocation after construction. Single-threaded (owned by the forwarding lcore).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace shesha::core {

using Mac = std::array<std::uint8_t, 6>;

// A MAC as an integer for the data path: its 6 bytes in memory order, little-endian, in the low 48
// bits (two loads from a frame, no byte swaps). Equal MACs have equal keys; 0 is the all-zero MAC.
using MacKey = std::uint64_t;

inline MacKey mac_key(const std::uint8_t* p) noexcept {
    std::uint32_t lo;
    std::uint16_t hi;
    std::memcpy(&lo, p, sizeof lo);
    std::memcpy(&hi, p + 4, sizeof hi);
    return MacKey{lo} | (MacKey{hi} << 32);
}
inline MacKey mac_key(const Mac& m) noexcept { return mac_key(m.data()); }

inline constexpr std::uint16_t kNoPort = 0xFFFF;
inline constexpr MacKey kNoMacKey = ~MacKey{0};  // no MAC's key (keys use the low 48 bits)

// One learn told to the other forwarding lcores' FDBs (see Fdb::start_journal()).
struct FdbLearn {
    MacKey key = 0;
    std::uint64_t seen = 0;  // the learner's `now`; lcores share one clock (the TSC)
    std::uint16_t port = kNoPort;
};

struct FdbStats {
    std::uint64_t learned = 0;     // new dynamic entries
    std::uint64_t moved = 0;       // a known MAC seen on another port
    std::uint64_t aged_out = 0;
    std::uint64_t table_full = 0;  // could not learn: no room
};

class Fdb {
public:
    // aging_ticks == 0: dynamic entries never age.
    Fdb(std::size_t capacity, std::uint64_t aging_ticks);
    // Static entries never age and are never moved by learning. False if the table is full.
    bool add_static(const Mac& mac, std::uint16_t port);
    // Learns (or refreshes) the source MAC of a frame seen on port. Multicast sources are ignored.
    // Returns true when repeating the same learn at the same now would change nothing (no table
    // entry, counter or memo) until the table changes otherwise; false when it would count again
    // (table_full). The pipeline uses this to skip a burst's repeated learns of one sender.
    bool learn(const Mac& mac, std::uint16_t port, std::uint64_t now) noexcept { return learn(mac_key(mac), port, now); }
    bool learn(MacKey mac, std::uint16_t port, std::uint64_t now) noexcept {
        // Same station, same port, same now as its last learn: it would only rewrite last_seen = now.
        const Memo& m = learned_[learn_memo_slot(mac)];
        if (m.valid && m.now == now && m.port == port && m.key == mac) return true;
        return learn_in_table(mac, port, now);
    }
    // Port for a unicast destination, or kNoPort (unknown or aged out: flood).
    std::uint16_t lookup(const Mac& mac, std::uint64_t now) const noexcept { return lookup(mac_key(mac), now); }
    std::uint16_t lookup(MacKey mac, std::uint64_t now) const noexcept {
        if (looked_up_.valid && looked_up_.now == now && looked_up_.key == mac) return looked_up_.port;
        return lookup_in_table(mac, now);
    }
    // Several forwarding lcores each keep an FDB and tell each other what they learn, so a station
    // learned on one lcore's port is known to all. start_journal() makes learn() keep every change
    // (a new station, a move, a relearn after aging) for take_journal(); learn_from_peer() applies
    // another lcore's learn, newest sighting winning; export_local() lists the stations this FDB
    // learned itself and saw since `since`, so peers refresh them before they age (and catch up
    // after a journal overflow, when every local entry is listed). None of these allocate.
    void start_journal() noexcept { journaling_ = true; }
    template <class Sink>
    void take_journal(Sink&& sink) {
        for (std::uint32_t i = 0; i < n_journal_; ++i) sink(journal_[i]);
        n_journal_ = 0;
    }
    void learn_from_peer(const FdbLearn& l) noexcept;
    template <class Sink>
    void export_local(std::uint64_t since, Sink&& sink) {
        const bool all = journal_overflowed_;
        journal_overflowed_ = false;
        for (const Entry& e : table_)
            if (e.used && e.local && !e.is_static && (all || e.last_seen >= since)) sink(FdbLearn{e.key, e.last_seen, e.port});
    }

    // Removes aged dynamic entries; returns how many. Call now and then from the control loop.
    std::size_t age(std::uint64_t now) noexcept;
    std::size_t size() const noexcept;
    const FdbStats& stats() const noexcept;

private:
    // Linear probing with backward-shift deletion (no tombstones, so probe chains never rot).
    struct Entry {
        MacKey key = 0;
        std::uint64_t last_seen = 0;
        std::uint16_t port = kNoPort;
        bool used = false;
        bool is_static = false;
        bool local = true;  // learned from this FDB's own frames, not from a peer's
    };
    // Memos: a burst of frames mostly comes from and goes to the same few stations at the same
    // `now`, and repeating a learn or a lookup of the same MAC at the same now is exact to skip
    // until the table changes (see fdb.cpp for what invalidates them). Learning has one memo per
    // MAC hash slot (direct mapped: a MAC's own learns always land in its slot), so a burst that
    // interleaves a few senders (the workers of a rack) probes the table once per sender.
    struct Memo {
        MacKey key = 0;
        std::uint64_t now = 0;
        std::uint16_t port = kNoPort;
        bool valid = false;
    };
    void forget_memos() noexcept;
    bool learn_in_table(MacKey mac, std::uint16_t port, std::uint64_t now) noexcept;
    std::uint16_t lookup_in_table(MacKey mac, std::uint64_t now) const noexcept;
    std::size_t home_slot(MacKey mac) const noexcept;
    std::size_t find_slot(MacKey mac) const noexcept;  // table_.size() if absent
    void erase_slot(std::size_t slot) noexcept;
    bool expired(const Entry& e, std::uint64_t now) const noexcept;

    std::vector<Entry> table_;  // power-of-two size, at least 2x capacity (load <= 1/2)
    std::size_t capacity_;
    int hash_shift_;            // 64 - log2(table size), for Fibonacci hashing
    std::size_t size_ = 0;
    std::uint64_t aging_ticks_;
    FdbStats stats_;
    static constexpr int kLearnMemoBits = 3;
    static std::size_t learn_memo_slot(MacKey mac) noexcept {
        return static_cast<std::size_t>((mac * 0x9E3779B97F4A7C15ull) >> (64 - kLearnMemoBits));
    }
    std::array<Memo, std::size_t{1} << kLearnMemoBits> learned_{};  // learns that left mac -> port at `now`
    mutable Memo looked_up_;   // last lookup and its answer at `now`
    void journal(MacKey mac, std::uint16_t port, std::uint64_t now) noexcept {
        if (!journaling_) return;
        if (n_journal_ == journal_.size()) {
            journal_overflowed_ = true;
            return;
        }
        journal_[n_journal_++] = FdbLearn{mac, now, port};
    }
    bool journaling_ = false;
    bool journal_overflowed_ = false;
    std::uint32_t n_journal_ = 0;
    std::array<FdbLearn, 64> journal_{};
};

inline bool is_multicast(const Mac& m) noexcept { return (m[0] & 1u) != 0; }
inline bool is_multicast(MacKey k) noexcept { return (k & 1u) != 0; }  // I/G bit of the first byte

}  // namespace shesha::core

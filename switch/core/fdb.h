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

inline constexpr std::uint16_t kNoPort = 0xFFFF;

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
    void learn(const Mac& mac, std::uint16_t port, std::uint64_t now) noexcept {
        // Same station, same port, same now as the last learn: it would only rewrite last_seen = now.
        if (learned_.valid && learned_.now == now && learned_.port == port && same_mac(learned_.mac, mac)) return;
        learn_in_table(mac, port, now);
    }
    // Port for a unicast destination, or kNoPort (unknown or aged out: flood).
    std::uint16_t lookup(const Mac& mac, std::uint64_t now) const noexcept {
        if (looked_up_.valid && looked_up_.now == now && same_mac(looked_up_.mac, mac)) return looked_up_.port;
        return lookup_in_table(mac, now);
    }
    // std::array's == becomes a call to memcmp; two loads and compares do not.
    static bool same_mac(const Mac& a, const Mac& b) noexcept {
        std::uint32_t a4, b4;
        std::uint16_t a2, b2;
        std::memcpy(&a4, a.data(), 4);
        std::memcpy(&b4, b.data(), 4);
        std::memcpy(&a2, a.data() + 4, 2);
        std::memcpy(&b2, b.data() + 4, 2);
        return ((a4 ^ b4) | static_cast<std::uint32_t>(a2 ^ b2)) == 0;
    }
    // Removes aged dynamic entries; returns how many. Call now and then from the control loop.
    std::size_t age(std::uint64_t now) noexcept;
    std::size_t size() const noexcept;
    const FdbStats& stats() const noexcept;

private:
    // Linear probing with backward-shift deletion (no tombstones, so probe chains never rot).
    struct Entry {
        Mac mac{};
        std::uint16_t port = kNoPort;
        bool used = false;
        bool is_static = false;
        std::uint64_t last_seen = 0;
    };
    // One-entry memos: a burst of frames mostly comes from and goes to the same stations at the
    // same `now`, and repeating a learn or a lookup of the same MAC at the same now is exact to
    // skip until the table changes (see fdb.cpp for what invalidates them).
    struct Memo {
        Mac mac{};
        std::uint16_t port = kNoPort;
        bool valid = false;
        std::uint64_t now = 0;
    };
    void forget_memos() noexcept;
    void learn_in_table(const Mac& mac, std::uint16_t port, std::uint64_t now) noexcept;
    std::uint16_t lookup_in_table(const Mac& mac, std::uint64_t now) const noexcept;
    std::size_t home_slot(const Mac& mac) const noexcept;
    std::size_t find_slot(const Mac& mac) const noexcept;  // table_.size() if absent
    void erase_slot(std::size_t slot) noexcept;
    bool expired(const Entry& e, std::uint64_t now) const noexcept;

    std::vector<Entry> table_;  // power-of-two size, at least 2x capacity (load <= 1/2)
    std::size_t capacity_;
    std::size_t size_ = 0;
    std::uint64_t aging_ticks_;
    FdbStats stats_;
    Memo learned_;             // last learn that left mac -> port in the table at `now`
    mutable Memo looked_up_;   // last lookup and its answer at `now`
};

inline bool is_multicast(const Mac& m) noexcept { return (m[0] & 1u) != 0; }

}  // namespace shesha::core

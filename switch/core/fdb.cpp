// L2 forwarding database (see fdb.h): linear probing over a power-of-two table kept at most half
// full, with backward-shift deletion so lookups stay short however many entries age out.
#include "fdb.h"

#include <algorithm>
#include <bit>

namespace shesha::core {

Fdb::Fdb(std::size_t capacity, std::uint64_t aging_ticks)
    : table_(std::bit_ceil(std::max<std::size_t>(capacity * 2, 2))), capacity_(capacity),
      hash_shift_(64 - std::countr_zero(table_.size())), aging_ticks_(aging_ticks) {}

// Any change that can alter which entry a MAC maps to, its port or whether it has expired drops
// both memos. A refresh of an unexpired entry on the same port changes none of that.
void Fdb::forget_memos() noexcept {
    for (Memo& m : learned_) m.valid = false;
    looked_up_.valid = false;
}

std::size_t Fdb::home_slot(MacKey mac) const noexcept {
    // Fibonacci hashing: the top bits of the product depend on every bit of the key, so MACs that
    // share a vendor prefix and differ only in their last bytes still spread.
    return static_cast<std::size_t>((mac * 0x9E3779B97F4A7C15ull) >> hash_shift_);
}

std::size_t Fdb::find_slot(MacKey mac) const noexcept {
    const std::size_t mask = table_.size() - 1;
    for (std::size_t i = home_slot(mac);; i = (i + 1) & mask) {
        const Entry& e = table_[i];
        if (!e.used) return table_.size();
        if (e.key == mac) return i;
    }
}

bool Fdb::expired(const Entry& e, std::uint64_t now) const noexcept {
    return !e.is_static && aging_ticks_ != 0 && now > e.last_seen && now - e.last_seen > aging_ticks_;
}

void Fdb::erase_slot(std::size_t slot) noexcept {
    const std::size_t mask = table_.size() - 1;
    std::size_t hole = slot;
    for (std::size_t j = (hole + 1) & mask;; j = (j + 1) & mask) {
        Entry& e = table_[j];
        if (!e.used) break;
        // e may fill the hole only if the hole lies on its probe path, i.e. cyclically in [home, j).
        const std::size_t home = home_slot(e.key);
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            table_[hole] = e;
            hole = j;
        }
    }
    table_[hole] = Entry{};
    --size_;
    forget_memos();
}

bool Fdb::add_static(const Mac& mac_bytes, std::uint16_t port) {
    forget_memos();
    const MacKey mac = mac_key(mac_bytes);
    const std::size_t found = find_slot(mac);
    if (found != table_.size()) {
        table_[found].port = port;
        table_[found].is_static = true;
        return true;
    }
    if (size_ >= capacity_) return false;
    const std::size_t mask = table_.size() - 1;
    std::size_t i = home_slot(mac);
    while (table_[i].used) i = (i + 1) & mask;
    table_[i] = Entry{mac, 0, port, true, true};
    ++size_;
    return true;
}

bool Fdb::learn_in_table(MacKey mac, std::uint16_t port, std::uint64_t now) noexcept {
    if (is_multicast(mac)) return true;  // a multicast source is bogus; never learn it
    const std::size_t mask = table_.size() - 1;
    std::size_t i = home_slot(mac);
    for (;; i = (i + 1) & mask) {
        Entry& e = table_[i];
        if (!e.used) break;
        if (e.key != mac) continue;
        if (e.is_static) {
            learned_[learn_memo_slot(mac)] = Memo{mac, now, port, true};  // static entries ignore learning: so will repeats
            return true;
        }
        if (expired(e, now)) {
            // Aged but not yet swept: a fresh learning, not a move.
            ++stats_.learned;
            looked_up_.valid = false;
            journal(mac, port, now);
        } else if (e.port != port) {
            ++stats_.moved;
            looked_up_.valid = false;
            journal(mac, port, now);
        }
        e.port = port;
        e.last_seen = now;
        e.local = true;
        learned_[learn_memo_slot(mac)] = Memo{mac, now, port, true};
        return true;
    }
    if (size_ >= capacity_) {
        ++stats_.table_full;
        return false;
    }
    table_[i] = Entry{mac, now, port, true, false};
    ++size_;
    ++stats_.learned;
    looked_up_.valid = false;
    learned_[learn_memo_slot(mac)] = Memo{mac, now, port, true};
    journal(mac, port, now);
    return true;
}

// Counted in no statistic: the peer that saw the station counted it. A station this FDB saw
// itself more recently keeps its entry; a full table keeps what it has (the peer's next export
// retries).
void Fdb::learn_from_peer(const FdbLearn& l) noexcept {
    if (is_multicast(l.key) || l.key == 0) return;
    const std::size_t mask = table_.size() - 1;
    std::size_t i = home_slot(l.key);
    for (;; i = (i + 1) & mask) {
        Entry& e = table_[i];
        if (!e.used) break;
        if (e.key != l.key) continue;
        if (e.is_static || e.last_seen > l.seen) return;
        if (e.port != l.port) forget_memos();
        e.port = l.port;
        e.last_seen = l.seen;
        e.local = false;
        return;
    }
    if (size_ >= capacity_) return;
    table_[i] = Entry{l.key, l.seen, l.port, true, false, false};
    ++size_;
    looked_up_.valid = false;
}

std::uint16_t Fdb::lookup_in_table(MacKey mac, std::uint64_t now) const noexcept {
    const std::size_t i = find_slot(mac);
    const std::uint16_t port = (i == table_.size() || expired(table_[i], now)) ? kNoPort : table_[i].port;
    looked_up_ = Memo{mac, now, port, true};
    return port;
}

std::size_t Fdb::age(std::uint64_t now) noexcept {
    if (size_ == 0) return 0;
    const std::size_t n = table_.size();
    const std::size_t mask = n - 1;
    // Start just after an empty slot so no probe cluster wraps past the start of the sweep: a
    // backward shift then only moves entries into the slot being examined or into slots not yet
    // reached, and every entry is examined.
    std::size_t start = 0;
    while (table_[start].used) ++start;  // exists: load is at most 1/2
    std::size_t removed = 0;
    for (std::size_t k = 1; k <= n; ++k) {
        const std::size_t i = (start + k) & mask;
        while (table_[i].used && expired(table_[i], now)) {
            erase_slot(i);
            ++removed;
        }
    }
    stats_.aged_out += removed;
    return removed;
}

std::size_t Fdb::size() const noexcept { return size_; }

const FdbStats& Fdb::stats() const noexcept { return stats_; }

}  // namespace shesha::core

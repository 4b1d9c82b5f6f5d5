// Merging in the TX batch: GRADIENTs that meet in one forwarding pass at an idle port.
//
// When a port's queue is empty and it has no shaper (so that whatever is queued now leaves in
// this round's transmit()), frames bypass the queue into the TX batch (tx_batch.h). A mergeable
// GRADIENT may bypass too, and a later GRADIENT of the same pass with the same key (cluster,
// chunk, model version) and destination is added into it there instead of entering the queue.
// The result is what the queue would have produced for the same pass: the same packets leave in
// the same order with the same sums, because the queue, empty at the start of the pass, would
// have merged the later GRADIENT into the same earlier one (its newest waiting packet with that
// key) before transmit() drained it. It costs one probe of this small index instead of the
// queue's ring slot, merge index insert, probe and erase.
//
// The index maps a key to the batch position of the newest GRADIENT with that key. It holds at
// most one entry per batch packet (twice as many slots, linear probing), lives for one batch, and
// is emptied in O(1) by a generation count when the batch is sent. No DPDK, no allocation after
// construction.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "merge_frame.h"

namespace shesha::core {

class BatchMergeIndex {
public:
    // What the batch packet a later arrival may merge into looks like.
    struct Leader {
        std::uint8_t* frame = nullptr;  // nullptr: superseded (a newer packet of the key is queued)
        GradientLayout layout;          // 32-bit fields: compared with no partial-register moves
        std::uint32_t tx_index = 0;     // its position in the TX batch
        std::uint32_t l4_offset = 0;
    };

    explicit BatchMergeIndex(std::uint32_t batch_capacity)
        : slots_(std::bit_ceil(std::max<std::uint32_t>(batch_capacity, 1) * 2u)), mask_(slots_.size() - 1) {}

    // The newest batch packet registered under key (merge_key) and dst in this batch, or nullptr. The caller
    // may set its frame to nullptr: the key's newest packet is then no longer in the batch.
    [[gnu::always_inline]] inline Leader* find(std::uint64_t key, std::uint32_t dst) noexcept {
        // The last key put or found: its slot, without hashing (the pair partner of the GRADIENT
        // just before it, typically). A key has one slot per batch, and slots never move.
        if (key == last_key_ && dst == last_dst_ && last_ != nullptr) return last_;
        for (std::uint64_t i = home(key, dst);; i = (i + 1) & mask_) {
            Slot& s = slots_[i];
            if (s.generation != generation_) return nullptr;
            if (s.key == key && s.dst == dst) return remember(key, dst, &s.leader);
        }
    }

    // Makes `leader` the packet for key and dst (replacing an earlier one: the newest packet of a key
    // is the one later arrivals merge into, as in the queue).
    [[gnu::always_inline]] inline void put(std::uint64_t key, std::uint32_t dst, const Leader& leader) noexcept {
        std::uint64_t i = home(key, dst);
        for (;; i = (i + 1) & mask_) {
            Slot& s = slots_[i];
            if (s.generation != generation_) break;
            if (s.key == key && s.dst == dst) {
                s.leader = leader;
                remember(key, dst, &s.leader);
                return;
            }
        }
        slots_[i] = Slot{key, dst, generation_, leader};
        remember(key, dst, &slots_[i].leader);
        ++used_;
    }

    // Forgets every entry (the batch was sent or dropped).
    [[gnu::always_inline]] inline void clear() noexcept {
        if (used_ == 0) return;
        used_ = 0;
        last_ = nullptr;
        if (++generation_ == 0) {  // wrapped: stale slots could look current, so wipe them once
            for (Slot& s : slots_) s.generation = 0;
            generation_ = 1;
        }
    }

    std::uint32_t size() const noexcept { return used_; }
    std::uint32_t slots() const noexcept { return static_cast<std::uint32_t>(slots_.size()); }

private:
    struct Slot {
        std::uint64_t key = 0;
        std::uint32_t dst = 0;
        std::uint32_t generation = 0;  // current only if equal to generation_
        Leader leader;
    };

    [[gnu::always_inline]] inline Leader* remember(std::uint64_t key, std::uint32_t dst, Leader* l) noexcept {
        last_key_ = key;
        last_dst_ = dst;
        last_ = l;
        return l;
    }
    std::uint64_t home(std::uint64_t key, std::uint32_t dst) const noexcept {
        return ((key ^ (std::uint64_t{dst} << 16)) * 0x9E3779B97F4A7C15ull >> 40) & mask_;
    }

    std::vector<Slot> slots_;
    std::uint64_t mask_;
    std::uint32_t generation_ = 1;
    std::uint32_t used_ = 0;
    // The slot of the last key put or found in this batch (nullptr: none).
    std::uint64_t last_key_ = 0;
    std::uint32_t last_dst_ = 0;
    Leader* last_ = nullptr;
};

}  // namespace shesha::core

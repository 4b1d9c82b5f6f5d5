// The aggregating egress queue (see aggregating_queue.h and docs/queue.md).
//
// Data structures, all sized at construction:
//   ring   power-of-two array of Slot, addressed by a 64-bit sequence number (seq & mask);
//          [head, tail) are the packets waiting, in FIFO order. A parallel MergeInfo array holds
//          the merge key of mergeable gradients, so plain packets never touch it.
//   index  open-addressing hash (linear probing, backward-shift deletion) from
//          (cluster, chunk, model_version) to the seq of the newest mergeable gradient waiting
//          with that key. At most one slot per waiting packet and twice as many slots as ring
//          entries, so the load stays <= 1/2 and an insert always finds room.
// A packet leaves the index when it is dequeued (before it is handed out), so nothing is ever
// merged into a packet the caller already owns again.
#include "aggregating_queue.h"

#include <algorithm>
#include <bit>
#include <vector>

#include "frame.h"
#include "merge_frame.h"
#include "protocol.h"

namespace shesha::core {
namespace {

constexpr std::uint32_t kMaxSlots = 1u << 24;
constexpr std::uint32_t kMaxVersionTolerance = 16;

// One ring slot, kept small (40 bytes) because every packet writes it once and reads it once:
// what a plain packet needs lives here, a gradient's merge key lives in a parallel MergeInfo array
// touched only for mergeable packets. Slots are overwritten whole on enqueue, never cleared.
struct Slot {
    void* handle;
    std::uint8_t* frame;
    std::uint64_t enqueued_at;
    std::uint32_t frame_len;
    std::uint16_t contributions;  // current header contrib_count for gradients, 0 otherwise
    std::uint16_t l3_offset;
    std::uint16_t l4_offset;
    std::uint16_t shesha_offset;
    std::uint8_t flags;           // kMergeable | kIndexed | kMarked
    std::uint16_t cluster_id;     // a GRADIENT's cluster (contributions != 0), for per-cluster shares
};
static_assert(sizeof(Slot) <= 40);

constexpr std::uint8_t kMergeable = 1;  // a merge target candidate (valid layout, aggregation on)
constexpr std::uint8_t kIndexed = 2;    // the index maps key(this) to this slot's seq
constexpr std::uint8_t kMarked = 4;     // congestion-marked by this queue (at most once)

struct MergeInfo {
    std::uint32_t dst_ip;
    std::uint32_t model_version;  // current header value (the minimum over its contributions)
    std::uint32_t max_version;    // the newest contribution's version: max - min stays <= tolerance
    std::uint16_t cluster_id;
    std::uint16_t chunk_index;
    std::uint16_t elem_count;
};

// 16 bytes, so the index of a 1,024-packet queue (2,048 slots) takes 32 KB: one probe is one cache line.
struct IndexSlot {
    std::uint64_t key = 0;
    std::uint64_t seq_plus_one = 0;  // 0: free
    bool used() const noexcept { return seq_plus_one != 0; }
    std::uint64_t seq() const noexcept { return seq_plus_one - 1; }
};
static_assert(sizeof(IndexSlot) == 16);

// An arrival flagged mergeable whose offsets do not fit its own frame is treated as not mergeable
// (merge_frame.h).
bool layout_fits(const Arrival& a) noexcept {
    return a.frame != nullptr && gradient_fits(a.shesha_offset, a.elem_count, a.frame_len);
}

}  // namespace

struct AggregatingQueue::Impl {
    QueueConfig cfg;
    std::vector<Slot> ring;
    std::vector<MergeInfo> info;  // parallel to ring; valid where the slot has kMergeable
    std::uint64_t ring_mask;
    std::uint64_t head = 0;  // seq of the oldest waiting packet
    std::uint64_t tail = 0;  // seq the next queued packet gets
    std::uint64_t bytes = 0;
    std::vector<IndexSlot> index;
    std::uint64_t index_mask;
    int index_shift;  // 64 - log2(index size), for Fibonacci hashing
    QueueStats stats;
    // Chunk following: the (cluster, chunk) of the last merged head, and the seq bound of the packets
    // that were waiting when it was at the head (0: no chunk is being followed).
    std::uint16_t follow_cluster = 0;
    std::uint16_t follow_chunk_index = 0;
    std::uint64_t follow_bound = 0;

    explicit Impl(const QueueConfig& c)
        : cfg(c),
          ring(std::bit_ceil(std::clamp<std::uint32_t>(c.capacity_packets, 1, kMaxSlots))),
          info(ring.size()),
          ring_mask(ring.size() - 1),
          index(ring.size() * 2),
          index_mask(index.size() - 1),
          index_shift(64 - std::countr_zero(index.size())) {}

    std::uint32_t depth() const noexcept { return static_cast<std::uint32_t>(tail - head); }
    Slot& at(std::uint64_t seq) noexcept { return ring[seq & ring_mask]; }
    MergeInfo& info_at(std::uint64_t seq) noexcept { return info[seq & ring_mask]; }
    std::uint64_t key_of(std::uint64_t seq) noexcept {
        const MergeInfo& m = info_at(seq);
        return merge_key(m.cluster_id, m.chunk_index, m.model_version);
    }

    // ---- index ----
    std::uint64_t home(std::uint64_t key) const noexcept {
        return (key * 0x9E3779B97F4A7C15ull) >> index_shift;
    }

    // Slot holding key, or index.size() if absent.
    std::size_t index_find(std::uint64_t key) const noexcept {
        for (std::uint64_t i = home(key);; i = (i + 1) & index_mask) {
            const IndexSlot& s = index[i];
            if (!s.used()) return index.size();
            if (s.key == key) return i;
        }
    }

    // Points key at seq; a packet it pointed at before stays queued but is no longer a merge target.
    void index_put(std::uint64_t key, std::uint64_t seq) noexcept {
        std::uint64_t i = home(key);
        for (;; i = (i + 1) & index_mask) {
            IndexSlot& s = index[i];
            if (!s.used()) break;
            if (s.key == key) {
                if (s.seq() >= head && s.seq() < tail) at(s.seq()).flags &= static_cast<std::uint8_t>(~kIndexed);
                s.seq_plus_one = seq + 1;
                return;
            }
        }
        index[i] = IndexSlot{key, seq + 1};
    }

    void index_erase_slot(std::uint64_t slot) noexcept {
        std::uint64_t hole = slot;
        for (std::uint64_t j = (hole + 1) & index_mask;; j = (j + 1) & index_mask) {
            IndexSlot& s = index[j];
            if (!s.used()) break;
            // s may fill the hole only if the hole lies cyclically in [home(s), j).
            if (((j - home(s.key)) & index_mask) >= ((j - hole) & index_mask)) {
                index[hole] = s;
                hole = j;
            }
        }
        index[hole] = IndexSlot{};
    }

    // Removes key -> seq if the key still points at this seq.
    void index_erase(std::uint64_t key, std::uint64_t seq) noexcept {
        const std::size_t slot = index_find(key);
        if (slot != index.size() && index[slot].seq() == seq) index_erase_slot(slot);
    }

    // ---- marking ----
    [[gnu::noinline]] void mark(Slot& e) noexcept {
        if (e.flags & kMarked) return;
        e.flags |= kMarked;
        ++stats.marked;
        if (e.frame == nullptr) return;
        if (e.shesha_offset != 0) {
            std::uint8_t* p = e.frame + e.shesha_offset;
            proto::inplace::set_flags(p, proto::inplace::flags(p) | proto::flag::kCongestionExperienced);
            if (e.l4_offset != 0) clear_udp_checksum_inline(e.frame + e.l4_offset);
        }
        if (cfg.mark_ip_ecn && e.l3_offset != 0 && frame::mark_ecn_ce(e.frame + e.l3_offset)) ++stats.ecn_ce_set;
    }

    // ---- merging ----
    // The waiting packet a may merge into, or UINT64_MAX. refused is set when a waiting packet with a
    // matching key and destination could not take it (layout differs or contributions would overflow).
    // Whether the waiting packet `slot` of the index may take arrival a (see find_target).
    [[gnu::always_inline]] inline bool may_take(std::size_t slot, const Arrival& a, std::uint16_t arriving_contrib,
                                                std::uint32_t tol, bool& refused) noexcept {
        const std::uint64_t seq = index[slot].seq();
        if (seq < head || seq >= tail) return false;  // cannot happen: erased on dequeue
        const Slot& e = at(seq);
        const MergeInfo& m = info_at(seq);
        if (!(e.flags & kMergeable) || m.dst_ip != a.dst_ip) return false;
        // The spread of versions inside one merged packet stays within the tolerance: each
        // arrival is compared with the oldest and the newest contribution, not only with
        // the packet's current (minimum) version, so tolerance 2 never chains 100 to 103.
        if (std::max(m.max_version, a.model_version) - std::min(m.model_version, a.model_version) > tol) return false;
        if (!may_merge({m.elem_count, e.frame_len, e.shesha_offset}, e.contributions,
                       {a.elem_count, a.frame_len, a.shesha_offset}, arriving_contrib)) {
            refused = true;
            return false;
        }
        return true;
    }

    // The waiting packet a may merge into, or UINT64_MAX. refused is set when a waiting packet with a
    // matching key and destination could not take it (layout differs or contributions would overflow).
    [[gnu::always_inline]] inline std::uint64_t find_target(const Arrival& a, std::uint16_t arriving_contrib,
                                                            bool& refused) noexcept {
        const std::uint32_t tol = std::min(a.version_tolerance, kMaxVersionTolerance);
        if (tol == 0) {  // the default: one probe
            const std::size_t slot = index_find(merge_key(a.cluster_id, a.chunk_index, a.model_version));
            return slot != index.size() && may_take(slot, a, arriving_contrib, 0, refused) ? index[slot].seq() : UINT64_MAX;
        }
        return find_target_tolerant(a, arriving_contrib, tol, refused);
    }

    // find_target with a version tolerance: the closest version first (exact, then -1, +1, -2, +2, ...).
    [[gnu::noinline]] std::uint64_t find_target_tolerant(const Arrival& a, std::uint16_t arriving_contrib,
                                                          std::uint32_t tol, bool& refused) noexcept {
        for (std::uint32_t d = 0; d <= tol; ++d) {
            for (int side = 0; side < (d == 0 ? 1 : 2); ++side) {
                std::uint32_t v;
                if (side == 0) {
                    if (a.model_version < d) continue;
                    v = a.model_version - d;
                } else {
                    if (a.model_version > UINT32_MAX - d) continue;
                    v = a.model_version + d;
                }
                const std::size_t slot = index_find(merge_key(a.cluster_id, a.chunk_index, v));
                if (slot != index.size() && may_take(slot, a, arriving_contrib, tol, refused)) return index[slot].seq();
            }
        }
        return UINT64_MAX;
    }

    [[gnu::noinline]] void merge_into(std::uint64_t seq, const Arrival& a, std::uint16_t arriving_contrib) noexcept {
        Slot& e = at(seq);
        MergeInfo& m = info_at(seq);
        std::uint8_t* wp = e.frame + e.shesha_offset;
        e.contributions = static_cast<std::uint16_t>(e.contributions + arriving_contrib);
        merge_gradient_into(wp, a.frame + a.shesha_offset, m.elem_count, e.contributions);
        m.max_version = std::max(m.max_version, a.model_version);
        if (a.model_version < m.model_version) {
            // The merged update is as old as its oldest contribution; re-key it under that version.
            index_erase(merge_key(m.cluster_id, m.chunk_index, m.model_version), seq);
            m.model_version = a.model_version;
            proto::inplace::set_model_version(wp, m.model_version);
            index_put(merge_key(m.cluster_id, m.chunk_index, m.model_version), seq);
            e.flags |= kIndexed;
        }
        if (e.l4_offset != 0) clear_udp_checksum_inline(e.frame + e.l4_offset);
        ++stats.merged;
        stats.bytes_saved += a.frame_len;
    }

    EnqueueResult enqueue(const Arrival& a, std::uint64_t now) noexcept {
        const std::uint32_t d = depth();
        stats.depth_sum += d;
        ++stats.depth_samples;
        if (d > stats.depth_max) stats.depth_max = d;
        const bool mark_now = cfg.mark_depth_packets > 0 && d >= cfg.mark_depth_packets;

        bool can_merge = false;
        std::uint16_t arriving_contrib = a.contributions;
        if (cfg.aggregation && a.mergeable) [[unlikely]] {
            ++stats.mergeable_arrivals;
            can_merge = layout_fits(a);
            if (can_merge) {
                arriving_contrib = proto::inplace::contrib_count(a.frame + a.shesha_offset);
                bool refused = false;
                const std::uint64_t target = find_target(a, arriving_contrib, refused);
                if (target != UINT64_MAX) {
                    merge_into(target, a, arriving_contrib);
                    // The merged packet now carries this arrival's contribution, so it carries its mark too.
                    if (mark_now) mark(at(target));
                    return {EnqueueStatus::Merged, mark_now};
                }
                if (refused) ++stats.merge_refused;
            }
        }

        if (d >= ring.size() || bytes + a.frame_len > cfg.capacity_bytes) [[unlikely]] {
            ++stats.dropped;
            stats.dropped_bytes += a.frame_len;
            return {EnqueueStatus::DroppedFull, false};
        }

        const std::uint64_t seq = tail++;
        Slot& e = at(seq);
        e = Slot{a.handle,       a.frame,       now,
                 a.frame_len,    arriving_contrib, a.l3_offset,
                 a.l4_offset,    a.shesha_offset,  can_merge ? kMergeable : std::uint8_t{0}, a.cluster_id};
        if (can_merge) [[unlikely]] {
            info_at(seq) = MergeInfo{a.dst_ip, a.model_version, a.model_version, a.cluster_id, a.chunk_index, a.elem_count};
            // The newest packet of a key becomes its merge target: it is the one waiting longest from now.
            index_put(merge_key(a.cluster_id, a.chunk_index, a.model_version), seq);
            e.flags |= kIndexed;
        }
        bytes += a.frame_len;
        ++stats.enqueued;
        stats.enqueued_bytes += a.frame_len;
        if (mark_now) mark(e);
        return {EnqueueStatus::Queued, mark_now};
    }

    // The same as enqueue() for each arrival in turn; returns how many results are not "queued,
    // unmarked". The common burst (nothing mergeable, room for all, below the marking depth) is n
    // slot writes with the statistics in closed form: the arrivals find depths d0, d0+1, ...,
    // d0+n-1. Otherwise runs of arrivals that cannot merge take a loop that keeps the ring
    // position and the statistics in locals, and a mergeable arrival goes through enqueue().
    std::uint32_t enqueue_burst(const Arrival* arrivals, std::uint32_t n, std::uint64_t now,
                                EnqueueResult* results) noexcept {
        const std::uint64_t ring_size = ring.size();
        const std::uint64_t capacity_bytes = cfg.capacity_bytes;
        const std::uint32_t mark_depth = cfg.mark_depth_packets;
        const bool aggregation = cfg.aggregation;
        const std::uint64_t d0 = tail - head;
        if (n != 0 && d0 + n <= ring_size && (mark_depth == 0 || d0 + n - 1 < mark_depth)) {
            // Slots [tail, tail + n) are free, so they may be written before the burst is known to fit.
            std::uint64_t sum_len = 0;
            bool any_mergeable = false;
            for (std::uint32_t i = 0; i < n; ++i) {
                const Arrival& a = arrivals[i];
                any_mergeable |= a.mergeable;
                sum_len += a.frame_len;
                ring[(tail + i) & ring_mask] =
                    Slot{a.handle, a.frame, now, a.frame_len, a.contributions, a.l3_offset, a.l4_offset, a.shesha_offset, 0, a.cluster_id};
            }
            if (!(aggregation && any_mergeable) && bytes + sum_len <= capacity_bytes) {
                tail += n;
                bytes += sum_len;
                stats.depth_sum += n * d0 + std::uint64_t{n} * (n - 1) / 2;
                stats.depth_samples += n;
                stats.depth_max = std::max<std::uint64_t>(stats.depth_max, d0 + n - 1);
                stats.enqueued += n;
                stats.enqueued_bytes += sum_len;
                for (std::uint32_t i = 0; i < n; ++i) results[i] = {EnqueueStatus::Queued, false};
                return 0;
            }
        }
        std::uint32_t exceptions = 0;
        std::uint32_t i = 0;
        while (i < n) {
            const std::uint32_t run_start = i;
            const std::uint64_t h = head;
            std::uint64_t t = tail;
            std::uint64_t b = bytes;
            std::uint64_t depth_sum = 0, depth_max = stats.depth_max;
            std::uint64_t queued = 0, queued_bytes = 0, drops = 0, drop_bytes = 0;
            for (; i < n; ++i) {
                const Arrival& a = arrivals[i];
                if (aggregation && a.mergeable) break;
                const std::uint64_t d = t - h;
                depth_sum += d;
                depth_max = std::max(depth_max, d);
                const bool mark_now = mark_depth > 0 && d >= mark_depth;
                if (d >= ring_size || b + a.frame_len > capacity_bytes) [[unlikely]] {
                    ++drops;
                    drop_bytes += a.frame_len;
                    ++exceptions;
                    results[i] = {EnqueueStatus::DroppedFull, false};
                    continue;
                }
                Slot& e = ring[t & ring_mask];
                e = Slot{a.handle, a.frame, now, a.frame_len, a.contributions, a.l3_offset, a.l4_offset, a.shesha_offset, 0, a.cluster_id};
                ++t;
                b += a.frame_len;
                ++queued;
                queued_bytes += a.frame_len;
                if (mark_now) {
                    mark(e);  // touches only e, stats.marked and stats.ecn_ce_set
                    ++exceptions;
                }
                results[i] = {EnqueueStatus::Queued, mark_now};
            }
            tail = t;
            bytes = b;
            stats.depth_sum += depth_sum;
            stats.depth_samples += i - run_start;
            stats.depth_max = depth_max;
            stats.enqueued += queued;
            stats.enqueued_bytes += queued_bytes;
            stats.dropped += drops;
            stats.dropped_bytes += drop_bytes;
            if (i < n) {
                results[i] = enqueue(arrivals[i], now);
                exceptions += results[i].status != EnqueueStatus::Queued || results[i].marked;
                ++i;
            }
        }
        return exceptions;
    }

    // Points key's index entry from seq `from` to seq `to`, if it points at `from`.
    void index_move(std::uint64_t key, std::uint64_t from, std::uint64_t to) noexcept {
        const std::size_t slot = index_find(key);
        if (slot != index.size() && index[slot].seq() == from) index[slot].seq_plus_one = to + 1;
    }

    // Moves the packet at seq to the head; the packets in [head, seq) move one place back, in order.
    void move_to_head(std::uint64_t seq) noexcept {
        const Slot moved = at(seq);
        const MergeInfo moved_info = info_at(seq);
        for (std::uint64_t j = seq; j > head; --j) {
            at(j) = at(j - 1);
            info_at(j) = info_at(j - 1);
            if (at(j).flags & kIndexed) index_move(key_of(j), j - 1, j);
        }
        at(head) = moved;
        info_at(head) = moved_info;
        if (moved.flags & kIndexed) index_move(key_of(head), seq, head);
    }

    bool follow_chunk() noexcept {
        if (head == tail || !(at(head).flags & kMergeable)) return false;
        // The oldest packet of the followed chunk among those waiting when its first packet was chosen.
        const std::uint64_t end = std::min(tail, follow_bound);
        for (std::uint64_t s = head; s < end; ++s) {
            if (!(at(s).flags & kMergeable)) continue;
            const MergeInfo& m = info_at(s);
            if (m.cluster_id != follow_cluster || m.chunk_index != follow_chunk_index) continue;
            if (s == head) return false;  // already at the head (a repeated call)
            move_to_head(s);
            ++stats.followed;
            return true;
        }
        // A head of its own: if it merged, the packets of its chunk waiting now follow it.
        const MergeInfo& h = info_at(head);
        follow_cluster = h.cluster_id;
        follow_chunk_index = h.chunk_index;
        follow_bound = at(head).contributions > 1 ? tail : 0;
        return false;
    }

    // Removes up to max packets from the head, handing each to emit(i, slot, sojourn); statistics
    // are summed locally and stored once.
    template <typename Emit>
    std::uint32_t dequeue_burst(std::uint64_t now, std::uint32_t max, Emit&& emit) noexcept {
        const std::uint32_t n = std::min<std::uint32_t>(max, depth());
        std::uint64_t out_bytes = 0;
        std::uint64_t sojourn_sum = 0;
        std::uint64_t sojourn_max = stats.sojourn_max_ticks;
        const std::uint64_t mark_ticks = cfg.mark_sojourn_ticks;
        for (std::uint32_t i = 0; i < n; ++i) {
            const std::uint64_t seq = head + i;
            Slot& e = at(seq);
            if (e.flags & kIndexed) [[unlikely]] {
                // Leaves the index before it is handed out: nothing merges into it any more.
                index_erase(key_of(seq), seq);
                e.flags &= static_cast<std::uint8_t>(~kIndexed);
            }
            const std::uint64_t sojourn = now > e.enqueued_at ? now - e.enqueued_at : 0;
            if (mark_ticks > 0 && sojourn >= mark_ticks) mark(e);
            emit(i, e, sojourn);
            out_bytes += e.frame_len;
            sojourn_sum += sojourn;
            sojourn_max = std::max(sojourn_max, sojourn);
        }
        head += n;
        // An empty queue has an empty index (every indexed packet leaves it on dequeue), so the
        // sequence numbers can start again at 0: a queue that keeps draining then reuses its first
        // few slots, which stay in L1, instead of sweeping the whole ring through the cache.
        if (head == tail) head = tail = follow_bound = 0;
        bytes -= out_bytes;
        stats.dequeued += n;
        stats.dequeued_bytes += out_bytes;
        stats.sojourn_sum_ticks += sojourn_sum;
        stats.sojourn_max_ticks = sojourn_max;
        return n;
    }
};

AggregatingQueue::AggregatingQueue(const QueueConfig& cfg) : impl_(std::make_unique<Impl>(cfg)) {}

AggregatingQueue::~AggregatingQueue() = default;

EnqueueResult AggregatingQueue::enqueue(const Arrival& a, std::uint64_t now) noexcept {
    return impl_->enqueue(a, now);
}

std::uint32_t AggregatingQueue::enqueue_burst(const Arrival* arrivals, std::uint32_t n, std::uint64_t now,
                                     EnqueueResult* results) noexcept {
    return impl_->enqueue_burst(arrivals, n, now, results);
}

std::uint32_t AggregatingQueue::front_len() const noexcept {
    const Impl& q = *impl_;
    return q.head == q.tail ? 0 : q.ring[q.head & q.ring_mask].frame_len;
}

namespace {
void fill(Departure& d, const Slot& e, std::uint64_t sojourn) noexcept {
    d.handle = e.handle;
    d.frame = e.frame;
    d.frame_len = e.frame_len;
    d.contributions = e.contributions;
    d.cluster_id = e.cluster_id;
    d.sojourn_ticks = sojourn;
    d.marked = (e.flags & kMarked) != 0;
}
}  // namespace

bool AggregatingQueue::follow_chunk() noexcept { return impl_->follow_chunk(); }

bool AggregatingQueue::dequeue(std::uint64_t now, Departure& out) noexcept {
    return impl_->dequeue_burst(now, 1, [&](std::uint32_t, const Slot& e, std::uint64_t sojourn) {
        fill(out, e, sojourn);
    }) == 1;
}

std::uint32_t AggregatingQueue::dequeue_burst(std::uint64_t now, Departure* out, std::uint32_t max) noexcept {
    return impl_->dequeue_burst(now, max, [&](std::uint32_t i, const Slot& e, std::uint64_t sojourn) {
        fill(out[i], e, sojourn);
    });
}

std::uint32_t AggregatingQueue::dequeue_burst(std::uint64_t now, void** handles, std::uint32_t* frame_lens,
                                              std::uint16_t* contributions, std::uint32_t max,
                                              std::uint16_t* clusters) noexcept {
    if (clusters == nullptr)
        return impl_->dequeue_burst(now, max, [&](std::uint32_t i, const Slot& e, std::uint64_t) {
            handles[i] = e.handle;
            frame_lens[i] = e.frame_len;
            contributions[i] = e.contributions;
        });
    return impl_->dequeue_burst(now, max, [&](std::uint32_t i, const Slot& e, std::uint64_t) {
        handles[i] = e.handle;
        frame_lens[i] = e.frame_len;
        contributions[i] = e.contributions;
        clusters[i] = e.cluster_id;
    });
}

void AggregatingQueue::count_bypass(std::uint32_t n, std::uint64_t bytes) noexcept {
    QueueStats& st = impl_->stats;
    st.enqueued += n;
    st.enqueued_bytes += bytes;
    st.depth_samples += n;  // each found depth 0: depth_sum and depth_max unchanged
    st.dequeued += n;
    st.dequeued_bytes += bytes;  // sojourn 0: the sojourn sums unchanged
    st.bypassed += n;
}

void AggregatingQueue::count_batch_merges(const BatchMergeCounts& c) noexcept {
    QueueStats& st = impl_->stats;
    st.mergeable_arrivals += c.mergeable;
    st.merged += c.merged;
    st.bytes_saved += c.merged_bytes;
    st.merge_refused += c.refused;
}

std::uint32_t AggregatingQueue::depth() const noexcept { return impl_->depth(); }

std::uint64_t AggregatingQueue::depth_bytes() const noexcept { return impl_->bytes; }

std::uint32_t AggregatingQueue::capacity() const noexcept { return static_cast<std::uint32_t>(impl_->ring.size()); }

const QueueStats& AggregatingQueue::stats() const noexcept { return impl_->stats; }

const QueueConfig& AggregatingQueue::config() const noexcept { return impl_->cfg; }

void AggregatingQueue::set_aggregation(bool on) noexcept { impl_->cfg.aggregation = on; }

}  // namespace shesha::core

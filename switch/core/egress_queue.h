// Stage 4 of the pipeline, the egress queue: where forwarded frames wait for their port, merge,
// get marked or tail-dropped.
//
// Contract: every frame bound for a port enters that port's PortQueue (aggregating_queue.h,
// port_queue.h) through one of two doors, and every queue sees the same enqueues in the same
// order, at the same instant, as one enqueue() per packet would give:
//   - staged: appended to the port's StagedArrivals during a forwarding pass and entered with one
//     enqueue_burst() by flush_staged() (at the pass's end, or before a GRADIENT that must enter
//     at once);
//   - at once: a GRADIENT whose enqueue may mark it, because FEEDBACK reads the queue's state
//     right after it (enqueue_now()).
// Both keep the port's recent mark fraction (for FEEDBACK), count tail drops, and defer the
// freeing of merged and dropped arrivals to the end of the pass (DeferredFree). An Arrival, the
// queue's view of a frame, is filled in one place: fill_arrival(). Owned by the forwarding thread.
#pragma once

#include <cstdint>
#include <vector>

#include "aggregating_queue.h"
#include "classify.h"
#include "counters.h"
#include "port_queue.h"
#include "switch_config.h"
#include "token_bucket.h"

namespace shesha::core {

inline constexpr std::uint32_t kMaxBurst = 512;       // the config allows up to 512
inline constexpr std::int64_t kMarkEwmaDivisor = 32;  // recent mark fraction: gain 1/32 per arrival

inline std::uint64_t us_to_ticks(std::uint64_t us, std::uint64_t hz) noexcept {
    return static_cast<std::uint64_t>(static_cast<unsigned __int128>(us) * hz / 1'000'000);
}

inline QueueConfig queue_config_from(const SwitchConfig& cfg, const PortConfig& p, std::uint64_t hz) {
    QueueConfig q;
    q.capacity_packets = p.queue_packets;
    q.capacity_bytes = p.queue_bytes;
    q.aggregation = cfg.aggregation;
    q.mark_depth_packets = p.marking.depth_packets;
    q.mark_sojourn_ticks = us_to_ticks(p.marking.sojourn_us, hz);
    q.mark_ip_ecn = p.marking.ip_ecn;
    return q;
}

std::vector<SchedulingClass> scheduling_classes_from(const SwitchConfig& cfg);

// The queue's view of a frame. Offsets and contributions are those classification found, except
// for a malformed frame (forwarded, never parsed further: no ECN mark, no contributions); the
// merge fields only matter for a GRADIENT.
[[gnu::always_inline]] inline void fill_arrival(Arrival& a, void* handle, std::uint8_t* frame, std::uint32_t frame_len,
                                                const PacketMeta& meta, bool mergeable, std::uint32_t tolerance) noexcept {
    a.handle = handle;
    a.frame = frame;
    a.frame_len = frame_len;
    const bool parsed = meta.cls != PacketClass::Malformed;
    a.l3_offset = parsed ? meta.l3_offset : 0;
    a.l4_offset = parsed ? meta.l4_offset : 0;
    a.shesha_offset = parsed ? meta.shesha_offset : 0;
    a.contributions = parsed ? meta.contributions : 0;
    a.mergeable = mergeable;
    if (meta.cls == PacketClass::Gradient) {
        a.cluster_id = meta.cluster_id;
        a.chunk_index = meta.chunk_index;
        a.elem_count = meta.elem_count;
        a.model_version = meta.model_version;
        a.dst_ip = meta.dst_ip;
        a.version_tolerance = tolerance;
    }
}

// One arrival's effect on the recent mark fraction (permille << 10).
[[gnu::always_inline]] inline void update_mark_ewma(std::int64_t& ewma, bool marked) noexcept {
    ewma += ((marked ? (std::int64_t{1000} << 10) : 0) - ewma) / kMarkEwmaDivisor;
}

// Merged arrivals and tail drops, freed in bulk at the end of the forwarding pass.
template <class Io>
class DeferredFree {
public:
    using Handle = typename Io::Handle;
    DeferredFree(Io& io, std::uint32_t capacity) : io_(io), handles_(capacity) {}
    [[gnu::always_inline]] inline void add(Handle m) noexcept {
        if (n_ == handles_.size()) [[unlikely]] flush();
        handles_[n_++] = m;
    }
    void flush() noexcept {
        if (n_ == 0) return;
        io_.free_bulk(handles_.data(), n_);
        n_ = 0;
    }

private:
    Io& io_;
    std::vector<Handle> handles_;
    std::uint32_t n_ = 0;
};

// A port's egress queue state: the queue, its shaper, what waits to enter it, and the marking
// state FEEDBACK reports.
struct EgressQueue {
    EgressQueue(const SwitchConfig& cfg, const PortConfig& pc, std::uint64_t hz, std::uint32_t burst)
        : queue(queue_config_from(cfg, pc, hz), pc.scheduling.value_or(cfg.scheduling), scheduling_classes_from(cfg), 1,
                cfg.fair_lag, cfg.chunk_follow),
          bucket(pc.shaper.rate_bps, pc.shaper.burst_bytes, hz),
          mark_depth(queue.config().mark_depth_packets),
          staged(burst) {}

    PortQueue queue;  // one aggregating queue, or one per cluster under DRR
    TokenBucket bucket;
    const std::uint32_t mark_depth;  // queue.config().mark_depth_packets (0: off), read per arrival
    std::int64_t mark_ewma = 0;      // recent mark fraction, permille << 10 (for FEEDBACK)
    // Arrivals staged during a forwarding pass; nothing stays staged between passes.
    std::vector<Arrival> staged;
    std::uint32_t n_staged = 0;
    bool listed_for_flush = false;  // in the pipeline's list of ports to flush this pass

    // Whether a GRADIENT may be staged like any other arrival instead of entering at once: when
    // its enqueue cannot mark it, because even with every arrival staged ahead of it queued, the
    // depth it finds stays below the marking depth (under DRR the port's total depth bounds its
    // class's). Unmarked, its enqueue has no effect beyond its own packet (no FEEDBACK).
    // `staged_now` is the live count of staged arrivals (a cursor's, when it has this port open).
    [[gnu::always_inline]] inline bool gradient_may_stage(std::uint32_t staged_now) const noexcept {
        return mark_depth == 0 || queue.depth() + staged_now < mark_depth;
    }

    // Enters the staged arrivals into the queue (one enqueue_burst), in order.
    template <class Io>
    void flush_staged(std::uint64_t now, PortCounters& tx, DeferredFree<Io>& to_free, EnqueueResult* results) noexcept {
        const std::uint32_t n = n_staged;
        if (n == 0) return;
        n_staged = 0;
        const std::uint32_t exceptions = queue.enqueue_burst(staged.data(), n, now, results);
        std::int64_t ewma = mark_ewma;
        if (exceptions == 0 && ewma == 0) return;  // all queued, none marked: nothing to free or update
        std::uint64_t drops = 0, lost = 0;
        for (std::uint32_t i = 0; i < n; ++i) {
            if (ewma == 0 && results[i].status == EnqueueStatus::Queued && !results[i].marked) continue;  // nothing changes
            const EnqueueResult r = results[i];
            update_mark_ewma(ewma, r.marked);
            if (r.status != EnqueueStatus::Queued) [[unlikely]] {
                if (r.status == EnqueueStatus::DroppedFull) {
                    ++drops;
                    lost += staged[i].contributions;
                }
                to_free.add(static_cast<typename Io::Handle>(staged[i].handle));
            }
        }
        mark_ewma = ewma;
        if (drops != 0) {
            tx.add(PortCounter::QueueDrops, drops);
            tx.add(PortCounter::TxDroppedContributions, lost);
        }
    }

    // One arrival entered at once, after whatever is staged (a GRADIENT that may be marked). The
    // caller sends FEEDBACK when the result says marked and not dropped.
    template <class Io>
    EnqueueResult enqueue_now(const Arrival& a, std::uint64_t now, PortCounters& tx, DeferredFree<Io>& to_free,
                              EnqueueResult* results) noexcept {
        flush_staged(now, tx, to_free, results);
        const EnqueueResult r = queue.enqueue(a, now);
        update_mark_ewma(mark_ewma, r.marked);
        switch (r.status) {
        case EnqueueStatus::Queued:
            break;
        case EnqueueStatus::Merged:
            to_free.add(static_cast<typename Io::Handle>(a.handle));
            break;
        case EnqueueStatus::DroppedFull:
            tx.add(PortCounter::QueueDrops);
            tx.add(PortCounter::TxDroppedContributions, a.contributions);
            to_free.add(static_cast<typename Io::Handle>(a.handle));
            break;
        }
        return r;
    }
};

}  // namespace shesha::core

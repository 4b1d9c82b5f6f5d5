// The aggregating egress queue: a fixed-capacity FIFO ring of packets plus an index from
// (cluster, chunk, base model version) to the gradient already waiting. A compatible GRADIENT that
// arrives while such a packet waits is added element-wise into it (SIMD, see merge_kernel.h) and
// the caller frees the arrival; the merged packet keeps its place in the ring. Packets handed out
// by dequeue() are never merged into again.
//
// No DPDK here: a packet is an opaque handle plus a pointer to its contiguous frame bytes, so unit
// tests, the simulator and the verifier replay run this same code. Single-threaded: one queue is
// owned by one lcore. No allocation after construction; no exceptions on the data path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace shesha::core {

struct QueueConfig {
    std::uint32_t capacity_packets = 1024;   // rounded up to a power of two internally
    std::uint64_t capacity_bytes = 4u << 20; // frame bytes waiting, tail drop beyond
    bool aggregation = true;                 // false: a plain FIFO (the baseline)
    // ECN-like marking; 0 disables a trigger.
    std::uint32_t mark_depth_packets = 0;    // mark arrivals that find at least this many waiting
    std::uint64_t mark_sojourn_ticks = 0;    // mark departures that waited at least this long
    bool mark_ip_ecn = true;                 // also set IPv4 ECN CE on ECN-capable packets
};

// What the caller's classifier found out about an arriving packet.
struct Arrival {
    void* handle = nullptr;           // owned by the caller (rte_mbuf*, test buffer, ...)
    std::uint8_t* frame = nullptr;    // contiguous frame bytes, Ethernet header first
    std::uint32_t frame_len = 0;
    std::uint16_t contributions = 0;  // updates carried: a GRADIENT's contrib_count, 0 for anything
                                      // else (tx_contributions counts these, merged or not)
    // The fields below matter only when mergeable is true.
    bool mergeable = false;           // a valid fp32 GRADIENT from an allowed member of a cluster
                                      // with aggregation enabled
    std::uint16_t l3_offset = 0;      // IPv4 header (for ECN marking), 0 if not IPv4
    std::uint16_t l4_offset = 0;      // UDP header (checksum cleared when the payload changes)
    std::uint16_t shesha_offset = 0;  // Shesha header, 0 if not a Shesha message
    std::uint16_t cluster_id = 0;
    std::uint16_t chunk_index = 0;
    std::uint16_t elem_count = 0;
    std::uint32_t model_version = 0;
    std::uint32_t dst_ip = 0;         // only packets to the same destination merge
    std::uint32_t version_tolerance = 0;  // merge if |v_waiting - v_arriving| <= this (<= 16)
};

enum class EnqueueStatus : std::uint8_t {
    Queued,       // took its own slot in the ring; the queue now holds the handle
    Merged,       // added into a waiting packet; the caller must free the arrival's handle
    DroppedFull,  // tail drop (packets or bytes); the caller must free the handle
};

struct EnqueueResult {
    EnqueueStatus status = EnqueueStatus::Queued;
    bool marked = false;  // congestion marked on enqueue (depth trigger); for sender feedback
};

struct Departure {
    void* handle = nullptr;
    std::uint8_t* frame = nullptr;
    std::uint32_t frame_len = 0;
    std::uint16_t contributions = 0;  // updates this packet carries (0 for non-gradients)
    std::uint16_t cluster_id = 0;     // its cluster, when contributions != 0
    std::uint64_t sojourn_ticks = 0;
    bool marked = false;              // marked at enqueue or at dequeue
};

struct QueueStats {
    std::uint64_t enqueued = 0;          // took a slot
    std::uint64_t enqueued_bytes = 0;
    std::uint64_t merged = 0;            // arrivals added into a waiting packet
    std::uint64_t bytes_saved = 0;       // frame bytes of merged arrivals (not sent)
    std::uint64_t merge_refused = 0;     // compatible key but could not merge (length, overflow)
    std::uint64_t mergeable_arrivals = 0;
    std::uint64_t dropped = 0;           // tail drops
    std::uint64_t dropped_bytes = 0;
    std::uint64_t dequeued = 0;
    std::uint64_t dequeued_bytes = 0;
    std::uint64_t marked = 0;            // packets marked (each at most once)
    std::uint64_t ecn_ce_set = 0;        // of which IPv4 ECN CE was set
    std::uint64_t depth_max = 0;
    std::uint64_t depth_sum = 0;         // depth seen by each arrival, for the mean
    std::uint64_t depth_samples = 0;
    std::uint64_t sojourn_sum_ticks = 0;
    std::uint64_t sojourn_max_ticks = 0;
    std::uint64_t bypassed = 0;          // of enqueued (and dequeued): found the queue empty and went
                                         // straight to the transmitter without taking a slot
    std::uint64_t followed = 0;          // packets moved to the head by follow_chunk()

    // Adds another queue's (one port's queue on another forwarding lcore): sums, and the larger maxima.
    QueueStats& operator+=(const QueueStats& o) noexcept {
        enqueued += o.enqueued;
        enqueued_bytes += o.enqueued_bytes;
        merged += o.merged;
        bytes_saved += o.bytes_saved;
        merge_refused += o.merge_refused;
        mergeable_arrivals += o.mergeable_arrivals;
        dropped += o.dropped;
        dropped_bytes += o.dropped_bytes;
        dequeued += o.dequeued;
        dequeued_bytes += o.dequeued_bytes;
        marked += o.marked;
        ecn_ce_set += o.ecn_ce_set;
        depth_max = depth_max > o.depth_max ? depth_max : o.depth_max;
        depth_sum += o.depth_sum;
        depth_samples += o.depth_samples;
        sojourn_sum_ticks += o.sojourn_sum_ticks;
        sojourn_max_ticks = sojourn_max_ticks > o.sojourn_max_ticks ? sojourn_max_ticks : o.sojourn_max_ticks;
        bypassed += o.bypassed;
        followed += o.followed;
        return *this;
    }
};
static_assert(sizeof(QueueStats) == 19 * sizeof(std::uint64_t), "operator+= adds every field");

// GRADIENTs that met in one forwarding pass at an idle port and merged in its TX batch instead of
// this queue (batch_merge.h), counted by the queue as its own merges.
struct BatchMergeCounts {
    std::uint32_t mergeable = 0;  // mergeable arrivals that bypassed the queue (merged or not)
    std::uint32_t merged = 0;     // of which were added into an earlier one
    std::uint32_t refused = 0;    // matched a key and destination but could not merge (layout, overflow)
    std::uint64_t merged_bytes = 0;
};

class AggregatingQueue {
public:
    explicit AggregatingQueue(const QueueConfig& cfg);
    ~AggregatingQueue();
    AggregatingQueue(const AggregatingQueue&) = delete;
    AggregatingQueue& operator=(const AggregatingQueue&) = delete;

    EnqueueResult enqueue(const Arrival& a, std::uint64_t now) noexcept;
    // Enqueues arrivals[0..n) in order, exactly as n calls of enqueue(arrivals[i], now) would, and
    // writes each result to results[i]. One call per burst instead of one per packet. Returns how
    // many results are not {Queued, unmarked} (0: the caller has nothing to free or report).
    std::uint32_t enqueue_burst(const Arrival* arrivals, std::uint32_t n, std::uint64_t now,
                                EnqueueResult* results) noexcept;

    // Frame length of the packet at the head (for the shaper), 0 if empty.
    std::uint32_t front_len() const noexcept;
    // Chunk following (PortQueue's chunk_follow, docs/queue.md "Chunk following"): call before each
    // front_len()/dequeue(). When the head is a gradient that carries merged contributions (more than
    // one), the gradients of the same cluster and chunk that are waiting at that moment leave right
    // after it, oldest first, before anything else (the packets they pass keep their order, one place
    // later); otherwise the queue stays FIFO. Returns true if it moved a packet to the head (counted in
    // stats().followed). Calling it again before the next dequeue changes nothing. O(depth) slot reads
    // while a chunk is being followed; no allocation.
    bool follow_chunk() noexcept;
    // Removes the head; false if empty. Marks it if its sojourn exceeds the threshold.
    bool dequeue(std::uint64_t now, Departure& out) noexcept;
    // Removes up to max packets from the head into out[0..n) and returns n: the same as n calls of
    // dequeue(now, ...), with the statistics summed once per burst. For a port with no shaper.
    std::uint32_t dequeue_burst(std::uint64_t now, Departure* out, std::uint32_t max) noexcept;
    // The same, writing only what a transmitter needs into three arrays (handles for the NIC, lengths
    // and contribution counts for its counters), and each packet's cluster if clusters is not null.
    std::uint32_t dequeue_burst(std::uint64_t now, void** handles, std::uint32_t* frame_lens,
                                std::uint16_t* contributions, std::uint32_t max,
                                std::uint16_t* clusters = nullptr) noexcept;

    // Counts n arrivals of `bytes` frame bytes in total that found this queue empty and went
    // straight to the caller's transmit batch (never mergeable, never marked: nothing waited ahead
    // of them): each as enqueued at depth 0 and dequeued at once with sojourn 0, and as bypassed.
    // The caller checks depth() == 0 first and keeps the packets in FIFO order ahead of anything
    // enqueued after them.
    void count_bypass(std::uint32_t n, std::uint64_t bytes) noexcept;
    // Counts merges made in the TX batch among packets counted by count_bypass (batch_merge.h):
    // mergeable_arrivals, merged, bytes_saved and merge_refused, as enqueue() would have.
    void count_batch_merges(const BatchMergeCounts& c) noexcept;

    std::uint32_t depth() const noexcept;        // packets waiting
    std::uint64_t depth_bytes() const noexcept;
    std::uint32_t capacity() const noexcept;     // slots (power of two)
    const QueueStats& stats() const noexcept;
    const QueueConfig& config() const noexcept;
    void set_aggregation(bool on) noexcept;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace shesha::core

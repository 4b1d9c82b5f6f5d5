// A switch port's egress queue: one AggregatingQueue (FIFO scheduling, the default), or one per
// configured cluster plus one for everything else, served by deficit round robin in packets
// (scheduling: drr). With DRR, k backlogged clusters on a port each get their configured share of
// the port's packets, whatever their window history: a cluster cut early by marks cannot be crowded
// out by one that kept a big window, and a cluster whose packets carry more contributions (merged
// in the network or at its senders) gets those through on top of its share instead of paying for
// them in turns. Counting contributions instead starved whichever cluster fell behind: its senders
// merged more, so each of its packets cost more turns, so it fell further behind (docs/queue.md).
//
// With fair_lag L > 0 (off by default) the classes take turns one packet at a time instead
// (bounded-lag round robin): the next backlogged class in turn sends its head unless its packets
// served per unit of weight already exceed the least-served backlogged class's by more than L, and
// a class that becomes backlogged starts no lower than the least-served backlogged class. Shares
// stay fair in packets within L plus one packet (docs/queue.md, "Bounded lag").
//
// With chunk_follow (off by default, DRR only) each cluster's class queue follows chunks: after a
// head that carries merged contributions, the packets of the same chunk that were waiting behind it
// (newer model versions) leave next, before the class's other packets (AggregatingQueue::
// follow_chunk, docs/queue.md "Chunk following"). Which class sends, and the shares, do not change.
//
// The class queues are real AggregatingQueues: merging happens inside a class (merges never cross
// clusters anyway), and each class has the port's capacity and marking depth, so one cluster's
// backlog neither fills the others' buffer nor marks their arrivals. Single-threaded, no
// allocation after construction, as AggregatingQueue.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "aggregating_queue.h"

namespace shesha::core {

enum class Scheduling : std::uint8_t { Fifo, Drr };

struct SchedulingClass {
    std::uint16_t cluster_id = 0;
    std::uint32_t weight = 1;  // share of contributions relative to the other classes
};

// What one cluster got from a port, under any scheduling, counted once two or more clusters are
// configured. `contended` is the part of `served` sent while at least two of the clusters had
// packets waiting here: a fair share is about those moments, so Jain's index over
// contended / weight measures how the port shared itself, not how much each cluster asked for.
struct ClusterShare {
    std::uint16_t cluster_id = 0;
    std::uint32_t weight = 1;
    std::uint64_t served = 0;     // contributions that left the queue
    std::uint64_t contended = 0;  // of which left while >= 2 clusters were backlogged (this one included)
    std::uint64_t served_packets = 0;     // packets that left the queue (what DRR shares out)
    std::uint64_t contended_packets = 0;  // of which left while >= 2 clusters were backlogged
};

class PortQueue {
public:
    // classes: the clusters with their own queue under DRR (under FIFO only their shares are
    // counted). Everything else (other traffic, unknown clusters) shares the default class, weight
    // default_weight.
    // fair_lag: 0 = deficit round robin (the default); L > 0 = bounded-lag round robin (DRR only).
    // chunk_follow: the cluster classes follow chunks (DRR only; ignored under FIFO).
    PortQueue(const QueueConfig& cfg, Scheduling scheduling, std::span<const SchedulingClass> classes,
              std::uint32_t default_weight = 1, std::uint32_t fair_lag = 0, bool chunk_follow = false);
    ~PortQueue();
    PortQueue(const PortQueue&) = delete;
    PortQueue& operator=(const PortQueue&) = delete;

    // GRADIENTs go to their cluster's class; non-gradients (a.mergeable false and contributions 0)
    // and unknown clusters to the default class.
    EnqueueResult enqueue(const Arrival& a, std::uint64_t now) noexcept;
    // As n calls of enqueue(), in order: one AggregatingQueue::enqueue_burst under FIFO, each arrival
    // to its class under DRR. Returns how many results are not {Queued, unmarked}.
    std::uint32_t enqueue_burst(const Arrival* arrivals, std::uint32_t n, std::uint64_t now, EnqueueResult* results) noexcept;

    // Frame length of the packet the scheduler sends next (0 if empty). Under DRR this commits the
    // choice: the next dequeue() takes exactly this packet.
    std::uint32_t front_len() noexcept;
    bool dequeue(std::uint64_t now, Departure& out) noexcept;
    std::uint32_t dequeue_burst(std::uint64_t now, void** handles, std::uint32_t* frame_lens, std::uint16_t* contributions,
                                std::uint32_t max) noexcept;
    // Each configured cluster's share of this port (empty with fewer than two clusters).
    std::span<const ClusterShare> shares() const noexcept { return shares_; }
    // As AggregatingQueue::count_bypass (the default class; only called when depth() == 0).
    void count_bypass(std::uint32_t n, std::uint64_t bytes) noexcept;
    // As AggregatingQueue::count_batch_merges (the default class, the only one when the TX batch merges).
    void count_batch_merges(const BatchMergeCounts& c) noexcept;

    std::uint32_t depth() const noexcept;                    // packets waiting, every class
    // True only while the queue certainly holds nothing: since construction or since a
    // dequeue_burst() that returned fewer than asked for, with no enqueue since. Inline, so that a
    // port whose frames all bypass its empty queue pays no call per round (false: ask depth()).
    bool known_empty() const noexcept { return known_empty_; }
    std::uint64_t depth_bytes() const noexcept;
    std::uint32_t capacity() const noexcept;                 // slots of one class
    // Statistics summed over the classes (depth_max: the largest of any class).
    QueueStats stats() const noexcept;
    const QueueConfig& config() const noexcept;
    Scheduling scheduling() const noexcept { return scheduling_; }

    // The class a GRADIENT of this cluster uses (0: the default class), and the classes themselves,
    // for FEEDBACK (which describes the sender's own class) and per-cluster reports.
    std::size_t class_of(std::uint16_t cluster_id) const noexcept;
    std::size_t class_count() const noexcept { return queues_.size(); }
    const AggregatingQueue& class_queue(std::size_t c) const noexcept { return *queues_[c]; }
    std::uint16_t class_cluster(std::size_t c) const noexcept { return clusters_[c]; }
    // Packets sent from each class: what DRR shares out.
    std::uint64_t class_served(std::size_t c) const noexcept { return served_[c]; }
    std::uint32_t fair_lag() const noexcept { return fair_lag_; }
    bool chunk_follow() const noexcept { return chunk_follow_; }
    // Bounded-lag round robin: a class's service in packets per unit of weight, scaled by
    // kServiceScale (exact for weights 1..16), as the rule compares it (0 under DRR).
    static constexpr std::int64_t kServiceScale = 720720;  // lcm(1..16)
    std::int64_t class_service(std::size_t c) const noexcept { return service_[c]; }

private:
    std::size_t pick() noexcept;  // DRR: the class whose head goes next; SIZE_MAX if all are empty
    std::uint32_t dequeue_burst_classes(std::uint64_t now, void** handles, std::uint32_t* frame_lens,
                                        std::uint16_t* contributions, std::uint32_t max) noexcept;
    std::size_t pick_bounded_lag() noexcept;
    void join(std::size_t c) noexcept;  // bounded lag: class c has just become backlogged
    std::int64_t least_service(std::size_t except) const noexcept;  // over backlogged classes; INT64_MAX if none
    // Share accounting: a GRADIENT of cluster_id took a slot / left the queue.
    void note_queued(std::uint16_t cluster_id) noexcept;
    void note_sent(std::uint16_t cluster_id, std::uint16_t contributions) noexcept;
    std::size_t share_of(std::uint16_t cluster_id) const noexcept;  // SIZE_MAX if not counted

    Scheduling scheduling_;
    std::vector<std::unique_ptr<AggregatingQueue>> queues_;  // [0] the default class
    std::vector<std::uint16_t> clusters_;                    // cluster of each class ([0] unused)
    std::vector<std::uint32_t> quantum_;                     // contributions added per round
    std::vector<std::int64_t> deficit_;
    std::vector<std::uint64_t> served_;
    std::vector<std::int64_t> service_;    // bounded-lag round robin: served per weight, scaled
    std::vector<std::int64_t> unit_cost_;  // kServiceScale / weight (rounded down past weight 16)
    std::uint32_t fair_lag_ = 0;
    bool chunk_follow_ = false;
    bool known_empty_ = true;
    std::vector<std::pair<std::uint16_t, std::uint8_t>> class_by_cluster_;  // sorted by cluster (DRR)
    std::size_t current_ = 0;        // DRR: the class whose turn it is
    bool turn_started_ = false;      // its quantum was added for this turn
    std::size_t picked_ = SIZE_MAX;  // committed by front_len()
    std::vector<ClusterShare> shares_;                        // empty unless >= 2 clusters
    std::vector<std::pair<std::uint16_t, std::uint16_t>> share_by_cluster_;  // sorted by cluster
    std::vector<std::uint32_t> waiting_;                      // packets of each share in the queue(s)
    std::uint32_t backlogged_ = 0;                            // shares with waiting_ != 0
};

}  // namespace shesha::core

#include "port_queue.h"

#include <algorithm>

namespace shesha::core {

namespace {

constexpr std::uint8_t kDefaultClass = 0xFF;
// Packets a class of weight 1 earns per DRR turn: 1, the finest grain, so two backlogged classes
// take turns packet by packet (weights w: w packets per turn).
constexpr std::uint32_t kQuantumPerWeight = 1;
constexpr std::int64_t kPacketCost = 1;

}  // namespace

PortQueue::PortQueue(const QueueConfig& cfg, Scheduling scheduling, std::span<const SchedulingClass> classes,
                     std::uint32_t default_weight, std::uint32_t fair_lag, bool chunk_follow)
    : scheduling_(scheduling),
      fair_lag_(scheduling == Scheduling::Drr ? fair_lag : 0),
      chunk_follow_(scheduling == Scheduling::Drr && chunk_follow) {
    for (const SchedulingClass& c : classes) {
        if (shares_.size() + 1 >= kDefaultClass || share_of(c.cluster_id) != SIZE_MAX) continue;
        const std::pair<std::uint16_t, std::uint16_t> entry{c.cluster_id, static_cast<std::uint16_t>(shares_.size())};
        share_by_cluster_.insert(std::lower_bound(share_by_cluster_.begin(), share_by_cluster_.end(), entry), entry);
        shares_.push_back({c.cluster_id, std::max<std::uint32_t>(c.weight, 1), 0, 0, 0, 0});
    }
    if (shares_.size() < 2) {
        shares_.clear();
        share_by_cluster_.clear();
    }
    waiting_.assign(shares_.size(), 0);
    queues_.push_back(std::make_unique<AggregatingQueue>(cfg));
    clusters_.push_back(0);
    quantum_.push_back(std::max<std::uint32_t>(default_weight, 1) * kQuantumPerWeight);
    if (scheduling_ == Scheduling::Drr) {
        for (const SchedulingClass& c : classes) {
            if (class_of(c.cluster_id) != 0 || queues_.size() >= kDefaultClass) continue;  // duplicate, or too many
            const auto at = std::lower_bound(class_by_cluster_.begin(), class_by_cluster_.end(),
                                             std::pair<std::uint16_t, std::uint8_t>{c.cluster_id, 0});
            class_by_cluster_.insert(at, {c.cluster_id, static_cast<std::uint8_t>(queues_.size())});
            queues_.push_back(std::make_unique<AggregatingQueue>(cfg));
            clusters_.push_back(c.cluster_id);
            quantum_.push_back(std::max<std::uint32_t>(c.weight, 1) * kQuantumPerWeight);
        }
    }
    deficit_.assign(queues_.size(), 0);
    served_.assign(queues_.size(), 0);
    service_.assign(queues_.size(), 0);
    for (const std::uint32_t q : quantum_) unit_cost_.push_back(std::max<std::int64_t>(kServiceScale / (q / kQuantumPerWeight), 1));
}

PortQueue::~PortQueue() = default;

std::size_t PortQueue::class_of(std::uint16_t cluster_id) const noexcept {
    if (class_by_cluster_.empty()) return 0;
    const auto at = std::lower_bound(class_by_cluster_.begin(), class_by_cluster_.end(),
                                     std::pair<std::uint16_t, std::uint8_t>{cluster_id, 0});
    return at != class_by_cluster_.end() && at->first == cluster_id ? at->second : 0;
}

EnqueueResult PortQueue::enqueue(const Arrival& a, std::uint64_t now) noexcept {
    known_empty_ = false;
    // Only a GRADIENT (it carries contributions) belongs to its cluster's class.
    const std::size_t c = a.contributions != 0 ? class_of(a.cluster_id) : 0;
    const bool was_idle = fair_lag_ != 0 && queues_[c]->depth() == 0;
    const EnqueueResult r = queues_[c]->enqueue(a, now);
    if (r.status == EnqueueStatus::Queued) {
        if (was_idle) join(c);
        if (!shares_.empty() && a.contributions != 0) note_queued(a.cluster_id);
    }
    return r;
}

std::uint32_t PortQueue::enqueue_burst(const Arrival* arrivals, std::uint32_t n, std::uint64_t now,
                                       EnqueueResult* results) noexcept {
    if (n != 0) known_empty_ = false;
    if (queues_.size() > 1) {
        // Per-cluster classes: each arrival to its own class, in order, as n calls of enqueue().
        std::uint32_t exceptions = 0;
        for (std::uint32_t i = 0; i < n; ++i) {
            results[i] = enqueue(arrivals[i], now);
            exceptions += results[i].status != EnqueueStatus::Queued || results[i].marked;
        }
        return exceptions;
    }
    const bool was_idle = fair_lag_ != 0 && queues_[0]->depth() == 0;
    const std::uint32_t r = queues_[0]->enqueue_burst(arrivals, n, now, results);
    if (was_idle && queues_[0]->depth() != 0) join(0);
    if (!shares_.empty())
        for (std::uint32_t i = 0; i < n; ++i)
            if (arrivals[i].contributions != 0 && results[i].status == EnqueueStatus::Queued)
                note_queued(arrivals[i].cluster_id);
    return r;
}

std::size_t PortQueue::share_of(std::uint16_t cluster_id) const noexcept {
    const auto at = std::lower_bound(share_by_cluster_.begin(), share_by_cluster_.end(),
                                     std::pair<std::uint16_t, std::uint16_t>{cluster_id, 0});
    return at != share_by_cluster_.end() && at->first == cluster_id ? at->second : SIZE_MAX;
}

void PortQueue::note_queued(std::uint16_t cluster_id) noexcept {
    const std::size_t s = share_of(cluster_id);
    if (s != SIZE_MAX && waiting_[s]++ == 0) ++backlogged_;
}

// Contended: this cluster and at least one other had packets waiting when this one left.
void PortQueue::note_sent(std::uint16_t cluster_id, std::uint16_t contributions) noexcept {
    const std::size_t s = share_of(cluster_id);
    if (s == SIZE_MAX || waiting_[s] == 0) return;
    shares_[s].served += contributions;
    ++shares_[s].served_packets;
    if (backlogged_ >= 2) {
        shares_[s].contended += contributions;
        ++shares_[s].contended_packets;
    }
    if (--waiting_[s] == 0) --backlogged_;
}

// Bounded-lag round robin: a class that becomes backlogged starts no lower than the least-served
// backlogged class, so service it did not use while idle is not banked (as DRR forfeits an emptied
// class's deficit). A class that finds the whole port idle starts a new busy period: it starts no
// lower than any class's service, so no class that joins after it carries a lead from before
// (else the class that was served least before the idle period is served until it catches up).
void PortQueue::join(std::size_t c) noexcept {
    const std::int64_t least = least_service(c);
    if (least != INT64_MAX) {
        if (service_[c] < least) service_[c] = least;
        return;
    }
    service_[c] = *std::max_element(service_.begin(), service_.end());
}

std::int64_t PortQueue::least_service(std::size_t except) const noexcept {
    std::int64_t least = INT64_MAX;
    for (std::size_t i = 0; i < queues_.size(); ++i)
        if (i != except && queues_[i]->depth() != 0) least = std::min(least, service_[i]);
    return least;
}

std::uint32_t PortQueue::depth() const noexcept {
    if (queues_.size() == 1) return queues_[0]->depth();
    std::uint32_t d = 0;
    for (const auto& q : queues_) d += q->depth();
    return d;
}

std::uint64_t PortQueue::depth_bytes() const noexcept {
    std::uint64_t b = 0;
    for (const auto& q : queues_) b += q->depth_bytes();
    return b;
}

std::uint32_t PortQueue::capacity() const noexcept { return queues_[0]->capacity(); }
const QueueConfig& PortQueue::config() const noexcept { return queues_[0]->config(); }

QueueStats PortQueue::stats() const noexcept {
    if (queues_.size() == 1) return queues_[0]->stats();
    QueueStats s;
    for (const auto& q : queues_) {
        const QueueStats& x = q->stats();
        s.enqueued += x.enqueued;
        s.enqueued_bytes += x.enqueued_bytes;
        s.merged += x.merged;
        s.bytes_saved += x.bytes_saved;
        s.merge_refused += x.merge_refused;
        s.mergeable_arrivals += x.mergeable_arrivals;
        s.dropped += x.dropped;
        s.dropped_bytes += x.dropped_bytes;
        s.dequeued += x.dequeued;
        s.dequeued_bytes += x.dequeued_bytes;
        s.marked += x.marked;
        s.ecn_ce_set += x.ecn_ce_set;
        s.depth_max = std::max(s.depth_max, x.depth_max);
        s.depth_sum += x.depth_sum;
        s.depth_samples += x.depth_samples;
        s.sojourn_sum_ticks += x.sojourn_sum_ticks;
        s.sojourn_max_ticks = std::max(s.sojourn_max_ticks, x.sojourn_max_ticks);
        s.bypassed += x.bypassed;
        s.followed += x.followed;
    }
    return s;
}

// Deficit round robin over the non-empty classes, in packets: every packet costs 1, whatever it
// carries, so the port's turns are shared and a cluster whose packets hold more contributions
// (merged in the network or at its senders) gets them through as a bonus, never at the price of
// fewer turns (docs/queue.md, "Why packets"). A class earns its quantum once per turn and sends
// while its deficit covers its head; an emptied class forfeits what is left, as in Shreedhar and
// Varghese's DRR.
std::size_t PortQueue::pick() noexcept {
    if (picked_ != SIZE_MAX) return picked_;
    if (depth() == 0) return SIZE_MAX;
    if (fair_lag_ != 0) return pick_bounded_lag();
    const std::size_t n = queues_.size();
    for (;;) {
        AggregatingQueue& q = *queues_[current_];
        if (q.depth() == 0) {
            deficit_[current_] = 0;
            current_ = (current_ + 1) % n;
            turn_started_ = false;
            continue;
        }
        if (!turn_started_) {
            deficit_[current_] += quantum_[current_];
            turn_started_ = true;
        }
        if (chunk_follow_ && current_ != 0) q.follow_chunk();  // before its head is committed
        if (deficit_[current_] >= kPacketCost) {
            picked_ = current_;
            return picked_;
        }
        current_ = (current_ + 1) % n;
        turn_started_ = false;
    }
}

// Bounded-lag round robin: from the class whose turn it is, the first backlogged class whose
// service is within fair_lag contributions (per unit of weight) of the least-served backlogged
// class sends one packet. The least-served class always qualifies, so some class is always picked.
std::size_t PortQueue::pick_bounded_lag() noexcept {
    const std::size_t n = queues_.size();
    std::int64_t least = least_service(SIZE_MAX);
    // Keep the scaled services far from overflow: every comparison is relative to the least
    // backlogged one, so shifting them all down changes no decision.
    if (least > (std::int64_t{1} << 60)) {
        for (std::size_t i = 0; i < n; ++i) service_[i] = std::max<std::int64_t>(service_[i] - least, 0);
        least = 0;
    }
    const std::int64_t bound = least + std::int64_t{fair_lag_} * kServiceScale;
    for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = (current_ + k) % n;
        if (queues_[i]->depth() != 0 && service_[i] <= bound) {
            if (chunk_follow_ && i != 0) queues_[i]->follow_chunk();
            picked_ = i;
            return picked_;
        }
    }
    return SIZE_MAX;  // unreachable: the least-served backlogged class qualifies
}

std::uint32_t PortQueue::front_len() noexcept {
    if (queues_.size() == 1) return queues_[0]->front_len();
    const std::size_t c = pick();
    return c == SIZE_MAX ? 0 : queues_[c]->front_len();
}

bool PortQueue::dequeue(std::uint64_t now, Departure& out) noexcept {
    if (queues_.size() == 1) {
        if (!queues_[0]->dequeue(now, out)) return false;
        if (!shares_.empty() && out.contributions != 0) note_sent(out.cluster_id, out.contributions);
        return true;
    }
    const std::size_t c = pick();
    if (c == SIZE_MAX) return false;
    picked_ = SIZE_MAX;
    if (!queues_[c]->dequeue(now, out)) return false;
    if (!shares_.empty() && out.contributions != 0) note_sent(out.cluster_id, out.contributions);
    if (fair_lag_ != 0) {
        service_[c] += kPacketCost * unit_cost_[c];
        served_[c] += kPacketCost;
        current_ = (c + 1) % queues_.size();  // the next class's turn: one packet per turn
        return true;
    }
    deficit_[c] -= kPacketCost;
    served_[c] += kPacketCost;
    if (queues_[c]->depth() == 0) {
        deficit_[c] = 0;
        current_ = (c + 1) % queues_.size();
        turn_started_ = false;
    }
    return true;
}

std::uint32_t PortQueue::dequeue_burst(std::uint64_t now, void** handles, std::uint32_t* frame_lens,
                                       std::uint16_t* contributions, std::uint32_t max) noexcept {
    // Fewer than asked for: every class is empty now.
    const std::uint32_t n = dequeue_burst_classes(now, handles, frame_lens, contributions, max);
    if (n < max) known_empty_ = true;
    return n;
}

std::uint32_t PortQueue::dequeue_burst_classes(std::uint64_t now, void** handles, std::uint32_t* frame_lens,
                                               std::uint16_t* contributions, std::uint32_t max) noexcept {
    if (queues_.size() == 1) {
        if (shares_.empty()) return queues_[0]->dequeue_burst(now, handles, frame_lens, contributions, max);
        std::uint32_t n = 0;
        std::uint16_t clusters[64];
        while (n < max) {
            const std::uint32_t want = std::min<std::uint32_t>(max - n, 64);
            const std::uint32_t got =
                queues_[0]->dequeue_burst(now, handles + n, frame_lens + n, contributions + n, want, clusters);
            for (std::uint32_t i = 0; i < got; ++i)
                if (contributions[n + i] != 0) note_sent(clusters[i], contributions[n + i]);
            n += got;
            if (got < want) break;
        }
        return n;
    }
    std::uint32_t n = 0;
    Departure d;
    while (n < max && dequeue(now, d)) {
        handles[n] = d.handle;
        frame_lens[n] = d.frame_len;
        contributions[n] = d.contributions;
        ++n;
    }
    return n;
}

void PortQueue::count_bypass(std::uint32_t n, std::uint64_t bytes) noexcept { queues_[0]->count_bypass(n, bytes); }

void PortQueue::count_batch_merges(const BatchMergeCounts& c) noexcept { queues_[0]->count_batch_merges(c); }

}  // namespace shesha::core

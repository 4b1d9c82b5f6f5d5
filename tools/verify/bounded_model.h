// The bounded model of C CreditSenders feeding one aggregating egress queue, written ONCE over an
// abstract value domain D so that the same code is
//   - unrolled symbolically by Z3 (symbolic.cpp: D::I and D::B are z3::expr), and
//   - executed concretely (ConcreteDomain below) to check the model against the real code.
// Semantics and abstractions: docs/verification.md. Step t, in this order:
//   A. FEEDBACK for the arrivals of cluster c marked at step t - feedback_delay (one per step),
//   B. CREDITs, one per departure of step t - credit_delay, in departure order (CreditPlanner of a
//      one-worker cluster: credits = contributions, ce_count = 1 if marked),
//   C. each sender sends n_c chunks, n_c free in [0, min(max_arrivals, floor(W) - in_flight)];
//      chunk indexes cycle 0..K-1 (what CreditSender's FIFO does when updates come as needed),
//   D. the arrivals enter the queue interleaved round robin (1st of cluster 0, 1st of 1, ...,
//      2nd of cluster 0, ...): merge into the waiting packet of the same (cluster, chunk), else
//      take the tail slot, else tail drop; marked if the depth found is >= mark_depth,
//   E. up to service_rate packets leave: from the head (FIFO scheduling), or from the class that
//      core::PortQueue's fair queues pick (fair_scheduling: one queue per cluster, each with the
//      port's capacity and marking depth): weighted deficit round robin in packets (quantum =
//      the cluster's weight), or bounded-lag round robin (fair_lag > 0); with chunk_follow each
//      class queue follows chunks as AggregatingQueue::follow_chunk does.
#pragma once

#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "port_queue.h"
#include "verify_config.h"

namespace shesha::verify {

// ---- the concrete domain: plain integers, workload and window cuts supplied from outside ----
struct ConcreteDomain {
    using I = std::int64_t;
    using B = bool;
    using R = double;

    // requested[t][c]: what the workload asks each sender to send (clamped to the window bound).
    std::vector<std::vector<int>> requested;
    // versions[t][c]: the version of the updates sender c starts at step t (model.versions > 0).
    std::vector<std::vector<int>> versions;
    // Floor of W after each window cut, per cluster, in order (from the real sender); empty: lo.
    std::vector<std::deque<std::int64_t>> cut_windows;
    std::vector<std::string> issues;  // oracle exhausted, cut outside the abstraction's bounds

    I lit(std::int64_t v) const { return v; }
    B blit(bool b) const { return b; }
    // A fact the model's construction relies on (not a property of the system): checked here.
    void expect(B holds, const std::string& what) {
        if (!holds) issues.push_back("model bound: " + what);
    }
    static I sel(B c, I a, I b) { return c ? a : b; }
    static B bsel(B c, B a, B b) { return c ? a : b; }
    static R rsel(B c, R a, R b) { return c ? a : b; }
    R rlit(double v) const { return v; }
    static R to_real(I v) { return static_cast<double>(v); }
    // The real sender's end_round() fraction, with the same double arithmetic.
    R fraction(I marked, I credited, int /*max_den*/) const {
        if (credited > 0) return std::min(1.0, static_cast<double>(marked) / static_cast<double>(credited));
        return marked > 0 ? 1.0 : 0.0;
    }
    static I floor_of(R v) { return static_cast<I>(std::floor(v)); }
    R rfix(R v, const std::string&) { return v; }
    I fix(I v, const std::string&) { return v; }
    B fixb(B v, const std::string&) { return v; }
    I choose_send(int c, int t, I upper) {
        const std::int64_t want = t < static_cast<int>(requested.size()) && c < static_cast<int>(requested[t].size())
                                      ? requested[t][c] : 0;
        return std::min<std::int64_t>(std::max<std::int64_t>(want, 0), upper);
    }
    I choose_version(int c, int t, int max_version) {
        const std::int64_t v = t < static_cast<int>(versions.size()) && c < static_cast<int>(versions[t].size())
                                   ? versions[t][c] : 0;
        return std::min<std::int64_t>(std::max<std::int64_t>(v, 0), max_version);
    }
    I choose_cut(int c, int t, B happens, I lo, I hi) {
        if (!happens) return hi;
        if (c >= static_cast<int>(cut_windows.size()) || cut_windows[c].empty()) {
            if (!cut_windows.empty())
                issues.push_back("step " + std::to_string(t) + ": model cut the window of cluster " + std::to_string(c) +
                                 " but the real sender did not");
            return lo;
        }
        const std::int64_t v = cut_windows[c].front();
        cut_windows[c].pop_front();
        if (v < lo || v > hi)
            issues.push_back("step " + std::to_string(t) + ": real window " + std::to_string(v) + " of cluster " +
                             std::to_string(c) + " after a cut lies outside the model's [" + std::to_string(lo) + ", " +
                             std::to_string(hi) + "]");
        return v;
    }
};

template <class D> struct Slot {
    typename D::I cluster, chunk, contrib;
    typename D::B marked;
    // With versions (model.versions > 0): the oldest and newest version merged into the packet,
    // and whether the queue's merge index points at it (its key is (cluster, chunk, min_version)).
    typename D::I min_version, max_version;
    typename D::B indexed;
};

template <class D> struct SenderState {
    typename D::I w;               // floor(W), the usable window
    typename D::I in_flight;
    typename D::I retired;         // retired_total_
    typename D::I sent;            // chunks_sent
    typename D::I round_end;
    typename D::I round_credited;
    typename D::I round_marked;
    typename D::B round_cut;
    typename D::I next_chunk;      // chunk index of the next chunk sent, in [0, K)
    typename D::I update_version;  // version of the update being sent (model.versions > 0)
    typename D::R alpha_lo;        // lower bound of alpha: alpha_init * (1 - g)^rounds
    // Exact window arithmetic (ModelParams::exact_window): the sender's W and alpha themselves.
    typename D::R window;
    typename D::R alpha;
    // SenderConfig::slow_start: an unmarked round doubles W (by what it credited) until the first cut.
    typename D::B slow_start;
};

template <class D> struct DepartureRec {
    typename D::B valid;
    typename D::I cluster, contrib;
    typename D::B marked;
    typename D::I min_version, max_version;
};

// What one step exposes to the properties (and what the replay compares with the real code).
template <class D> struct StepRecord {
    std::vector<typename D::I> sent;            // per cluster: chunks put on the wire
    std::vector<typename D::B> greedy;          // per cluster: sent all that max_arrivals and the window allowed
    std::vector<typename D::B> arrival_marked;  // per cluster: an arrival marked (feedback source)
    std::vector<typename D::I> marked_depth;    // per cluster: deepest depth a marked arrival found (FEEDBACK)
    std::vector<typename D::B> congested;       // per cluster: an arrival found depth >= threshold
    typename D::I depth_after_arrivals;
    typename D::I depth_end;                    // after service, every class
    std::vector<typename D::I> class_depth_end; // per cluster: its class queue's depth after service
    typename D::I drops;
    std::vector<typename D::B> backlogged;      // per cluster: a packet waiting before service
    std::vector<DepartureRec<D>> departures;    // service_rate entries, in order
    std::vector<typename D::I> served;          // per cluster: packets departed (what DRR shares)
    std::vector<typename D::B> cut;             // per cluster: window cut (FEEDBACK or round end)
    std::vector<typename D::I> window;          // per cluster, after sending
    std::vector<typename D::I> in_flight;

    StepRecord() = default;  // concrete domains only
    explicit StepRecord(const typename D::I& zero) : depth_after_arrivals(zero), depth_end(zero), drops(zero) {}
};

template <class D> using Trace = std::vector<StepRecord<D>>;

template <class D> class Model {
public:
    using I = typename D::I;
    using B = typename D::B;
    using R = typename D::R;

    Model(D& d, const ModelParams& p)
        : d_(d), p_(p), drr_current_(d.lit(0)), drr_turn_started_(d.blit(false)) {
        // Bounded lag: PortQueue's scaled service units, exactly (kServiceScale / weight, at least 1).
        for (int c = 0; c < p.clusters; ++c) unit_cost_.push_back(std::max<std::int64_t>(kServiceScale / p.weight_of(c), 1));
        // FIFO: one queue for every cluster. DRR: one class per cluster (the real port also has a
        // default class for other traffic; the model has none, and an empty class is skipped).
        const int classes = p.fair_scheduling ? p.clusters : 1;
        for (int q = 0; q < classes; ++q) {
            queues_.push_back(ClassQueue{d.lit(0), d.lit(0), d.lit(0), d.lit(0), d.lit(0), {}});
            for (int j = 0; j < p.queue_packets; ++j)
                queues_.back().slots.push_back(
                    Slot<D>{d.lit(0), d.lit(0), d.lit(0), d.blit(false), d.lit(0), d.lit(0), d.blit(false)});
        }
        for (int c = 0; c < p.clusters; ++c)
            senders_.push_back(SenderState<D>{d.lit(p.w_init_of(c)), d.lit(0), d.lit(0), d.lit(0), d.lit(0), d.lit(0),
                                              d.lit(0), d.blit(false), d.lit(0), d.lit(0), d.rlit(p.alpha_init),
                                              d.rlit(p.w_init_of(c)), d.rlit(p.alpha_init), d.blit(p.slow_start)});
    }

    const Trace<D>& trace() const { return trace_; }

    void run() {
        for (int t = 0; t < p_.horizon; ++t) step(t);
    }

    void step(int t) {
        const int C = p_.clusters;
        StepRecord<D> rec(d_.lit(0));
        rec.cut.assign(C, d_.blit(false));
        // A. FEEDBACK: the switch reported a marked gradient of this cluster.
        if (p_.feedback && t - p_.feedback_delay >= 0) {
            const auto& src = trace_[t - p_.feedback_delay];
            for (int c = 0; c < C; ++c)
                rec.cut[c] = on_feedback(c, t, src.arrival_marked[c], src.marked_depth[c]) || rec.cut[c];
        }
        // B. CREDITs for the departures of step t - credit_delay.
        if (t - p_.credit_delay >= 0) {
            const auto& src = trace_[t - p_.credit_delay];
            for (const auto& dep : src.departures)
                for (int c = 0; c < C; ++c)
                    rec.cut[c] = on_credit(c, t, dep.valid && dep.cluster == d_.lit(c), dep.contrib,
                                           d_.sel(dep.marked, d_.lit(1), d_.lit(0))) ||
                                 rec.cut[c];
        }
        // C. Sending.
        for (int c = 0; c < C; ++c) {
            SenderState<D>& s = senders_[c];
            const I room = s.w - s.in_flight;
            I upper = d_.sel(room < d_.lit(0), d_.lit(0), room);
            upper = d_.sel(upper > d_.lit(p_.max_arrivals), d_.lit(p_.max_arrivals), upper);
            const I n = d_.choose_send(c, t, upper);
            rec.sent.push_back(n);
            rec.greedy.push_back(d_.fixb(n == upper, name("greedy", t, c)));
        }
        // The version of the updates each sender starts in this step (model.versions > 0).
        std::vector<I> step_version;
        for (int c = 0; c < C; ++c)
            step_version.push_back(p_.versions > 0 ? d_.choose_version(c, t, p_.versions) : d_.lit(0));
        // D. Arrivals, round robin over clusters, each into its class queue.
        rec.arrival_marked.assign(C, d_.blit(false));
        rec.congested.assign(C, d_.blit(false));
        rec.marked_depth.assign(C, d_.lit(0));
        I drops = d_.lit(0);
        for (int i = 0; i < p_.max_arrivals; ++i) {
            for (int c = 0; c < C; ++c) {
                ClassQueue& q = queues_[class_of(c)];
                const B present = rec.sent[c] > d_.lit(i);
                const I chunk = wrap(senders_[c].next_chunk + d_.lit(i), p_.max_arrivals);
                const I d = q.depth;  // marking and FEEDBACK see the class's depth
                const B mark_now = d_.blit(p_.mark_depth > 0) && d >= d_.lit(p_.mark_depth > 0 ? p_.mark_depth : 0);
                if (p_.congestion_threshold > 0)
                    rec.congested[c] = rec.congested[c] || (present && d >= d_.lit(p_.congestion_threshold));
                const bool merges_here = p_.aggregation && !((p_.unmerged_clusters >> c) & 1u);
                // The version this chunk carries: chunk 0 starts a new update.
                I version = d_.lit(0);
                if (p_.versions > 0) {
                    SenderState<D>& s = senders_[c];
                    s.update_version = d_.sel(present && chunk == d_.lit(0), step_version[c], s.update_version);
                    version = s.update_version;
                }
                B merged = d_.blit(false);
                if (merges_here && p_.versions == 0) {
                    for (int j = 0; j < p_.queue_packets; ++j) {
                        // At most one waiting packet per key (the merge rule keeps it so).
                        Slot<D>& sl = q.slots[j];
                        const B match = present && d > d_.lit(j) && sl.cluster == d_.lit(c) && sl.chunk == chunk;
                        sl.contrib = d_.sel(match, sl.contrib + d_.lit(1), sl.contrib);
                        sl.marked = sl.marked || (match && mark_now);
                        merged = merged || match;
                    }
                } else if (merges_here) {
                    merged = merge_versioned(q, c, chunk, version, present, d, mark_now);
                }
                const B fits = d < d_.lit(p_.queue_packets);
                const B takes_slot = present && !merged && fits;
                if (p_.versions > 0 && merges_here) reindex(q, c, chunk, version, takes_slot, -1);
                for (int j = 0; j < p_.queue_packets; ++j) {
                    Slot<D>& sl = q.slots[j];
                    const B here = takes_slot && d == d_.lit(j);
                    sl.cluster = d_.sel(here, d_.lit(c), sl.cluster);
                    sl.chunk = d_.sel(here, chunk, sl.chunk);
                    sl.contrib = d_.sel(here, d_.lit(1), sl.contrib);
                    sl.marked = d_.bsel(here, mark_now, sl.marked);
                    if (p_.versions > 0) {
                        sl.min_version = d_.sel(here, version, sl.min_version);
                        sl.max_version = d_.sel(here, version, sl.max_version);
                        sl.indexed = d_.bsel(here, d_.blit(merges_here), sl.indexed);
                    }
                }
                // Bounded lag: a class that becomes backlogged starts no lower than the least-served
                // backlogged class (PortQueue::join, on the arrival that finds it empty and queues).
                if (p_.fair_scheduling && p_.fair_lag != 0) join(class_of(c), takes_slot && d == d_.lit(0));
                q.depth = d_.sel(takes_slot, q.depth + d_.lit(1), q.depth);
                drops = d_.sel(present && !merged && !fits, drops + d_.lit(1), drops);
                const B marked_here = present && (merged || fits) && mark_now;
                rec.arrival_marked[c] = rec.arrival_marked[c] || marked_here;
                rec.marked_depth[c] = d_.sel(marked_here && d > rec.marked_depth[c], d, rec.marked_depth[c]);
            }
        }
        for (int c = 0; c < C; ++c) {
            SenderState<D>& s = senders_[c];
            s.sent = s.sent + rec.sent[c];
            s.in_flight = s.in_flight + rec.sent[c];
            s.next_chunk = wrap(s.next_chunk + rec.sent[c], p_.max_arrivals);
        }
        rec.drops = d_.fix(drops, name("drops", t));
        for (std::size_t k = 0; k < queues_.size(); ++k) queues_[k].depth = d_.fix(queues_[k].depth, name("depth_arr", t, k));
        rec.depth_after_arrivals = total_depth();
        for (int c = 0; c < C; ++c) {
            const ClassQueue& q = queues_[class_of(c)];
            B any = d_.blit(false);
            for (int j = 0; j < p_.queue_packets; ++j)
                any = any || (q.depth > d_.lit(j) && q.slots[j].cluster == d_.lit(c));
            rec.backlogged.push_back(d_.fixb(any, name("backlogged", t, c)));
        }
        // E. Service: from the head (FIFO), or from the class DRR picks.
        for (int k = 0; k < p_.service_rate; ++k) {
            if (queues_.size() == 1) {
                ClassQueue& q = queues_[0];
                const B valid = q.depth > d_.lit(0);
                rec.departures.push_back(DepartureRec<D>{d_.fixb(valid, name("dep_valid", t, k)),
                                                         d_.fix(q.slots[0].cluster, name("dep_cluster", t, k)),
                                                         d_.fix(q.slots[0].contrib, name("dep_contrib", t, k)),
                                                         d_.fixb(valid && q.slots[0].marked, name("dep_marked", t, k)),
                                                         d_.fix(q.slots[0].min_version, name("dep_minv", t, k)),
                                                         d_.fix(q.slots[0].max_version, name("dep_maxv", t, k))});
                for (int j = 0; j + 1 < p_.queue_packets; ++j) q.slots[j] = q.slots[j + 1];
                q.depth = d_.sel(valid, q.depth - d_.lit(1), q.depth);
            } else if (p_.fair_lag != 0) {
                rec.departures.push_back(lag_dequeue(t, k));
            } else {
                rec.departures.push_back(drr_dequeue(t, k));
            }
        }
        for (int c = 0; c < C; ++c) {
            rec.marked_depth[c] = d_.fix(rec.marked_depth[c], name("marked_depth", t, c));
            I served = d_.lit(0);
            for (const auto& dep : rec.departures)
                served = served + d_.sel(dep.valid && dep.cluster == d_.lit(c), d_.lit(1), d_.lit(0));
            rec.served.push_back(d_.fix(served, name("served", t, c)));
            rec.cut[c] = d_.fixb(rec.cut[c], name("cut", t, c));
        }
        // Fresh names for the state carried to the next step keep the unrolled terms small.
        for (std::size_t q = 0; q < queues_.size(); ++q) {
            ClassQueue& cq = queues_[q];
            const std::string k = std::to_string(q);
            cq.depth = d_.fix(cq.depth, name(("depth_end_q" + k).c_str(), t));
            cq.deficit = d_.fix(cq.deficit, name(("deficit_q" + k).c_str(), t));
            if (p_.fair_lag != 0) cq.service = d_.fix(cq.service, name(("service_q" + k).c_str(), t));
            if (p_.chunk_follow) {
                cq.follow_rel = d_.fix(cq.follow_rel, name(("follow_rel_q" + k).c_str(), t));
                cq.follow_chunk = d_.fix(cq.follow_chunk, name(("follow_chunk_q" + k).c_str(), t));
            }
            for (int j = 0; j < p_.queue_packets; ++j) {
                Slot<D>& sl = cq.slots[j];
                sl.cluster = d_.fix(sl.cluster, name(("slot_cluster_q" + k).c_str(), t, j));
                sl.chunk = d_.fix(sl.chunk, name(("slot_chunk_q" + k).c_str(), t, j));
                sl.contrib = d_.fix(sl.contrib, name(("slot_contrib_q" + k).c_str(), t, j));
                sl.marked = d_.fixb(sl.marked, name(("slot_marked_q" + k).c_str(), t, j));
                if (p_.versions > 0) {
                    sl.min_version = d_.fix(sl.min_version, name(("slot_minv_q" + k).c_str(), t, j));
                    sl.max_version = d_.fix(sl.max_version, name(("slot_maxv_q" + k).c_str(), t, j));
                    sl.indexed = d_.fixb(sl.indexed, name(("slot_indexed_q" + k).c_str(), t, j));
                }
            }
        }
        drr_current_ = d_.fix(drr_current_, name("drr_current", t));
        drr_turn_started_ = d_.fixb(drr_turn_started_, name("drr_turn_started", t));
        rec.depth_end = d_.fix(total_depth(), name("depth_end", t));
        for (int c = 0; c < C; ++c) rec.class_depth_end.push_back(queues_[class_of(c)].depth);
        for (int c = 0; c < C; ++c) {
            SenderState<D>& s = senders_[c];
            s.w = d_.fix(s.w, name("w", t, c));
            s.in_flight = d_.fix(s.in_flight, name("in_flight", t, c));
            s.retired = d_.fix(s.retired, name("retired", t, c));
            s.sent = d_.fix(s.sent, name("sent_total", t, c));
            s.round_end = d_.fix(s.round_end, name("round_end", t, c));
            s.round_credited = d_.fix(s.round_credited, name("round_credited", t, c));
            s.round_marked = d_.fix(s.round_marked, name("round_marked", t, c));
            s.round_cut = d_.fixb(s.round_cut, name("round_cut", t, c));
            if (p_.slow_start) s.slow_start = d_.fixb(s.slow_start, name("slow_start", t, c));
            s.next_chunk = d_.fix(s.next_chunk, name("next_chunk", t, c));
            if (p_.versions > 0) s.update_version = d_.fix(s.update_version, name("update_version", t, c));
            s.alpha_lo = d_.rfix(s.alpha_lo, name("alpha_lo", t, c));
            if (p_.exact_window) {
                s.window = d_.rfix(s.window, name("window", t, c));
                s.alpha = d_.rfix(s.alpha, name("alpha", t, c));
            }
            rec.window.push_back(s.w);
            rec.in_flight.push_back(s.in_flight);
        }
        trace_.push_back(std::move(rec));
    }

private:
    static std::string name(const char* what, int t, int i = -1) {
        std::string n(what);
        n += '_';
        n += std::to_string(t);
        if (i >= 0) {
            n += '_';
            n += std::to_string(i);
        }
        return n;
    }

    // x mod K for 0 <= x < K + extra.
    I wrap(I x, int extra) {
        for (int k = 0; k <= extra / p_.chunks; ++k) x = d_.sel(x >= d_.lit(p_.chunks), x - d_.lit(p_.chunks), x);
        return x;
    }

    // cut_window(a): W' = max(w_min, W * (1 - a/2)) with a in [a_lo, 1] (alpha is not tracked
    // exactly, only its lower bound). For w = floor(W), W in [w, w+1), so floor(W') lies in
    //   [max(w_min, floor(w/2)), min(w, max(w_min, floor((w+1) * (1 - a_lo/2))))]
    // and the domain picks the value (Z3: any; concrete: the real sender's).
    I cut_window(int c, int t, B happens, R a_lo) {
        SenderState<D>& s = senders_[c];
        if (p_.exact_window) return s.w;  // the exact cut is done by the callers (cut_exact)
        const I half = s.w / 2;
        const I lo = d_.sel(half < d_.lit(p_.w_min), d_.lit(p_.w_min), half);
        I hi = s.w;
        for (int k = p_.w_min; k <= p_.w_max; ++k) {
            // (k+1) * (1 - a/2), linear in a for a constant k.
            const I f = D::floor_of(d_.rlit(k + 1.0) - d_.rlit((k + 1.0) / 2) * a_lo);
            I bound = d_.sel(f < d_.lit(p_.w_min), d_.lit(p_.w_min), f);
            bound = d_.sel(bound > d_.lit(k), d_.lit(k), bound);
            hi = d_.sel(s.w == d_.lit(k), bound, hi);
        }
        hi = d_.sel(hi < lo, lo, hi);
        const I v = d_.choose_cut(c, t, happens, lo, hi);
        return d_.sel(happens, v, s.w);
    }

    // CreditSender::cut_window(a) with the sender's own arithmetic: W = max(w_min, W * (1 - a/2)).
    // Z3 sees W * (1 - a/2) as a product of two terms (non-linear real arithmetic); the concrete
    // domain computes it in doubles, operation for operation like the real sender.
    void cut_exact(int c, B happens, R a) {
        SenderState<D>& s = senders_[c];
        const R w_min = d_.rlit(p_.w_min);
        const R cut = s.window * (d_.rlit(1.0) - a / d_.rlit(2.0));
        s.window = D::rsel(happens, D::rsel(w_min < cut, cut, w_min), s.window);
        s.w = D::floor_of(s.window);
    }

    // Returns whether the window was cut.
    B on_feedback(int c, int t, B valid, I depth) {
        SenderState<D>& s = senders_[c];
        const B cuts = valid && !s.round_cut;
        if (p_.exact_window) {
            // max(alpha, feedback_fraction) with feedback_fraction = depth / capacity (mark_permille 0).
            const R frac = D::to_real(depth) / d_.rlit(p_.queue_packets);
            cut_exact(c, cuts, D::rsel(s.alpha < frac, frac, s.alpha));
            s.round_cut = s.round_cut || valid;
            s.slow_start = s.slow_start && !cuts;
            return cuts;
        }
        // The cut uses max(alpha, depth/capacity) and the marked arrival found depth >= mark_depth.
        R a_lo = s.alpha_lo;
        if (p_.mark_depth > 0) {
            const R fb = d_.rlit(static_cast<double>(p_.mark_depth) / p_.queue_packets);
            a_lo = D::rsel(a_lo < fb, fb, a_lo);
        }
        s.w = cut_window(c, t, cuts, a_lo);
        s.round_cut = s.round_cut || valid;
        s.slow_start = s.slow_start && !cuts;
        return cuts;
    }

    // Returns whether the window was cut.
    B on_credit(int c, int t, B valid, I credits, I marks) {
        SenderState<D>& s = senders_[c];
        const I applied = d_.sel(valid, d_.sel(credits < s.in_flight, credits, s.in_flight), d_.lit(0));
        const I m = d_.sel(valid, marks, d_.lit(0));
        s.in_flight = s.in_flight - applied;
        s.retired = s.retired + applied;
        s.round_credited = s.round_credited + applied;
        s.round_marked = s.round_marked + m;
        const B ends = valid && (applied > d_.lit(0) || m > d_.lit(0)) && s.retired >= s.round_end;
        // end_round(): no change if FEEDBACK already cut this round; cut if marked; else grow.
        // alpha = (1-g) alpha + g F >= (1-g) alpha, updated before the cut uses it.
        s.alpha_lo = D::rsel(ends, d_.rlit(1.0 - p_.gain) * s.alpha_lo, s.alpha_lo);
        const B cuts = ends && !s.round_cut && s.round_marked > d_.lit(0);
        const B grows = ends && !s.round_cut && !(s.round_marked > d_.lit(0));
        if (p_.exact_window) {
            // alpha = (1-g) alpha + g F, F = min(1, marked / credited) (1 if marks but no credit).
            // round_credited <= 2 w_max: the chunks in flight at the round's start plus one credit.
            const R f = d_.fraction(s.round_marked, s.round_credited, 2 * p_.w_max);
            s.alpha = D::rsel(ends, d_.rlit(1.0 - p_.gain) * s.alpha + d_.rlit(p_.gain) * f, s.alpha);
            cut_exact(c, cuts, s.alpha);
            // Slow start adds what the round credited, at most W (end_round()).
            const R credited = D::to_real(s.round_credited);
            const R doubling = D::rsel(credited < s.window, credited, s.window);
            const R grown_w = s.window + D::rsel(s.slow_start, doubling, d_.rlit(p_.additive_increase));
            const R max_w = d_.rlit(p_.w_max_of(c));
            s.window = D::rsel(grows, D::rsel(max_w < grown_w, max_w, grown_w), s.window);
            s.w = D::floor_of(s.window);
        }
        const I cut_w = cut_window(c, t, cuts, s.alpha_lo);
        // In slow start W is whole (w_init is, and only whole amounts were added), so floor(W) is W.
        const I doubling = d_.sel(s.round_credited < s.w, s.round_credited, s.w);
        const I grown = s.w + d_.sel(s.slow_start, doubling, d_.lit(p_.additive_increase));
        const I cap = d_.lit(p_.w_max_of(c));
        if (!p_.exact_window) s.w = d_.sel(grows, d_.sel(grown > cap, cap, grown), cut_w);
        // start_round()
        s.round_end = d_.sel(ends, s.sent, s.round_end);
        s.round_credited = d_.sel(ends, d_.lit(0), s.round_credited);
        s.round_marked = d_.sel(ends, d_.lit(0), s.round_marked);
        s.round_cut = d_.bsel(ends, d_.blit(false), s.round_cut);
        s.slow_start = s.slow_start && !cuts;
        return cuts;
    }

    struct ClassQueue {
        I depth;
        I deficit;      // DRR: packets this class may still send in its turn
        I service;      // bounded lag: packets served, in units of kServiceScale / weight
        // Chunk following (AggregatingQueue::follow_chunk): the chunk being followed and how many
        // of the packets from the head on were waiting when its merged head was chosen (the seq
        // bound follow_bound - head, clamped at 0).
        I follow_rel;
        I follow_chunk;
        std::vector<Slot<D>> slots;
    };

    // AggregatingQueue::find_target() and merge_into() with versions: the arrival (cluster c,
    // chunk, version v) looks up the index at versions v, v-1, v+1, v-2, v+2, ... up to the
    // tolerance (closest first); the first indexed waiting packet under that key whose versions
    // would stay within the tolerance with v merged takes it. Merging an older version re-keys the
    // packet under the new minimum (index_put: another packet under that key leaves the index).
    // Returns whether it merged.
    B merge_versioned(ClassQueue& q, int c, const I& chunk, const I& v, const B& present, const I& d, const B& mark_now) {
        const int tol = p_.version_tolerance;
        const int Q = p_.queue_packets;
        std::vector<B> target(Q, d_.blit(false));
        B found = d_.blit(false);
        for (int dist = 0; dist <= tol; ++dist)
            for (int side = 0; side < (dist == 0 ? 1 : 2); ++side) {
                const I key_version = side == 0 ? v - d_.lit(dist) : v + d_.lit(dist);
                B here_any = d_.blit(false);
                for (int j = 0; j < Q; ++j) {
                    const Slot<D>& sl = q.slots[j];
                    const I hi = d_.sel(sl.max_version > v, sl.max_version, v);
                    const I lo = d_.sel(sl.min_version < v, sl.min_version, v);
                    // The old rule compared only the key's version (a B, not a C++ bool: with Z3 terms
                    // a ?: mixing the two would turn the term into its pointer's truth).
                    const B spread_ok = p_.legacy_version_match ? d_.blit(true) : B(hi - lo <= d_.lit(tol));
                    const B ok = present && d > d_.lit(j) && sl.indexed && sl.cluster == d_.lit(c) &&
                                 sl.chunk == chunk && sl.min_version == key_version && spread_ok;
                    const B take = ok && !found;
                    target[j] = target[j] || take;
                    here_any = here_any || ok;
                }
                found = found || here_any;
            }
        for (int j = 0; j < Q; ++j) {
            Slot<D>& sl = q.slots[j];
            const B t = target[j];
            sl.contrib = d_.sel(t, sl.contrib + d_.lit(1), sl.contrib);
            sl.marked = sl.marked || (t && mark_now);
            sl.max_version = d_.sel(t && v > sl.max_version, v, sl.max_version);
            const B rekey = t && v < sl.min_version;
            sl.min_version = d_.sel(rekey, v, sl.min_version);
            reindex(q, c, chunk, v, rekey, j);
        }
        return found;
    }

    // index_put(key (c, chunk, v)) when `happens`: every other indexed packet under that key (the
    // slot `keep` is the one being put, -1: a new slot) leaves the index.
    void reindex(ClassQueue& q, int c, const I& chunk, const I& v, const B& happens, int keep) {
        for (int k = 0; k < p_.queue_packets; ++k) {
            if (k == keep) continue;
            Slot<D>& o = q.slots[k];
            const B same_key = o.indexed && o.cluster == d_.lit(c) && o.chunk == chunk && o.min_version == v;
            o.indexed = d_.bsel(happens && same_key, d_.blit(false), o.indexed);
        }
    }

    int class_of(int c) const { return p_.fair_scheduling ? c : 0; }

    I total_depth() const {
        I sum = queues_[0].depth;
        for (std::size_t q = 1; q < queues_.size(); ++q) sum = sum + queues_[q].depth;
        return sum;
    }

    // PortQueue::pick() then dequeue() (switch/core/port_queue.cpp), unrolled: a visit to an empty
    // class forfeits its deficit and moves on; a class starting its turn earns its quantum (its
    // weight, in packets: kQuantumPerWeight = 1); with chunk_follow a visited non-empty class
    // follows chunks (before its head is committed, whether it sends or not, as pick() does); it
    // sends its head if the deficit covers it (every packet costs 1), else the turn passes. Bound
    // on the visits: a class earns at least 1 when its turn starts, so a backlogged class sends at
    // its first visit of a turn, and some class sends within 1 + classes visits. The concrete
    // domain checks that bound on every run (ConcreteDomain::expect).
    DepartureRec<D> drr_dequeue(int t, int k) {
        const int n = static_cast<int>(queues_.size());
        const B any = total_depth() > d_.lit(0);
        B done = !any;
        I picked = d_.lit(0);
        I cur = drr_current_;
        B turn = drr_turn_started_;
        const int visits = 1 + n;
        for (int v = 0; v < visits; ++v) {
            I next_cur = cur;
            B next_turn = turn;
            B next_done = done;
            for (int q = 0; q < n; ++q) {
                ClassQueue& cq = queues_[q];
                const B here = !done && cur == d_.lit(q);
                const B empty = cq.depth == d_.lit(0);
                const I earned = d_.sel(turn, cq.deficit, cq.deficit + d_.lit(p_.weight_of(q)));
                const B sends = !empty && earned >= d_.lit(1);
                cq.deficit = d_.sel(here, d_.sel(empty, d_.lit(0), earned), cq.deficit);
                if (p_.chunk_follow) follow(q, here && !empty);
                next_cur = d_.sel(here && !sends, d_.lit((q + 1) % n), next_cur);
                next_turn = d_.bsel(here, sends, next_turn);
                picked = d_.sel(here && sends, d_.lit(q), picked);
                next_done = next_done || (here && sends);
            }
            cur = next_cur;
            turn = next_turn;
            done = next_done;
        }
        d_.expect(done, "step " + std::to_string(t) + ": DRR picked no class within the bound");
        const DepartureRec<D> dep = take_head(t, k, any, picked);
        for (int q = 0; q < n; ++q) {
            ClassQueue& cq = queues_[q];
            const B from = any && picked == d_.lit(q);
            const B emptied = from && cq.depth == d_.lit(0);
            cq.deficit = d_.sel(emptied, d_.lit(0), d_.sel(from, cq.deficit - d_.lit(1), cq.deficit));
            cur = d_.sel(emptied, d_.lit((q + 1) % n), cur);
            turn = d_.bsel(emptied, d_.blit(false), turn);
        }
        drr_current_ = cur;
        drr_turn_started_ = turn;
        return dep;
    }

    // PortQueue::pick_bounded_lag() then dequeue(): from the class whose turn it is, the first
    // backlogged class whose service is at most the least backlogged service + fair_lag *
    // kServiceScale sends one packet (following chunks first with chunk_follow); its service grows
    // by kServiceScale / weight and the turn moves to the next class. (The real queue shifts every
    // service down past 2^60; no bounded horizon gets there.)
    DepartureRec<D> lag_dequeue(int t, int k) {
        const int n = static_cast<int>(queues_.size());
        const B any = total_depth() > d_.lit(0);
        const I least = least_service(-1);
        const I bound = least + d_.lit(std::int64_t{p_.fair_lag} * kServiceScale);
        I picked = d_.lit(0);
        B found = d_.blit(false);
        // Scan order from the current class: offset s visits class (cur + s) % n.
        for (int s = 0; s < n; ++s)
            for (int q = 0; q < n; ++q) {
                const ClassQueue& cq = queues_[q];
                const B at = drr_current_ == d_.lit(((q - s) % n + n) % n);
                const B ok = at && !found && cq.depth > d_.lit(0) && cq.service <= bound;
                picked = d_.sel(ok, d_.lit(q), picked);
                found = found || ok;
            }
        d_.expect(found || !any, "step " + std::to_string(t) + ": bounded lag picked no class");
        if (p_.chunk_follow)
            for (int q = 0; q < n; ++q) follow(q, any && picked == d_.lit(q));
        const DepartureRec<D> dep = take_head(t, k, any, picked);
        for (int q = 0; q < n; ++q) {
            ClassQueue& cq = queues_[q];
            const B from = any && picked == d_.lit(q);
            cq.service = d_.sel(from, cq.service + d_.lit(unit_cost_[q]), cq.service);
            drr_current_ = d_.sel(from, d_.lit((q + 1) % n), drr_current_);
        }
        return dep;
    }

    // PortQueue::least_service(except): the least service over the backlogged classes other than
    // `except`; a huge value if none (the real INT64_MAX: no class to compare with).
    I least_service(int except) {
        I least = d_.lit(kNoService);
        for (int q = 0; q < static_cast<int>(queues_.size()); ++q) {
            if (q == except) continue;
            const ClassQueue& cq = queues_[q];
            least = d_.sel(cq.depth > d_.lit(0) && cq.service < least, cq.service, least);
        }
        return least;
    }

    // PortQueue::join(q) when `happens` (an arrival queued into the empty class q): no lower than
    // the least-served backlogged class; on an idle port, no lower than any class's service.
    void join(int q, const B& happens) {
        const I least = least_service(q);
        ClassQueue& cq = queues_[q];
        I highest = queues_[0].service;
        for (int k = 1; k < static_cast<int>(queues_.size()); ++k)
            highest = d_.sel(queues_[k].service > highest, queues_[k].service, highest);
        const B idle_port = least == d_.lit(kNoService);
        cq.service = d_.sel(happens && !idle_port && cq.service < least, least,
                            d_.sel(happens && idle_port, highest, cq.service));
    }

    // AggregatingQueue::follow_chunk() on class q when `happens` (class queues hold one cluster).
    // If the head is a gradient the queue may merge (mergeable), look among the packets that were
    // waiting when the followed chunk's merged head was chosen (the first follow_rel from the head)
    // for the first one of that chunk: at the head already, nothing; further back, it moves to the
    // head and the packets it passes move one place back. If there is none, the head starts a new
    // chunk to follow: the packets waiting now, if it carries merged contributions, else none.
    void follow(int q, const B& happens) {
        ClassQueue& cq = queues_[q];
        // Under DRR class q holds cluster q only; its gradients are mergeable iff the switch merges them.
        if (!p_.aggregation || ((p_.unmerged_clusters >> q) & 1u)) return;
        const int Q = p_.queue_packets;
        const B act = happens && cq.depth > d_.lit(0);
        std::vector<B> target(Q, d_.blit(false));
        B found = d_.blit(false);
        for (int j = 0; j < Q; ++j) {
            const B ok = cq.depth > d_.lit(j) && cq.follow_rel > d_.lit(j) && cq.slots[j].chunk == cq.follow_chunk;
            target[j] = ok && !found;
            found = found || ok;
        }
        // Not found: the head becomes the chunk followed (before any move; none happens then).
        const B restart = act && !found;
        cq.follow_chunk = d_.sel(restart, cq.slots[0].chunk, cq.follow_chunk);
        cq.follow_rel = d_.sel(restart, d_.sel(cq.slots[0].contrib > d_.lit(1), cq.depth, d_.lit(0)), cq.follow_rel);
        // Found behind the head: move it to the head.
        if (Q < 2) return;
        std::vector<B> behind(Q, d_.blit(false));  // behind[k]: the target lies at k or further back
        B acc = d_.blit(false);
        for (int j = Q - 1; j >= 1; --j) {
            acc = acc || (act && target[j]);
            behind[j] = acc;
        }
        const std::vector<Slot<D>> old = cq.slots;
        Slot<D> moved = old[0];
        for (int j = 1; j < Q; ++j) moved = select_slot(act && target[j], old[j], moved);
        cq.slots[0] = select_slot(behind[1], moved, old[0]);
        for (int k2 = 1; k2 < Q; ++k2) cq.slots[k2] = select_slot(behind[k2], old[k2 - 1], old[k2]);
    }

    Slot<D> select_slot(const B& c, const Slot<D>& a, const Slot<D>& b) const {
        return Slot<D>{D::sel(c, a.cluster, b.cluster), D::sel(c, a.chunk, b.chunk), D::sel(c, a.contrib, b.contrib),
                       D::bsel(c, a.marked, b.marked), D::sel(c, a.min_version, b.min_version),
                       D::sel(c, a.max_version, b.max_version), D::bsel(c, a.indexed, b.indexed)};
    }

    // The head of class `picked` leaves (if any packet waits): its departure record, the class
    // queue shifted by one, its depth and its followed-packet count one lower.
    DepartureRec<D> take_head(int t, int k, const B& any, const I& picked) {
        const int n = static_cast<int>(queues_.size());
        DepartureRec<D> dep{d_.fixb(any, name("dep_valid", t, k)), d_.lit(0), d_.lit(0), d_.blit(false), d_.lit(0),
                            d_.lit(0)};
        I cluster = d_.lit(0), contrib = d_.lit(0), minv = d_.lit(0), maxv = d_.lit(0);
        B marked = d_.blit(false);
        for (int q = 0; q < n; ++q) {
            const B from = any && picked == d_.lit(q);
            cluster = d_.sel(from, queues_[q].slots[0].cluster, cluster);
            contrib = d_.sel(from, queues_[q].slots[0].contrib, contrib);
            marked = d_.bsel(from, queues_[q].slots[0].marked, marked);
            minv = d_.sel(from, queues_[q].slots[0].min_version, minv);
            maxv = d_.sel(from, queues_[q].slots[0].max_version, maxv);
        }
        dep.cluster = d_.fix(cluster, name("dep_cluster", t, k));
        dep.contrib = d_.fix(contrib, name("dep_contrib", t, k));
        dep.marked = d_.fixb(any && marked, name("dep_marked", t, k));
        dep.min_version = d_.fix(minv, name("dep_minv", t, k));
        dep.max_version = d_.fix(maxv, name("dep_maxv", t, k));
        for (int q = 0; q < n; ++q) {
            ClassQueue& cq = queues_[q];
            const B from = any && picked == d_.lit(q);
            for (int j = 0; j + 1 < p_.queue_packets; ++j) cq.slots[j] = select_slot(from, cq.slots[j + 1], cq.slots[j]);
            cq.depth = d_.sel(from, cq.depth - d_.lit(1), cq.depth);
            if (p_.chunk_follow)
                cq.follow_rel = d_.sel(from && cq.follow_rel > d_.lit(0) && cq.depth > d_.lit(0),
                                       cq.follow_rel - d_.lit(1), d_.sel(from, d_.lit(0), cq.follow_rel));
        }
        return dep;
    }

    static constexpr std::int64_t kServiceScale = core::PortQueue::kServiceScale;
    static constexpr std::int64_t kNoService = std::int64_t{1} << 62;
    std::vector<std::int64_t> unit_cost_;  // bounded lag: kServiceScale / weight per packet

    D& d_;
    const ModelParams& p_;
    std::vector<ClassQueue> queues_;
    I drr_current_;           // DRR: the class whose turn it is
    B drr_turn_started_;      // DRR: it has earned its quantum for this turn
    std::vector<SenderState<D>> senders_;
    Trace<D> trace_;
};

// ---- properties: each returns the list of ways it can fail; it holds iff none is true ----
template <class D> struct Violation {
    typename D::B happens;
    std::string property;
    int step = 0;     // where the failure shows (window start, crossing step, ...)
    std::string what;
};

// Over every window of W steps in which clusters a and b are both backlogged at every step, their
// served packets per unit of share differ by at most epsilon: |s_a / w_a - s_b / w_b| <= epsilon,
// compared as |s_a w_b - s_b w_a| <= epsilon w_a w_b (shares w: FairnessSpec::shares, 1 if not
// given). Backlogged: a packet of the cluster waits in the queue AND its sender is greedy (sent
// all that max_arrivals and its window allowed), i.e. it always had more to send; a cluster that
// holds back gets less, which is not unfairness.
template <class D> std::vector<Violation<D>> fairness_violations(D& d, const Trace<D>& tr, const FairnessSpec& f) {
    std::vector<Violation<D>> out;
    const int T = static_cast<int>(tr.size());
    const int C = tr.empty() ? 0 : static_cast<int>(tr[0].served.size());
    for (int t0 = 0; t0 + f.window <= T; ++t0)
        for (int a = 0; a < C; ++a)
            for (int b = a + 1; b < C; ++b) {
                const std::int64_t wa = f.share_of(a), wb = f.share_of(b);
                typename D::B both = d.blit(true);
                typename D::I diff = d.lit(0);
                for (int t = t0; t < t0 + f.window; ++t) {
                    both = both && tr[t].backlogged[a] && tr[t].backlogged[b];
                    if (!tr[t].greedy.empty()) both = both && tr[t].greedy[a] && tr[t].greedy[b];
                    diff = diff + tr[t].served[a] * d.lit(wb) - tr[t].served[b] * d.lit(wa);
                }
                const std::int64_t limit = std::int64_t{f.epsilon} * wa * wb;
                const std::string per = wa == 1 && wb == 1
                                            ? std::string("served packets differ")
                                            : "served packets per unit of share (" + std::to_string(wa) + ":" +
                                                  std::to_string(wb) + ") differ";
                out.push_back({both && (diff > d.lit(limit) || diff < d.lit(-limit)), "fairness", t0,
                               "clusters " + std::to_string(a) + " and " + std::to_string(b) +
                                   " both backlogged over steps " + std::to_string(t0) + ".." +
                                   std::to_string(t0 + f.window - 1) + " but " + per + " by more than " +
                                   std::to_string(f.epsilon)});
            }
    return out;
}

// Age of cluster c at step t: 0 if a contribution of c departed at t, else (age at t-1) + 1 while c
// has a packet waiting, else 0 (no traffic, no age). Must stay <= bound.
template <class D> std::vector<typename D::I> aom_ages(D& d, const Trace<D>& tr, int c) {
    std::vector<typename D::I> ages;
    typename D::I age = d.lit(0);
    for (size_t t = 0; t < tr.size(); ++t) {
        age = D::sel(tr[t].served[c] > d.lit(0), d.lit(0), D::sel(tr[t].backlogged[c], age + d.lit(1), d.lit(0)));
        age = d.fix(age, "age_" + std::to_string(t) + "_" + std::to_string(c));
        ages.push_back(age);
    }
    return ages;
}

template <class D> std::vector<Violation<D>> aom_violations(D& d, const Trace<D>& tr, const AomSpec& a) {
    std::vector<Violation<D>> out;
    const int C = tr.empty() ? 0 : static_cast<int>(tr[0].served.size());
    for (int c = 0; c < C; ++c) {
        const auto ages = aom_ages(d, tr, c);
        for (size_t t = 0; t < ages.size(); ++t)
            out.push_back({ages[t] > d.lit(a.bound), "aom", static_cast<int>(t),
                           "cluster " + std::to_string(c) + " waited more than " + std::to_string(a.bound) +
                               " steps for a service at step " + std::to_string(t)});
    }
    return out;
}

// Every packet that departs carries versions at most `bound` apart (max - min): the merge rule's
// tolerance holds for the whole packet, not only pairwise with the arrival that joined last.
template <class D> std::vector<Violation<D>> version_spread_violations(D& d, const Trace<D>& tr, const VersionSpreadSpec& v) {
    std::vector<Violation<D>> out;
    for (std::size_t t = 0; t < tr.size(); ++t)
        for (const auto& dep : tr[t].departures)
            out.push_back({dep.valid && dep.max_version - dep.min_version > d.lit(v.bound), "version_spread",
                           static_cast<int>(t),
                           "a packet left at step " + std::to_string(t) + " carrying versions more than " +
                               std::to_string(v.bound) + " apart"});
    return out;
}

// When an arrival of cluster c finds its queue (its class under DRR) at or above the threshold at
// step t, then within R steps that queue is back under it at the end of some step in [t, t+R], or c cut its window at
// some step in (t, t+R]. Only crossings with t + R inside the horizon are judged.
template <class D>
std::vector<Violation<D>> responsiveness_violations(D& d, const Trace<D>& tr, const ResponsivenessSpec& r) {
    std::vector<Violation<D>> out;
    const int T = static_cast<int>(tr.size());
    const int C = tr.empty() ? 0 : static_cast<int>(tr[0].served.size());
    for (int t = 0; t + r.within < T; ++t) {
        for (int c = 0; c < C; ++c) {
            // The queue c sent into: the port's (FIFO) or c's class (DRR).
            typename D::B drained = d.blit(false);
            for (int u = t; u <= t + r.within; ++u)
                drained = drained || (tr[u].class_depth_end.empty() ? tr[u].depth_end : tr[u].class_depth_end[c]) <
                                         d.lit(r.threshold);
            typename D::B reacted = d.blit(false);
            for (int u = t + 1; u <= t + r.within; ++u) reacted = reacted || tr[u].cut[c];
            out.push_back({tr[t].congested[c] && !drained && !reacted, "responsiveness", t,
                           "cluster " + std::to_string(c) + " sent into a queue at >= " + std::to_string(r.threshold) +
                               " at step " + std::to_string(t) + ", which stayed there for " +
                               std::to_string(r.within) + " more steps without a window cut"});
        }
    }
    return out;
}

}  // namespace shesha::verify

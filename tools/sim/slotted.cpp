#include "slotted.h"

#include <array>
#include <bit>
#include <cstring>
#include <optional>
#include <span>
#include <stdexcept>

#include <fmt/format.h>

#include "aggregating_queue.h"
#include "pipeline.h"
#include "frame.h"
#include "gradient_pattern.h"
#include "json_io.h"
#include "protocol.h"
#include "transport/credit_planner.h"
#include "transport/credit_sender.h"

namespace shesha::sim {

namespace {

constexpr std::uint32_t kLearnerIp = 0x0A000101;  // 10.0.1.1: every cluster's learner behind one port
constexpr std::size_t kBufferSize = 512;

std::uint16_t cluster_id_of(int c) { return static_cast<std::uint16_t>(c + 1); }
std::uint32_t worker_id_of(int c) { return static_cast<std::uint32_t>(100 + c); }

struct Packet {
    std::array<std::uint8_t, kBufferSize> buf{};
    std::uint32_t len = 0;
    int cluster = 0;
    std::uint16_t shesha_offset = 0;
    // While it waits in the queue: the contributions seen in its header and the oldest and newest
    // version among them (a merge shows as one waiting packet's contrib_count going up).
    bool queued = false;
    std::uint16_t seen_contrib = 0;
    int min_version = 0;
    int max_version = 0;
};

struct DepartedChunk {
    int cluster;
    proto::Header header;
};

// The switch's pipeline moves slotted packets: frees go back to the free list, and a FEEDBACK it
// sends is only noted (the slotted model delivers feedback itself, after feedback_delay slots).
struct SlotIo {
    using Handle = Packet*;
    static std::uint8_t* data(Packet* p) noexcept { return p->buf.data(); }
    static std::uint32_t pkt_len(Packet* p) noexcept { return p->len; }
    static std::uint32_t data_len(Packet* p) noexcept { return p->len; }
    static bool multi_segment(Packet*) noexcept { return false; }
    static void prefetch(Packet*) noexcept {}
    void free_bulk(Packet** p, std::uint32_t n) noexcept {
        for (std::uint32_t i = 0; i < n; ++i) free(p[i]);
    }
    void free(Packet* p) noexcept {
        if (p != &feedback) free_list->push_back(p);
    }
    Packet* copy(Packet*) noexcept { return nullptr; }  // nothing floods: the learner's MAC is static
    // The slotted model sends no MODEL frames: its switch config has no replicated cluster.
    Packet* replicate(Packet*, std::uint32_t, std::uint8_t**) noexcept { return nullptr; }
    Packet* alloc(std::uint32_t len, std::uint8_t** bytes) noexcept {
        if (len > feedback.buf.size()) return nullptr;
        feedback.len = len;
        *bytes = feedback.buf.data();
        return &feedback;
    }
    bool send_now(std::uint16_t, Packet*) noexcept {
        ++feedback_sent;
        return true;
    }
    std::uint16_t tx_burst(std::uint16_t, Packet**, std::uint16_t) noexcept { return 0; }

    std::vector<Packet*>* free_list = nullptr;
    Packet feedback;
    std::uint64_t feedback_sent = 0;
};

constexpr core::Mac kLearnerMac{0x02, 0xFF, 0, 0, 1, 1};

// One switch: port 0 faces the learners, port 1 + c receives cluster c's sender. Every per-packet
// decision (classification, cluster policy, merge, mark) is the real pipeline's.
core::SwitchConfig slotted_switch_config(const SlottedSystem& p) {
    core::SwitchConfig cfg;
    cfg.burst = 32;
    cfg.udp_port = proto::kDefaultUdpPort;
    cfg.aggregation = p.aggregation;
    cfg.scheduling = p.fair_scheduling ? core::Scheduling::Drr : core::Scheduling::Fifo;
    cfg.fair_lag = p.fair_scheduling ? static_cast<std::uint32_t>(p.fair_lag) : 0;
    cfg.chunk_follow = p.fair_scheduling && p.chunk_follow;
    cfg.feedback = true;             // marks are observed through the FEEDBACK the pipeline builds
    cfg.feedback_interval_us = 0;    // every marked arrival answers (the model rate-limits by slots)
    cfg.fdb_capacity = static_cast<std::uint32_t>(p.clusters) + 16;
    for (int i = 0; i <= p.clusters; ++i) {
        core::PortConfig pc;
        pc.name = fmt::format("p{}", i);
        pc.device = "slotted";
        pc.queue_packets = i == 0 ? static_cast<std::uint32_t>(p.queue_packets) : 2;
        pc.queue_bytes = std::uint64_t{kBufferSize} * (static_cast<std::uint64_t>(p.queue_packets) + 1);  // never the limit
        pc.marking.depth_packets = i == 0 ? static_cast<std::uint32_t>(p.mark_depth) : 0;
        pc.marking.sojourn_us = 0;
        cfg.ports.push_back(pc);
    }
    cfg.static_fdb.push_back({kLearnerMac, "p0"});
    for (int c = 0; c < p.clusters; ++c) {
        core::ClusterConfig cc;
        cc.id = cluster_id_of(c);
        cc.aggregation = !((p.unmerged_clusters >> c) & 1u);  // the switch's per-cluster rule
        cc.member_ips.push_back(0x0A000001 + static_cast<std::uint32_t>(c));
        cc.version_tolerance = static_cast<std::uint32_t>(p.version_tolerance);
        cc.weight = static_cast<std::uint32_t>(p.weight_of(c));
        cfg.clusters.push_back(std::move(cc));
    }
    return cfg;
}

}  // namespace

SlottedRun run_slotted(const SlottedSystem& p, const std::vector<std::vector<int>>& requested,
                       const std::vector<std::vector<int>>& versions) {
    // Callers validate first (parse_replay, the verifier's config); this catches a caller that did not.
    if (const std::string err = validate(p); !err.empty()) throw std::invalid_argument("slotted system: " + err);
    SlottedRun run;
    const int C = p.clusters;
    const int E = p.elems_per_chunk;
    run.cut_windows.assign(C, {});


    std::vector<transport::CreditSender> senders;
    std::vector<transport::CreditPlanner> planners;
    std::vector<std::vector<float>> gradients;
    for (int c = 0; c < C; ++c) {
        transport::SenderConfig sc;
        sc.cluster_id = cluster_id_of(c);
        sc.worker_id = worker_id_of(c);
        sc.model_elems = static_cast<std::uint32_t>(p.chunks * E);
        sc.chunk_elems = static_cast<std::uint32_t>(E);
        sc.w_init = p.w_init_of(c);
        sc.w_min = p.w_min;
        sc.w_max = p.w_max_of(c);
        sc.additive_increase = p.additive_increase;
        sc.slow_start = p.slow_start;
        sc.gain = p.gain;
        sc.alpha_init = p.alpha_init;
        sc.credit_timeout_ns = 0;  // no losses in the model (drops leak credit, as in the real sender)
        // The verifier's bounded model counts credit units only: a dropped chunk keeps its unit in
        // flight. The real sender's cumulative acknowledgement (acked_seq) would retire it; off here so
        // that the model and the real code agree step by step (docs/verification.md).
        sc.cumulative_ack = false;
        senders.emplace_back(sc);
        const std::uint32_t wid = sc.worker_id;
        planners.emplace_back(sc.cluster_id, std::span<const std::uint32_t>(&wid, 1));
        // The synthetic pattern: any merge of this sender's chunks verifies exactly at departure.
        std::vector<float> g(static_cast<std::size_t>(p.chunks * E));
        for (int k = 0; k < p.chunks; ++k)
            pattern::fill(g.data() + k * E, E, sc.cluster_id, static_cast<std::uint16_t>(k), sc.worker_id);
        gradients.push_back(std::move(g));
    }

    // Packet buffers: at most Q waiting per scheduling class plus one step's arrivals in hand.
    const int classes = p.fair_scheduling ? C + 1 : 1;
    std::vector<Packet> pool(static_cast<std::size_t>(classes * p.queue_packets + C * p.max_arrivals + 1));
    std::vector<Packet*> free_list;
    for (auto& pk : pool) free_list.push_back(&pk);
    std::vector<int> waiting(C, 0);
    SlotIo io;
    io.free_list = &free_list;
    // One tick per slot; the pipeline runs in pull mode (the slot's service dequeues).
    core::Pipeline<SlotIo> sw(slotted_switch_config(p), 1'000'000, io, core::PipelineOptions{.poll_mode = false});
    core::SwitchCounters rx;
    const core::PortQueue& queue = sw.port(0).queue;
    // The queue a cluster's gradients wait in: the port's only one (FIFO) or the cluster's class (DRR).
    auto class_depth = [&](int c) {
        return static_cast<int>(queue.class_queue(queue.class_of(cluster_id_of(c))).depth());
    };

    std::vector<std::vector<DepartedChunk>> departed;        // [t]
    std::vector<std::vector<int>> marked_depth;              // [t][c]: depth found by a marked arrival, -1 none
    auto cut_count = [&](int c) {
        return senders[c].counters().feedback_reductions + senders[c].counters().round_reductions;
    };

    for (int t = 0; t < p.horizon; ++t) {
        SlotRecord rec;
        rec.cut.assign(C, false);
        const std::uint64_t now_ns = static_cast<std::uint64_t>(t) * 1000;
        auto note_cut = [&](int c, std::uint64_t before) {
            if (cut_count(c) != before) {
                rec.cut[c] = true;
                run.cut_windows[c].push_back(senders[c].usable_window());
            }
        };
        // A. FEEDBACK.
        if (p.feedback && t - p.feedback_delay >= 0)
            for (int c = 0; c < C; ++c) {
                const int d = marked_depth[t - p.feedback_delay][c];
                if (d < 0) continue;
                proto::FeedbackBody fb;
                fb.queue_capacity = static_cast<std::uint16_t>(queue.capacity());
                fb.queue_depth = static_cast<std::uint16_t>(d);
                const auto before = cut_count(c);
                senders[c].on_feedback(fb, now_ns);
                note_cut(c, before);
            }
        // B. CREDITs, planned by the learner's real CreditPlanner.
        if (t - p.credit_delay >= 0)
            for (const DepartedChunk& dc : departed[t - p.credit_delay]) {
                std::array<transport::CreditGrant, 1> grants;
                const std::size_t n = planners[dc.cluster].plan(dc.header, 0, grants);
                for (std::size_t i = 0; i < n; ++i) {
                    const auto before = cut_count(dc.cluster);
                    senders[dc.cluster].on_credit(grants[i].body, grants[i].flags, now_ns);
                    note_cut(dc.cluster, before);
                }
            }
        // C. Sending: the real window decides; updates are offered when the sender runs dry.
        std::vector<std::vector<Packet*>> out(C);
        for (int c = 0; c < C; ++c) {
            const int allowed = std::min<int>(p.max_arrivals, static_cast<int>(senders[c].credits_available()));
            const int want = std::max(0, std::min(t < static_cast<int>(requested.size()) ? requested[t][c] : 0,
                                                  p.max_arrivals));
            const int version = t < static_cast<int>(versions.size()) && c < static_cast<int>(versions[t].size())
                                    ? versions[t][c] : 0;
            for (int i = 0; i < want; ++i) {
                // An update is offered when the sender has run dry and can send now, so its version is
                // the one of the slot its first chunk leaves in (the model's rule).
                if (senders[c].pending_chunks() == 0 && senders[c].credits_available() > 0)
                    senders[c].offer_update(static_cast<std::uint32_t>(version), now_ns, gradients[c]);
                const std::optional<transport::OutgoingChunk> chunk = senders[c].next_to_send(now_ns);
                if (!chunk) {
                    run.notes.push_back(fmt::format("slot {}: cluster {} asked to send {} but the real window "
                                                    "allowed {}", t, c, want, i));
                    break;
                }
                Packet* pk = free_list.back();
                free_list.pop_back();
                pk->cluster = c;
                pk->min_version = pk->max_version = static_cast<int>(chunk->header.model_version);
                std::span<std::uint8_t> payload(pk->buf.data() + frame::kUdpPayloadOffset,
                                                kBufferSize - frame::kUdpPayloadOffset);
                const std::size_t plen = proto::encode(
                    chunk->header,
                    std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(chunk->elements.data()),
                                                  chunk->elements.size_bytes()),
                    payload);
                frame::Endpoints ep;
                ep.src_mac = {0x02, 0, 0, 0, 0, static_cast<std::uint8_t>(1 + c)};
                ep.dst_mac = kLearnerMac;
                ep.src_ip = 0x0A000001 + static_cast<std::uint32_t>(c);
                ep.dst_ip = kLearnerIp;
                ep.src_port = proto::kDefaultUdpPort;
                ep.dst_port = proto::kDefaultUdpPort;
                ep.ecn = 1;
                pk->len = static_cast<std::uint32_t>(frame::build_udp_frame(ep, plen, pk->buf));
                out[c].push_back(pk);
            }
            rec.sent.push_back(static_cast<std::int64_t>(out[c].size()));
            rec.greedy.push_back(static_cast<int>(out[c].size()) == allowed);
        }
        // D. Arrivals, round robin over clusters, through the real classifier and queue.
        rec.arrival_marked.assign(C, false);
        rec.congested.assign(C, false);
        marked_depth.emplace_back(C, -1);
        std::int64_t drops = 0;
        for (int i = 0; i < p.max_arrivals; ++i)
            for (int c = 0; c < C; ++c) {
                if (i >= static_cast<int>(out[c].size())) continue;
                Packet* pk = out[c][i];
                const frame::FrameInfo info = frame::classify({pk->buf.data(), pk->len}, proto::kDefaultUdpPort);
                pk->shesha_offset = info.payload_offset;
                const int depth_before = class_depth(c);  // what marking and FEEDBACK see
                if (p.congestion_threshold > 0 && depth_before >= p.congestion_threshold) rec.congested[c] = true;
                const core::QueueStats before = queue.stats();
                const std::uint64_t feedback_before = io.feedback_sent;
                Packet* burst[1] = {pk};
                sw.receive_burst(rx, static_cast<std::uint16_t>(1 + c), burst, 1, static_cast<std::uint64_t>(t));
                if (io.feedback_sent != feedback_before) {  // the pipeline marked this arrival
                    rec.arrival_marked[c] = true;
                    marked_depth[t][c] = std::max(marked_depth[t][c], depth_before);
                }
                const core::QueueStats after = queue.stats();
                if (after.merged != before.merged) {
                    ++rec.merges;
                    // The packet it merged into: the waiting one whose contribution count went up.
                    int targets = 0;
                    for (Packet& w : pool) {
                        if (!w.queued) continue;
                        const std::uint16_t now_contrib = proto::inplace::contrib_count(w.buf.data() + w.shesha_offset);
                        if (now_contrib == w.seen_contrib) continue;
                        w.seen_contrib = now_contrib;
                        w.min_version = std::min(w.min_version, pk->min_version);
                        w.max_version = std::max(w.max_version, pk->max_version);
                        ++targets;
                    }
                    if (targets != 1)
                        run.notes.push_back(fmt::format("slot {}: a merge changed {} waiting packets", t, targets));
                } else if (after.dropped != before.dropped) {
                    ++drops;
                } else {
                    ++waiting[c];
                    pk->queued = true;
                    pk->seen_contrib = proto::inplace::contrib_count(pk->buf.data() + pk->shesha_offset);
                }
            }
        rec.drops = drops;
        for (int c = 0; c < C; ++c) rec.marked_depth.push_back(std::max(0, marked_depth[t][c]));
        rec.depth_after_arrivals = queue.depth();
        for (int c = 0; c < C; ++c) rec.backlogged.push_back(waiting[c] > 0);
        // E. Service.
        departed.emplace_back();
        rec.served.assign(C, 0);
        for (int k = 0; k < p.service_rate; ++k) {
            core::Departure dep;
            if (!sw.dequeue_one(0, static_cast<std::uint64_t>(t), dep)) {
                continue;
            }
            Packet* pk = static_cast<Packet*>(dep.handle);
            proto::Message msg;
            const auto err = proto::decode({pk->buf.data() + pk->shesha_offset, pk->len - pk->shesha_offset}, msg);
            if (err != proto::DecodeError::Ok) {
                run.payloads_exact = false;
                run.notes.push_back(fmt::format("slot {}: departed frame does not decode", t));
            } else {
                std::vector<float> elems(msg.hdr.elem_count);
                std::memcpy(elems.data(), msg.payload.data(), elems.size() * sizeof(float));
                if (pattern::verify(elems.data(), elems.size(), msg.hdr.cluster_id, msg.hdr.chunk_index,
                                    msg.hdr.contrib_count) != pattern::Check::Ok) {
                    run.payloads_exact = false;
                    run.notes.push_back(fmt::format("slot {}: merged payload of cluster {} is not exact", t, pk->cluster));
                }
                departed[t].push_back({pk->cluster, msg.hdr});
            }
            rec.departures.push_back(
                {pk->cluster, static_cast<int>(dep.contributions), dep.marked, pk->min_version, pk->max_version});
            pk->queued = false;
            ++rec.served[pk->cluster];  // packets: what the fair queue shares out
            --waiting[pk->cluster];
            free_list.push_back(pk);
        }
        rec.depth_end = queue.depth();
        for (int c = 0; c < C; ++c) rec.class_depth_end.push_back(class_depth(c));
        for (int c = 0; c < C; ++c) {
            rec.window.push_back(senders[c].usable_window());
            rec.in_flight.push_back(senders[c].in_flight());
        }
        run.slots.push_back(std::move(rec));
    }
    return run;
}


std::string validate(const SlottedSystem& p) {
    if (p.clusters < 1) return "model.clusters must be >= 1";
    if (p.horizon < 1) return "model.horizon must be >= 1";
    if (p.chunks < 1) return "model.chunks must be >= 1";
    // Real frames live in kBufferSize-byte buffers: headers plus the payload must fit.
    const std::size_t max_elems =
        (kBufferSize - frame::kUdpPayloadOffset - proto::kHeaderSize) / sizeof(float);
    if (p.elems_per_chunk < 2 || static_cast<std::size_t>(p.elems_per_chunk) > max_elems)
        return fmt::format("model.elems_per_chunk must lie in [2, {}]", max_elems);
    if (p.service_rate < 1) return "model.service_rate must be >= 1";
    if (p.max_arrivals < 1) return "model.max_arrivals must be >= 1";
    if (p.credit_delay < 1) return "model.credit_delay must be >= 1";
    if (p.feedback_delay < 1) return "model.feedback_delay must be >= 1";
    if (p.queue_packets < 1 || !std::has_single_bit(static_cast<unsigned>(p.queue_packets)))
        return "queue_packets must be a power of two >= 1 (the real queue rounds up)";
    if (p.mark_depth < 0) return "mark_depth must be >= 0";
    if (p.congestion_threshold < 0) return "congestion_threshold must be >= 0";
    if (p.w_min < 1) return "transport.w_min must be >= 1";
    if (p.w_max < p.w_min) return "transport.w_max must be >= w_min";
    if (p.w_init < p.w_min || p.w_init > p.w_max) return "transport.w_init must lie in [w_min, w_max]";
    if (static_cast<int>(p.w_max_by_cluster.size()) > p.clusters)
        return "transport.w_max_by_cluster has more entries than model.clusters";
    for (int w : p.w_max_by_cluster)
        if (w < p.w_min || w > p.w_max) return "transport.w_max_by_cluster entries must lie in [w_min, w_max]";
    if (p.additive_increase < 0) return "transport.additive_increase must be >= 0";
    if (!(p.gain > 0 && p.gain <= 1)) return "transport.gain must lie in (0, 1]";
    if (!(p.alpha_init >= 0 && p.alpha_init <= 1)) return "transport.alpha_init must lie in [0, 1]";
    if (p.versions < 0 || p.versions > 1000) return "model.versions must lie in [0, 1000]";
    if (p.version_tolerance < 0 || p.version_tolerance > 16)  // the switch's limit (switch_config.cpp)
        return "model.version_tolerance must lie in [0, 16]";
    // The switch's limits (switch_config.cpp): weight 1..1000, fair_lag 0..65535, both need drr.
    if (static_cast<int>(p.weights.size()) > p.clusters) return "model.weights has more entries than model.clusters";
    for (int w : p.weights)
        if (w < 1 || w > 1000) return "model.weights entries must lie in [1, 1000]";
    if (p.fair_lag < 0 || p.fair_lag > 65535) return "model.fair_lag must lie in [0, 65535]";
    if (p.fair_lag != 0 && !p.fair_scheduling) return "model.fair_lag needs fair queues (scheduling drr)";
    if (p.chunk_follow && !p.fair_scheduling) return "model.chunk_follow needs fair queues (scheduling drr)";
    return {};
}

namespace {
// Responsiveness asks whether the queue the cluster sent into drained: its class under DRR.
std::int64_t class_depth_end_of(const SlotRecord& s, int c) {
    return c < static_cast<int>(s.class_depth_end.size()) ? s.class_depth_end[c] : s.depth_end;
}
}  // namespace

SlotMeasurements measure(const std::vector<SlotRecord>& slots, const SlotBounds& bounds) {
    SlotMeasurements m;
    const int T = static_cast<int>(slots.size());
    const int C = T == 0 ? 0 : static_cast<int>(slots[0].served.size());

    // Age of model, in slots.
    m.aom_peak.assign(C, 0);
    std::vector<std::int64_t> age(C, 0);
    for (int t = 0; t < T; ++t) {
        for (int c = 0; c < C; ++c) {
            age[c] = slots[t].served[c] > 0 ? 0 : slots[t].backlogged[c] ? age[c] + 1 : 0;
            m.aom_peak[c] = std::max(m.aom_peak[c], age[c]);
            if (bounds.aom && age[c] > bounds.aom->bound)
                m.violations.push_back({"aom", t, fmt::format("cluster {} has waited {} slots for a service at slot {} "
                                                              "(bound {})", c, age[c], t, bounds.aom->bound)});
        }
        m.ages.push_back(age);
    }

    // Fairness over every window of W slots where both clusters are backlogged and greedy.
    if (bounds.fairness) {
        const int W = bounds.fairness->window;
        for (int t0 = 0; t0 + W <= T; ++t0)
            for (int a = 0; a < C; ++a)
                for (int b = a + 1; b < C; ++b) {
                    bool eligible = true;
                    // Weighted: s_a / w_a - s_b / w_b, scaled by w_a w_b to stay in integers.
                    const std::int64_t wa = bounds.fairness->share_of(a), wb = bounds.fairness->share_of(b);
                    std::int64_t sa = 0, sb = 0;
                    for (int t = t0; t < t0 + W && eligible; ++t) {
                        const SlotRecord& s = slots[t];
                        eligible = s.backlogged[a] && s.backlogged[b] && s.greedy[a] && s.greedy[b];
                        sa += s.served[a];
                        sb += s.served[b];
                    }
                    if (!eligible) continue;
                    const std::int64_t scaled = std::abs(sa * wb - sb * wa);
                    // fairness_worst in packets per unit of share, rounded up (exact when unweighted).
                    const std::int64_t worst = (scaled + wa * wb - 1) / (wa * wb);
                    if (worst > m.fairness_worst) {
                        m.fairness_worst = worst;
                        m.fairness_worst_slot = t0;
                    }
                    if (scaled > bounds.fairness->epsilon * wa * wb) {
                        const std::string served =
                            wa == 1 && wb == 1 ? fmt::format("{} packets apart", std::abs(sa - sb))
                                               : fmt::format("{} and {} packets for shares {} and {}", sa, sb, wa, wb);
                        m.violations.push_back(
                            {"fairness", t0,
                             fmt::format("clusters {} and {}, both backlogged and greedy over slots {}..{}, were served "
                                         "{} (epsilon {})", a, b, t0, t0 + W - 1, served, bounds.fairness->epsilon)});
                    }
                }
    }

    // Reaction time to congestion.
    m.reaction_worst.assign(C, -1);
    if (bounds.responsiveness) {
        const int R = bounds.responsiveness->within;
        const int thr = bounds.responsiveness->threshold;
        for (int t = 0; t < T; ++t)
            for (int c = 0; c < C; ++c) {
                if (!slots[t].congested[c]) continue;
                std::int64_t reaction = -1;
                for (int u = t; u < T && reaction < 0; ++u)
                    if (class_depth_end_of(slots[u], c) < thr || (u > t && slots[u].cut[c])) reaction = u - t;
                // Never within the horizon: at least the slots that remain.
                const std::int64_t measured = reaction < 0 ? T - t : reaction;
                m.reaction_worst[c] = std::max(m.reaction_worst[c], measured);
                if (t + R < T && (reaction < 0 || reaction > R))
                    m.violations.push_back(
                        {"responsiveness", t,
                         fmt::format("cluster {} sent into a queue at >= {} at slot {}; the queue stayed at or above it "
                                     "and the window was not cut for {}{} slots (bound {})", c, thr, t,
                                     reaction < 0 ? "more than " : "", reaction < 0 ? T - 1 - t : reaction, R)});
            }
    }
    // Version spread of every departure.
    for (int t = 0; t < T; ++t)
        for (const SlotDeparture& d : slots[t].departures) {
            const std::int64_t spread = d.max_version - d.min_version;
            m.version_spread_worst = std::max(m.version_spread_worst, spread);
            if (bounds.version_spread && spread > bounds.version_spread->bound)
                m.violations.push_back({"version_spread", t,
                                        fmt::format("a packet of cluster {} left at slot {} carrying versions {} to {} "
                                                    "(spread {}, bound {})", d.cluster, t, d.min_version, d.max_version,
                                                    spread, bounds.version_spread->bound)});
        }
    std::stable_sort(m.violations.begin(), m.violations.end(),
                     [](const BoundViolation& x, const BoundViolation& y) { return x.property < y.property; });
    return m;
}

SlottedReplay parse_replay(const std::string& json_text, const std::string& source) {
    using json::required;
    SlottedReplay r;
    try {
        const json::Json root = json::parse(json_text, source);
        if (!root.is_object()) throw json::KeyError("expected a JSON object at the top");
        r.property = required<std::string>(root, "property");
        r.step = required<int>(root, "step");
        r.what = required<std::string>(root, "what");
        if (!root.contains("model") || !root["model"].is_object()) throw json::KeyError("missing object model");
        const json::Json& m = root["model"];
        SlottedSystem& s = r.system;
        s.clusters = required<int>(m, "clusters", "model.");
        s.horizon = required<int>(m, "horizon", "model.");
        s.chunks = required<int>(m, "chunks", "model.");
        s.elems_per_chunk = required<int>(m, "elems_per_chunk", "model.");
        s.service_rate = required<int>(m, "service_rate", "model.");
        s.max_arrivals = required<int>(m, "max_arrivals", "model.");
        s.credit_delay = required<int>(m, "credit_delay", "model.");
        s.feedback_delay = required<int>(m, "feedback_delay", "model.");
        s.feedback = required<bool>(m, "feedback", "model.");
        s.queue_packets = required<int>(m, "queue_packets", "model.");
        s.mark_depth = required<int>(m, "mark_depth", "model.");
        s.aggregation = required<bool>(m, "aggregation", "model.");
        s.w_init = required<int>(m, "w_init", "model.");
        s.w_min = required<int>(m, "w_min", "model.");
        s.w_max = required<int>(m, "w_max", "model.");
        s.additive_increase = required<int>(m, "additive_increase", "model.");
        // Files written before slow start have no key: their senders grew additively from the start.
        s.slow_start = false;
        if (auto v = json::optional<bool>(m, "slow_start", "model.")) s.slow_start = *v;
        s.gain = required<double>(m, "gain", "model.");
        s.alpha_init = required<double>(m, "alpha_init", "model.");
        s.congestion_threshold = required<int>(m, "congestion_threshold", "model.");
        if (auto v = json::optional<unsigned>(m, "unmerged_clusters", "model.")) s.unmerged_clusters = *v;
        // Files written before fair queues have no scheduling: the FIFO port they were found on.
        if (auto v = json::optional<std::string>(m, "scheduling", "model.")) {
            if (*v != "fifo" && *v != "drr")
                throw json::KeyError("model.scheduling: expected fifo or drr, not '" + *v + "'");
            s.fair_scheduling = *v == "drr";
        }
        if (auto v = json::optional<std::vector<int>>(m, "w_max_by_cluster", "model.")) s.w_max_by_cluster = *v;
        if (auto v = json::optional<int>(m, "versions", "model.")) s.versions = *v;
        // Files written before the fair queues' options were modelled: weights 1, DRR, no following.
        if (auto v = json::optional<std::vector<int>>(m, "weights", "model.")) s.weights = *v;
        if (auto v = json::optional<int>(m, "fair_lag", "model.")) s.fair_lag = *v;
        if (auto v = json::optional<bool>(m, "chunk_follow", "model.")) s.chunk_follow = *v;
        if (auto v = json::optional<int>(m, "version_tolerance", "model.")) s.version_tolerance = *v;
        if (root.contains("properties") && root["properties"].is_object()) {
            const json::Json& props = root["properties"];
            if (props.contains("fairness")) {
                const json::Json& f = props["fairness"];
                r.bounds.fairness = FairnessBound{required<int>(f, "window", "properties.fairness."),
                                                  required<int>(f, "epsilon", "properties.fairness."), {}};
                if (auto v = json::optional<std::vector<int>>(f, "shares", "properties.fairness."))
                    r.bounds.fairness->shares = *v;
            }
            if (props.contains("responsiveness")) {
                const json::Json& x = props["responsiveness"];
                r.bounds.responsiveness = ResponsivenessBound{required<int>(x, "within", "properties.responsiveness."),
                                                              required<int>(x, "threshold", "properties.responsiveness.")};
            }
            if (props.contains("aom"))
                r.bounds.aom = AomBound{required<int>(props["aom"], "bound", "properties.aom.")};
            if (props.contains("version_spread"))
                r.bounds.version_spread =
                    VersionSpreadBound{required<int>(props["version_spread"], "bound", "properties.version_spread.")};
        }
        if (!root.contains("steps") || !root["steps"].is_array()) throw json::KeyError("missing list steps");
        const json::Json& steps = root["steps"];
        for (std::size_t t = 0; t < steps.size(); ++t) {
            r.workload.push_back(required<std::vector<int>>(steps[t], "send", fmt::format("steps[{}].", t)));
            if (s.versions > 0)
                r.versions.push_back(required<std::vector<int>>(steps[t], "version", fmt::format("steps[{}].", t)));
        }
    } catch (const json::KeyError& e) {
        throw ReplayFileError(fmt::format("{}: {}", source, e.what()));
    } catch (const json::Error& e) {
        // Syntax: json::parse names the source already.
        throw ReplayFileError(fmt::format("{}: not a counterexample file: {}", source,
                                          std::string_view(e.what()).substr(source.size() + 2)));
    }
    const SlottedSystem& s = r.system;
    if (const std::string err = validate(s); !err.empty()) throw ReplayFileError(source + ": " + err);
    if (static_cast<int>(r.workload.size()) != s.horizon)
        throw ReplayFileError(fmt::format("{}: the workload has {} steps, model.horizon is {}", source,
                                          r.workload.size(), s.horizon));
    for (std::size_t t = 0; t < r.workload.size(); ++t) {
        if (static_cast<int>(r.workload[t].size()) != s.clusters)
            throw ReplayFileError(fmt::format("{}: steps[{}].send has {} entries, expected one per cluster ({})", source,
                                              t, r.workload[t].size(), s.clusters));
        for (int v : r.workload[t])
            if (v < 0 || v > s.max_arrivals)
                throw ReplayFileError(fmt::format("{}: steps[{}].send: {} lies outside [0, model.max_arrivals = {}]",
                                                  source, t, v, s.max_arrivals));
    }
    if (r.bounds.fairness && (r.bounds.fairness->window < 1 || r.bounds.fairness->epsilon < 0))
        throw ReplayFileError(source + ": properties.fairness needs window >= 1 and epsilon >= 0");
    if (r.bounds.fairness) {
        if (static_cast<int>(r.bounds.fairness->shares.size()) > s.clusters)
            throw ReplayFileError(source + ": properties.fairness.shares has more entries than model.clusters");
        for (int w : r.bounds.fairness->shares)
            if (w < 1 || w > 1000) throw ReplayFileError(source + ": properties.fairness.shares entries must lie in [1, 1000]");
    }
    if (r.bounds.responsiveness &&
        (r.bounds.responsiveness->within < 1 || r.bounds.responsiveness->threshold < 1 ||
         r.bounds.responsiveness->threshold != s.congestion_threshold))
        throw ReplayFileError(source + ": properties.responsiveness needs within >= 1 and threshold >= 1 equal to "
                                       "model.congestion_threshold");
    if (r.bounds.aom && r.bounds.aom->bound < 0) throw ReplayFileError(source + ": properties.aom.bound must be >= 0");
    for (std::size_t t = 0; t < r.versions.size(); ++t) {
        if (static_cast<int>(r.versions[t].size()) != s.clusters)
            throw ReplayFileError(fmt::format("{}: steps[{}].version has {} entries, expected one per cluster ({})",
                                              source, t, r.versions[t].size(), s.clusters));
        for (int v : r.versions[t])
            if (v < 0 || v > s.versions)
                throw ReplayFileError(fmt::format("{}: steps[{}].version: {} lies outside [0, model.versions = {}]",
                                                  source, t, v, s.versions));
    }
    if (r.bounds.version_spread && r.bounds.version_spread->bound < 0)
        throw ReplayFileError(source + ": properties.version_spread.bound must be >= 0");
    return r;
}

std::string slots_csv(const std::vector<SlotRecord>& slots, const SlotMeasurements& m) {
    std::string out = "slot,cluster,sent,window,in_flight,served,age,cut,marked,backlogged,depth_end,drops,merges\n";
    for (std::size_t t = 0; t < slots.size(); ++t) {
        const SlotRecord& s = slots[t];
        for (std::size_t c = 0; c < s.served.size(); ++c)
            out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}\n", t, c, s.sent[c], s.window[c], s.in_flight[c],
                               s.served[c], t < m.ages.size() ? m.ages[t][c] : 0, s.cut[c] ? 1 : 0,
                               s.arrival_marked[c] ? 1 : 0, s.backlogged[c] ? 1 : 0, s.depth_end, s.drops, s.merges);
    }
    return out;
}

}  // namespace shesha::sim

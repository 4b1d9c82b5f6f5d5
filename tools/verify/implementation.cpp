#include "implementation.h"

#include <array>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "aggregating_queue.h"
#include "frame.h"
#include "gradient_pattern.h"
#include "protocol.h"
#include "transport/credit_planner.h"
#include "transport/credit_sender.h"

namespace shesha::verify {
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
};

struct DepartedChunk {
    int cluster;
    proto::Header header;
};

}  // namespace

RealRun run_implementation(const ModelParams& p, const std::vector<std::vector<int>>& requested) {
    RealRun run;
    const int C = p.clusters;
    const int E = p.elems_per_chunk;
    run.cut_windows.assign(C, {});

    core::QueueConfig qc;
    qc.capacity_packets = static_cast<std::uint32_t>(p.queue_packets);
    qc.capacity_bytes = std::uint64_t{kBufferSize} * (p.queue_packets + 1);  // never the limit
    qc.aggregation = p.aggregation;
    qc.mark_depth_packets = static_cast<std::uint32_t>(p.mark_depth);
    qc.mark_sojourn_ticks = 0;
    core::AggregatingQueue queue(qc);

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
        sc.gain = p.gain;
        sc.alpha_init = p.alpha_init;
        sc.credit_timeout_ns = 0;  // no losses in the model (drops leak credit, as in the real sender)
        senders.emplace_back(sc);
        const std::uint32_t wid = sc.worker_id;
        planners.emplace_back(sc.cluster_id, std::span<const std::uint32_t>(&wid, 1));
        // The synthetic pattern: any merge of this sender's chunks verifies exactly at departure.
        std::vector<float> g(static_cast<std::size_t>(p.chunks * E));
        for (int k = 0; k < p.chunks; ++k)
            pattern::fill(g.data() + k * E, E, sc.cluster_id, static_cast<std::uint16_t>(k), sc.worker_id);
        gradients.push_back(std::move(g));
    }

    // Packet buffers: at most Q waiting plus one step's arrivals in hand.
    std::vector<Packet> pool(static_cast<std::size_t>(p.queue_packets + C * p.max_arrivals + 1));
    std::vector<Packet*> free_list;
    for (auto& pk : pool) free_list.push_back(&pk);
    std::vector<int> waiting(C, 0);

    std::vector<std::vector<DepartedChunk>> departed;        // [t]
    std::vector<std::vector<int>> marked_depth;              // [t][c]: depth found by a marked arrival, -1 none
    auto cut_count = [&](int c) {
        return senders[c].counters().feedback_reductions + senders[c].counters().round_reductions;
    };

    for (int t = 0; t < p.horizon; ++t) {
        StepRecord<ConcreteDomain> rec;
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
            for (int i = 0; i < want; ++i) {
                if (senders[c].pending_chunks() == 0)
                    senders[c].offer_update(1, now_ns, gradients[c]);  // one model version in the horizon
                const std::optional<transport::OutgoingChunk> chunk = senders[c].next_to_send(now_ns);
                if (!chunk) {
                    run.notes.push_back(fmt::format("step {}: cluster {} asked to send {} but the real window "
                                                    "allowed {}", t, c, want, i));
                    break;
                }
                Packet* pk = free_list.back();
                free_list.pop_back();
                pk->cluster = c;
                std::span<std::uint8_t> payload(pk->buf.data() + frame::kUdpPayloadOffset,
                                                kBufferSize - frame::kUdpPayloadOffset);
                const std::size_t plen = proto::encode(
                    chunk->header,
                    std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(chunk->elements.data()),
                                                  chunk->elements.size_bytes()),
                    payload);
                frame::Endpoints ep;
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
                proto::Header h;
                proto::decode_header({pk->buf.data() + info.payload_offset, info.payload_len}, h);
                pk->shesha_offset = info.payload_offset;
                core::Arrival a;
                a.handle = pk;
                a.frame = pk->buf.data();
                a.frame_len = pk->len;
                a.mergeable = !((p.unmerged_clusters >> c) & 1u);  // the switch's per-cluster rule
                a.l3_offset = info.l3_offset;
                a.l4_offset = info.l4_offset;
                a.shesha_offset = info.payload_offset;
                a.cluster_id = h.cluster_id;
                a.chunk_index = h.chunk_index;
                a.elem_count = h.elem_count;
                a.model_version = h.model_version;
                a.dst_ip = info.dst_ip;
                const int depth_before = static_cast<int>(queue.depth());
                if (p.congestion_threshold > 0 && depth_before >= p.congestion_threshold) rec.congested[c] = true;
                const core::EnqueueResult r = queue.enqueue(a, static_cast<std::uint64_t>(t));
                if (r.marked) {
                    rec.arrival_marked[c] = true;
                    marked_depth[t][c] = std::max(marked_depth[t][c], depth_before);
                }
                if (r.status == core::EnqueueStatus::Queued) {
                    ++waiting[c];
                } else {
                    if (r.status == core::EnqueueStatus::DroppedFull) ++drops;
                    free_list.push_back(pk);
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
            if (!queue.dequeue(static_cast<std::uint64_t>(t), dep)) {
                rec.departures.push_back({false, 0, 0, false});
                continue;
            }
            Packet* pk = static_cast<Packet*>(dep.handle);
            proto::Message msg;
            const auto err = proto::decode({pk->buf.data() + pk->shesha_offset, pk->len - pk->shesha_offset}, msg);
            if (err != proto::DecodeError::Ok) {
                run.payloads_exact = false;
                run.notes.push_back(fmt::format("step {}: departed frame does not decode", t));
            } else {
                std::vector<float> elems(msg.hdr.elem_count);
                std::memcpy(elems.data(), msg.payload.data(), elems.size() * sizeof(float));
                if (pattern::verify(elems.data(), elems.size(), msg.hdr.cluster_id, msg.hdr.chunk_index,
                                    msg.hdr.contrib_count) != pattern::Check::Ok) {
                    run.payloads_exact = false;
                    run.notes.push_back(fmt::format("step {}: merged payload of cluster {} is not exact", t, pk->cluster));
                }
                departed[t].push_back({pk->cluster, msg.hdr});
            }
            rec.departures.push_back({true, pk->cluster, dep.contributions, dep.marked});
            rec.served[pk->cluster] += dep.contributions;
            --waiting[pk->cluster];
            free_list.push_back(pk);
        }
        rec.depth_end = queue.depth();
        for (int c = 0; c < C; ++c) {
            rec.window.push_back(senders[c].usable_window());
            rec.in_flight.push_back(senders[c].in_flight());
        }
        run.trace.push_back(std::move(rec));
    }
    return run;
}

std::string first_difference(const Trace<ConcreteDomain>& a, const Trace<ConcreteDomain>& b) {
    if (a.size() != b.size()) return fmt::format("lengths differ: {} vs {} steps", a.size(), b.size());
    auto valid_deps = [](const StepRecord<ConcreteDomain>& r) {
        std::vector<std::array<std::int64_t, 3>> v;
        for (const auto& d : r.departures)
            if (d.valid) v.push_back({d.cluster, d.contrib, d.marked ? 1 : 0});
        return v;
    };
    for (size_t t = 0; t < a.size(); ++t) {
        const auto& x = a[t];
        const auto& y = b[t];
        auto diff = [&](const char* what, auto u, auto v) {
            return fmt::format("step {}: {} differ: model {} vs real {}", t, what, fmt::join(u, ","), fmt::join(v, ","));
        };
        if (x.sent != y.sent) return diff("sent", x.sent, y.sent);
        if (x.depth_after_arrivals != y.depth_after_arrivals)
            return fmt::format("step {}: depth after arrivals: model {} vs real {}", t, x.depth_after_arrivals, y.depth_after_arrivals);
        if (x.drops != y.drops) return fmt::format("step {}: drops: model {} vs real {}", t, x.drops, y.drops);
        const auto dx = valid_deps(x), dy = valid_deps(y);
        if (dx != dy) {
            std::string sx, sy;
            for (const auto& d : dx) sx += fmt::format("[c{} x{}{}]", d[0], d[1], d[2] ? " marked" : "");
            for (const auto& d : dy) sy += fmt::format("[c{} x{}{}]", d[0], d[1], d[2] ? " marked" : "");
            return fmt::format("step {}: departures differ: model {} vs real {}", t, sx, sy);
        }
        if (x.depth_end != y.depth_end)
            return fmt::format("step {}: depth at end: model {} vs real {}", t, x.depth_end, y.depth_end);
        if (x.arrival_marked != y.arrival_marked) return diff("marked arrivals", x.arrival_marked, y.arrival_marked);
        if (!x.marked_depth.empty() && !y.marked_depth.empty() && x.marked_depth != y.marked_depth)
            return diff("depths found by marked arrivals", x.marked_depth, y.marked_depth);
        if (x.cut != y.cut) return diff("window cuts", x.cut, y.cut);
        if (x.window != y.window) return diff("usable windows", x.window, y.window);
        if (x.in_flight != y.in_flight) return diff("in flight", x.in_flight, y.in_flight);
        if (!x.greedy.empty() && !y.greedy.empty() && x.greedy != y.greedy) return diff("greedy senders", x.greedy, y.greedy);
        if (!x.backlogged.empty() && !y.backlogged.empty() && x.backlogged != y.backlogged)
            return diff("backlogged", x.backlogged, y.backlogged);
        if (!x.congested.empty() && !y.congested.empty() && x.congested != y.congested)
            return diff("congested", x.congested, y.congested);
    }
    return {};
}

std::string check_agreement(const ModelParams& p, const std::vector<std::vector<int>>& requested) {
    const RealRun real = run_implementation(p, requested);
    if (!real.payloads_exact) return "real run: " + (real.notes.empty() ? std::string("payload error") : real.notes.front());
    ConcreteDomain d;
    d.requested = requested;
    // Exact window arithmetic computes every cut itself; the interval model takes the real ones.
    if (!p.exact_window) d.cut_windows = real.cut_windows;
    Model<ConcreteDomain> model(d, p);
    model.run();
    if (!d.issues.empty()) return d.issues.front();
    for (const auto& left : d.cut_windows)
        if (!left.empty()) return "the real sender cut its window more often than the model";
    return first_difference(model.trace(), real.trace);
}

std::vector<Violation<ConcreteDomain>> violations_of(const VerifyConfig& cfg, const std::string& property,
                                                     const Trace<ConcreteDomain>& trace) {
    ConcreteDomain d;
    std::vector<Violation<ConcreteDomain>> all;
    if (property == "fairness" && cfg.fairness) all = fairness_violations(d, trace, *cfg.fairness);
    else if (property == "responsiveness" && cfg.responsiveness) all = responsiveness_violations(d, trace, *cfg.responsiveness);
    else if (property == "aom" && cfg.aom) all = aom_violations(d, trace, *cfg.aom);
    std::vector<Violation<ConcreteDomain>> out;
    for (auto& v : all)
        if (v.happens) out.push_back(std::move(v));
    return out;
}

ReplayReport replay(const Counterexample& cex) {
    ReplayReport rep;
    const RealRun real = run_implementation(cex.config.model, cex.workload);
    for (const auto& n : real.notes) rep.lines.push_back("real run: " + n);
    if (!real.payloads_exact) rep.lines.push_back("real run: a merged payload was not exact");
    if (!cex.model_trace.empty()) {
        const std::string diff = first_difference(cex.model_trace, real.trace);
        rep.lines.push_back(diff.empty() ? "the real queue and senders followed the model's trace step by step"
                                         : "the real run departs from the model's trace: " + diff);
    }
    const auto v = violations_of(cex.config, cex.property, real.trace);
    rep.reproduced = !v.empty();
    if (rep.reproduced) {
        rep.lines.push_back(fmt::format("violation of {} reproduced on the real code ({} instance(s)); first: step {}: {}",
                                        cex.property, v.size(), v.front().step, v.front().what));
    } else {
        rep.lines.push_back("the real code does NOT violate " + cex.property + " on this workload");
    }
    return rep;
}

}  // namespace shesha::verify

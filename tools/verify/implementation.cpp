#include "implementation.h"

#include <array>

#include <fmt/format.h>

#include "slotted.h"

namespace shesha::verify {

namespace {

Trace<ConcreteDomain> to_trace(const std::vector<sim::SlotRecord>& slots) {
    Trace<ConcreteDomain> trace;
    for (const sim::SlotRecord& s : slots) {
        StepRecord<ConcreteDomain> r;
        r.sent = s.sent;
        r.greedy = s.greedy;
        r.arrival_marked = s.arrival_marked;
        r.marked_depth = s.marked_depth;
        r.congested = s.congested;
        r.depth_after_arrivals = s.depth_after_arrivals;
        r.depth_end = s.depth_end;
        r.class_depth_end = s.class_depth_end;
        r.drops = s.drops;
        r.backlogged = s.backlogged;
        for (const sim::SlotDeparture& d : s.departures)
            r.departures.push_back({true, d.cluster, d.contributions, d.marked, d.min_version, d.max_version});
        r.served = s.served;
        r.cut = s.cut;
        r.window = s.window;
        r.in_flight = s.in_flight;
        trace.push_back(std::move(r));
    }
    return trace;
}

}  // namespace

sim::SlotBounds bounds_of(const VerifyConfig& cfg) {
    sim::SlotBounds b;
    if (cfg.fairness) b.fairness = sim::FairnessBound{cfg.fairness->window, cfg.fairness->epsilon, cfg.fairness->shares};
    if (cfg.responsiveness) b.responsiveness = sim::ResponsivenessBound{cfg.responsiveness->within, cfg.responsiveness->threshold};
    if (cfg.aom) b.aom = sim::AomBound{cfg.aom->bound};
    if (cfg.version_spread) b.version_spread = sim::VersionSpreadBound{cfg.version_spread->bound};
    return b;
}

RealRun run_implementation(const ModelParams& p, const std::vector<std::vector<int>>& requested,
                           const std::vector<std::vector<int>>& versions) {
    sim::SlottedRun slotted = sim::run_slotted(p, requested, versions);
    RealRun run;
    run.trace = to_trace(slotted.slots);
    run.cut_windows = std::move(slotted.cut_windows);
    run.notes = std::move(slotted.notes);
    run.payloads_exact = slotted.payloads_exact;
    return run;
}

std::string first_difference(const Trace<ConcreteDomain>& a, const Trace<ConcreteDomain>& b) {
    if (a.size() != b.size()) return fmt::format("lengths differ: {} vs {} steps", a.size(), b.size());
    auto valid_deps = [](const StepRecord<ConcreteDomain>& r) {
        std::vector<std::array<std::int64_t, 5>> v;
        for (const auto& d : r.departures)
            if (d.valid) v.push_back({d.cluster, d.contrib, d.marked ? 1 : 0, d.min_version, d.max_version});
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
            auto show = [](const auto& d) {
                return fmt::format("[c{} x{}{} v{}..{}]", d[0], d[1], d[2] ? " marked" : "", d[3], d[4]);
            };
            for (const auto& d : dx) sx += show(d);
            for (const auto& d : dy) sy += show(d);
            return fmt::format("step {}: departures differ: model {} vs real {}", t, sx, sy);
        }
        if (x.depth_end != y.depth_end)
            return fmt::format("step {}: depth at end: model {} vs real {}", t, x.depth_end, y.depth_end);
        if (!x.class_depth_end.empty() && !y.class_depth_end.empty() && x.class_depth_end != y.class_depth_end)
            return diff("class queue depths at end", x.class_depth_end, y.class_depth_end);
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

std::string check_agreement(const ModelParams& p, const std::vector<std::vector<int>>& requested,
                            const std::vector<std::vector<int>>& versions) {
    const RealRun real = run_implementation(p, requested, versions);
    if (!real.payloads_exact) return "real run: " + (real.notes.empty() ? std::string("payload error") : real.notes.front());
    ConcreteDomain d;
    d.requested = requested;
    d.versions = versions;
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
    else if (property == "version_spread" && cfg.version_spread) all = version_spread_violations(d, trace, *cfg.version_spread);
    std::vector<Violation<ConcreteDomain>> out;
    for (auto& v : all)
        if (v.happens) out.push_back(std::move(v));
    return out;
}

ReplayReport replay(const Counterexample& cex) {
    ReplayReport rep;
    // The simulator's slotted mode runs the workload on the real code and measures the property.
    const sim::SlottedRun run = sim::run_slotted(cex.config.model, cex.workload, cex.versions);
    for (const auto& n : run.notes) rep.lines.push_back("simulator: " + n);
    rep.window_refused = !run.notes.empty();
    rep.payloads_exact = run.payloads_exact;
    if (!run.payloads_exact) rep.lines.push_back("simulator: a merged payload was not exact");
    if (!cex.model_trace.empty()) {
        const std::string diff = first_difference(cex.model_trace, to_trace(run.slots));
        rep.follows_model = diff.empty();
        rep.lines.push_back(diff.empty() ? "the real queue and senders followed the model's trace step by step"
                                         : "the real run departs from the model's trace: " + diff);
    }
    const sim::SlotMeasurements m = sim::measure(run.slots, bounds_of(cex.config));
    std::vector<const sim::BoundViolation*> same;
    for (const auto& v : m.violations)
        if (v.property == cex.property) same.push_back(&v);
    rep.reproduced = !same.empty();
    for (const auto* v : same)
        if (v->slot == cex.step) rep.same_step = true;
    if (rep.reproduced) {
        rep.lines.push_back(fmt::format("violation of {} reproduced by the simulator on the real code ({} instance(s){}); "
                                        "first: slot {}: {}", cex.property, same.size(),
                                        rep.same_step ? ", one at the model's step" : "", same.front()->slot,
                                        same.front()->what));
    } else {
        rep.lines.push_back("the simulator measures NO violation of " + cex.property + " on this workload");
    }
    return rep;
}

}  // namespace shesha::verify

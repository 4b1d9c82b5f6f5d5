#include "counterexample.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "json_io.h"

namespace shesha::verify {
namespace {

template <class T> json::Json list(const std::vector<T>& v) {
    json::Json out = json::Json::array();
    for (const T& x : v) out.push_back(static_cast<long long>(x));
    return out;
}

}  // namespace

std::string to_json(const Counterexample& cex) {
    const ModelParams& m = cex.config.model;
    json::Json j;
    j["property"] = cex.property;
    j["step"] = cex.step;
    j["what"] = cex.what;
    j["model"] = {{"clusters", m.clusters},
                  {"horizon", m.horizon},
                  {"chunks", m.chunks},
                  {"elems_per_chunk", m.elems_per_chunk},
                  {"service_rate", m.service_rate},
                  {"max_arrivals", m.max_arrivals},
                  {"credit_delay", m.credit_delay},
                  {"feedback_delay", m.feedback_delay},
                  {"feedback", m.feedback},
                  {"queue_packets", m.queue_packets},
                  {"mark_depth", m.mark_depth},
                  {"aggregation", m.aggregation},
                  {"w_init", m.w_init},
                  {"w_min", m.w_min},
                  {"w_max", m.w_max},
                  {"additive_increase", m.additive_increase},
                  {"slow_start", m.slow_start},
                  {"gain", m.gain},
                  {"alpha_init", m.alpha_init},
                  {"congestion_threshold", m.congestion_threshold},
                  {"exact_window", m.exact_window},
                  {"scheduling", m.fair_scheduling ? "drr" : "fifo"},
                  {"unmerged_clusters", m.unmerged_clusters},
                  {"w_max_by_cluster", list(m.w_max_by_cluster)},
                  {"weights", list(m.weights)},
                  {"fair_lag", m.fair_lag},
                  {"chunk_follow", m.chunk_follow},
                  {"versions", m.versions},
                  {"version_tolerance", m.version_tolerance}};
    json::Json props = json::Json::object();
    if (cex.config.fairness) {
        props["fairness"] = {{"window", cex.config.fairness->window}, {"epsilon", cex.config.fairness->epsilon}};
        if (!cex.config.fairness->shares.empty()) props["fairness"]["shares"] = list(cex.config.fairness->shares);
    }
    if (cex.config.responsiveness)
        props["responsiveness"] = {{"within", cex.config.responsiveness->within},
                                   {"threshold", cex.config.responsiveness->threshold}};
    if (cex.config.aom) props["aom"] = {{"bound", cex.config.aom->bound}};
    if (cex.config.version_spread) props["version_spread"] = {{"bound", cex.config.version_spread->bound}};
    j["properties"] = std::move(props);
    json::Json steps = json::Json::array();
    for (size_t t = 0; t < cex.workload.size(); ++t) {
        json::Json step = {{"t", t}, {"send", list(cex.workload[t])}};
        if (m.versions > 0) step["version"] = list(t < cex.versions.size() ? cex.versions[t] : std::vector<int>(m.clusters, 0));
        if (t < cex.model_trace.size()) {
            const auto& r = cex.model_trace[t];
            std::vector<int> cut, marked;
            for (bool b : r.cut) cut.push_back(b);
            for (bool b : r.arrival_marked) marked.push_back(b);
            json::Json deps = json::Json::array();
            for (const auto& dep : r.departures)
                if (dep.valid) {
                    if (m.versions > 0)
                        deps.push_back({dep.cluster, dep.contrib, dep.marked ? 1 : 0, dep.min_version, dep.max_version});
                    else
                        deps.push_back({dep.cluster, dep.contrib, dep.marked ? 1 : 0});
                }
            step["model_sent"] = list(r.sent);
            step["depth_after_arrivals"] = r.depth_after_arrivals;
            step["depth_end"] = r.depth_end;
            step["class_depth_end"] = list(r.class_depth_end);
            step["drops"] = r.drops;
            step["departures"] = std::move(deps);
            step["marked_arrivals"] = list(marked);
            step["cut"] = list(cut);
            step["window"] = list(r.window);
            step["in_flight"] = list(r.in_flight);
        }
        steps.push_back(std::move(step));
    }
    j["steps"] = std::move(steps);
    // One line per step: the file stays readable (and editable with sed) at long horizons.
    return json::rows(j);
}

Counterexample counterexample_from_json(const std::string& text, const std::string& source) {
    Counterexample cex;
    // The parameters, bounds and workload: the simulator's replay format.
    const sim::SlottedReplay common = sim::parse_replay(text, source);
    cex.property = common.property;
    cex.step = common.step;
    cex.what = common.what;
    static_cast<sim::SlottedSystem&>(cex.config.model) = common.system;
    if (common.bounds.fairness)
        cex.config.fairness = FairnessSpec{common.bounds.fairness->window, common.bounds.fairness->epsilon,
                                           common.bounds.fairness->shares};
    if (common.bounds.responsiveness)
        cex.config.responsiveness = ResponsivenessSpec{common.bounds.responsiveness->within, common.bounds.responsiveness->threshold};
    if (common.bounds.aom) cex.config.aom = AomSpec{common.bounds.aom->bound};
    if (common.bounds.version_spread) cex.config.version_spread = VersionSpreadSpec{common.bounds.version_spread->bound};
    cex.workload = common.workload;
    cex.versions = common.versions;
    using json::required;
    try {
        // parse_replay accepted the text: it is valid JSON with an object model and a list steps.
        const json::Json root = json::parse(text, source);
        if (auto v = json::optional<bool>(root["model"], "exact_window", "model.")) cex.config.model.exact_window = *v;
        // The model's trace, for comparison with the real run.
        const json::Json& steps = root["steps"];
        for (std::size_t t = 0; t < steps.size(); ++t) {
            const json::Json& step = steps[t];
            if (!step.contains("depth_end")) break;
            const std::string at = fmt::format("steps[{}].", t);
            StepRecord<ConcreteDomain> r;
            for (int v : required<std::vector<int>>(step, "model_sent", at)) r.sent.push_back(v);
            r.depth_after_arrivals = required<int>(step, "depth_after_arrivals", at);
            r.depth_end = required<int>(step, "depth_end", at);
            if (auto v = json::optional<std::vector<int>>(step, "class_depth_end", at))
                for (int x : *v) r.class_depth_end.push_back(x);
            r.drops = required<int>(step, "drops", at);
            for (const auto& dep : required<std::vector<std::vector<int>>>(step, "departures", at)) {
                if (dep.size() != 3 && dep.size() != 5)
                    throw json::KeyError("key " + at + "departures: wrong type (expected [cluster, contributions, marked] "
                                         "or, with versions, [..., min_version, max_version])");
                r.departures.push_back({true, dep[0], dep[1], dep[2] != 0, dep.size() == 5 ? dep[3] : 0,
                                        dep.size() == 5 ? dep[4] : 0});
            }
            for (int v : required<std::vector<int>>(step, "marked_arrivals", at)) r.arrival_marked.push_back(v != 0);
            for (int v : required<std::vector<int>>(step, "cut", at)) r.cut.push_back(v != 0);
            for (int v : required<std::vector<int>>(step, "window", at)) r.window.push_back(v);
            for (int v : required<std::vector<int>>(step, "in_flight", at)) r.in_flight.push_back(v);
            cex.model_trace.push_back(std::move(r));
        }
    } catch (const json::Error& e) {
        throw std::runtime_error(source + ": not a shesha-verify counterexample: " + e.what());
    }
    cex.config.source = source;
    return cex;
}

void write_file(const std::string& path, const std::string& text) {
    std::ofstream out(path);
    out << text;
    if (!out) throw std::runtime_error(path + ": cannot write");
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error(path + ": cannot read");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace shesha::verify

#include "counterexample.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

namespace shesha::verify {
namespace {

std::string quoted(const std::string& s) {
    std::string out = "\"";
    for (char ch : s) {
        if (ch == '"' || ch == '\\') out += '\\';
        if (ch == '\n') { out += "\\n"; continue; }
        out += ch;
    }
    return out + "\"";
}

template <class T> std::string list(const std::vector<T>& v) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(static_cast<long long>(v[i]));
    return out + "]";
}

}  // namespace

std::string to_json(const Counterexample& cex) {
    const ModelParams& m = cex.config.model;
    std::string s = "{\n";
    s += fmt::format("  \"property\": {},\n  \"step\": {},\n  \"what\": {},\n", quoted(cex.property), cex.step,
                     quoted(cex.what));
    s += "  \"model\": {";
    s += fmt::format("\"clusters\": {}, \"horizon\": {}, \"chunks\": {}, \"elems_per_chunk\": {}, "
                     "\"service_rate\": {}, \"max_arrivals\": {}, \"credit_delay\": {}, \"feedback_delay\": {}, "
                     "\"feedback\": {}, \"queue_packets\": {}, \"mark_depth\": {}, \"aggregation\": {}, "
                     "\"w_init\": {}, \"w_min\": {}, \"w_max\": {}, \"additive_increase\": {}, \"gain\": {}, "
                     "\"alpha_init\": {}, \"congestion_threshold\": {}, \"exact_window\": {}, \"unmerged_clusters\": {}, \"w_max_by_cluster\": {}}},\n",
                     m.clusters, m.horizon, m.chunks, m.elems_per_chunk, m.service_rate, m.max_arrivals,
                     m.credit_delay, m.feedback_delay, m.feedback, m.queue_packets, m.mark_depth, m.aggregation,
                     m.w_init, m.w_min, m.w_max, m.additive_increase, m.gain, m.alpha_init, m.congestion_threshold,
                     m.exact_window, m.unmerged_clusters, list(m.w_max_by_cluster));
    s += "  \"properties\": {";
    std::string props;
    if (cex.config.fairness)
        props += fmt::format("\"fairness\": {{\"window\": {}, \"epsilon\": {}}}", cex.config.fairness->window,
                             cex.config.fairness->epsilon);
    if (cex.config.responsiveness)
        props += fmt::format("{}\"responsiveness\": {{\"within\": {}, \"threshold\": {}}}", props.empty() ? "" : ", ",
                             cex.config.responsiveness->within, cex.config.responsiveness->threshold);
    if (cex.config.aom) props += fmt::format("{}\"aom\": {{\"bound\": {}}}", props.empty() ? "" : ", ", cex.config.aom->bound);
    s += props + "},\n";
    s += "  \"steps\": [\n";
    for (size_t t = 0; t < cex.workload.size(); ++t) {
        s += fmt::format("    {{\"t\": {}, \"send\": {}", t, list(cex.workload[t]));
        if (t < cex.model_trace.size()) {
            const auto& r = cex.model_trace[t];
            std::vector<int> cut, marked;
            for (bool b : r.cut) cut.push_back(b);
            for (bool b : r.arrival_marked) marked.push_back(b);
            std::string deps = "[";
            for (const auto& dep : r.departures)
                if (dep.valid)
                    deps += fmt::format("{}[{}, {}, {}]", deps.size() > 1 ? ", " : "", dep.cluster, dep.contrib,
                                        dep.marked ? 1 : 0);
            deps += "]";
            s += fmt::format(", \"model_sent\": {}, \"depth_after_arrivals\": {}, \"depth_end\": {}, \"drops\": {}, "
                             "\"departures\": {}, \"marked_arrivals\": {}, \"cut\": {}, \"window\": {}, "
                             "\"in_flight\": {}",
                             list(r.sent), r.depth_after_arrivals, r.depth_end, r.drops, deps, list(marked), list(cut),
                             list(r.window), list(r.in_flight));
        }
        s += t + 1 < cex.workload.size() ? "},\n" : "}\n";
    }
    s += "  ]\n}\n";
    return s;
}

Counterexample counterexample_from_json(const std::string& text, const std::string& source) {
    Counterexample cex;
    // The parameters, bounds and workload: the simulator's replay format.
    const sim::SlottedReplay common = sim::parse_replay(text, source);
    cex.property = common.property;
    cex.step = common.step;
    cex.what = common.what;
    static_cast<sim::SlottedSystem&>(cex.config.model) = common.system;
    if (common.bounds.fairness) cex.config.fairness = FairnessSpec{common.bounds.fairness->window, common.bounds.fairness->epsilon};
    if (common.bounds.responsiveness)
        cex.config.responsiveness = ResponsivenessSpec{common.bounds.responsiveness->within, common.bounds.responsiveness->threshold};
    if (common.bounds.aom) cex.config.aom = AomSpec{common.bounds.aom->bound};
    cex.workload = common.workload;
    try {
        const YAML::Node root = YAML::Load(text);
        if (root["model"]["exact_window"]) cex.config.model.exact_window = root["model"]["exact_window"].as<bool>();
        // The model's trace, for comparison with the real run.
        for (const auto& step : root["steps"]) {
            if (!step["depth_end"]) break;
            StepRecord<ConcreteDomain> r;
            for (int v : step["model_sent"].as<std::vector<int>>()) r.sent.push_back(v);
            r.depth_after_arrivals = step["depth_after_arrivals"].as<int>();
            r.depth_end = step["depth_end"].as<int>();
            r.drops = step["drops"].as<int>();
            for (const auto& dep : step["departures"])
                r.departures.push_back({true, dep[0].as<int>(), dep[1].as<int>(), dep[2].as<int>() != 0});
            for (int v : step["marked_arrivals"].as<std::vector<int>>()) r.arrival_marked.push_back(v != 0);
            for (int v : step["cut"].as<std::vector<int>>()) r.cut.push_back(v != 0);
            for (int v : step["window"].as<std::vector<int>>()) r.window.push_back(v);
            for (int v : step["in_flight"].as<std::vector<int>>()) r.in_flight.push_back(v);
            cex.model_trace.push_back(std::move(r));
        }
    } catch (const YAML::Exception& e) {
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

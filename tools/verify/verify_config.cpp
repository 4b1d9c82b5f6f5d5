#include "verify_config.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "cluster_config.h"
#include "strict_yaml.h"
#include "switch_config.h"

namespace shesha::verify {
namespace {

using yaml::MapView;
using yaml::Reader;
using yaml::Value;

// The model's bounds are small ints; every lower bound here is >= 0.
int integer(const Reader& r, const Value& v, int lo, int hi) {
    return static_cast<int>(r.uint(v, static_cast<std::uint64_t>(lo), static_cast<std::uint64_t>(hi)));
}

// A transport window constant: the model tracks floor(W) exactly only for whole numbers.
int whole_window(const Reader& r, const Value& v) {
    const double w = r.number(v, 0, 1024);
    if (w != static_cast<int>(w)) r.fail(v, "the verifier needs a whole number of chunks here (docs/verification.md)");
    return static_cast<int>(w);
}

}  // namespace

std::string validate(const ModelParams& p) { return sim::validate(p); }

// The shared reader's errors leave as VerifyConfigError.
VerifyConfig parse_verify_config(const std::string& yaml_text, const std::string& source, const std::string& base_dir) try {
    const Reader r(source);
    YAML::Node root;
    try {
        root = YAML::Load(yaml_text);
    } catch (const YAML::Exception& e) {
        throw VerifyConfigError(fmt::format("{}: YAML syntax error: {}", source, e.msg));
    }
    if (!root || root.IsNull()) throw VerifyConfigError(source + ": empty configuration");
    const MapView top =
        r.map(r.root(root), {"switch_config", "switch_port", "transport", "worker_configs", "model", "properties"});

    VerifyConfig cfg;
    cfg.source = source;
    ModelParams& m = cfg.model;
    bool has_cluster_rules = false, drop_unmerged = false;
    std::vector<int> switch_weights;  // by model cluster (switch id c + 1), from aggregation.clusters[].weight

    // 1. The switch's own YAML: queue size, marking depth, aggregation and feedback switches.
    const std::optional<Value> switch_config = top.get("switch_config");
    if (switch_config) {
        std::filesystem::path path = r.string(*switch_config, "a file name");
        if (path.is_relative()) path = std::filesystem::path(base_dir) / path;
        core::SwitchConfig sw;
        try {
            sw = core::load_switch_config(path.string());
        } catch (const core::ConfigError& e) {
            r.fail(*switch_config, e.what());
        }
        if (sw.ports.empty()) r.fail(*switch_config, "the switch config has no ports");
        const core::PortConfig* port = &sw.ports.front();
        if (const auto switch_port = top.get("switch_port")) {
            const std::string name = r.string(*switch_port, "a port name");
            port = nullptr;
            for (const auto& p : sw.ports)
                if (p.name == name) port = &p;
            if (port == nullptr) r.fail(*switch_port, "no port named '" + name + "' in the switch config");
        }
        m.queue_packets = static_cast<int>(std::bit_ceil(std::max<std::uint32_t>(1, port->queue_packets)));
        m.mark_depth = static_cast<int>(port->marking.depth_packets);
        m.aggregation = sw.aggregation;
        m.feedback = sw.feedback;
        m.fair_scheduling = port->scheduling.value_or(sw.scheduling) == core::Scheduling::Drr;
        // The fair queues' options, as core::PortQueue serves them (docs/verification.md): each
        // cluster's weight (its DRR quantum in packets), bounded lag, chunk following.
        if (m.fair_scheduling) {
            m.fair_lag = static_cast<int>(sw.fair_lag);
            m.chunk_follow = sw.chunk_follow;
        }
        for (int c = 0; c < 32; ++c) {
            int weight = 1;
            for (const auto& rule : sw.clusters)
                if (rule.id == c + 1) weight = static_cast<int>(rule.weight);
            switch_weights.push_back(weight);
        }
        // Per-cluster rules (aggregation.clusters): the replay's cluster c has id c + 1 and sends
        // from 10.0.0.(c + 1). With rules, a cluster merges only if its rule turns aggregation on
        // and lists that address (the switch forwards unknown clusters and non-members unmerged).
        // Without rules every cluster merges (the switch's own default would merge nothing).
        if (!sw.clusters.empty()) {
            // One version tolerance for every merging cluster (the model has one).
            std::optional<std::size_t> first;
            for (std::size_t i = 0; i < sw.clusters.size(); ++i) {
                if (!sw.clusters[i].aggregation) continue;
                if (!first) {
                    first = i;
                    m.version_tolerance = static_cast<int>(sw.clusters[i].version_tolerance);
                } else if (static_cast<int>(sw.clusters[i].version_tolerance) != m.version_tolerance) {
                    r.fail(*switch_config, fmt::format("aggregation.clusters[{}].version_tolerance is {} but "
                                                       "aggregation.clusters[{}]'s is {}: the model has one tolerance",
                                                       i, sw.clusters[i].version_tolerance, *first,
                                                       m.version_tolerance));
                }
            }
            for (int c = 0; c < 32; ++c) {
                const std::uint32_t ip = 0x0A000001u + static_cast<std::uint32_t>(c);
                bool merges = false;
                for (const auto& rule : sw.clusters)
                    if (rule.id == c + 1)
                        merges = rule.aggregation &&
                                 std::find(rule.member_ips.begin(), rule.member_ips.end(), ip) != rule.member_ips.end();
                if (!merges) m.unmerged_clusters |= 1u << c;
            }
            drop_unmerged = sw.non_member == core::NonMemberAction::Drop;
            has_cluster_rules = true;
        }
        cfg.notes += fmt::format("from {} port {}: queue {} packets, mark depth {}, aggregation {}, feedback {}, "
                                 "scheduling {}{}{}\n", path.string(), port->name, m.queue_packets, m.mark_depth,
                                 m.aggregation, m.feedback, m.fair_scheduling ? "drr" : "fifo",
                                 m.fair_lag != 0 ? fmt::format(" (bounded lag {})", m.fair_lag) : std::string(),
                                 m.chunk_follow ? ", chunk following" : "");
        if (port->marking.sojourn_us != 0)
            cfg.notes += "note: sojourn marking is not modelled (depth marking only)\n";
    } else if (const auto switch_port = top.get("switch_port")) {
        r.fail(*switch_port, "needs switch_config");
    }

    // 2. Window constants, same names as transport::SenderConfig.
    if (const auto transport = top.get("transport")) {
        const MapView t = r.map(*transport, {"w_init", "w_min", "w_max", "additive_increase", "slow_start", "gain",
                                             "alpha_init", "w_max_by_cluster"});
        if (auto x = t.get("w_init")) m.w_init = whole_window(r, *x);
        if (auto x = t.get("w_min")) m.w_min = whole_window(r, *x);
        if (auto x = t.get("w_max")) m.w_max = whole_window(r, *x);
        if (auto x = t.get("additive_increase")) m.additive_increase = whole_window(r, *x);
        if (auto x = t.get("slow_start")) m.slow_start = r.boolean(*x);
        if (auto x = t.get("gain")) m.gain = r.number(*x, 1e-9, 1);
        if (auto x = t.get("alpha_init")) m.alpha_init = r.number(*x, 0, 1);
        if (const auto caps = t.get("w_max_by_cluster")) {
            if (!caps->node.IsSequence()) r.fail(*caps, "expected a list of window caps");
            for (const Value& cap : r.list(*caps, "window caps")) m.w_max_by_cluster.push_back(whole_window(r, cap));
        }
    }

    // 2b. Or the workers' own cluster YAML (what shesha-worker reads), one file per cluster or one
    // for all, parsed by the workers' parser. The model shares every window constant but the cap.
    const std::optional<Value> worker_configs = top.get("worker_configs");
    if (worker_configs) {
        if (top.get("transport")) r.fail(*worker_configs, "give either transport: or worker_configs:, not both");
        if (!worker_configs->node.IsSequence() || worker_configs->node.size() == 0)
            r.fail(*worker_configs, "expected a list of cluster YAML files");
        const std::vector<Value> files = r.list(*worker_configs, "cluster YAML files");
        std::vector<drl::TransportConfig> per_file;
        std::vector<std::string> names;
        for (const Value& file : files) {
            std::filesystem::path path = r.string(file, "a file name");
            if (path.is_relative()) path = std::filesystem::path(base_dir) / path;
            try {
                per_file.push_back(drl::load_cluster_config(path.string()).transport);
            } catch (const drl::ConfigError& e) {
                r.fail(file, e.what());
            }
            names.push_back(path.string());
        }
        auto whole = [&](double v, std::size_t i, const char* key) {
            if (v != std::floor(v) || v > 1024)
                r.fail(files[i],
                       fmt::format("{}: transport.{} = {}: the verifier needs a whole number of chunks up to 1024 "
                                   "(docs/verification.md)", names[i], key, v));
            return static_cast<int>(v);
        };
        const drl::TransportConfig& t0 = per_file.front();
        // A cluster starts at min(w_init, its cap) (ModelParams::w_init_of): w_init is the largest.
        std::size_t widest = 0;
        for (std::size_t i = 0; i < per_file.size(); ++i)
            if (per_file[i].w_init > per_file[widest].w_init) widest = i;
        m.w_init = whole(per_file[widest].w_init, widest, "w_init");
        m.w_min = whole(modelled_w_min(t0.w_min), 0, "w_min");
        if (t0.w_min < 1)
            cfg.notes += fmt::format("note: transport.w_min {} (pacing below one chunk) is modelled as 1 chunk\n", t0.w_min);
        m.additive_increase = whole(t0.additive_increase, 0, "additive_increase");
        m.slow_start = t0.slow_start;
        m.gain = t0.gain;
        m.alpha_init = t0.alpha_init;
        int cap_max = 0;
        std::vector<int> caps;
        for (std::size_t i = 0; i < per_file.size(); ++i) {
            const drl::TransportConfig& t = per_file[i];
            if (t.w_init != std::min<double>(m.w_init, t.w_max) || t.w_min != t0.w_min || t.additive_increase != t0.additive_increase ||
                t.slow_start != t0.slow_start || t.gain != t0.gain || t.alpha_init != t0.alpha_init)
                r.fail(files[i],
                       fmt::format("{}: transport.w_min, additive_increase, slow_start, gain and alpha_init must equal those of "
                                   "{}, and w_init must be min({}, w_max) (the model shares them; only w_max may "
                                   "differ per cluster)", names[i], names[0], m.w_init));
            caps.push_back(whole(t.w_max, i, "w_max"));
            cap_max = std::max(cap_max, caps.back());
            if (t.credit_timeout_ms != 0 && i == 0)
                cfg.notes += "note: credit timeouts are not modelled (the model has no losses to recover)\n";
        }
        m.w_max = cap_max;
        if (caps.size() > 1 && std::any_of(caps.begin(), caps.end(), [&](int c) { return c != cap_max; }))
            m.w_max_by_cluster = caps;
        cfg.notes += fmt::format("window constants from {}: w_init {}, w_min {}, w_max {}, additive increase {}\n",
                                 fmt::join(names, ", "), m.w_init, m.w_min,
                                 m.w_max_by_cluster.empty() ? std::to_string(m.w_max)
                                                            : fmt::format("[{}]", fmt::join(m.w_max_by_cluster, ", ")),
                                 m.additive_increase);
    }

    // 3. The verifier's bounds; queue_packets / mark_depth / aggregation / feedback override the switch.
    if (const auto model = top.get("model")) {
        const MapView n = r.map(*model, {"clusters", "horizon", "chunks", "elems_per_chunk", "service_rate", "max_arrivals",
                                         "credit_delay", "feedback_delay", "feedback", "queue_packets", "mark_depth",
                                         "aggregation", "exact_window", "scheduling", "versions", "version_tolerance",
                                         "weights", "fair_lag", "chunk_follow"});
        auto get = [&](const char* key, int& out, int lo, int hi) {
            if (auto x = n.get(key)) out = integer(r, *x, lo, hi);
        };
        get("clusters", m.clusters, 1, 8);
        get("horizon", m.horizon, 1, 200);
        get("chunks", m.chunks, 1, 64);
        get("elems_per_chunk", m.elems_per_chunk, 2, 64);
        get("service_rate", m.service_rate, 1, 16);
        get("max_arrivals", m.max_arrivals, 1, 16);
        get("credit_delay", m.credit_delay, 1, 50);
        get("feedback_delay", m.feedback_delay, 1, 50);
        if (auto x = n.get("queue_packets")) {
            m.queue_packets = integer(r, *x, 1, 64);
            if (!std::has_single_bit(static_cast<unsigned>(m.queue_packets)))
                r.fail(*x, "must be a power of two (the real queue rounds up)");
        }
        get("mark_depth", m.mark_depth, 0, 64);
        get("versions", m.versions, 0, 1000);
        get("version_tolerance", m.version_tolerance, 0, 16);
        if (auto x = n.get("feedback")) m.feedback = r.boolean(*x);
        if (auto x = n.get("aggregation")) m.aggregation = r.boolean(*x);
        if (auto x = n.get("exact_window")) m.exact_window = r.boolean(*x);
        if (auto x = n.get("scheduling")) {
            const std::string v = r.string(*x, "fifo or drr");
            if (v != "fifo" && v != "drr") r.fail(*x, "expected fifo or drr, not '" + v + "'");
            m.fair_scheduling = v == "drr";
            if (!m.fair_scheduling) {  // the fair queues' options do nothing on a FIFO port
                m.fair_lag = 0;
                m.chunk_follow = false;
            }
        }
        if (auto x = n.get("weights")) {
            if (!x->node.IsSequence()) r.fail(*x, "expected a list of weights, one per cluster");
            switch_weights.clear();
            for (const Value& w : r.list(*x, "weights")) switch_weights.push_back(integer(r, w, 1, 1000));
            if (static_cast<int>(switch_weights.size()) != m.clusters)
                r.fail(*x, fmt::format("lists {} weights but model.clusters is {}", switch_weights.size(), m.clusters));
        }
        if (auto x = n.get("fair_lag")) {
            m.fair_lag = integer(r, *x, 0, 65535);
            if (m.fair_lag != 0 && !m.fair_scheduling) r.fail(*x, "bounded lag needs fair queues (scheduling drr)");
        }
        if (auto x = n.get("chunk_follow")) {
            m.chunk_follow = r.boolean(*x);
            if (m.chunk_follow && !m.fair_scheduling) r.fail(*x, "chunk following needs fair queues (scheduling drr)");
        }
    }
    // Weights: the model's clusters 0..C-1 (switch ids 1..C); all 1 is the unweighted scheduler.
    if (static_cast<int>(switch_weights.size()) > m.clusters) switch_weights.resize(m.clusters);
    if (std::any_of(switch_weights.begin(), switch_weights.end(), [](int w) { return w != 1; }))
        m.weights = switch_weights;
    if (!m.weights.empty())
        cfg.notes += fmt::format("cluster weights (DRR quantum in packets per turn{}): {}\n",
                                 m.fair_scheduling ? "" : "; unused on a FIFO port", fmt::join(m.weights, ", "));
    if (worker_configs && worker_configs->node.size() > 1 && static_cast<int>(worker_configs->node.size()) != m.clusters)
        r.fail(*worker_configs,
               fmt::format("lists {} files but model.clusters is {}: give one file per cluster, or one for all",
                           worker_configs->node.size(), m.clusters));
    if (has_cluster_rules) {
        m.unmerged_clusters &= (1u << m.clusters) - 1;
        std::string unmerged;
        for (int c = 0; c < m.clusters; ++c) {
            if (!((m.unmerged_clusters >> c) & 1u)) continue;
            if (drop_unmerged)
                r.fail(*switch_config,
                       fmt::format("cluster id {} (model cluster {}) has no merging rule and non_member is drop: "
                                   "not modelled", c + 1, c));
            unmerged += (unmerged.empty() ? "" : ", ") + std::to_string(c);
        }
        cfg.notes += fmt::format("per-cluster rules: model clusters never merged (cluster c has switch id c+1): {}\n",
                                 unmerged.empty() ? "none" : unmerged);
    }
    if (m.queue_packets > 64)
        throw VerifyConfigError(fmt::format(
            "{}: the queue has {} slots: too many to unroll; set model.queue_packets (<= 64) for the bounded model",
            source, m.queue_packets));

    // 4. Properties: those listed are checked.
    if (const auto properties = top.get("properties")) {
        const MapView p = r.map(*properties, {"fairness", "responsiveness", "aom", "version_spread"});
        if (const auto section = p.get("fairness")) {
            const MapView f = r.map(*section, {"window", "epsilon", "shares"});
            FairnessSpec s;
            if (auto x = f.get("window")) s.window = integer(r, *x, 1, 200);
            if (auto x = f.get("epsilon")) s.epsilon = integer(r, *x, 0, 1000);
            // The shares the operator wants: the switch's weights unless given.
            s.shares = m.weights;
            if (auto x = f.get("shares")) {
                if (!x->node.IsSequence()) r.fail(*x, "expected a list of shares, one per cluster");
                s.shares.clear();
                for (const Value& w : r.list(*x, "shares")) s.shares.push_back(integer(r, w, 1, 1000));
                if (static_cast<int>(s.shares.size()) != m.clusters)
                    r.fail(*x, fmt::format("lists {} shares but model.clusters is {}", s.shares.size(), m.clusters));
            }
            cfg.fairness = s;
        }
        if (const auto section = p.get("responsiveness")) {
            const MapView f = r.map(*section, {"within", "threshold"});
            ResponsivenessSpec s;
            s.threshold = m.mark_depth;
            if (auto x = f.get("within")) s.within = integer(r, *x, 1, 200);
            if (auto x = f.get("threshold")) s.threshold = integer(r, *x, 1, 64);
            if (s.threshold == 0)
                r.fail(section->mark, "properties.responsiveness.threshold",
                       "marking is off in this configuration: give the congestion threshold explicitly");
            cfg.responsiveness = s;
            m.congestion_threshold = s.threshold;
        }
        if (const auto section = p.get("aom")) {
            const MapView f = r.map(*section, {"bound"});
            AomSpec s;
            if (auto x = f.get("bound")) s.bound = integer(r, *x, 0, 1000);
            cfg.aom = s;
        }
        if (const auto section = p.get("version_spread")) {
            const MapView f = r.map(*section, {"bound"});
            VersionSpreadSpec s;
            s.bound = m.version_tolerance;  // default: what the switch's rule promises
            if (auto x = f.get("bound")) s.bound = integer(r, *x, 0, 1000);
            if (m.versions < 1)
                r.fail(section->mark, "properties.version_spread",
                       "needs model.versions >= 1 (with one version every packet's spread is 0)");
            cfg.version_spread = s;
        }
    }
    if (const std::string err = validate(m); !err.empty()) throw VerifyConfigError(source + ": " + err);
    return cfg;
} catch (const yaml::Error& e) {
    throw VerifyConfigError(e.what());
}

VerifyConfig load_verify_config(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw VerifyConfigError(path + ": cannot read the file");
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_verify_config(ss.str(), path, std::filesystem::path(path).parent_path().string());
}

}  // namespace shesha::verify

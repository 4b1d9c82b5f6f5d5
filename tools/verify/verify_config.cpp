#include "verify_config.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "cluster_config.h"
#include "switch_config.h"

namespace shesha::verify {
namespace {

// Keeps the source name and gives every error the same "FILE:LINE: key.path: what" shape.
class Reader {
public:
    explicit Reader(std::string source) : source_(std::move(source)) {}

    [[noreturn]] void fail(const YAML::Node& n, const std::string& where, const std::string& what) const {
        if (n && n.Mark().line >= 0)
            throw VerifyConfigError(fmt::format("{}:{}: {}: {}", source_, n.Mark().line + 1, where, what));
        throw VerifyConfigError(fmt::format("{}: {}: {}", source_, where, what));
    }

    void require_map(const YAML::Node& n, const std::string& where, std::initializer_list<const char*> allowed) const {
        if (!n.IsMap()) fail(n, where, "expected a mapping");
        std::set<std::string> ok(allowed.begin(), allowed.end());
        for (const auto& kv : n) {
            const std::string key = kv.first.as<std::string>();
            if (!ok.count(key)) {
                std::string list;
                for (const auto& k : ok) list += (list.empty() ? "" : ", ") + k;
                fail(kv.first, where.empty() ? key : where + "." + key, "unknown key (allowed: " + list + ")");
            }
        }
    }

    // Integer scalar read from its text, so "1.5", "0x10" or "true" are errors, not conversions.
    int integer(const YAML::Node& n, const std::string& where, int lo, int hi) const {
        if (!n.IsScalar()) fail(n, where, "expected an integer");
        const std::string s = n.Scalar();
        long long v = 0;
        const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc{} || p != s.data() + s.size())
            fail(n, where, fmt::format("expected an integer, got '{}'", s));
        if (v < lo || v > hi) fail(n, where, fmt::format("must lie in [{}, {}], got {}", lo, hi, v));
        return static_cast<int>(v);
    }

    double real(const YAML::Node& n, const std::string& where, double lo, double hi) const {
        if (!n.IsScalar()) fail(n, where, "expected a number");
        const std::string s = n.Scalar();
        std::istringstream in(s);
        double v = 0;
        in >> v;
        if (!in || !in.eof()) fail(n, where, fmt::format("expected a number, got '{}'", s));
        if (!(v >= lo && v <= hi)) fail(n, where, fmt::format("must lie in [{}, {}], got {}", lo, hi, s));
        return v;
    }

    bool boolean(const YAML::Node& n, const std::string& where) const {
        if (!n.IsScalar()) fail(n, where, "expected true or false");
        if (n.Scalar() == "true") return true;
        if (n.Scalar() == "false") return false;
        fail(n, where, fmt::format("expected true or false, got '{}'", n.Scalar()));
    }

    // A transport window constant: the model tracks floor(W) exactly only for whole numbers.
    int whole_window(const YAML::Node& n, const std::string& where) const {
        const double v = real(n, where, 0, 1024);
        if (v != static_cast<int>(v))
            fail(n, where, "the verifier needs a whole number of chunks here (docs/verification.md)");
        return static_cast<int>(v);
    }

    const std::string& source() const { return source_; }

private:
    std::string source_;
};

}  // namespace

std::string validate(const ModelParams& p) { return sim::validate(p); }

VerifyConfig parse_verify_config(const std::string& yaml_text, const std::string& source, const std::string& base_dir) {
    Reader r(source);
    YAML::Node root;
    try {
        root = YAML::Load(yaml_text);
    } catch (const YAML::Exception& e) {
        throw VerifyConfigError(fmt::format("{}: YAML syntax error: {}", source, e.msg));
    }
    if (!root || root.IsNull()) throw VerifyConfigError(source + ": empty configuration");
    r.require_map(root, "", {"switch_config", "switch_port", "transport", "worker_configs", "model", "properties"});

    VerifyConfig cfg;
    cfg.source = source;
    ModelParams& m = cfg.model;
    bool has_cluster_rules = false, drop_unmerged = false;

    // 1. The switch's own YAML: queue size, marking depth, aggregation and feedback switches.
    if (root["switch_config"]) {
        std::filesystem::path path = root["switch_config"].as<std::string>();
        if (path.is_relative()) path = std::filesystem::path(base_dir) / path;
        core::SwitchConfig sw;
        try {
            sw = core::load_switch_config(path.string());
        } catch (const core::ConfigError& e) {
            r.fail(root["switch_config"], "switch_config", e.what());
        }
        if (sw.ports.empty()) r.fail(root["switch_config"], "switch_config", "the switch config has no ports");
        const core::PortConfig* port = &sw.ports.front();
        if (root["switch_port"]) {
            const std::string name = root["switch_port"].as<std::string>();
            port = nullptr;
            for (const auto& p : sw.ports)
                if (p.name == name) port = &p;
            if (port == nullptr) r.fail(root["switch_port"], "switch_port", "no port named '" + name + "' in the switch config");
        }
        m.queue_packets = static_cast<int>(std::bit_ceil(std::max<std::uint32_t>(1, port->queue_packets)));
        m.mark_depth = static_cast<int>(port->marking.depth_packets);
        m.aggregation = sw.aggregation;
        m.feedback = sw.feedback;
        // Per-cluster rules (aggregation.clusters): the replay's cluster c has id c + 1 and sends
        // from 10.0.0.(c + 1). With rules, a cluster merges only if its rule turns aggregation on
        // and lists that address (the switch forwards unknown clusters and non-members unmerged).
        // Without rules every cluster merges (the switch's own default would merge nothing).
        if (!sw.clusters.empty()) {
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
        cfg.notes += fmt::format("from {} port {}: queue {} packets, mark depth {}, aggregation {}, feedback {}\n",
                                 path.string(), port->name, m.queue_packets, m.mark_depth, m.aggregation, m.feedback);
        if (port->marking.sojourn_us != 0)
            cfg.notes += "note: sojourn marking is not modelled (depth marking only)\n";
    } else if (root["switch_port"]) {
        r.fail(root["switch_port"], "switch_port", "needs switch_config");
    }

    // 2. Window constants, same names as transport::SenderConfig.
    if (const YAML::Node t = root["transport"]) {
        r.require_map(t, "transport", {"w_init", "w_min", "w_max", "additive_increase", "gain", "alpha_init",
                                       "w_max_by_cluster"});
        if (t["w_init"]) m.w_init = r.whole_window(t["w_init"], "transport.w_init");
        if (t["w_min"]) m.w_min = r.whole_window(t["w_min"], "transport.w_min");
        if (t["w_max"]) m.w_max = r.whole_window(t["w_max"], "transport.w_max");
        if (t["additive_increase"]) m.additive_increase = r.whole_window(t["additive_increase"], "transport.additive_increase");
        if (t["gain"]) m.gain = r.real(t["gain"], "transport.gain", 1e-9, 1);
        if (t["alpha_init"]) m.alpha_init = r.real(t["alpha_init"], "transport.alpha_init", 0, 1);
        if (const YAML::Node caps = t["w_max_by_cluster"]) {
            if (!caps.IsSequence()) r.fail(caps, "transport.w_max_by_cluster", "expected a list of window caps");
            for (std::size_t i = 0; i < caps.size(); ++i)
                m.w_max_by_cluster.push_back(
                    r.whole_window(caps[i], fmt::format("transport.w_max_by_cluster[{}]", i)));
        }
    }

    // 2b. Or the workers' own cluster YAML (what shesha-worker reads), one file per cluster or one
    // for all, parsed by the workers' parser. The model shares every window constant but the cap.
    if (const YAML::Node list = root["worker_configs"]) {
        if (root["transport"]) r.fail(list, "worker_configs", "give either transport: or worker_configs:, not both");
        if (!list.IsSequence() || list.size() == 0) r.fail(list, "worker_configs", "expected a list of cluster YAML files");
        std::vector<drl::TransportConfig> per_file;
        std::vector<std::string> names;
        for (std::size_t i = 0; i < list.size(); ++i) {
            const std::string where = fmt::format("worker_configs[{}]", i);
            if (!list[i].IsScalar()) r.fail(list[i], where, "expected a file name");
            std::filesystem::path path = list[i].Scalar();
            if (path.is_relative()) path = std::filesystem::path(base_dir) / path;
            try {
                per_file.push_back(drl::load_cluster_config(path.string()).transport);
            } catch (const drl::ConfigError& e) {
                r.fail(list[i], where, e.what());
            }
            names.push_back(path.string());
        }
        auto whole = [&](double v, std::size_t i, const char* key) {
            if (v != std::floor(v) || v > 1024)
                r.fail(list[i], fmt::format("worker_configs[{}]", i),
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
        m.w_min = whole(t0.w_min, 0, "w_min");
        m.additive_increase = whole(t0.additive_increase, 0, "additive_increase");
        m.gain = t0.gain;
        m.alpha_init = t0.alpha_init;
        int cap_max = 0;
        std::vector<int> caps;
        for (std::size_t i = 0; i < per_file.size(); ++i) {
            const drl::TransportConfig& t = per_file[i];
            if (t.w_init != std::min<double>(m.w_init, t.w_max) || t.w_min != t0.w_min || t.additive_increase != t0.additive_increase ||
                t.gain != t0.gain || t.alpha_init != t0.alpha_init)
                r.fail(list[i], fmt::format("worker_configs[{}]", i),
                       fmt::format("{}: transport.w_min, additive_increase, gain and alpha_init must equal those of "
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
    if (const YAML::Node n = root["model"]) {
        r.require_map(n, "model", {"clusters", "horizon", "chunks", "elems_per_chunk", "service_rate", "max_arrivals",
                                   "credit_delay", "feedback_delay", "feedback", "queue_packets", "mark_depth",
                                   "aggregation", "exact_window"});
        auto get = [&](const char* key, int& out, int lo, int hi) {
            if (n[key]) out = r.integer(n[key], std::string("model.") + key, lo, hi);
        };
        get("clusters", m.clusters, 1, 8);
        get("horizon", m.horizon, 1, 200);
        get("chunks", m.chunks, 1, 64);
        get("elems_per_chunk", m.elems_per_chunk, 2, 64);
        get("service_rate", m.service_rate, 1, 16);
        get("max_arrivals", m.max_arrivals, 1, 16);
        get("credit_delay", m.credit_delay, 1, 50);
        get("feedback_delay", m.feedback_delay, 1, 50);
        if (n["queue_packets"]) {
            m.queue_packets = r.integer(n["queue_packets"], "model.queue_packets", 1, 64);
            if (!std::has_single_bit(static_cast<unsigned>(m.queue_packets)))
                r.fail(n["queue_packets"], "model.queue_packets", "must be a power of two (the real queue rounds up)");
        }
        get("mark_depth", m.mark_depth, 0, 64);
        if (n["feedback"]) m.feedback = r.boolean(n["feedback"], "model.feedback");
        if (n["aggregation"]) m.aggregation = r.boolean(n["aggregation"], "model.aggregation");
        if (n["exact_window"]) m.exact_window = r.boolean(n["exact_window"], "model.exact_window");
    }
    if (const YAML::Node list = root["worker_configs"]; list && list.size() > 1 &&
                                                         static_cast<int>(list.size()) != m.clusters)
        r.fail(list, "worker_configs",
               fmt::format("lists {} files but model.clusters is {}: give one file per cluster, or one for all",
                           list.size(), m.clusters));
    if (has_cluster_rules) {
        m.unmerged_clusters &= (1u << m.clusters) - 1;
        std::string unmerged;
        for (int c = 0; c < m.clusters; ++c) {
            if (!((m.unmerged_clusters >> c) & 1u)) continue;
            if (drop_unmerged)
                r.fail(root["switch_config"], "switch_config",
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
    if (const YAML::Node p = root["properties"]) {
        r.require_map(p, "properties", {"fairness", "responsiveness", "aom"});
        if (const YAML::Node f = p["fairness"]) {
            r.require_map(f, "properties.fairness", {"window", "epsilon"});
            FairnessSpec s;
            if (f["window"]) s.window = r.integer(f["window"], "properties.fairness.window", 1, 200);
            if (f["epsilon"]) s.epsilon = r.integer(f["epsilon"], "properties.fairness.epsilon", 0, 1000);
            cfg.fairness = s;
        }
        if (const YAML::Node f = p["responsiveness"]) {
            r.require_map(f, "properties.responsiveness", {"within", "threshold"});
            ResponsivenessSpec s;
            s.threshold = m.mark_depth;
            if (f["within"]) s.within = r.integer(f["within"], "properties.responsiveness.within", 1, 200);
            if (f["threshold"]) s.threshold = r.integer(f["threshold"], "properties.responsiveness.threshold", 1, 64);
            if (s.threshold == 0)
                r.fail(f, "properties.responsiveness.threshold",
                       "marking is off in this configuration: give the congestion threshold explicitly");
            cfg.responsiveness = s;
            m.congestion_threshold = s.threshold;
        }
        if (const YAML::Node f = p["aom"]) {
            r.require_map(f, "properties.aom", {"bound"});
            AomSpec s;
            if (f["bound"]) s.bound = r.integer(f["bound"], "properties.aom.bound", 0, 1000);
            cfg.aom = s;
        }
    }
    if (const std::string err = validate(m); !err.empty()) throw VerifyConfigError(source + ": " + err);
    return cfg;
}

VerifyConfig load_verify_config(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw VerifyConfigError(path + ": cannot read the file");
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_verify_config(ss.str(), path, std::filesystem::path(path).parent_path().string());
}

}  // namespace shesha::verify

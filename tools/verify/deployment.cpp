#include "deployment.h"

#include <algorithm>
#include <bit>
#include <optional>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <sys/wait.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "cluster_config.h"
#include "switch_config.h"

namespace shesha::verify {
namespace {

// The bounds a deployment is checked at (docs/verification.md, "Checking a deployment"): the
// examples' sizes, at which Z3 answers in seconds.
constexpr int kQueueSlots = 4;   // per class
constexpr int kWindowCap = 4;    // chunks in flight
constexpr int kHorizon = 6;

[[noreturn]] void fail(const std::string& msg) { throw VerifyConfigError(msg); }

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    if (!in) fail(path + ": cannot read the file");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

YAML::Node load_yaml(const std::string& text, const std::string& source) {
    try {
        return YAML::Load(text);
    } catch (const YAML::Exception& e) {
        fail(fmt::format("{}: YAML syntax error: {}", source, e.msg));
    }
}

// What the port and the clusters run, before it is scaled to the model's bounds.
struct PortFacts {
    int queue_packets = 0;
    int mark_depth = 0;
    bool aggregation = true;
    bool feedback = true;
    bool drr = false;
    int fair_lag = 0;
    bool chunk_follow = false;
    int version_tolerance = 0;
    std::vector<int> weights;         // per cluster
    std::vector<bool> merges;         // per cluster
    std::vector<drl::TransportConfig> transport;  // per cluster
    std::vector<std::string> transport_keys;      // per cluster: where its transport: came from
};

// The model of the port at the checked bounds.
void build(const PortFacts& f, Deployment& dep) {
    VerifyConfig& cfg = dep.config;
    ModelParams& m = cfg.model;
    const int C = static_cast<int>(f.weights.size());
    if (C < 1) fail(dep.port + ": no cluster sends through this port");
    if (C > 8) fail(fmt::format("{}: {} clusters share the port; the model has at most 8", dep.port, C));
    m.clusters = C;
    m.horizon = kHorizon;
    m.chunks = 2;
    m.service_rate = 1;
    m.max_arrivals = 2;
    m.credit_delay = 1;
    m.feedback_delay = 1;
    m.queue_packets = std::min(kQueueSlots, static_cast<int>(std::bit_ceil(static_cast<unsigned>(std::max(1, f.queue_packets)))));
    m.mark_depth = f.mark_depth == 0 ? 0
                                     : std::clamp(static_cast<int>(std::lround(static_cast<double>(f.mark_depth) *
                                                                               m.queue_packets / f.queue_packets)),
                                                  1, m.queue_packets);
    m.aggregation = f.aggregation;
    m.feedback = f.feedback;
    m.fair_scheduling = f.drr;
    m.fair_lag = f.drr ? f.fair_lag : 0;
    m.chunk_follow = f.drr && f.chunk_follow;
    m.version_tolerance = f.version_tolerance;
    for (int c = 0; c < C; ++c)
        if (!f.merges[c]) m.unmerged_clusters |= 1u << c;
    if (std::any_of(f.weights.begin(), f.weights.end(), [](int w) { return w != 1; })) m.weights = f.weights;
    dep.bounds.push_back(fmt::format("queue: {} packets per class, marking at {} -> {} slots, marking at {} (the same "
                                     "fraction, rounded)", f.queue_packets, f.mark_depth, m.queue_packets, m.mark_depth));
    // Window constants: those the model shares must agree; the cap is bounded.
    const drl::TransportConfig& t0 = f.transport.front();
    auto whole = [&](double v, int c, const char* key) {
        if (v != std::floor(v))
            fail(fmt::format("{}: transport.{} = {}: the model needs a whole number of chunks", f.transport_keys[c], key, v));
        return static_cast<int>(v);
    };
    std::vector<int> caps;
    int widest_init = 0;
    for (int c = 0; c < C; ++c) {
        const drl::TransportConfig& t = f.transport[c];
        if (t.w_min != t0.w_min || t.additive_increase != t0.additive_increase || t.slow_start != t0.slow_start ||
            t.gain != t0.gain || t.alpha_init != t0.alpha_init)
            fail(fmt::format("{}: transport.w_min, additive_increase, slow_start, gain and alpha_init must equal those of {} (the "
                             "model shares them; only w_max and w_init may differ)", f.transport_keys[c],
                             f.transport_keys[0]));
        if (t.merge_aware)
            fail(fmt::format("{}: transport.merge_aware is true: window cuts scaled by the switch's merge fraction are "
                             "not modelled", f.transport_keys[c]));
        caps.push_back(std::min(kWindowCap, whole(std::min<double>(t.w_max, kWindowCap), c, "w_max")));
        widest_init = std::max(widest_init, whole(std::min<double>(t.w_init, caps.back()), c, "w_init"));
    }
    m.w_min = whole(modelled_w_min(t0.w_min), 0, "w_min");
    if (m.w_min > kWindowCap)
        fail(fmt::format("{}: transport.w_min = {}: above the model's window bound {}", f.transport_keys[0], m.w_min,
                         kWindowCap));
    m.additive_increase = whole(t0.additive_increase, 0, "additive_increase");
    m.slow_start = t0.slow_start;
    m.gain = t0.gain;
    m.alpha_init = t0.alpha_init;
    m.w_max = *std::max_element(caps.begin(), caps.end());
    m.w_init = widest_init;
    // The model starts cluster c at min(w_init, its cap): every cluster must start there.
    for (int c = 0; c < C; ++c) {
        const int starts = static_cast<int>(std::min<double>(f.transport[c].w_init, caps[c]));
        if (starts != std::min(widest_init, caps[c]))
            fail(fmt::format("{}: transport.w_init: this cluster starts at {} chunks, another at {}: the model starts "
                             "every cluster at min(w_init, its cap)", f.transport_keys[c], starts, widest_init));
    }
    if (std::any_of(caps.begin(), caps.end(), [&](int w) { return w != m.w_max; })) m.w_max_by_cluster = caps;
    dep.bounds.push_back(fmt::format("windows: [{}, {}] init {} chunks -> [{}, {}] init {}", t0.w_min, t0.w_max,
                                     t0.w_init, m.w_min, m.w_max, m.w_init));
    if (t0.w_min < 1)
        dep.abstracted.push_back(fmt::format("transport.w_min: {} (pacing: one chunk every 1/W round trips) is modelled "
                                             "as a floor of one chunk, sent as soon as nothing is in flight",
                                             t0.w_min));
    dep.bounds.push_back(fmt::format("{} chunk indexes per update, one sender per cluster, {} arrivals per step and "
                                     "sender, {} packet per step leaves the port, credits and FEEDBACK after 1 step "
                                     "(horizon: the model line)", m.chunks, m.max_arrivals, m.service_rate));
    // The properties: the default bounds of the examples.
    std::vector<int> shares = m.weights;
    cfg.fairness = FairnessSpec{4, 1, shares};
    int weight_sum = 0;
    for (int w : f.weights) weight_sum += w;
    cfg.aom = AomSpec{weight_sum};
    if (m.mark_depth > 0) {
        cfg.responsiveness = ResponsivenessSpec{6, m.mark_depth};
        m.congestion_threshold = m.mark_depth;
    } else {
        dep.abstracted.push_back("responsiveness: not checked: the port does not mark (no congestion threshold)");
    }
    if (const std::string err = validate(m); !err.empty()) fail(dep.port + ": " + err);
}

void load_transport(const std::string& file, const std::string& key, PortFacts& f) {
    try {
        f.transport.push_back(drl::load_cluster_config(file).transport);
    } catch (const std::exception& e) {
        fail(fmt::format("{}: {}", key, e.what()));
    }
    f.transport_keys.push_back(key);
}

// A scalar of the lab's effective scenario (the lab has checked its type).
template <class T> T get(const YAML::Node& n, const std::string& key, const std::string& path) {
    if (!n[key]) fail(fmt::format("lab scenario: missing {}{}", path, key));
    try {
        return n[key].as<T>();
    } catch (const YAML::Exception&) {
        fail(fmt::format("lab scenario: {}{}: unexpected value '{}'", path, key, n[key].as<std::string>("?")));
    }
}

std::string run_lab_check(const std::string& lab_cli, const std::string& scenario, int& status) {
    const std::string cmd = fmt::format("/usr/bin/python3 '{}' check '{}' 2>&1", lab_cli, scenario);
    FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) fail("cannot run " + lab_cli);
    std::string out;
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    const int rc = ::pclose(p);
    status = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
    return out;
}

}  // namespace

InputKind input_kind(const std::string& path) {
    const YAML::Node root = load_yaml(read_text(path), path);
    if (!root.IsMap()) return InputKind::VerifyYaml;  // the verify parser names the problem
    if (root["ports"]) return InputKind::SwitchYaml;
    // A lab scenario's own keys (a verify YAML has none of them; the lab's loader checks the rest).
    for (const char* key : {"arms", "switches", "learners", "duration_s", "clusters", "seeds", "name"})
        if (root[key]) return InputKind::LabScenario;
    return InputKind::VerifyYaml;
}

Deployment deployment_from_switch(const std::string& switch_yaml, const std::string& port_name,
                                  const std::vector<std::string>& cluster_files) {
    Deployment dep;
    core::SwitchConfig sw;
    try {
        sw = core::load_switch_config(switch_yaml);
    } catch (const std::exception& e) {
        fail(e.what());
    }
    if (cluster_files.empty())
        fail(switch_yaml + ": give the cluster YAML of each cluster that sends through the port after the switch YAML");
    const core::PortConfig* port = nullptr;
    std::size_t port_index = 0;
    for (std::size_t i = 0; i < sw.ports.size(); ++i)
        if (port_name.empty() ? (port == nullptr && sw.ports[i].shaper.rate_bps != 0) : sw.ports[i].name == port_name) {
            port = &sw.ports[i];
            port_index = i;
        }
    if (port == nullptr && !port_name.empty()) fail(fmt::format("--port: no port named '{}' in {}", port_name, switch_yaml));
    if (port == nullptr) port = &sw.ports.front();  // no shaped port: the first
    const std::string at = fmt::format("{}: ports[{}]", switch_yaml, port_index);
    dep.port = fmt::format("port {} of {}", port->name, switch_yaml);
    if (port->marking.sojourn_us != 0)
        fail(fmt::format("{}.marking.sojourn_us is {}: sojourn marking is not modelled (depth marking only)", at,
                         port->marking.sojourn_us));
    PortFacts f;
    f.queue_packets = static_cast<int>(port->queue_packets);
    f.mark_depth = static_cast<int>(port->marking.depth_packets);
    f.aggregation = sw.aggregation;
    f.feedback = sw.feedback;
    f.drr = port->scheduling.value_or(sw.scheduling) == core::Scheduling::Drr;
    f.fair_lag = static_cast<int>(sw.fair_lag);
    f.chunk_follow = sw.chunk_follow;
    const std::size_t C = cluster_files.size();
    if (!sw.clusters.empty() && sw.clusters.size() < C)
        fail(fmt::format("{}: aggregation.clusters has {} rules but {} cluster YAMLs were given (one per rule, in its order)",
                         switch_yaml, sw.clusters.size(), C));
    std::optional<int> tolerance;
    for (std::size_t c = 0; c < C; ++c) {
        load_transport(cluster_files[c], cluster_files[c], f);
        if (sw.clusters.empty()) {
            dep.cluster_ids.push_back(static_cast<int>(c) + 1);
            f.weights.push_back(1);
            f.merges.push_back(false);  // no rule: the switch merges nothing
            continue;
        }
        const core::ClusterConfig& rule = sw.clusters[c];
        dep.cluster_ids.push_back(rule.id);
        f.weights.push_back(static_cast<int>(rule.weight));
        f.merges.push_back(rule.aggregation);
        if (rule.aggregation) {
            if (tolerance && *tolerance != static_cast<int>(rule.version_tolerance))
                fail(fmt::format("{}: aggregation.clusters[{}].version_tolerance is {} but another merging cluster's is "
                                 "{}: the model has one tolerance", switch_yaml, c, rule.version_tolerance, *tolerance));
            tolerance = static_cast<int>(rule.version_tolerance);
        }
        if (!rule.member_ips.empty() || !rule.member_macs.empty() || !rule.member_bindings.empty())
            dep.abstracted.push_back(fmt::format("aggregation.clusters[{}].members: taken to list every worker of {} "
                                                 "(the model's sender is a member)", c, cluster_files[c]));
        if (rule.model_replication)
            dep.abstracted.push_back(fmt::format("aggregation.clusters[{}].model_replication: acts on MODEL packets "
                                                 "towards the workers, not on this port's gradients", c));
    }
    if (sw.clusters.empty())
        dep.abstracted.push_back("aggregation.clusters: no rules, so the switch merges no cluster's gradients");
    f.version_tolerance = tolerance.value_or(0);
    if (port->shaper.rate_bps != 0)
        dep.abstracted.push_back(fmt::format("{}.shaper.rate: {} bit/s: the model counts time in steps of one "
                                             "departure", at, port->shaper.rate_bps));
    dep.abstracted.push_back(fmt::format("{}.queue.bytes: the byte limit is not modelled (packets only)", at));
    if (sw.feedback)
        dep.abstracted.push_back(fmt::format("feedback.interval_us: {}: the model sends at most one FEEDBACK per "
                                             "sender and step", sw.feedback_interval_us));
    build(f, dep);
    return dep;
}

Deployment deployment_from_lab(const std::string& scenario_path, const std::string& arm_name, const std::string& lab_cli) {
    if (!std::filesystem::exists(lab_cli)) fail("the lab's command " + lab_cli + " is missing (set SHESHA_LAB_CLI)");
    int status = 0;
    const std::string text = run_lab_check(lab_cli, scenario_path, status);
    if (status != 0) {
        std::string msg = text;
        while (!msg.empty() && msg.back() == '\n') msg.pop_back();
        fail(fmt::format("{}: the lab refuses the scenario: {}", scenario_path, msg));
    }
    const YAML::Node s = load_yaml(text, scenario_path + " (as the lab reads it)");
    const std::filesystem::path source_root = std::filesystem::path(lab_cli).parent_path().parent_path().parent_path();
    Deployment dep;
    if (s["links"] && s["links"].size() != 0)
        fail(scenario_path + ": links: switch-to-switch links are not modelled (one switch, one shared port)");
    const std::string learners = get<std::string>(s, "learners", "");
    if (learners != "shared")
        fail(fmt::format("{}: learners: {}: every learner has its own port, so no port is shared by the clusters "
                         "(learners: shared puts them behind one)", scenario_path, learners));
    if (get<bool>(s["cross_traffic"], "enabled", "cross_traffic."))
        fail(scenario_path + ": cross_traffic.enabled: other traffic in the port's default class is not modelled");
    // The arm.
    const YAML::Node arms = s["arms"];
    int arm_index = -1;
    for (std::size_t i = 0; i < arms.size(); ++i)
        if (arm_name.empty() ? get<std::string>(arms[i], "name", "") == "shesha" : get<std::string>(arms[i], "name", "") == arm_name)
            arm_index = static_cast<int>(i);
    if (arm_index < 0 && !arm_name.empty()) fail(fmt::format("--arm: {} has no arm named '{}'", scenario_path, arm_name));
    if (arm_index < 0) arm_index = static_cast<int>(arms.size()) - 1;
    if (arm_index < 0) fail(scenario_path + ": arms: none");
    const YAML::Node arm = arms[arm_index];
    const std::string arm_at = fmt::format("arms[{}].", arm_index);
    if (!get<bool>(arm, "congestion_control", arm_at))
        fail(fmt::format("{}: {}congestion_control is off (arm {}): the model's senders react to marks and FEEDBACK "
                         "(transport::CreditSender); senders that ignore them are not modelled", scenario_path, arm_at,
                         get<std::string>(arm, "name", arm_at)));
    if (arm["model_delivery"] && arm["model_delivery"].as<std::string>("") == "replicated")
        dep.abstracted.push_back(fmt::format("{}model_delivery: replicated: the switch copies MODEL packets towards "
                                             "the workers, and expands the learners' CREDIT_BATCHes into one CREDIT "
                                             "per worker (learner.credit_batching auto), not this port's gradients",
                                             arm_at));
    // The learners' host sits on the first cluster's switch.
    const YAML::Node clusters = s["clusters"];
    const std::string switch_name = get<std::string>(clusters[0], "switch", "clusters[0].");
    YAML::Node sw;
    std::size_t sw_index = 0;
    for (std::size_t i = 0; i < s["switches"].size(); ++i)
        if (get<std::string>(s["switches"][i], "name", "") == switch_name) {
            sw = s["switches"][i];
            sw_index = i;
        }
    if (!sw) fail(fmt::format("{}: clusters[0].switch: no switch named '{}'", scenario_path, switch_name));
    const std::string sw_at = fmt::format("switches[{}].", sw_index);
    const YAML::Node b = sw["bottleneck"];
    if (get<int>(b, "mark_sojourn_us", sw_at + "bottleneck.") != 0)
        fail(fmt::format("{}: {}bottleneck.mark_sojourn_us is {}: sojourn marking is not modelled (depth marking only)",
                         scenario_path, sw_at, get<int>(b, "mark_sojourn_us", sw_at + "bottleneck.")));
    PortFacts f;
    f.queue_packets = get<int>(b, "queue_packets", sw_at + "bottleneck.");
    f.mark_depth = get<int>(b, "mark_depth_packets", sw_at + "bottleneck.");
    f.aggregation = get<bool>(arm, "aggregation", arm_at);
    f.feedback = get<bool>(arm, "feedback", arm_at);
    // auto (shesha-switch's default): fair queues where two or more clusters aggregate.
    const std::string scheduling = get<std::string>(arm, "scheduling", arm_at);
    f.drr = scheduling == "drr" || (scheduling == "auto" && f.aggregation && clusters.size() >= 2);
    f.version_tolerance = get<int>(sw, "version_tolerance", sw_at);
    dep.port = fmt::format("the shared learner port (learners) of switch {}, arm {}", switch_name,
                           get<std::string>(arm, "name", arm_at));
    for (std::size_t i = 0; i < clusters.size(); ++i) {
        const std::string at = fmt::format("clusters[{}].", i);
        const YAML::Node c = clusters[i];
        dep.cluster_ids.push_back(get<int>(c, "id", at));
        f.weights.push_back(get<int>(c, "weight", at));
        f.merges.push_back(true);  // the lab lets every cluster's workers merge
        std::string file = get<std::string>(c, "config", at);
        if (file.empty())
            fail(fmt::format("{}: {}config is empty: the window constants come from the cluster's YAML", scenario_path, at));
        if (std::filesystem::path(file).is_relative()) file = (source_root / file).string();
        load_transport(file, scenario_path + ": " + at + "config (" + file + ")", f);
        const int workers = get<int>(c, "workers", at);
        if (workers > 1)
            dep.abstracted.push_back(fmt::format("{}workers: {}: one sender per cluster (the model's "
                                                 "abstraction: docs/verification.md, Abstractions)", at, workers));
    }
    dep.abstracted.push_back(fmt::format("{}bottleneck.rate: {}: the model counts time in steps of one departure",
                                         sw_at, get<std::string>(b, "rate", sw_at + "bottleneck.")));
    dep.abstracted.push_back(fmt::format("{}bottleneck.queue_bytes: {}: the byte limit is not modelled (packets only)",
                                         sw_at, get<std::string>(b, "queue_bytes", sw_at + "bottleneck.")));
    if (f.feedback)
        dep.abstracted.push_back(fmt::format("{}feedback_interval_us: {}: the model sends at most one FEEDBACK per "
                                             "sender and step", sw_at, get<int>(sw, "feedback_interval_us", sw_at)));
    build(f, dep);
    return dep;
}

}  // namespace shesha::verify

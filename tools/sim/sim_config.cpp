// Strict scenario reader. The YAML tree is flattened to "section.key" -> scalar text, overrides
// replace entries of that map, and every entry is then parsed by the one schema table below, so a
// file key and a --set override share names, types, ranges and error messages.
#include "sim_config.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "strict_yaml.h"

namespace shesha::sim {
namespace {

struct FlatValue {
    std::string text;
    std::string where;  // "file:line" or "--set"
};

[[noreturn]] void fail(const std::string& key, const FlatValue& v, const std::string& what) {
    throw ConfigError(fmt::format("{}: key '{}': {} (got '{}')", v.where, key, what, v.text));
}

// The scalar grammar is the shared strict reader's; the messages are the simulator's own, since
// --set values have no YAML position.
std::uint64_t parse_uint(const std::string& key, const FlatValue& v, std::uint64_t lo, std::uint64_t hi) {
    const std::optional<std::uint64_t> x = yaml::parse_uint(v.text);
    if (!x) fail(key, v, "expected an unsigned integer");
    if (*x < lo || *x > hi) fail(key, v, fmt::format("must lie in [{}, {}]", lo, hi));
    return *x;
}

double parse_double(const std::string& key, const FlatValue& v, double lo, double hi) {
    const std::optional<double> x = yaml::parse_number(v.text);
    if (!x) fail(key, v, "expected a number");
    if (*x < lo || *x > hi) fail(key, v, fmt::format("must lie in [{}, {}]", lo, hi));
    return *x;
}

bool parse_bool(const std::string& key, const FlatValue& v) {
    if (const std::optional<bool> x = yaml::parse_bool(v.text)) return *x;
    fail(key, v, "expected true or false");
}

// "a, b,c" -> {"a", "b", "c"} (items trimmed; an empty text is no item).
std::vector<std::string> split_list(const std::string& text) {
    std::vector<std::string> out;
    if (text.find_first_not_of(' ') == std::string::npos) return out;
    std::stringstream in(text);
    for (std::string item; std::getline(in, item, ',');) {
        const auto b = item.find_first_not_of(' '), e = item.find_last_not_of(' ');
        out.push_back(b == std::string::npos ? std::string() : item.substr(b, e - b + 1));
    }
    return out;
}

using Setter = std::function<void(Scenario&, const std::string&, const FlatValue&)>;

template <typename T>
Setter uint_field(T Scenario::*field, std::uint64_t lo, std::uint64_t hi) {
    return [=](Scenario& s, const std::string& k, const FlatValue& v) { s.*field = static_cast<T>(parse_uint(k, v, lo, hi)); };
}
Setter double_field(double Scenario::*field, double lo, double hi) {
    return [=](Scenario& s, const std::string& k, const FlatValue& v) { s.*field = parse_double(k, v, lo, hi); };
}
Setter bool_field(bool Scenario::*field) {
    return [=](Scenario& s, const std::string& k, const FlatValue& v) { s.*field = parse_bool(k, v); };
}

// One number for every cluster, or a comma-separated list of one per cluster (its length is
// checked against the clusters after parsing).
Setter per_cluster_field(std::vector<double> Scenario::*field, double lo, double hi) {
    return [=](Scenario& s, const std::string& k, const FlatValue& v) {
        std::vector<double> out;
        for (const std::string& item : split_list(v.text)) {
            if (item.empty()) fail(k, v, "expected a number, or a comma-separated list of one number per cluster");
            out.push_back(parse_double(k, FlatValue{item, v.where}, lo, hi));
        }
        if (out.empty()) fail(k, v, "expected a number, or a comma-separated list of one number per cluster");
        s.*field = std::move(out);
    };
}

const std::map<std::string, Setter>& schema() {
    static const std::map<std::string, Setter> table = {
        {"seed", uint_field(&Scenario::seed, 0, UINT64_MAX)},
        {"duration_ms", double_field(&Scenario::duration_ms, 0.001, 3'600'000)},
        {"topology.kind",
         [](Scenario& s, const std::string& k, const FlatValue& v) {
             if (v.text == "tor") s.topology = TopologyKind::Tor;
             else if (v.text == "leaf_spine") s.topology = TopologyKind::LeafSpine;
             else fail(k, v, "expected tor or leaf_spine");
         }},
        {"topology.shared_bottleneck", bool_field(&Scenario::shared_bottleneck)},
        {"topology.leaves", uint_field(&Scenario::leaves, 1, 1024)},
        {"topology.spines", uint_field(&Scenario::spines, 1, 1024)},
        {"workload.clusters", uint_field(&Scenario::clusters, 1, 4096)},
        {"workload.workers_per_cluster", uint_field(&Scenario::workers_per_cluster, 1, 65536)},
        {"workload.cluster_workers",
         [](Scenario& s, const std::string& k, const FlatValue& v) {
             // A comma-separated list, one count per cluster ("2,4"); empty keeps workers_per_cluster.
             s.cluster_workers.clear();
             std::stringstream in(v.text);
             for (std::string item; std::getline(in, item, ',');) {
                 const auto b = item.find_first_not_of(' '), e = item.find_last_not_of(' ');
                 if (b == std::string::npos) fail(k, v, "expected a comma-separated list of worker counts");
                 s.cluster_workers.push_back(static_cast<std::uint32_t>(
                     parse_uint(k, FlatValue{item.substr(b, e - b + 1), v.where}, 1, 65536)));
             }
         }},
        {"workload.kind",
         [](Scenario& s, const std::string& k, const FlatValue& v) {
             if (v.text == "synthetic") s.workload_kind = WorkloadKind::Synthetic;
             else if (v.text == "training") s.workload_kind = WorkloadKind::Training;
             else fail(k, v, "expected synthetic or training");
         }},
        {"training.clusters",
         [](Scenario& s, const std::string& k, const FlatValue& v) {
             s.training_clusters.clear();
             for (const std::string& item : split_list(v.text)) {
                 if (item.empty()) fail(k, v, "expected a comma-separated list of cluster YAML paths, one per cluster");
                 s.training_clusters.push_back(item);
             }
         }},
        {"training.targets",
         [](Scenario& s, const std::string& k, const FlatValue& v) {
             // One target return per cluster; "none" (or empty) for a cluster without one.
             s.training_targets.clear();
             for (const std::string& item : split_list(v.text)) {
                 if (item.empty() || item == "none") {
                     s.training_targets.push_back(std::numeric_limits<double>::quiet_NaN());
                     continue;
                 }
                 s.training_targets.push_back(parse_double(k, FlatValue{item, v.where}, -1e9, 1e9));
             }
         }},
        {"training.step_us", per_cluster_field(&Scenario::step_us, 0, 1e7)},
        {"training.update_us", per_cluster_field(&Scenario::update_us, 0, 1e7)},
        {"training.wake_us", per_cluster_field(&Scenario::wake_us, 0, 1e7)},
        {"training.learner_wake_us", per_cluster_field(&Scenario::learner_wake_us, 0, 1e7)},
        {"training.workers_read_between_rollouts", bool_field(&Scenario::workers_read_between_rollouts)},
        {"training.stop_at_target",
         [](Scenario& s, const std::string& k, const FlatValue& v) {
             // true and false (the key's first form) still mean all and never.
             const std::optional<bool> b = yaml::parse_bool(v.text);
             if (v.text == "all" || (b && *b)) s.stop_at_target = StopAtTarget::All;
             else if (v.text == "cluster") s.stop_at_target = StopAtTarget::Cluster;
             else if (v.text == "never" || (b && !*b)) s.stop_at_target = StopAtTarget::Never;
             else fail(k, v, "expected all (or true), cluster, or never (or false)");
         }},
        {"training.learner_tick_us", double_field(&Scenario::learner_tick_us, 1, 1e7)},
        {"training.compute_threads", uint_field(&Scenario::compute_threads, 0, 64)},
        {"training.eval_interval_ms", double_field(&Scenario::eval_interval_ms, 0, 1e7)},
        {"training.learner_max_workers", uint_field(&Scenario::learner_max_workers, 0, 1u << 20)},
        {"workload.compute_us", double_field(&Scenario::compute_us, 0.001, 1e7)},
        {"workload.jitter", double_field(&Scenario::jitter, 0, 1)},
        {"workload.chunks", uint_field(&Scenario::chunks, 1, 4096)},
        {"workload.chunk_elems", uint_field(&Scenario::chunk_elems, 2, 2048)},
        {"workload.max_updates", uint_field(&Scenario::max_updates, 0, UINT32_MAX)},
        {"workload.start_together", bool_field(&Scenario::start_together)},
        {"links.host_gbps", double_field(&Scenario::host_gbps, 0.001, 10'000)},
        {"links.fabric_gbps", double_field(&Scenario::fabric_gbps, 0.001, 10'000)},
        {"links.learner_gbps", double_field(&Scenario::learner_gbps, 0.001, 10'000)},
        {"links.learner_down_gbps", double_field(&Scenario::learner_down_gbps, 0.001, 10'000)},
        {"links.prop_ns", double_field(&Scenario::prop_ns, 0, 1e9)},
        {"queue.aggregation", bool_field(&Scenario::aggregation)},
        {"queue.capacity_packets", uint_field(&Scenario::capacity_packets, 1, 1u << 20)},
        {"queue.capacity_bytes", uint_field(&Scenario::capacity_bytes, 9100, 1ull << 34)},
        {"queue.mark_depth_packets", uint_field(&Scenario::mark_depth_packets, 0, 1u << 20)},
        {"queue.version_tolerance", uint_field(&Scenario::version_tolerance, 0, 16)},
        {"queue.fair",
         [](Scenario& s, const std::string& k, const FlatValue& v) {
             s.fair_auto = v.text == "auto";
             if (s.fair_auto) return;
             const std::optional<bool> x = yaml::parse_bool(v.text);
             if (!x) fail(k, v, "expected auto, true or false");
             s.fair_scheduling = *x;
         }},
        {"queue.fair_lag", uint_field(&Scenario::fair_lag, 0, 65535)},
        {"queue.chunk_follow", bool_field(&Scenario::chunk_follow)},
        {"queue.host_capacity_packets", uint_field(&Scenario::host_capacity_packets, 1, 1u << 20)},
        {"transport.window_control", bool_field(&Scenario::window_control)},
        {"transport.switch_feedback", bool_field(&Scenario::switch_feedback)},
        {"transport.w_init", double_field(&Scenario::w_init, 1, 1e6)},
        {"transport.w_min", double_field(&Scenario::w_min, 0.001, 1e6)},
        {"transport.merge_aware", bool_field(&Scenario::merge_aware)},
        {"transport.cumulative_ack", bool_field(&Scenario::cumulative_ack)},
        {"transport.bank_excess", bool_field(&Scenario::bank_excess)},
        {"transport.slow_start", bool_field(&Scenario::slow_start)},
        {"transport.flight_expiry_us", double_field(&Scenario::flight_expiry_us, 0, 1e9)},
        {"transport.flight_expiry_rtts", double_field(&Scenario::flight_expiry_rtts, 0, 1000)},
        {"transport.merge_floor", double_field(&Scenario::merge_floor, 0, 1e6)},
        {"transport.w_max", double_field(&Scenario::w_max, 1, 1e6)},
        {"transport.credit_timeout_us", double_field(&Scenario::credit_timeout_us, 0, 1e9)},
        {"transport.feedback_interval_us", double_field(&Scenario::feedback_interval_us, 0, 1e9)},
        {"model.delivery",
         [](Scenario& s, const std::string& k, const FlatValue& v) {
             if (v.text == "none") s.model_delivery = ModelDelivery::None;
             else if (v.text == "unicast") s.model_delivery = ModelDelivery::Unicast;
             else if (v.text == "replicated") s.model_delivery = ModelDelivery::Replicated;
             else fail(k, v, "expected none, unicast or replicated");
         }},
        {"model.publish_interval_us", double_field(&Scenario::publish_interval_us, 0, 1e9)},
        {"model.rebroadcast_us", double_field(&Scenario::rebroadcast_us, 1, 1e9)},
        {"model.request_us", double_field(&Scenario::model_request_us, 1, 1e9)},
        {"model.budget", uint_field(&Scenario::model_budget, 1, UINT32_MAX)},
        {"model.learner_nic_packets", uint_field(&Scenario::learner_nic_packets, 1, 1u << 24)},
        {"model.credit_priority", bool_field(&Scenario::credit_priority)},
        {"model.tree", bool_field(&Scenario::model_tree)},
        {"model.credit_batching",
         [](Scenario& s, const std::string& k, const FlatValue& v) {
             if (v.text == "auto") s.credit_batching = drl::CreditBatching::Auto;
             else if (v.text == "true") s.credit_batching = drl::CreditBatching::On;
             else if (v.text == "false") s.credit_batching = drl::CreditBatching::Off;
             else fail(k, v, "expected auto, true or false");
         }},
        {"output.sample_us", double_field(&Scenario::sample_us, 0.1, 1e9)},
        {"output.pool_max_packets", uint_field(&Scenario::pool_max_packets, 1024, 1u << 26)},
    };
    return table;
}

void flatten(const YAML::Node& node, const std::string& prefix, const std::string& source,
             std::map<std::string, FlatValue>& out) {
    for (const auto& pair : node) {
        const std::string key = pair.first.Scalar();
        const std::string path = prefix.empty() ? key : prefix + "." + key;
        const YAML::Node& value = pair.second;
        const std::string where = fmt::format("{}:{}", source, pair.first.Mark().line + 1);
        if (value.IsMap()) {
            if (!prefix.empty()) throw ConfigError(fmt::format("{}: key '{}': sections nest one level only", where, path));
            flatten(value, path, source, out);
        } else if (value.IsScalar()) {
            out[path] = FlatValue{value.Scalar(), where};
        } else {
            throw ConfigError(fmt::format("{}: key '{}': expected a value or a section, got {}", where, path,
                                          value.IsNull() ? "nothing" : "a list"));
        }
    }
}

std::string known_keys_near(const std::string& key) {
    const std::string section = key.substr(0, key.find('.'));
    std::string list;
    for (const auto& [name, setter] : schema()) {
        if (name.rfind(section + ".", 0) == 0 || (key.find('.') == std::string::npos && name.find('.') == std::string::npos)) {
            list += list.empty() ? name : ", " + name;
        }
    }
    if (list.empty()) {
        for (const auto& [name, setter] : schema()) {
            const std::string s = name.substr(0, name.find('.'));
            if (list.find(s) == std::string::npos) list += list.empty() ? s : ", " + s;
        }
        return "known sections and keys: " + list;
    }
    return "known keys here: " + list;
}

}  // namespace

Scenario load_scenario(const std::string& yaml_text, const std::string& source,
                       const std::vector<std::string>& overrides) {
    std::map<std::string, FlatValue> flat;
    YAML::Node root;
    try {
        root = YAML::Load(yaml_text);
    } catch (const YAML::Exception& e) {
        throw ConfigError(fmt::format("{}:{}: YAML syntax error: {}", source, e.mark.line + 1, e.msg));
    }
    if (root.IsMap()) {
        flatten(root, "", source, flat);
    } else if (!root.IsNull()) {
        throw ConfigError(fmt::format("{}: expected a mapping of sections at the top level", source));
    }
    for (const std::string& o : overrides) {
        const auto eq = o.find('=');
        if (eq == std::string::npos || eq == 0) throw ConfigError(fmt::format("--set '{}': expected key=value", o));
        flat[o.substr(0, eq)] = FlatValue{o.substr(eq + 1), "--set"};
    }

    Scenario s;
    for (const auto& [key, value] : flat) {
        const auto it = schema().find(key);
        if (it == schema().end()) throw ConfigError(fmt::format("{}: unknown key '{}' ({})", value.where, key, known_keys_near(key)));
        it->second(s, key, value);
    }
    // Cross-field checks.
    auto bad = [](const std::string& what) { throw ConfigError("scenario: " + what); };
    if (s.training() && !s.training_clusters.empty()) {
        const auto n = static_cast<std::uint32_t>(s.training_clusters.size());
        if (flat.count("workload.clusters") != 0 && s.clusters != n)
            bad(fmt::format("training.clusters lists {} cluster YAMLs but workload.clusters is {}", n, s.clusters));
        s.clusters = n;  // one cluster per YAML
    }
    if (s.credit_batching == drl::CreditBatching::On && s.model_delivery != ModelDelivery::Replicated)
        bad("model.credit_batching needs model.delivery replicated (the switch fans a batch out to the group's members)");
    if (flat.count("model.tree") != 0 &&
        (s.model_delivery != ModelDelivery::Replicated || s.topology != TopologyKind::LeafSpine))
        bad("model.tree needs model.delivery replicated and topology.kind leaf_spine (a ToR's one switch, or "
            "unicast MODEL, has no tree to build)");
    if (s.w_min > s.w_max) bad("transport.w_min must be <= transport.w_max");
    if (s.w_init < s.w_min || s.w_init > s.w_max) bad("transport.w_init must lie in [w_min, w_max]");
    if (s.merge_floor != 0 && (s.merge_floor < s.w_min || s.merge_floor > s.w_max))
        bad("transport.merge_floor must be 0 (off) or lie in [w_min, w_max]");
    if (s.flight_expiry_rtts > 0 && s.flight_expiry_rtts < 1)
        bad(fmt::format("transport.flight_expiry_rtts must be 0 (off) or at least 1, got {}", s.flight_expiry_rtts));
    // queue.fair: auto is the switch's aggregation.scheduling: auto (switch_config.h).
    if (s.fair_auto) s.fair_scheduling = s.aggregation && s.clusters >= 2;
    if (s.fair_lag != 0 && !s.fair_scheduling) bad("queue.fair_lag needs queue.fair: true");
    if (s.chunk_follow && !s.fair_scheduling) bad("queue.chunk_follow needs queue.fair: true");
    if (s.merge_floor != 0 && !s.merge_aware) bad("transport.merge_floor needs transport.merge_aware: true");
    if (std::uint64_t{s.chunks} * s.chunk_elems > UINT32_MAX) bad("workload.chunks * chunk_elems is too large");
    if (s.clusters > 65535) bad("workload.clusters must fit a 16-bit cluster id");
    if (!s.cluster_workers.empty() && s.cluster_workers.size() != s.clusters)
        bad(fmt::format("workload.cluster_workers lists {} counts for {} clusters (workload.clusters)",
                        s.cluster_workers.size(), s.clusters));
    std::uint64_t total = 0;
    for (std::uint32_t c = 0; c < s.clusters; ++c) total += s.workers_in(c);
    if (total > (1u << 20)) bad("more than 2^20 workers in total");
    if (s.training()) {
        if (s.training_clusters.empty())
            bad("workload.kind training needs training.clusters (one cluster YAML per cluster, comma-separated)");
        const auto n = static_cast<std::uint32_t>(s.training_clusters.size());
        if (!s.training_targets.empty() && s.training_targets.size() != n)
            bad(fmt::format("training.targets lists {} targets for the {} clusters of training.clusters",
                            s.training_targets.size(), n));
        for (const auto& [key, list] : {std::pair<const char*, const std::vector<double>*>{"training.step_us", &s.step_us},
                                        {"training.update_us", &s.update_us},
                                        {"training.wake_us", &s.wake_us},
                                        {"training.learner_wake_us", &s.learner_wake_us}})
            if (list->size() != 1 && list->size() != n)
                bad(fmt::format("{} lists {} values for the {} clusters of training.clusters (one value for every "
                                "cluster, or one per cluster)", key, list->size(), n));
        if (s.model_delivery == ModelDelivery::None)
            bad("workload.kind training needs model.delivery unicast or replicated (the workers compute on the "
                "models the learner publishes)");
    } else if (!s.training_clusters.empty() || !s.training_targets.empty()) {
        bad("training.clusters and training.targets need workload.kind: training");
    }
    // The switch keeps at most 4096 members per replication group (switch_config: max_members).
    if (s.model_delivery == ModelDelivery::Replicated)
        for (std::uint32_t c = 0; c < s.clusters; ++c)
            if (s.workers_in(c) > 4096)
                bad(fmt::format("model.delivery replicated: cluster {} has {} workers, a replication group at most 4096",
                                c, s.workers_in(c)));
    return s;
}

Scenario load_scenario_file(const std::string& path, const std::vector<std::string>& overrides) {
    std::ifstream in(path);
    if (!in) throw ConfigError(fmt::format("{}: cannot open", path));
    std::stringstream ss;
    ss << in.rdbuf();
    Scenario s = load_scenario(ss.str(), path, overrides);
    // A relative cluster YAML path is taken from the current directory, else from the scenario's.
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    for (std::string& c : s.training_clusters) {
        const std::filesystem::path p(c);
        if (p.is_relative() && !std::filesystem::exists(p) && std::filesystem::exists(dir / p)) c = (dir / p).string();
    }
    return s;
}

const char* to_string(StopAtTarget s) noexcept {
    switch (s) {
        case StopAtTarget::Never: return "never";
        case StopAtTarget::All: return "all";
        case StopAtTarget::Cluster: return "cluster";
    }
    return "?";
}

const char* to_string(ModelDelivery d) noexcept {
    switch (d) {
        case ModelDelivery::None: return "none";
        case ModelDelivery::Unicast: return "unicast";
        case ModelDelivery::Replicated: return "replicated";
    }
    return "?";
}

std::string arm_name(const Scenario& s) {
    std::string n = s.aggregation ? "merge" : "fifo";
    if (s.fair_scheduling) n += "+drr";
    if (s.window_control) n += s.switch_feedback ? "+window+fb" : "+window";
    return n;
}

}  // namespace shesha::sim

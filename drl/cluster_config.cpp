// Strict reader for the DRL cluster YAML. This file is the single source of truth for the names,
// types and ranges of its keys (configs/cluster-cartpole.yaml documents them).
#include "cluster_config.h"

#include <arpa/inet.h>

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "envs/registry.h"
#include "strict_yaml.h"

namespace shesha::drl {
namespace {

using yaml::describe;
using yaml::MapView;
using yaml::Reader;
using yaml::Value;

constexpr std::uint32_t kMaxMs = 3'600'000;  // one hour: any cadence beyond that is a typo

// "10.77.0.4" (a /32) or "10.77.0.0/24".
std::optional<Ipv4Prefix> parse_prefix(const std::string& text) {
    const std::string t(yaml::trim(text));
    const auto slash = t.find('/');
    const std::string address = t.substr(0, slash);
    in_addr a{};
    if (address.empty() || inet_pton(AF_INET, address.c_str(), &a) != 1) return std::nullopt;
    Ipv4Prefix p;
    p.address = ntohl(a.s_addr);
    if (slash != std::string::npos) {
        const auto length = yaml::parse_uint(std::string_view(t).substr(slash + 1));
        if (!length || *length > 32) return std::nullopt;
        p.length = static_cast<std::uint8_t>(*length);
    }
    return p;
}

void read_model(const Reader& r, const Value& v, rl::ModelConfig& m) {
    const MapView map = r.map(v, {"hidden", "activation"});
    if (auto x = map.get("hidden")) {
        if (!x->node.IsSequence()) r.fail(*x, fmt::format("expected a list of layer sizes like [64, 64], got {}", describe(x->node)));
        m.hidden_sizes.clear();
        if (x->node.size() > 8) r.fail(*x, fmt::format("expected at most 8 hidden layers, got {}", x->node.size()));
        for (std::size_t i = 0; i < x->node.size(); ++i) {
            const YAML::Node item = x->node[i];
            m.hidden_sizes.push_back(r.uint(Value{item, fmt::format("{}[{}]", x->path, i), item.Mark()}, 1, 4096));
        }
    }
    if (auto x = map.get("activation"))
        m.activation = r.choice(*x, {"tanh", "relu"}) == 0 ? rl::Activation::Tanh : rl::Activation::Relu;
}

void read_a3c(const Reader& r, const Value& v, A3cConfig& a) {
    const MapView map = r.map(v, {"n_steps", "gamma", "entropy", "value_coef", "max_grad_norm"});
    if (auto x = map.get("n_steps")) a.n_steps = static_cast<std::uint32_t>(r.uint(*x, 1, 10'000));
    if (auto x = map.get("gamma")) a.loss.gamma = r.number(*x, 0.0, 1.0);
    if (auto x = map.get("entropy")) a.loss.entropy_beta = static_cast<float>(r.number(*x, 0.0, 10.0));
    if (auto x = map.get("value_coef")) a.loss.value_coef = static_cast<float>(r.number(*x, 0.0, 100.0));
    if (auto x = map.get("max_grad_norm")) a.loss.max_grad_norm = static_cast<float>(r.number(*x, 0.0, 1e6));
}

void read_optimizer(const Reader& r, const Value& v, rl::OptimizerConfig& o) {
    const MapView map = r.map(v, {"kind", "lr", "rmsprop_alpha", "epsilon", "adam_beta1", "adam_beta2"});
    if (auto x = map.get("kind")) {
        const std::size_t k = r.choice(*x, {"rmsprop", "adam", "sgd"});
        o.kind = k == 0 ? rl::OptimizerKind::SharedRmsProp : k == 1 ? rl::OptimizerKind::Adam : rl::OptimizerKind::Sgd;
    }
    if (auto x = map.get("lr")) {
        o.learning_rate = static_cast<float>(r.number(*x, 0.0, 10.0));
        if (!(o.learning_rate > 0.0F)) r.fail(*x, "expected a positive learning rate, got 0");
    }
    if (auto x = map.get("rmsprop_alpha")) o.rmsprop_alpha = static_cast<float>(r.number(*x, 0.0, 1.0));
    if (auto x = map.get("epsilon")) {
        o.epsilon = static_cast<float>(r.number(*x, 0.0, 1.0));
        if (!(o.epsilon > 0.0F)) r.fail(*x, "expected a positive epsilon, got 0");
    }
    if (auto x = map.get("adam_beta1")) o.adam_beta1 = static_cast<float>(r.number(*x, 0.0, 0.999999));
    if (auto x = map.get("adam_beta2")) o.adam_beta2 = static_cast<float>(r.number(*x, 0.0, 0.999999));
}

void read_transport(const Reader& r, const Value& v, TransportConfig& t) {
    const MapView map = r.map(v, {"chunk_elems", "w_init", "w_min", "w_max", "additive_increase", "gain",
                                  "alpha_init", "credit_timeout_ms", "merge_version_gap", "merge_aware", "merge_floor",
                                  "bank_excess", "flight_expiry_rtts", "flight_expiry_ms", "slow_start"});
    if (auto x = map.get("chunk_elems")) t.chunk_elems = static_cast<std::uint32_t>(r.uint(*x, 1, proto::kMaxElements));
    // Below 1 the sender paces: one chunk in flight, the next (1/W - 1) round trips after its credit.
    if (auto x = map.get("w_min")) t.w_min = r.number(*x, 1.0 / 1024, 65535.0);
    if (auto x = map.get("w_max")) t.w_max = r.number(*x, 1.0, 65535.0);
    if (auto x = map.get("w_init")) t.w_init = r.number(*x, 1.0, 65535.0);
    // Cross-field checks point at the first of the involved keys that was given.
    const auto where = [&](std::initializer_list<std::string_view> keys) {
        for (std::string_view k : keys)
            if (auto x = map.get(k)) return *x;
        return v;
    };
    if (t.w_max < t.w_min)
        r.fail(where({"w_max", "w_min"}), fmt::format("expected w_min <= w_max, got w_min {} and w_max {}", t.w_min, t.w_max));
    if (t.w_init < t.w_min || t.w_init > t.w_max)
        r.fail(where({"w_init", "w_max", "w_min"}),
               fmt::format("expected w_init in [w_min, w_max] = [{}, {}], got {}", t.w_min, t.w_max, t.w_init));
    if (auto x = map.get("additive_increase")) t.additive_increase = r.number(*x, 0.0, 65535.0);
    if (auto x = map.get("gain")) {
        t.gain = r.number(*x, 0.0, 1.0);
        if (!(t.gain > 0.0)) r.fail(*x, "expected a gain in (0, 1], got 0");
    }
    if (auto x = map.get("alpha_init")) t.alpha_init = r.number(*x, 0.0, 1.0);
    if (auto x = map.get("credit_timeout_ms")) {
        t.credit_timeout_ms = static_cast<std::uint32_t>(r.uint(*x, 0, kMaxMs));
        // Without a timeout, every lost GRADIENT or CREDIT strands a unit of the window for good,
        // and a worker whose window fills with them waits forever for credit that will not come.
        if (t.credit_timeout_ms == 0)
            r.fail(*x, "expected a timeout of at least 1 ms, got 0 (a worker would wait forever for a lost credit)");
    }
    if (auto x = map.get("merge_version_gap")) t.merge_version_gap = static_cast<std::uint32_t>(r.uint(*x, 0, UINT32_MAX));
    if (auto x = map.get("merge_aware")) t.merge_aware = r.boolean(*x);
    if (auto x = map.get("bank_excess")) t.bank_excess = r.boolean(*x);
    if (auto x = map.get("slow_start")) t.slow_start = r.boolean(*x);
    if (auto x = map.get("flight_expiry_rtts")) {
        t.flight_expiry_rtts = r.number(*x, 0.0, 1000.0);
        if (t.flight_expiry_rtts != 0 && t.flight_expiry_rtts < 1)
            r.fail(*x, fmt::format("expected 0 (off) or at least 1 (below one round trip it retires chunks still on their way), got {}",
                                   t.flight_expiry_rtts));
    }
    if (auto x = map.get("flight_expiry_ms")) t.flight_expiry_ms = static_cast<std::uint32_t>(r.uint(*x, 0, kMaxMs));
    if (auto x = map.get("merge_floor")) {
        t.merge_floor = r.number(*x, 0.0, 65535.0);
        if (t.merge_floor != 0 && !t.merge_aware) r.fail(*x, "merge_floor needs transport.merge_aware: true");
        if (t.merge_floor != 0 && (t.merge_floor < t.w_min || t.merge_floor > t.w_max))
            r.fail(*x, fmt::format("expected 0 (off) or a merge_floor in [w_min, w_max] = [{}, {}], got {}", t.w_min,
                                   t.w_max, t.merge_floor));
    }
}

void read_learner(const Reader& r, const Value& v, LearnerConfig& l) {
    const MapView map = r.map(v, {"publish_interval_ms", "rebroadcast_ms", "staleness_scaling", "merged_steps",
                                  "sqrt_max_staleness",
                                  "eval_interval_ms", "eval_episodes", "checkpoint_interval_ms", "worker_timeout_ms",
                                  "max_workers", "max_grad_norm", "max_abs_element", "max_staleness", "admit_sources",
                                  "admit_worker_ids", "model_budget", "model_delivery", "model_group", "credit_priority",
                                  "credit_batching"});
    if (auto x = map.get("publish_interval_ms")) l.publish_interval_ms = r.number(*x, 0.0, kMaxMs);
    if (auto x = map.get("rebroadcast_ms")) l.rebroadcast_ms = static_cast<std::uint32_t>(r.uint(*x, 1, kMaxMs));
    if (auto x = map.get("staleness_scaling")) l.staleness_scaling = r.boolean(*x);
    if (auto x = map.get("merged_steps"))
        l.merged_steps = static_cast<MergedSteps>(r.choice(*x, {"one", "per_contribution", "sqrt"}));
    if (auto x = map.get("sqrt_max_staleness"))
        l.sqrt_max_staleness = static_cast<std::uint32_t>(r.uint(*x, 0, INT32_MAX));
    if (auto x = map.get("eval_interval_ms")) l.eval_interval_ms = static_cast<std::uint32_t>(r.uint(*x, 1, kMaxMs));
    if (auto x = map.get("eval_episodes")) l.eval_episodes = static_cast<std::uint32_t>(r.uint(*x, 1, 10'000));
    if (auto x = map.get("checkpoint_interval_ms")) l.checkpoint_interval_ms = static_cast<std::uint32_t>(r.uint(*x, 0, kMaxMs));
    if (auto x = map.get("worker_timeout_ms")) l.worker_timeout_ms = static_cast<std::uint32_t>(r.uint(*x, 1, kMaxMs));
    if (auto x = map.get("max_workers")) l.max_workers = static_cast<std::uint32_t>(r.uint(*x, 1, 65535));
    if (auto x = map.get("max_grad_norm")) l.max_grad_norm = r.number(*x, 0.0, 1e30);
    if (auto x = map.get("max_abs_element")) l.max_abs_element = r.number(*x, 0.0, 1e30);
    // Versions are serial numbers (they wrap at 2^32): a distance is only meaningful below 2^31.
    if (auto x = map.get("max_staleness")) l.max_staleness = static_cast<std::uint32_t>(r.uint(*x, 1, INT32_MAX));
    if (auto x = map.get("admit_sources")) {
        for (const Value& item : r.list(*x, "IPv4 addresses or prefixes like 10.77.0.0/24")) {
            const auto prefix = parse_prefix(item.node.IsScalar() ? item.node.Scalar() : std::string{});
            if (!prefix) r.fail(item, fmt::format("expected an IPv4 address like 10.77.0.4 or a prefix like 10.77.0.0/24, got {}",
                                                  describe(item.node)));
            l.admit_sources.push_back(*prefix);
        }
    }
    if (auto x = map.get("admit_worker_ids")) {
        for (const Value& item : r.list(*x, "worker ids")) {
            const auto id = static_cast<std::uint32_t>(r.uint(item, 0, UINT32_MAX));
            if (std::find(l.admit_worker_ids.begin(), l.admit_worker_ids.end(), id) != l.admit_worker_ids.end())
                r.fail(item, fmt::format("duplicate worker id {}", id));
            l.admit_worker_ids.push_back(id);
        }
        std::sort(l.admit_worker_ids.begin(), l.admit_worker_ids.end());
    }
    if (auto x = map.get("model_budget")) l.model_budget = static_cast<std::uint32_t>(r.uint(*x, 1, 1'000'000));
    const auto delivery = map.get("model_delivery");
    if (delivery)
        l.model_delivery = r.choice(*delivery, {"unicast", "replicated"}) == 0 ? ModelDelivery::Unicast : ModelDelivery::Replicated;
    if (auto x = map.get("model_group")) {
        // An address, not a prefix: "239.77.0.1" (224.0.0.0/4, IPv4 multicast).
        const std::string text = x->node.IsScalar() ? std::string(yaml::trim(x->node.Scalar())) : std::string{};
        in_addr a{};
        if (text.empty() || text.find('/') != std::string::npos || inet_pton(AF_INET, text.c_str(), &a) != 1)
            r.fail(*x, fmt::format("expected an IPv4 multicast group address like 239.77.0.1, got {}", describe(x->node)));
        const std::uint32_t group = ntohl(a.s_addr);
        if ((group >> 28) != 0xE)
            r.fail(*x, fmt::format("expected an IPv4 multicast group (224.0.0.0/4) like 239.77.0.1, got '{}', which is "
                                   "not a multicast address",
                                   text));
        l.model_group = group;
    }
    if (auto x = map.get("credit_priority")) l.credit_priority = r.boolean(*x);
    if (auto x = map.get("credit_batching")) {
        const bool is_auto = x->node.IsScalar() && yaml::trim(x->node.Scalar()) == "auto";
        l.credit_batching = is_auto ? CreditBatching::Auto : r.boolean(*x) ? CreditBatching::On : CreditBatching::Off;
        if (l.credit_batching == CreditBatching::On && l.model_delivery != ModelDelivery::Replicated)
            r.fail(*x, "learner.credit_batching needs learner.model_delivery: replicated (the switch expands a batch "
                       "for the members of the cluster's MODEL group)");
    }
    if (l.model_delivery == ModelDelivery::Replicated && l.model_group == 0)
        r.fail(delivery->mark, v.path.empty() ? "model_group" : v.path + ".model_group",
               "missing: learner.model_delivery replicated needs the cluster's multicast group, like model_group: "
               "239.77.0.1");
}

void read_worker(const Reader& r, const Value& v, WorkerConfig& w) {
    const MapView map = r.map(v, {"max_updates_per_version", "model_request_ms", "learner_silence_ms", "metrics_interval_ms"});
    if (auto x = map.get("max_updates_per_version")) w.max_updates_per_version = static_cast<std::uint32_t>(r.uint(*x, 0, 1'000'000));
    if (auto x = map.get("model_request_ms")) w.model_request_ms = static_cast<std::uint32_t>(r.uint(*x, 1, kMaxMs));
    if (auto x = map.get("learner_silence_ms")) w.learner_silence_ms = static_cast<std::uint32_t>(r.uint(*x, 1, kMaxMs));
    if (auto x = map.get("metrics_interval_ms")) w.metrics_interval_ms = static_cast<std::uint32_t>(r.uint(*x, 1, kMaxMs));
}

}  // namespace

// The shared reader's errors leave as this parser's own ConfigError.
ClusterConfig parse_cluster_config(const std::string& yaml_text, const std::string& source) try {
    const Reader r(source);
    YAML::Node root;
    try {
        root = YAML::Load(yaml_text);
    } catch (const YAML::Exception& e) {
        r.fail(e.mark, "", fmt::format("not valid YAML: {}", e.msg));
    }
    ClusterConfig c;
    c.source = source;
    const Value top = r.root(root);
    if (!root.IsMap()) r.fail(top, fmt::format("expected a mapping with keys env, model, a3c, ...; got {}", describe(root)));
    const MapView map = r.map(top, {"env", "model", "a3c", "optimizer", "transport", "learner", "worker", "udp_port", "seed"});
    const auto env = map.get("env");
    if (!env) r.fail(top, "missing required key 'env'");
    {
        std::string names;
        bool known = false;
        for (std::string_view n : worker::envs::environment_names()) {
            names += (names.empty() ? "" : ", ") + std::string(n);
            known = known || (env->node.IsScalar() && env->node.Scalar() == n);
        }
        if (!known) r.fail(*env, fmt::format("expected one of {}, got {}", names, describe(env->node)));
        c.model.env_name = env->node.Scalar();
    }
    if (auto x = map.get("model")) read_model(r, *x, c.model);
    if (auto x = map.get("a3c")) read_a3c(r, *x, c.a3c);
    if (auto x = map.get("optimizer")) read_optimizer(r, *x, c.optimizer);
    if (auto x = map.get("transport")) read_transport(r, *x, c.transport);
    if (auto x = map.get("learner")) read_learner(r, *x, c.learner);
    if (auto x = map.get("worker")) read_worker(r, *x, c.worker);
    if (auto x = map.get("udp_port")) c.udp_port = static_cast<std::uint16_t>(r.uint(*x, 1, 65535));
    if (auto x = map.get("seed")) c.seed = r.uint(*x, 0, UINT64_MAX);
    return c;
} catch (const yaml::Error& e) {
    throw ConfigError(e.what());
}

ClusterConfig load_cluster_config(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw ConfigError(fmt::format("{}: cannot read the file", path));
    std::stringstream text;
    text << in.rdbuf();
    return parse_cluster_config(text.str(), path);
}

transport::SenderConfig sender_config(const ClusterConfig& c, std::uint16_t cluster_id, std::uint32_t worker_id,
                                      std::uint32_t model_elems) {
    transport::SenderConfig s;
    s.cluster_id = cluster_id;
    s.worker_id = worker_id;
    s.model_elems = model_elems;
    s.chunk_elems = c.transport.chunk_elems;
    s.w_init = c.transport.w_init;
    s.w_min = c.transport.w_min;
    s.w_max = c.transport.w_max;
    s.additive_increase = c.transport.additive_increase;
    s.slow_start = c.transport.slow_start;
    s.gain = c.transport.gain;
    s.alpha_init = c.transport.alpha_init;
    s.credit_timeout_ns = std::uint64_t{c.transport.credit_timeout_ms} * 1'000'000;
    s.merge_version_gap = c.transport.merge_version_gap;
    s.merge_aware = c.transport.merge_aware;
    s.bank_excess = c.transport.bank_excess;
    s.flight_expiry_rtts = c.transport.flight_expiry_rtts;
    s.flight_expiry_ns = std::uint64_t{c.transport.flight_expiry_ms} * 1'000'000;
    s.merge_floor = c.transport.merge_floor;
    return s;
}

}  // namespace shesha::drl

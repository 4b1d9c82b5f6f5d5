#include "admission.h"

namespace shesha::core {

std::vector<ClusterRule> cluster_rules_from(const SwitchConfig& cfg) {
    std::vector<ClusterRule> rules;
    rules.reserve(cfg.clusters.size());
    for (const auto& c : cfg.clusters) {
        ClusterRule r;
        r.cluster_id = c.id;
        r.aggregation = c.aggregation;
        r.version_tolerance = c.version_tolerance;
        r.allowed_macs = c.member_macs;
        r.allowed_ips = c.member_ips;
        r.allowed_bindings = c.member_bindings;
        rules.push_back(std::move(r));
    }
    return rules;
}

}  // namespace shesha::core

// Merge admission per cluster (see cluster_policy.h). Rules and allow-lists are sorted once at
// construction so each check is a few binary searches, with no allocation.
#include "cluster_policy.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace shesha::core {

ClusterPolicy::ClusterPolicy(std::span<const ClusterRule> rules, NonMemberAction non_member)
    : rules_(rules.begin(), rules.end()), non_member_(non_member) {
    std::sort(rules_.begin(), rules_.end(),
              [](const ClusterRule& a, const ClusterRule& b) { return a.cluster_id < b.cluster_id; });
    for (std::size_t i = 1; i < rules_.size(); ++i) {
        if (rules_[i].cluster_id == rules_[i - 1].cluster_id) {
            throw std::invalid_argument("cluster policy: duplicate rule for cluster " +
                                        std::to_string(rules_[i].cluster_id));
        }
    }
    for (ClusterRule& r : rules_) {
        std::sort(r.allowed_macs.begin(), r.allowed_macs.end());
        std::sort(r.allowed_ips.begin(), r.allowed_ips.end());
        std::sort(r.allowed_bindings.begin(), r.allowed_bindings.end());
    }
}

namespace {
// Whether (mac, ip) is on a rule's allow-list: a MAC, an IP, or a MAC@IP binding.
bool on_allow_list(const ClusterRule& r, const Mac& mac, std::uint32_t ip) noexcept {
    return std::binary_search(r.allowed_macs.begin(), r.allowed_macs.end(), mac) ||
           std::binary_search(r.allowed_ips.begin(), r.allowed_ips.end(), ip) ||
           (!r.allowed_bindings.empty() &&
            std::binary_search(r.allowed_bindings.begin(), r.allowed_bindings.end(), MacIp{mac, ip}));
}
}  // namespace

bool ClusterPolicy::is_member(std::uint16_t cluster_id, const Mac& src_mac, std::uint32_t src_ip) const noexcept {
    const auto it = std::lower_bound(rules_.begin(), rules_.end(), cluster_id,
                                     [](const ClusterRule& r, std::uint16_t id) { return r.cluster_id < id; });
    return it != rules_.end() && it->cluster_id == cluster_id && on_allow_list(*it, src_mac, src_ip);
}

MergeVerdict ClusterPolicy::check(std::uint16_t cluster_id, const Mac& src_mac, std::uint32_t src_ip,
                                  std::uint32_t& tolerance) const noexcept {
    const auto it = std::lower_bound(rules_.begin(), rules_.end(), cluster_id,
                                     [](const ClusterRule& r, std::uint16_t id) { return r.cluster_id < id; });
    if (it == rules_.end() || it->cluster_id != cluster_id) return MergeVerdict::UnknownCluster;
    if (!it->aggregation) return MergeVerdict::NoAggregation;
    if (!on_allow_list(*it, src_mac, src_ip)) return MergeVerdict::NotMember;
    tolerance = it->version_tolerance;
    return MergeVerdict::Merge;
}

}  // namespace shesha::core

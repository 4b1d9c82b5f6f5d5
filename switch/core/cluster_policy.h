// Which gradients may be merged: per-cluster aggregation switch, model-version tolerance and the
// allow-list of member sources. A GRADIENT from a source outside its cluster's allow-list is never
// merged (so a rogue host cannot poison a merged update): it is forwarded unmerged or dropped, as
// configured, and counted by the caller.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "fdb.h"

namespace shesha::core {

struct MacIp {
    Mac mac{};
    std::uint32_t ip = 0;  // host byte order
    auto operator<=>(const MacIp&) const = default;
};

enum class NonMemberAction : std::uint8_t { ForwardUnmerged, Drop };

struct ClusterRule {
    std::uint16_t cluster_id = 0;
    bool aggregation = true;
    std::uint32_t version_tolerance = 0;
    std::vector<Mac> allowed_macs;       // all three empty: nobody may merge
    std::vector<std::uint32_t> allowed_ips;  // host byte order
    std::vector<MacIp> allowed_bindings;     // MAC and IP that must arrive together
    // A source is a member if its MAC is listed, or its IP is listed, or its (MAC, IP) pair is
    // listed as a binding. A bare IP trusts whoever sends with that address (spoofable from any
    // port); a binding also needs the sender's MAC, so a host cannot merge as a member by
    // borrowing the member's IP from its own MAC.
};

enum class MergeVerdict : std::uint8_t {
    Merge,            // member of a cluster with aggregation on
    NoAggregation,    // cluster known, aggregation off for it (or globally): forward unmerged
    UnknownCluster,   // no rule for this cluster id: forward unmerged
    NotMember,        // source not on the allow-list: apply NonMemberAction
};

class ClusterPolicy {
public:
    ClusterPolicy() = default;
    ClusterPolicy(std::span<const ClusterRule> rules, NonMemberAction non_member);
    // Decides for one GRADIENT; fills tolerance when the verdict is Merge.
    MergeVerdict check(std::uint16_t cluster_id, const Mac& src_mac, std::uint32_t src_ip,
                       std::uint32_t& tolerance) const noexcept;
    NonMemberAction non_member_action() const noexcept { return non_member_; }
    std::size_t cluster_count() const noexcept { return rules_.size(); }

private:
    std::vector<ClusterRule> rules_;  // sorted by cluster_id for binary search
    NonMemberAction non_member_ = NonMemberAction::ForwardUnmerged;
};

}  // namespace shesha::core

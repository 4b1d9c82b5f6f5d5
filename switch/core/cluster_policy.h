// Which gradients may be merged: per-cluster aggregation switch, model-version tolerance and the
// allow-list of member sources. A GRADIENT from a source outside its cluster's allow-list is never
// merged (so a rogue host cannot poison a merged update): it is forwarded unmerged or dropped, as
// configured, and counted by the caller.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
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
    // Whether (src_mac, src_ip) is on the cluster's allow-list, whatever its aggregation setting.
    bool is_member(std::uint16_t cluster_id, const Mac& src_mac, std::uint32_t src_ip) const noexcept;
    MergeVerdict check(std::uint16_t cluster_id, const Mac& src_mac, std::uint32_t src_ip,
                       std::uint32_t& tolerance) const noexcept;
    NonMemberAction non_member_action() const noexcept { return non_member_; }
    std::size_t cluster_count() const noexcept { return rules_.size(); }

private:
    std::vector<ClusterRule> rules_;  // sorted by cluster_id for binary search
    NonMemberAction non_member_ = NonMemberAction::ForwardUnmerged;
};

// check() memoized for the data path: the policy never changes after construction and a burst
// carries few senders, so a verdict remembered for the same (cluster, MAC, IP) is exact. Direct
// mapped, fixed size, owned by one thread (the egress owner), like the FDB's memos.
class PolicyVerdictCache {
public:
    explicit PolicyVerdictCache(const ClusterPolicy& policy) noexcept : policy_(&policy) {}

    MergeVerdict check(std::uint16_t cluster_id, const std::uint8_t* src_mac, std::uint32_t src_ip,
                       std::uint32_t& tolerance) noexcept {
        const MacKey mac = mac_key(src_mac);
        const std::uint64_t tag = mac | (std::uint64_t{cluster_id} << 48);
        // Fibonacci hashing of tag and IP together.
        const std::size_t slot = ((tag ^ (std::uint64_t{src_ip} * 0x9E3779B97F4A7C15ull)) * 0x9E3779B97F4A7C15ull) >> (64 - kSlotBits);
        Entry& e = entries_[slot];
        if (!(e.valid && e.tag == tag && e.ip == src_ip)) [[unlikely]] {
            Mac m;
            std::memcpy(m.data(), src_mac, m.size());
            std::uint32_t tol = 0;
            const MergeVerdict v = policy_->check(cluster_id, m, src_ip, tol);
            e = Entry{tag, src_ip, tol, v, true};
        }
        if (e.verdict == MergeVerdict::Merge) tolerance = e.tolerance;  // as check(): else left alone
        return e.verdict;
    }

private:
    static constexpr int kSlotBits = 6;  // 64 entries: a rack's workers per burst, with room
    struct Entry {
        std::uint64_t tag = 0;  // MAC key | cluster id << 48
        std::uint32_t ip = 0;
        std::uint32_t tolerance = 0;
        MergeVerdict verdict = MergeVerdict::UnknownCluster;
        bool valid = false;
    };
    const ClusterPolicy* policy_;
    std::array<Entry, std::size_t{1} << kSlotBits> entries_{};
};

}  // namespace shesha::core

// Stage 3 of the pipeline, admission: the cluster policy's verdict on an fp32 GRADIENT.
//
// Contract: for a GRADIENT from (cluster, source MAC, source IP), says whether it travels at all
// (a non-member under `non_member: drop` does not), whether it may merge (a member of a cluster
// with aggregation on, with the switch's aggregation on) and with which version tolerance. Counts
// the verdicts that are not "merge" in the forwarding thread's table; frees nothing (the caller
// drops what does not pass). Other frames are not its business.
#pragma once

#include <cstdint>
#include <cstring>

#include "classify.h"
#include "cluster_policy.h"
#include "counters.h"
#include "switch_config.h"

namespace shesha::core {

std::vector<ClusterRule> cluster_rules_from(const SwitchConfig& cfg);

struct Admission {
    bool pass = true;        // false: drop it (a non-member under non_member: drop)
    bool mergeable = false;  // it may merge in the egress queue
    std::uint32_t tolerance = 0;  // version tolerance of its cluster (when mergeable)
};

class AdmissionStage {
public:
    explicit AdmissionStage(const SwitchConfig& cfg)
        : policy_(cluster_rules_from(cfg), cfg.non_member), aggregation_(cfg.aggregation) {}
    AdmissionStage(const AdmissionStage&) = delete;  // the cache points at the policy
    AdmissionStage& operator=(const AdmissionStage&) = delete;

    [[gnu::always_inline]] inline Admission admit(const PacketMeta& meta, const std::uint8_t* src_mac,
                                                  SwitchCounters& counters) noexcept {
        Admission a;
        switch (cache_.check(meta.cluster_id, src_mac, meta.src_ip, a.tolerance)) {
        case MergeVerdict::Merge:
            a.mergeable = aggregation_;
            break;
        case MergeVerdict::NoAggregation:
            counters.add(SwitchCounter::NoAggregation);
            break;
        case MergeVerdict::UnknownCluster:
            counters.add(SwitchCounter::UnknownCluster);
            break;
        case MergeVerdict::NotMember:
            counters.add(SwitchCounter::NonMember);
            if (policy_.non_member_action() == NonMemberAction::Drop) {
                counters.add(SwitchCounter::NonMemberDropped);
                a.pass = false;
            }
            break;
        }
        return a;
    }

    // Whether the cluster policy counts a source as a member of its cluster (merging or not).
    bool is_member(const PacketMeta& meta, const std::uint8_t* src_mac) const noexcept {
        Mac mac;
        std::memcpy(mac.data(), src_mac, mac.size());
        return policy_.is_member(meta.cluster_id, mac, meta.src_ip);
    }

private:
    ClusterPolicy policy_;
    PolicyVerdictCache cache_{policy_};  // after policy_: it points at it
    bool aggregation_;
};

}  // namespace shesha::core

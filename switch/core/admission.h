// Stage 3 of the pipeline, admission: the cluster policy's verdict on an fp32 GRADIENT.
//
// Contract: for a GRADIENT from (cluster, source MAC, source IP), says whether it travels at all
// (a non-member under `non_member: drop` does not), whether it may merge (a member of a cluster
// with aggregation on, with the switch's aggregation on) and with which version tolerance. Counts
// the verdicts that are not "merge" in the forwarding thread's table; frees nothing (the caller
// drops what does not pass). Other frames are not its business.
//
// A copy is never merged, nor forwarded. Per (cluster, worker, chunk) the stage keeps the window
// of seqs it has seen (SeqWindow, as the learner does): a GRADIENT whose seq it has seen is a
// copy made on the way (a link or a relay duplicated it) and is dropped (counted `copies_dropped`;
// it never was in its worker's flight, so no credit is owed for it). Merged into another chunk it
// would be applied twice and nobody could tell; forwarded alone, it could still be a second copy of
// a contribution already inside a merged chunk named after another worker. A reordered GRADIENT
// (older, not seen) is new and merges as usual. Workers' seqs grow per update (a chunk's seq is its
// first contribution's), so an honest sender never repeats one. A seq SeqWindow::kWidth or more
// behind cannot be told from a copy: forwarded unmerged (`late_unmerged`), for the learner to
// judge; kRestartGap or more behind is a restarted sender (a new window).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>

#include "classify.h"
#include "seq_window.h"
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

// The seqs seen per (cluster, worker, chunk) and (source, destination) IPv4 address (a copy has its
// original's; two hosts misconfigured with one worker id, or one worker's gradients to two
// learners, are two senders), in a table of 4-way buckets: a key whose bucket is
// full replaces one of its four keys, which forgets that key's seqs, so a copy arriving after its
// key was replaced is not recognised here (the learner still refuses it if it travels alone).
// 4096 slots of 32 bytes: two clusters of ten workers and 19 chunks (380 keys, the lab's largest
// rack) all fit (tests/test_pipeline.cpp).
enum class RepeatVerdict : std::uint8_t { New, Copy, Late };

class RecentGradients {
public:
    static constexpr std::size_t kSlots = 4096;
    static constexpr std::size_t kWays = 4;
    static constexpr std::uint32_t kRestartGap = 1024;

    RecentGradients() : slots_(std::make_unique<Slot[]>(kSlots)) {}

    [[gnu::always_inline]] inline RepeatVerdict check(const PacketMeta& meta) noexcept {
        Slot* const bucket = &slots_[bucket_of(meta) * kWays];
        for (std::size_t i = 0; i < kWays; ++i) {
            Slot& s = bucket[i];
            if (s.seen.empty() || s.worker_id != meta.worker_id || s.cluster_id != meta.cluster_id ||
                s.chunk_index != meta.chunk_index || s.src_ip != meta.src_ip || s.dst_ip != meta.dst_ip)
                continue;
            switch (s.seen.classify(meta.seq)) {
            case SeqVerdict::Duplicate:
                return RepeatVerdict::Copy;
            case SeqVerdict::TooOld:
                if (static_cast<std::uint32_t>(s.seen.highest() - meta.seq) < kRestartGap) return RepeatVerdict::Late;
                s.seen.clear();  // far behind: the sender restarted
                break;
            case SeqVerdict::New:
                break;
            }
            s.seen.mark(meta.seq);
            return RepeatVerdict::New;
        }
        // A new key: an empty slot of the bucket, else the slots in turn.
        std::size_t free = 0;
        while (free < kWays && !bucket[free].seen.empty()) ++free;
        if (free == kWays) free = victim_++ % kWays;
        Slot& s = bucket[free];
        s.worker_id = meta.worker_id;
        s.cluster_id = meta.cluster_id;
        s.chunk_index = meta.chunk_index;
        s.src_ip = meta.src_ip;
        s.dst_ip = meta.dst_ip;
        s.seen.clear();
        s.seen.mark(meta.seq);
        return RepeatVerdict::New;
    }

private:
    struct Slot {
        SeqWindow seen;
        std::uint32_t worker_id = 0;
        std::uint16_t cluster_id = 0;
        std::uint16_t chunk_index = 0;
        std::uint32_t src_ip = 0;
        std::uint32_t dst_ip = 0;
    };
    static std::size_t bucket_of(const PacketMeta& meta) noexcept {
        // murmur3's 32-bit finalizer over the key: neighbouring ids and chunks land apart.
        std::uint32_t h = meta.worker_id * 0x9E3779B1U ^ (std::uint32_t{meta.cluster_id} << 16 | meta.chunk_index) ^
                          meta.src_ip * 0x27D4EB2FU ^ meta.dst_ip * 0x165667B1U;
        h ^= h >> 16;
        h *= 0x85EBCA6BU;
        h ^= h >> 13;
        h *= 0xC2B2AE35U;
        h ^= h >> 16;
        return h & (kSlots / kWays - 1);
    }
    std::unique_ptr<Slot[]> slots_;
    unsigned victim_ = 0;
};

class AdmissionStage {
public:
    explicit AdmissionStage(const SwitchConfig& cfg)
        : policy_(cluster_rules_from(cfg), cfg.non_member), aggregation_(cfg.aggregation), drop_copies_(cfg.drop_copies) {}
    AdmissionStage(const AdmissionStage&) = delete;  // the cache points at the policy
    AdmissionStage& operator=(const AdmissionStage&) = delete;

    [[gnu::always_inline]] inline Admission admit(const PacketMeta& meta, const std::uint8_t* src_mac,
                                                  SwitchCounters& counters) noexcept {
        Admission a;
        switch (cache_.check(meta.cluster_id, src_mac, meta.src_ip, a.tolerance)) {
        case MergeVerdict::Merge:
            if (aggregation_ && drop_copies_) [[likely]] {
                const RepeatVerdict r = recent_.check(meta);
                if (r == RepeatVerdict::Copy) [[unlikely]] {
                    counters.add(SwitchCounter::GradientCopiesDropped);
                    a.pass = false;
                    break;
                }
                if (r == RepeatVerdict::Late) [[unlikely]] {
                    counters.add(SwitchCounter::GradientLateUnmerged);
                    break;
                }
            }
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
    bool drop_copies_;  // aggregation.drop_copies
    RecentGradients recent_;
};

}  // namespace shesha::core

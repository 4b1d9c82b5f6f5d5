// The switch's counters: two enum-indexed tables (per port, and per switch) with one name table
// each. The pipeline writes them; the stats JSON, the telemetry commands, the Prometheus textfile,
// the periodic log line, shesha-replay and the simulator all read them through the name tables
// instead of listing the fields again (the idea of OVS's dpif-netdev-perf.h PMD counters).
//
// Each counter has exactly one writer: every forwarding lcore has its own tables (its pipeline's
// per-port RX and TX tables and its switch tables), and a snapshot adds them up. A writer does a plain
// load + add + relaxed store (no lock prefix, no read-modify-write atomics on the data path) and
// readers do relaxed loads, so a 64-bit value is never torn. Writers on different lcores never
// share a table.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "protocol.h"

namespace shesha::core {

inline void bump(std::uint64_t& counter, std::uint64_t n = 1) noexcept {
    std::atomic_ref<std::uint64_t>(counter).store(counter + n, std::memory_order_relaxed);
}
inline void store_relaxed(std::uint64_t& counter, std::uint64_t v) noexcept {
    std::atomic_ref<std::uint64_t>(counter).store(v, std::memory_order_relaxed);
}
inline std::uint64_t load_relaxed(const std::uint64_t& counter) noexcept {
    return std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(counter)).load(std::memory_order_relaxed);
}

// ---- per port ------------------------------------------------------------------------------------
enum class PortCounter : std::uint8_t {
    // RX: written by the lcore that polls the port
    RxPackets,
    RxBytes,
    RxMultiSegment,          // forwarded without looking past the Ethernet header
    // TX: written by the lcore that forwards to the port (each lcore has its own table)
    TxPackets,
    TxBytes,
    TxContributions,         // gradient updates carried by the packets sent
    TxRefused,               // packet-attempts the NIC refused (kept pending, retried)
    TxDropped,               // still queued or pending at shutdown: freed, never sent
    Flooded,                 // frames received on this port that were flooded
    Filtered,                // destination learned on the ingress port itself: dropped
    QueueDrops,              // tail drops into this port's queue
    TxTooBig,                // frames longer than this port's mtu allows: dropped
    TxDroppedContributions,  // gradient updates in this port's tail drops
    Count
};

// ---- per switch ----------------------------------------------------------------------------------
enum class SwitchCounter : std::uint8_t {
    // classification (each forwarding lcore has its own table)
    NonIp,
    IpOther,
    Shesha,                  // Shesha messages that decoded cleanly
    GradientF32,             // valid fp32 GRADIENTs (merge candidates)
    MultiSegment,
    Runts,                   // shorter than an Ethernet header (14 bytes): dropped
    BadFrames,               // IPv4/UDP headers inconsistent
    MalformedFirst,          // one entry per proto::DecodeError after Ok, in its order
    MalformedLast = MalformedFirst + proto::kDecodeErrorCount - 2,
    RxRounds,
    RxIdleRounds,
    // forwarding: policy, FEEDBACK, internals
    MalformedDropped,        // malformed frames dropped per config
    NonMember,               // GRADIENTs from sources outside their cluster's allow-list
    NonMemberDropped,
    NoAggregation,           // fp32 GRADIENTs of clusters with aggregation off
    UnknownCluster,
    GradientCopiesDropped,   // mergeable GRADIENTs whose (cluster, worker, chunk, seq) was seen: copies (admission.h)
    GradientLateUnmerged,    // too far behind their sender's newest to tell: forwarded unmerged
    FeedbackSent,
    FeedbackSuppressed,      // rate limited by FeedbackLimiter
    FeedbackFailed,          // no buffer, or the NIC refused it
    CloneFailed,             // flood copies that could not be allocated
    // forwarding: MODEL replication (replication.h)
    ModelReplicated,         // MODEL frames to a group, replicated to its members
    ModelCopies,             // copies made and enqueued (one per member with a known port; a copy
                             // tail-dropped at a full queue also counts in queue_drops)
    ModelFabricCopies,       // group frames sent on, unchanged, through a fabric port (one per
                             // such port with members behind it): the switch there copies
    ModelNotMember,          // MODEL to a group not from its learner or cluster: dropped
    ModelMemberPortUnknown,  // a member the FDB does not know: no copy (never flooded)
    ModelJoined,             // model requests that joined (or updated) a group member
    ModelJoinRefused,        // model requests of non-members, or not to the group's learner
    ModelMembersFull,        // joins refused: the group has max_members members
    ModelCopyFailed,         // copies that could not be allocated
    // forwarding: CREDIT_BATCH fan-out to a group's members (replication.h)
    CreditBatches,           // CREDIT_BATCHes from a group's learner, expanded here
    CreditCopies,            // CREDITs built from their entries and enqueued, one per entry
    CreditBatchNotMember,    // CREDIT_BATCH to a group not from its learner or cluster: dropped
    CreditWorkerUnknown,     // entries naming no member of the group (not joined, or left): no CREDIT
    CreditMemberPortUnknown, // entries for a member the FDB does not know: no CREDIT (never flooded)
    CreditBadEntry,          // entries with flags a CREDIT may not carry: no CREDIT
    CreditCopyFailed,        // CREDITs that could not be allocated
    PeerSyncDropped,         // FDB learns and group joins not told to the other lcores (their
                             // rings were full); the next once-a-second resync repeats them
    EgressRounds,
    EgressIdleRounds,
    Count
};

inline constexpr SwitchCounter malformed_counter(proto::DecodeError e) noexcept {
    return static_cast<SwitchCounter>(static_cast<int>(SwitchCounter::MalformedFirst) + static_cast<int>(e) - 1);
}

// Where a counter appears in reports: its section ("port", "frames", "malformed", ...) and key.
// A counter only grows (Prometheus type counter).
struct CounterName {
    std::string_view section;
    std::string_view key;
};

inline constexpr std::array<CounterName, static_cast<std::size_t>(PortCounter::Count)> kPortCounterNames{{
    {"port", "rx_packets"},
    {"port", "rx_bytes"},
    {"port", "rx_multi_segment"},
    {"port", "tx_packets"},
    {"port", "tx_bytes"},
    {"port", "tx_contributions"},
    {"port", "tx_refused"},
    {"port", "tx_dropped"},
    {"port", "flooded"},
    {"port", "filtered"},
    {"port", "queue_drops"},
    {"port", "tx_too_big"},
    {"port", "tx_dropped_contributions"},
}};

inline constexpr std::array<CounterName, static_cast<std::size_t>(SwitchCounter::Count)> kSwitchCounterNames{{
    {"frames", "non_ip"},
    {"frames", "ip_other"},
    {"frames", "shesha"},
    {"frames", "gradient_f32"},
    {"frames", "multi_segment"},
    {"frames", "runts_dropped"},
    {"malformed", "bad_frames"},
    {"malformed", "short_packet"},
    {"malformed", "bad_magic"},
    {"malformed", "bad_version"},
    {"malformed", "unknown_type"},
    {"malformed", "unknown_flags"},
    {"malformed", "bad_elem_type"},
    {"malformed", "bad_chunk"},
    {"malformed", "too_many_elements"},
    {"malformed", "length_mismatch"},
    {"malformed", "bad_contrib_count"},
    {"malformed", "bad_timestamps"},
    {"internal", "rx_rounds"},
    {"internal", "rx_idle_rounds"},
    {"malformed", "dropped"},
    {"gradients", "non_member"},
    {"gradients", "non_member_dropped"},
    {"gradients", "no_aggregation"},
    {"gradients", "unknown_cluster"},
    {"gradients", "copies_dropped"},
    {"gradients", "late_unmerged"},
    {"feedback", "sent"},
    {"feedback", "suppressed"},
    {"feedback", "failed"},
    {"internal", "clone_failed"},
    {"replication", "model_replicated"},
    {"replication", "model_copies"},
    {"replication", "model_fabric_copies"},
    {"replication", "model_not_member"},
    {"replication", "model_member_port_unknown"},
    {"replication", "model_joined"},
    {"replication", "model_join_refused"},
    {"replication", "model_members_full"},
    {"replication", "model_copy_failed"},
    {"replication", "credit_batches"},
    {"replication", "credit_copies"},
    {"replication", "credit_batch_not_member"},
    {"replication", "credit_worker_unknown"},
    {"replication", "credit_member_port_unknown"},
    {"replication", "credit_bad_entry"},
    {"replication", "credit_copy_failed"},
    {"internal", "peer_sync_dropped"},
    {"internal", "egress_rounds"},
    {"internal", "egress_idle_rounds"},
}};
static_assert(static_cast<int>(SwitchCounter::MalformedLast) - static_cast<int>(SwitchCounter::MalformedFirst) + 2 ==
              proto::kDecodeErrorCount);

// Every counter has a name, and no two share one: an enum entry added without its name leaves an
// empty entry at the end of the table (std::array value-initialises the rest), caught here at
// compile time instead of as an empty key in the stats JSON or Prometheus.
template <std::size_t N>
constexpr bool names_complete_and_unique(const std::array<CounterName, N>& names) noexcept {
    for (std::size_t i = 0; i < N; ++i) {
        if (names[i].section.empty() || names[i].key.empty()) return false;
        for (std::size_t j = i + 1; j < N; ++j)
            if (names[i].section == names[j].section && names[i].key == names[j].key) return false;
    }
    return true;
}
static_assert(names_complete_and_unique(kPortCounterNames), "every PortCounter needs a unique, non-empty name");
static_assert(names_complete_and_unique(kSwitchCounterNames), "every SwitchCounter needs a unique, non-empty name");

// An enum-indexed table of single-writer counters, on cache lines of its own.
template <typename E>
struct alignas(64) CounterTable {
    static constexpr std::size_t kSize = static_cast<std::size_t>(E::Count);
    std::array<std::uint64_t, kSize> values{};

    void add(E c, std::uint64_t n = 1) noexcept { bump(values[static_cast<std::size_t>(c)], n); }
    std::uint64_t operator[](E c) const noexcept { return values[static_cast<std::size_t>(c)]; }
    // A copy read with relaxed loads: safe from another thread while the writer runs.
    CounterTable read() const noexcept {
        CounterTable t;
        for (std::size_t i = 0; i < kSize; ++i) t.values[i] = load_relaxed(values[i]);
        return t;
    }
    CounterTable& operator+=(const CounterTable& o) noexcept {
        for (std::size_t i = 0; i < kSize; ++i) values[i] += o.values[i];
        return *this;
    }
};
using PortCounters = CounterTable<PortCounter>;
using SwitchCounters = CounterTable<SwitchCounter>;

inline constexpr const CounterName& name_of(PortCounter c) noexcept { return kPortCounterNames[static_cast<std::size_t>(c)]; }
inline constexpr const CounterName& name_of(SwitchCounter c) noexcept { return kSwitchCounterNames[static_cast<std::size_t>(c)]; }

// Sum of every malformed reason (decode errors and bad frames): the "malformed total".
inline std::uint64_t malformed_total(const SwitchCounters& s) noexcept {
    std::uint64_t total = s[SwitchCounter::BadFrames];
    for (int i = static_cast<int>(SwitchCounter::MalformedFirst); i <= static_cast<int>(SwitchCounter::MalformedLast); ++i)
        total += s.values[static_cast<std::size_t>(i)];
    return total;
}

// A struct of uint64_t fields published by its single writer, field by field, for readers on other
// threads. Fields are individually untorn; the set is a best-effort snapshot.
template <typename T>
class Published {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) % 8 == 0);
    static constexpr std::size_t kWords = sizeof(T) / 8;

public:
    void publish(const T& value) noexcept {
        std::array<std::uint64_t, kWords> words;
        std::memcpy(words.data(), &value, sizeof(T));
        for (std::size_t i = 0; i < kWords; ++i) store_relaxed(words_[i], words[i]);
    }
    T read() const noexcept {
        std::array<std::uint64_t, kWords> words;
        for (std::size_t i = 0; i < kWords; ++i) words[i] = load_relaxed(words_[i]);
        T value;
        std::memcpy(static_cast<void*>(&value), words.data(), sizeof(T));
        return value;
    }

private:
    alignas(64) std::array<std::uint64_t, kWords> words_{};
};

}  // namespace shesha::core

// The learner's protocol engine, without sockets, clocks or libtorch: every datagram, the current
// time and the send function are parameters, so unit tests drive it with exact inputs.
//
//   GRADIENT  validated by the Reassembler (type, F32, cluster, layout, finite); a valid chunk is
//             applied at once to its parameter slice with that slice's optimizer, scaled by
//             1 / contrib_count (the average of the merged updates) and, with staleness scaling,
//             by 1 / (1 + staleness); every GRADIENT of the cluster is answered with the CREDITs
//             CreditPlanner plans (CE echoed), applied or not, since it left flight either way.
//   MODEL     with elem_count 0: a worker's model request (drl_wire.h), answered with the whole
//             published model, at most once per kModelResendMinNs per worker.
//   publish   a new version (a snapshot of the parameters) at most every publish_interval_ms when
//             anything was applied since the last one, broadcast to every active worker;
//   rebroadcast  the published version again every rebroadcast_ms (lost chunks, new workers).
//
// With learner.model_delivery: replicated, a publish or rebroadcast sends each chunk once, to the
// cluster's group (learner.model_group at udp_port) with worker_id kEveryWorker, and a Shesha
// switch fans it out to the members (docs/transport.md, "Replicated model delivery"). Answers to
// model requests stay unicast. model_budget still bounds what silent workers draw: the group copy
// goes out only while at least one active worker has budget left, and it counts against the
// budget of every active worker that had some (it reaches them through the switch).
//
// Unicast copies are owed, then sent: a publish, rebroadcast or answered request marks the worker,
// and the copies go out whole, workers in turn, each of the version published when it leaves. When
// the socket's buffer is full (the send function says WouldBlock) the rest wait, in the learner,
// until on_writable() or the next tick: a copy never sits behind older versions in the kernel's
// queue, and no worker's copy is lost to a full buffer (docs/transport.md, "Copies owed"). With
// replicated delivery only answers are unicast; they go at once, as the group copy follows.
//
// Age-of-Model and staleness are computed here exactly as docs/aom.md defines them.
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "aom_tracker.h"
#include "cluster_config.h"
#include "model/model_types.h"
#include "model/optimizer.h"
#include "protocol.h"
#include "transport/chunking.h"
#include "transport/credit_planner.h"
#include "seq_window.h"

namespace shesha::learner {

inline constexpr std::uint64_t kModelResendMinNs = 20'000'000;  // per worker, for requests
inline constexpr std::size_t kStalenessBuckets = 32;            // exact counts 0..31, then ">= 32"

// The IPv4 TOS a learner datagram leaves with (docs/transport.md, "CREDIT ahead of MODEL"). With
// learner.credit_priority (the default) a CREDIT (or CREDIT_BATCH) gets IPTOS_LOWDELAY, 0x10 with the ECN bits 0:
// Linux derives the packet's priority from it (rt_tos2priority: TC_PRIO_INTERACTIVE), and a
// pfifo_fast or prio qdisc on the learner's host serves that band before MODEL's. Everything else,
// and CREDIT with the setting off, gets 0: the learner socket's own TOS. The learner's socket
// (api/transport.cpp) and shesha-sim's learners both ask this function.
inline constexpr std::uint8_t kCreditTos = 0x10;
inline std::uint8_t datagram_tos(const drl::LearnerConfig& cfg, std::span<const std::uint8_t> message) noexcept {
    const bool credit = message.size() > proto::off::kType &&
                        (message[proto::off::kType] == static_cast<std::uint8_t>(proto::MsgType::Credit) ||
                         message[proto::off::kType] == static_cast<std::uint8_t>(proto::MsgType::CreditBatch));
    return cfg.credit_priority && credit ? kCreditTos : 0;
}

struct LearnerCounters {
    std::uint64_t datagrams = 0;
    std::array<std::uint64_t, proto::kDecodeErrorCount> decode_errors{};  // by DecodeError
    std::uint64_t decode_errors_total = 0;
    std::uint64_t unexpected_type = 0;       // CREDIT, FEEDBACK or a non-request MODEL sent to us
    std::uint64_t gradient_chunks = 0;       // decoded GRADIENT messages (any cluster)
    std::uint64_t chunks_applied = 0;
    std::uint64_t contributions_applied = 0; // sum of contrib_count over applied chunks
    std::uint64_t optimizer_steps = 0;       // one per applied chunk, or per contribution (merged_steps)
    std::uint64_t steps_capped = 0;          // chunks with more contributions than kMaxStepsPerChunk
    std::uint64_t merged_chunks = 0;         // applied chunks with the MERGED flag (in-network)
    std::uint64_t sender_merged_chunks = 0;  // applied chunks with SENDER_MERGED
    std::uint64_t ce_chunks = 0;             // applied or not, chunks carrying CE
    std::uint64_t version_ahead = 0;         // base version newer than ours (after a resume): staleness 0
    std::uint64_t credit_messages = 0;       // CREDITs sent (in a CREDIT_BATCH: its entries)
    std::uint64_t credit_units = 0;
    std::uint64_t credit_batches = 0;        // CREDIT_BATCH datagrams (learner.credit_batching)
    std::uint64_t model_requests = 0;
    std::uint64_t model_requests_rate_limited = 0;
    std::uint64_t foreign_requests = 0;      // model requests naming another cluster
    std::uint64_t versions_published = 0;
    std::uint64_t model_chunks_sent = 0;        // unicast MODEL chunks (one per worker per chunk)
    std::uint64_t model_copies_owed = 0;        // unicast copies decided (publish, rebroadcast, request)
    std::uint64_t model_copies_sent = 0;        // ... that went out whole
    std::uint64_t model_copies_renewed = 0;     // ... that went out as a newer version than decided
    std::uint64_t model_sends_deferred = 0;     // times the socket's buffer was full and copies waited
    // Replicated delivery: one datagram per chunk to learner.model_group, whatever the member count.
    std::uint64_t model_group_sends = 0;        // publishes and rebroadcasts sent to the group
    std::uint64_t model_group_chunks_sent = 0;  // their chunks (not in model_chunks_sent)
    std::uint64_t model_group_withheld = 0;     // group sends skipped: active workers, none with budget left
    std::uint64_t rebroadcasts = 0;
    std::uint64_t workers_overflow = 0;      // a new worker beyond max_workers: not registered
    std::uint64_t workers_expired = 0;
    // Hardening (docs/aom.md, "What the learner refuses"). Rejected chunks are never applied and
    // never register their sender.
    std::uint64_t rejected_too_stale = 0;    // more than max_staleness versions behind
    std::uint64_t rejected_too_new = 0;      // more than max_staleness versions ahead
    std::uint64_t rejected_magnitude = 0;    // an averaged element beyond max_abs_element
    std::uint64_t chunks_clipped = 0;        // applied after scaling down to max_grad_norm
    std::uint64_t steps_rolled_back = 0;     // a step left parameters or optimizer state non-finite
    std::uint64_t not_admitted = 0;          // datagrams of our cluster from a source or id not admitted
    std::uint64_t models_withheld = 0;       // unicast MODEL copies not sent: the worker's model_budget was spent
    // Duplicates (docs/transport.md, "Duplicates"): a GRADIENT whose (worker, seq, chunk) was
    // already taken is a copy made on the way; it is neither applied nor credited.
    std::uint64_t duplicates = 0;
    std::uint64_t rejected_replay_window = 0;  // SeqWindow::kWidth or more seqs late: cannot tell, not applied
    std::uint64_t rejected_total() const noexcept {
        return rejected_too_stale + rejected_too_new + rejected_magnitude + steps_rolled_back + rejected_replay_window;
    }
};

struct StalenessStats {
    std::uint64_t count = 0;
    double sum = 0.0;
    std::uint32_t max = 0;
    std::array<std::uint64_t, kStalenessBuckets + 1> histogram{};  // last: >= kStalenessBuckets
    double mean() const noexcept { return count ? sum / static_cast<double>(count) : 0.0; }
};

struct WorkerInfo {
    std::uint32_t id = 0;
    sockaddr_in addr{};
    bool active = true;
    std::uint64_t last_heard_ns = 0;       // monotonic
    std::uint64_t last_model_sent_ns = 0;  // monotonic, 0: never
    std::uint32_t models_since_heard = 0;  // MODEL copies sent since its last datagram (model_budget)
    bool any_steps = false;
    std::uint32_t env_steps_first = 0;     // first 24-bit count seen in this incarnation (baseline on resume)
    std::uint64_t env_steps_since_first = 0;  // unwrapped advance from env_steps_first
    std::uint64_t chunks_applied = 0;
    std::uint64_t credit_units = 0;        // CREDIT units sent to it (named and spread)
    bool quiet = false;                    // not heard for 2 x credit_timeout_ms: no spread units
    // A unicast copy owed to it: owed_chunk chunks of owed_version have gone out.
    bool model_owed = false;
    std::uint32_t owed_version = 0;
    std::uint16_t owed_chunk = 0;
    std::vector<SeqWindow> seen;  // per chunk index, the seqs taken (cleared on expiry)
};

// What a checkpoint holds (learner/checkpoint.h writes and reads it).
struct LearnerState {
    std::uint16_t cluster_id = 0;
    std::uint32_t version = 1;
    std::uint64_t env_steps = 0;
    std::uint64_t chunks_applied = 0;
    std::vector<float> parameters;
    std::vector<rl::OptimizerState> optimizers;  // one per chunk
};

// An accepted chunk handed to an external optimizer instead of the built-in one (the public API's
// LearnerEndpoint with an update handler): the chunk's elements as received (the sum of its
// contributions); elements * average_scale is their average clipped to learner.max_grad_norm,
// and staleness_scale is 1 / (1 + staleness) with learner.staleness_scaling (else 1).
struct ExternalChunk {
    std::uint16_t chunk_index = 0;
    std::uint32_t offset = 0;
    std::span<const float> elements;
    float average_scale = 1.0F;
    float staleness_scale = 1.0F;
    std::uint16_t contributions = 1;
    std::uint32_t staleness = 0;
    std::uint32_t base_version = 0;
    std::uint32_t worker_id = 0;
    bool merged = false;
};

// What one send did. The socket's buffer full (EAGAIN) is WouldBlock: a MODEL copy waits for room;
// anything else that failed is Failed. A send function may return a bool (true: Sent).
enum class SendStatus : std::uint8_t { Sent, WouldBlock, Failed };
struct SendResult {
    SendStatus status = SendStatus::Sent;
    SendResult(bool sent) noexcept : status(sent ? SendStatus::Sent : SendStatus::Failed) {}  // NOLINT: implicit by design
    SendResult(SendStatus s) noexcept : status(s) {}                                          // NOLINT
    explicit operator bool() const noexcept { return status == SendStatus::Sent; }
};

class LearnerCore {
public:
    using SendFn = std::function<SendResult(const sockaddr_in& to, std::span<const std::uint8_t> message)>;
    using ChunkHandler = std::function<void(const ExternalChunk&)>;

    // initial: the parameters of version 1 (or of the resumed state). Throws std::invalid_argument
    // when the layout is impossible.
    LearnerCore(const drl::ClusterConfig& config, std::uint16_t cluster_id, std::vector<float> initial,
                std::uint32_t incarnation, SendFn send);

    // Restores parameters, version, counts and optimizer states; false (nothing changes) if the
    // state does not fit this model/optimizer, with the reason in error.
    bool restore(const LearnerState& state, std::string& error);
    LearnerState snapshot_state() const;

    // now_real: CLOCK_REALTIME ns (AoM, timestamps), now_mono: CLOCK_MONOTONIC ns (cadences).
    void on_datagram(std::span<const std::uint8_t> bytes, const sockaddr_in& from, std::uint64_t now_real,
                     std::uint64_t now_mono);
    // Timers; call often. Returns true if a new version was published. Also sends owed copies.
    bool on_tick(std::uint64_t now_real, std::uint64_t now_mono);
    // The socket's buffer has room again (poll(2) says POLLOUT): owed copies go on.
    void on_writable();
    // Copies are owed and the last send found the buffer full: poll for POLLOUT.
    bool wants_writable() const noexcept { return send_blocked_ && owed_copies_ != 0; }
    std::size_t owed_copies() const noexcept { return owed_copies_; }
    // Publishes now if anything was applied since the last version (used before evaluations and
    // at exit, so the snapshot evaluated/saved carries a version of its own).
    bool publish_now(std::uint64_t now_real, std::uint64_t now_mono);

    std::uint32_t version() const noexcept { return version_; }
    std::uint32_t incarnation() const noexcept { return incarnation_; }
    std::span<const float> parameters() const noexcept { return parameters_; }
    // For an external optimizer: it writes the parameters, the next publish sends them.
    std::span<float> mutable_parameters() noexcept { return parameters_; }
    // The parameters were written from outside: the next publish_now() publishes them.
    void note_parameters_written() noexcept { ++applied_since_publish_; }
    // Accepted chunks go to `handler` instead of the built-in optimizer (empty: built-in again).
    void set_chunk_handler(ChunkHandler handler) { handler_ = std::move(handler); }
    std::span<const float> published() const noexcept { return published_; }
    const transport::ChunkLayout& layout() const noexcept { return layout_; }
    const LearnerCounters& counters() const noexcept { return c_; }
    // learner.model_delivery is replicated; model_group() is then the group's address and port.
    bool replicated() const noexcept { return replicated_; }
    const sockaddr_in& model_group() const noexcept { return group_; }
    const transport::ReassemblerStats& reassembler_stats() const noexcept { return reassembler_.stats(); }
    transport::CreditPlannerStats planner_stats() const noexcept;  // summed over planner rebuilds
    const StalenessStats& staleness() const noexcept { return staleness_; }
    metrics::AomTracker& aom() noexcept { return aom_; }
    const std::vector<WorkerInfo>& workers() const noexcept { return workers_; }
    std::size_t active_workers() const noexcept;
    // Env steps reported by the workers (cumulative counters in GRADIENT reserved bytes), plus
    // what the resumed checkpoint held.
    std::uint64_t env_steps() const noexcept;

private:
    WorkerInfo* find_worker(std::uint32_t id) noexcept;
    bool admitted(std::uint32_t worker_id, const sockaddr_in& from) const noexcept;
    // Applies one validated chunk (its slice of scratch_), or rejects it; true if applied.
    bool apply_chunk(const proto::Header& h);
    bool step_builtin(const proto::Header& h, std::span<const float> slice, float scale, std::uint32_t staleness);
    WorkerInfo* register_worker(std::uint32_t id, const sockaddr_in& from, std::uint64_t now_mono);
    void rebuild_planner();
    void handle_gradient(const proto::Message& m, std::span<const std::uint8_t> bytes, const sockaddr_in& from,
                         std::uint64_t now_real, std::uint64_t now_mono);
    void handle_model_request(const proto::Header& h, const sockaddr_in& from, std::uint64_t now_mono);
    // Owes w a unicast copy (sent by send_owed()).
    void send_model(WorkerInfo& w, std::uint64_t now_mono);
    // The owed copies, whole and workers in turn, while the socket takes them.
    void send_owed();
    // Chunk k of the published model to `to`, addressed to worker_id.
    SendResult send_chunk(const sockaddr_in& to, std::uint32_t worker_id, std::uint16_t k);
    // Every chunk of the published model to `to`; returns chunks sent.
    std::uint64_t send_chunks(const sockaddr_in& to, std::uint32_t worker_id);
    // To every active worker with budget left: a unicast copy each, or one group copy.
    void broadcast_model(std::uint64_t now_mono);
    void broadcast_group(std::uint64_t now_mono);
    void send_credits(const proto::Header& h);
    void count_credit(const transport::CreditGrant& g, WorkerInfo* w);  // one CREDIT sent, alone or in a batch
    // Marks workers quiet (or live again) by last_heard_ns and tells the planner.
    void update_quiet(std::uint64_t now_mono);

    drl::ClusterConfig config_;
    std::uint16_t cluster_id_;
    transport::ChunkLayout layout_;
    std::uint32_t incarnation_;
    SendFn send_;
    bool replicated_ = false;
    sockaddr_in group_{};  // learner.model_group at udp_port, with replicated delivery

    std::vector<float> parameters_;
    std::vector<float> published_;
    std::vector<float> scratch_;  // one chunk's gradient, validated by the Reassembler
    double clip_norm_ = 0;  // learner.max_grad_norm resolved (0: off)
    ChunkHandler handler_;
    std::vector<float> rollback_parameters_;  // one chunk's parameters before its step
    rl::OptimizerState rollback_state_;       // its optimizer's state before the step
    std::vector<std::unique_ptr<rl::Optimizer>> optimizers_;  // one per chunk: element-wise state
    transport::Reassembler reassembler_;
    std::unique_ptr<transport::CreditPlanner> planner_;
    transport::CreditPlannerStats planner_stats_total_;  // summed over planner rebuilds
    std::vector<transport::CreditGrant> grants_;

    std::size_t owed_copies_ = 0;  // workers with model_owed
    std::size_t owed_cursor_ = 0;  // the next worker send_owed() looks at
    bool send_blocked_ = false;    // the last MODEL send found the buffer full

    std::uint32_t version_ = 1;
    std::uint64_t published_real_ns_ = 0;
    std::uint64_t publish_interval_ns_ = 0;  // learner.publish_interval_ms
    std::uint64_t last_publish_mono_ = 0;
    std::uint64_t last_rebroadcast_mono_ = 0;
    std::uint64_t applied_since_publish_ = 0;
    bool resumed_ = false;
    std::uint64_t resumed_env_steps_ = 0;
    std::uint64_t resumed_chunks_ = 0;

    std::vector<WorkerInfo> workers_;
    std::vector<std::uint8_t> tx_;
    LearnerCounters c_;
    StalenessStats staleness_;
    metrics::AomTracker aom_;
};

}  // namespace shesha::learner

// Shesha's public transport API: push your own model's gradients through the credit-based sender
// and a Shesha switch, and get the learner's model back; or be the learner. docs/api.md has the
// guide and a complete libtorch example.
//
// Only standard C++20 types appear here, so a program needs nothing but this header and
// `pkg-config --cflags --libs shesha`. The wire protocol is Shesha's (docs/protocol.md); the
// cluster YAML is the one shesha-learner and shesha-worker read (configs/cluster-*.yaml): its
// transport, learner and worker sections apply, its model/a3c sections are not used here except
// for the learner's built-in optimizer and its default gradient clip.
//
// Errors: constructors and calls with bad arguments throw shesha::Error with a message naming
// what is wrong (the same text the bundled programs print). Nothing here throws on bad *network*
// input: malformed or foreign datagrams are counted and dropped.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace shesha {

class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// ---- worker side ---------------------------------------------------------------------------

struct WorkerOptions {
    std::string config_path;        // cluster YAML
    std::uint16_t cluster_id = 0;   // on the wire (the YAML does not carry it)
    std::uint32_t worker_id = 0;    // unique within the cluster
    std::string learner_address;    // IPv4
    std::uint16_t learner_port = 0; // 0: the YAML's udp_port
    std::string bind_address = "0.0.0.0";
    std::uint32_t model_elems = 0;  // length of the flat parameter (and gradient) vector
    bool congestion_control = true; // false: ignore CE echoes and FEEDBACK (a FIFO baseline)
};

struct WorkerCounters {
    // Sender (docs/transport.md).
    std::uint64_t updates_offered = 0, updates_rejected = 0;
    std::uint64_t chunks_queued = 0, chunks_sent = 0, contributions_sent = 0;
    std::uint64_t sender_merges = 0;            // chunks summed into a waiting one at the sender
    std::uint64_t chunks_dropped_overflow = 0, chunks_replaced_stale = 0;
    std::uint64_t credit_messages = 0, credits_received = 0, credits_excess = 0;
    std::uint64_t credits_banked = 0, chunks_prepaid = 0;  // transport.bank_excess (docs/transport.md)
    std::uint64_t ce_echoes = 0;                // congestion marks echoed by the learner
    std::uint64_t feedback_received = 0, feedback_reductions = 0, feedback_ignored = 0;
    std::uint64_t round_reductions = 0, round_increases = 0;
    std::uint64_t slow_start_increases = 0;     // of round_increases: doublings in slow start (transport.slow_start)
    std::uint64_t credit_timeouts = 0, chunks_presumed_lost = 0;
    std::uint64_t chunks_expired = 0;           // of chunks_presumed_lost: by flight expiry (transport.flight_expiry_rtts)
    std::uint64_t ack_rtt_ns = 0;               // smoothed update send -> its acknowledgement (0: none yet)
    std::uint64_t flight_expiry_ns = 0;         // the expiry in force (0: off, or no round trip measured yet)
    double window = 0, alpha = 0;
    std::uint32_t in_flight = 0, pending_chunks = 0;
    std::uint32_t banked = 0;                   // credit units kept, not yet spent (bank_excess)
    // Receiving.
    std::uint64_t datagrams = 0, decode_errors = 0, foreign = 0, unexpected = 0;
    std::uint64_t marks_ignored = 0;            // congestion_control off: echoes not acted on
    std::uint64_t models_adopted = 0, model_chunks_staged = 0, model_chunks_stale = 0;
    std::uint64_t model_chunks_duplicate = 0, model_chunks_rejected = 0, model_assemblies_abandoned = 0;
    std::uint64_t learner_restarts = 0;         // learner incarnation changes seen in MODEL
    std::uint64_t learner_restarts_seen = 0;    // ... and in CREDIT
    // The learner sent the adopted version again (a rebroadcast, or an answer to a model
    // request): it had nothing newer. A worker that caps its gradients per version computes
    // again when this grows (shesha-worker's loop; drl/update_budget.h).
    std::uint64_t model_resends = 0;
    std::uint64_t model_requests = 0, send_errors = 0;
    std::uint32_t learner_version = 0;          // from the last CREDIT
    std::uint32_t model_version = 0;            // adopted (0: none yet)
    std::uint32_t incarnation = 0;              // of the adopted model's learner
};

struct Model {
    std::uint32_t version = 0;
    std::vector<float> parameters;
};

class WorkerTransport {
public:
    explicit WorkerTransport(const WorkerOptions& options);
    ~WorkerTransport();
    WorkerTransport(const WorkerTransport&) = delete;
    WorkerTransport& operator=(const WorkerTransport&) = delete;

    // Offers one gradient computed on model `version`. The parts, concatenated in order (for
    // instance one span per parameter tensor), must hold exactly model_elems finite values.
    // The update is chunked and merged into any of its chunks still waiting for credit, then
    // whatever the window allows is sent. env_steps (optional) is reported to the learner.
    void send(std::uint32_t version, std::span<const std::span<const float>> parts, std::uint32_t env_steps = 0);
    void send(std::uint32_t version, std::span<const float> gradient, std::uint32_t env_steps = 0);

    // Receives every waiting datagram (MODEL, CREDIT, FEEDBACK), runs the credit timeout and the
    // model requests, and sends what the window allows. Waits up to timeout_ms (0: not at all)
    // for a datagram when none is waiting.
    void poll(int timeout_ms = 0);

    // The newest adopted model, if it is newer than the last one taken; never blocks.
    bool take_model(Model& out);
    // Polls until a model newer than the last one taken is adopted, or timeout_ms passes.
    bool wait_model(Model& out, int timeout_ms);

    bool has_model() const noexcept;
    std::uint32_t model_version() const noexcept;
    std::uint32_t learner_version() const noexcept;  // from the last CREDIT (cheap: no counters copy)
    std::uint32_t model_elems() const noexcept;
    std::uint16_t local_port() const noexcept;
    WorkerCounters counters() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// ---- learner side --------------------------------------------------------------------------

struct LearnerOptions {
    std::string config_path;        // cluster YAML
    std::uint16_t cluster_id = 0;
    std::string bind_address = "0.0.0.0";
    int port = -1;                  // -1: the YAML's udp_port; 0: any free port (local_port())
    std::vector<float> initial_parameters;  // version 1 of the model; its length is model_elems
};

// One validated chunk of a worker's update, as the learner would apply it.
struct ChunkUpdate {
    std::uint32_t offset = 0;          // of the chunk in the flat parameter vector
    std::span<const float> gradient;   // the average of its contributions, clipped to
                                       // learner.max_grad_norm; valid during the call only
    float scale = 1.0F;                // 1 / (1 + staleness) with learner.staleness_scaling, else 1
    std::uint16_t chunk_index = 0;
    std::uint16_t contributions = 1;   // updates summed into it (in the network or at a sender)
    std::uint32_t staleness = 0;       // learner version - base version (0 if ahead)
    std::uint32_t base_version = 0;
    std::uint32_t worker_id = 0;       // the first contributor's
    bool merged = false;               // merged in the network
};

struct LearnerCounters {
    std::uint64_t datagrams = 0, decode_errors = 0, not_admitted = 0;
    std::uint64_t chunks_received = 0, chunks_applied = 0, contributions_applied = 0;
    std::uint64_t chunks_rejected = 0;          // every reason (docs/aom.md)
    std::uint64_t versions_published = 0, model_chunks_sent = 0, credit_messages = 0;
    std::uint64_t model_group_chunks_sent = 0;  // learner.model_delivery: replicated (model_chunks_sent: unicast)
    std::uint64_t credit_batches = 0;           // CREDIT_BATCHes to the group (learner.credit_batching; credit_messages: their entries)
    std::uint64_t send_errors = 0, receive_errors = 0;
    std::uint32_t version = 0;
    std::uint64_t active_workers = 0;
    double aom_mean_ms = 0, aom_peak_ms = 0;
    double staleness_mean = 0;
    std::uint32_t staleness_max = 0;
};

class LearnerEndpoint {
public:
    // Without a handler, accepted chunks are applied to the parameters with the YAML's optimizer.
    using UpdateHandler = std::function<void(const ChunkUpdate&)>;

    explicit LearnerEndpoint(const LearnerOptions& options);
    ~LearnerEndpoint();
    LearnerEndpoint(const LearnerEndpoint&) = delete;
    LearnerEndpoint& operator=(const LearnerEndpoint&) = delete;

    // With a handler, each accepted chunk is handed to it instead (apply it to your own
    // parameters or optimizer), then credited as usual. Set it before the first poll().
    void set_update_handler(UpdateHandler handler);

    // Receives and handles every waiting datagram, answers model requests, and publishes a new
    // version when learner.publish_interval_ms has passed and something was applied. Waits up to
    // timeout_ms for a datagram when none is waiting (or, with unicast MODEL copies waiting for
    // the socket, for room in it: docs/transport.md, "Copies owed").
    void poll(int timeout_ms = 0);

    // The learner's current parameters (written by the built-in optimizer or by you: taking the
    // mutable span counts as a change, so the next publish sends them).
    std::span<const float> parameters() const noexcept;
    std::span<float> mutable_parameters() noexcept;
    // Publishes the current parameters as a new version now (if anything was applied or written
    // since the last one); returns whether it did. poll() also publishes on the YAML's cadence.
    bool publish();

    std::uint32_t version() const noexcept;
    std::uint32_t model_elems() const noexcept;
    std::uint16_t local_port() const noexcept;
    LearnerCounters counters() const;

    // For the bundled shesha-learner (metrics, checkpoints): the protocol engine itself.
    void* native_core() noexcept;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// ---- environments --------------------------------------------------------------------------

// The Gymnasium classic-control environments of drl/envs (bit-exact with Gymnasium).
struct StepResult {
    std::vector<float> observation;
    double reward = 0;
    bool terminated = false;
    bool truncated = false;
};

class Environment {
public:
    explicit Environment(const std::string& name);  // "CartPole-v1", ...; throws Error
    ~Environment();
    Environment(const Environment&) = delete;
    Environment& operator=(const Environment&) = delete;

    std::vector<float> reset(std::uint64_t seed);   // seeds the environment's own generator
    std::vector<float> reset();                     // continues the current generator
    StepResult step_discrete(std::int64_t action);  // throws Error if out of range
    StepResult step_continuous(std::span<const float> action);
    bool discrete() const noexcept;
    std::uint32_t action_count() const noexcept;    // Discrete(n): n; Box: its size
    std::uint32_t observation_size() const noexcept;
    float action_low() const noexcept;
    float action_high() const noexcept;
    const std::string& name() const noexcept;
    // Gymnasium's env.unwrapped.state = ...: start an episode from an explicit internal state
    // (float64, the environment's own layout); throws Error for a wrong length.
    std::vector<float> set_state(std::span<const double> state);
    std::vector<double> state() const;
    static std::vector<std::string> names();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

std::string version_string();  // the library version, e.g. "0.1.0"

}  // namespace shesha

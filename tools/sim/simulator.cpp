// shesha-sim engine (see simulator.h). One event heap ordered by (time, insertion sequence), a
// pooled packet store grown in blocks (never per packet), and per-port serialization.
#include "simulator.h"
#include "big_endian.h"

#include <arpa/inet.h>

#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <condition_variable>
#include <mutex>
#include <queue>
#include <thread>

#include <fmt/format.h>

#include "aggregating_queue.h"
#include "cluster_config.h"  // drl::kEveryWorker
#include "drl_wire.h"
#include "model_receiver.h"
#include "update_budget.h"
#include "aom_tracker.h"
#include "pipeline.h"
#include "frame.h"
#include "gradient_pattern.h"
#include "host_queue.h"
#include "protocol.h"
#include "transport/chunking.h"
#include "transport/credit_planner.h"
#include "transport/credit_sender.h"
#include "envs/registry.h"
#include "envs/seeding.h"
#include "learner/learner_core.h"

namespace shesha::sim {

const char* to_string(HopLevel h) noexcept {
    switch (h) {
        case HopLevel::HostNic: return "host_nic";
        case HopLevel::LeafUplink: return "leaf_uplink";
        case HopLevel::SpineDown: return "spine_down";
        case HopLevel::LearnerPort: return "learner_port";
        case HopLevel::LearnerNic: return "learner_nic";
        case HopLevel::FabricReturn: return "fabric_return";
        case HopLevel::WorkerPort: return "worker_port";
    }
    return "?";
}

namespace {

constexpr std::uint32_t kPoolBlock = 4096;  // packets added to the pool at a time
constexpr std::uint32_t kNoLink = 0xFFFFFFFFu;
constexpr std::uint64_t kShaperRetryNs = 10;  // a shaped-out head is tried again this much later


struct Packet {
    std::uint8_t* frame = nullptr;
    std::uint32_t len = 0;
};

enum class EventType : std::uint8_t {
    Compute, TxDone, Arrive, Credit, Feedback, Sample,
    ModelRequest,    // a worker without a model asks (again)
    PublishTick,     // a learner's publish interval has passed
    RebroadcastTick, // a learner's rebroadcast period has passed (index2: the publish it belongs to)
    TrainDone,       // training: a worker's rollout and gradient took their virtual time
    TrainWake,       // training: a woken worker got its core (training.wake_us) and starts a rollout
    LearnerTick,     // training: LearnerCore::on_tick of a cluster, and its workers' timers
    Evaluate,        // training: a cluster's learner evaluates its model (learner.eval_interval_ms)
    LearnerWake,     // training: a cluster's learner got its core (training.learner_wake_us) and reads what arrived
    LearnerWritable  // a learner host's send queue drained to half (POLLOUT): the cluster's owed MODEL copies go on
};

struct Event {
    std::uint64_t t = 0;
    std::uint64_t seq = 0;
    EventType type = EventType::Compute;
    std::uint8_t flags = 0;
    std::uint32_t index = 0;  // worker or port
    Packet* packet = nullptr;
    proto::CreditBody credit{};  // Credit events; a Feedback event's body is in feedback_bodies[index2]
    std::uint32_t index2 = 0;
};
struct Later {
    bool operator()(const Event& a, const Event& b) const noexcept {
        return a.t != b.t ? a.t > b.t : a.seq > b.seq;
    }
};

// One direction of a cable: an egress (a worker's NIC queue, or a switch port's queue inside that
// switch's pipeline) serialized at the link rate, then a propagation delay to the far end (a
// switch port, or the learners).
struct Link {
    std::unique_ptr<HostQueue> host_queue;  // a host's send queue: a worker NIC (FIFO), a learner host (pfifo_fast)
    std::uint32_t sw = kNoLink;        // switch whose port is the egress, or kNoLink (a host's NIC)
    std::uint16_t sw_port = 0;
    std::uint32_t to_sw = kNoLink;     // switch at the far end, or kNoLink (a host)
    std::uint16_t to_port = 0;
    std::uint32_t to_worker = kNoLink; // the worker at the far end; kNoLink with to_sw: the learners
    std::uint32_t learner_port = kNoLink;  // a learner port's index, in either direction
    HopLevel level = HopLevel::HostNic;
    std::uint64_t rate_bps = 0;
    std::uint64_t prop_ns = 0;
    bool busy = false;
    bool learner_facing = false;
};

struct Sim;

struct Worker {
    std::unique_ptr<transport::CreditSender> sender;
    std::uint16_t cluster = 0;
    std::uint32_t updates = 0;
    frame::Endpoints ep;
    // Two-directional runs: the model it computes on, assembled from MODEL chunks.
    std::unique_ptr<drl::ModelReceiver> receiver;
    bool computing = false;              // adopted a first model, so its update loop runs
    std::uint64_t adopted_published_ns = 0;  // publish time of the adopted version
};

// What a learner knows of one of its workers (LearnerCore's WorkerInfo, the parts MODEL uses).
struct KnownWorker {
    bool known = false;                  // registered by a model request or a GRADIENT naming it
    bool sent_any = false;
    std::uint64_t last_model_sent_ns = 0;
    std::uint32_t models_since_heard = 0;
    // A unicast copy owed (LearnerCore's WorkerInfo::model_owed): owed_chunk chunks of owed_version
    // have gone out.
    bool owed = false;
    bool owed_answer = false;  // the copy answers a model request
    std::uint32_t owed_version = 0;
    std::uint16_t owed_chunk = 0;
};

struct Learner {
    std::unique_ptr<transport::Reassembler> reassembler;
    std::unique_ptr<transport::CreditPlanner> planner;
    std::vector<float> target;
    std::vector<transport::CreditGrant> grants;
    std::uint32_t version = 0;
    metrics::AomTracker aom;
    double staleness_sum = 0;
    double staleness_at_generation_sum = 0;  // two directions: the part already there when the worker generated
    std::uint32_t staleness_max = 0;
    std::uint64_t chunks = 0;
    std::uint64_t contributions = 0;
    std::uint64_t bottleneck_bytes = 0;
    std::uint64_t bottleneck_bytes_sampled = 0;  // at the previous sample
    std::uint32_t workers = 0;
    std::uint32_t first_worker = 0;
    // Two-directional runs: the published model (LearnerCore's version_ and published_), who it
    // goes to, and the send queue onto the learner port.
    std::uint32_t published = 1;          // version 1 is published at t = 0
    std::uint64_t published_ns = 0;
    std::vector<float> published_params;  // pattern::fill per chunk with weight 1 + version % 4
    std::uint64_t applied_since_publish = 0;
    bool publish_due = false;             // the interval passed with nothing applied: publish at the next chunk
    std::uint32_t rebroadcast_epoch = 0;
    std::vector<KnownWorker> known;       // by worker index within the cluster
    std::vector<std::uint32_t> registered;  // worker ids in the order they registered (the planner's)
    std::uint32_t nic = kNoLink;          // the learner host's send queue
    std::uint32_t owed = 0;               // workers with a unicast copy owed (LearnerCore::owed_copies_)
    std::uint32_t owed_cursor = 0;        // the next worker send_owed() looks at
    bool send_blocked = false;            // the last MODEL send found the send queue full
    bool credit_priority = true;          // CREDIT with TOS 0x10 (learner.credit_priority; model.credit_priority)
    std::uint32_t versions_published = 0;
    std::vector<std::uint64_t> publish_times;  // of versions 2, 3, ...: the version published at any time
    explicit Learner(std::uint64_t period) : aom(period) {}
};

constexpr std::uint64_t kModelResendMinNs = 20'000'000;  // learner_core.h: per worker, for requests

// Training workload: one cluster's job (its YAML), its real learner core, the model its workers
// compute with, and its evaluation.
struct TrainCluster {
    drl::ClusterConfig cfg;
    transport::ChunkLayout layout;
    std::unique_ptr<learner::LearnerCore> core;
    // The workers' compute model. A worker's model is the parameters of the version it adopted;
    // this one instance is loaded with them before a rollout (only when the version differs from
    // what it holds: every worker on (incarnation, version) holds the same parameters).
    std::unique_ptr<rl::ActorCritic> model;
    std::uint64_t loaded_key = ~std::uint64_t{0};
    std::unique_ptr<rl::ActorCritic> eval_model;
    std::uint64_t eval_seed = 0;
    std::uint64_t eval_ns = 0;
    std::uint64_t request_ns = 0;      // worker.model_request_ms
    TrainingClusterSummary summary;
    // training.stop_at_target: the cluster stopped (its own target under `cluster`, every cluster's
    // under `all`): its workers start no rollout and send nothing more, its learner no longer ticks
    // or evaluates; datagrams already on the wire still reach it (contributions stay conserved).
    // Its AoM is the learner core's up to stop_ns, frozen there (shesha-learner's, which exits).
    bool stopped = false;
    std::uint64_t stop_ns = 0;
    double aom_mean_us = 0;
    double aom_peak_us = 0;
    std::vector<Packet*> arrived;   // training.learner_wake_us: datagrams waiting for the learner's core
    bool learner_waking = false;
};

// Training workload, training.compute_threads > 0: compute_gradient on helper threads while the
// event loop goes on. A job is a worker's rollout and a copy of the parameters it rolled out with;
// each helper has its own model per cluster. The event loop waits for a worker's job when its
// gradient is due (TrainDone), so every gradient is offered at the same virtual time as when it is
// computed inline, and it is the same gradient bit for bit: compute_gradient depends only on the
// parameters, the rollout and the loss (libtorch runs each op on one thread).
class GradientPool {
public:
    GradientPool(std::size_t threads, std::size_t workers, std::vector<std::vector<std::unique_ptr<rl::ActorCritic>>> models)
        : jobs_(workers), models_(std::move(models)) {
        for (std::size_t t = 0; t < threads; ++t) threads_.emplace_back([this, t] { run(t); });
    }
    ~GradientPool() {
        {
            std::lock_guard lock(mutex_);
            quit_ = true;
        }
        work_.notify_all();
        for (auto& t : threads_) t.join();
    }
    GradientPool(const GradientPool&) = delete;
    GradientPool& operator=(const GradientPool&) = delete;

    // The rollout and the output span stay untouched by the caller until wait(w).
    void submit(std::uint32_t w, std::uint16_t cluster, std::uint64_t key, std::span<const float> parameters,
                const rl::Rollout& rollout, const rl::LossConfig& loss, std::span<float> out) {
        {
            std::lock_guard lock(mutex_);
            Job& j = jobs_[w];
            j.cluster = cluster;
            j.key = key;
            j.parameters.assign(parameters.begin(), parameters.end());
            j.rollout = &rollout;
            j.loss = &loss;
            j.out = out;
            j.done = false;
            queue_.push_back(w);
        }
        work_.notify_one();
    }
    bool wait(std::uint32_t w) {
        std::unique_lock lock(mutex_);
        done_.wait(lock, [&] { return jobs_[w].done; });
        return jobs_[w].ok;
    }

private:
    struct Job {
        std::uint16_t cluster = 0;
        std::uint64_t key = 0;
        std::vector<float> parameters;
        const rl::Rollout* rollout = nullptr;
        const rl::LossConfig* loss = nullptr;
        std::span<float> out;
        bool ok = false;
        bool done = true;
    };
    void run(std::size_t t) {
        std::vector<std::uint64_t> loaded(models_[t].size(), ~std::uint64_t{0});
        for (;;) {
            std::uint32_t w;
            {
                std::unique_lock lock(mutex_);
                work_.wait(lock, [&] { return quit_ || !queue_.empty(); });
                if (quit_ && queue_.empty()) return;
                w = queue_.front();
                queue_.pop_front();
            }
            Job& j = jobs_[w];  // only this thread touches it until done is set
            rl::ActorCritic& m = *models_[t][j.cluster];
            if (loaded[j.cluster] != j.key) {
                m.set_parameters(j.parameters);
                loaded[j.cluster] = j.key;
            }
            const bool ok = m.compute_gradient(*j.rollout, *j.loss, j.out);
            {
                std::lock_guard lock(mutex_);
                j.ok = ok;
                j.done = true;
            }
            done_.notify_all();
        }
    }

    std::vector<Job> jobs_;
    std::vector<std::vector<std::unique_ptr<rl::ActorCritic>>> models_;  // [thread][cluster]
    std::deque<std::uint32_t> queue_;
    std::mutex mutex_;
    std::condition_variable work_, done_;
    bool quit_ = false;
    std::vector<std::thread> threads_;
};

// Training workload: a worker's actor state (worker/worker_main.cpp's loop variables).
struct TrainWorker {
    std::unique_ptr<worker::envs::Environment> env;
    worker::envs::Rng rng{0};
    worker::envs::Observation observation;
    double episode_return = 0;
    rl::Rollout rollout;
    std::vector<float> gradient;
    std::uint32_t env_steps = 0;         // cumulative, carried in every GRADIENT (as shesha-worker does)
    std::uint32_t base_version = 0;      // the version the gradient in `gradient` was computed on
    drl::UpdateBudget budget{0};         // worker.max_updates_per_version, refilled as shesha-worker's
    bool busy = false;                   // a rollout + gradient is taking its virtual time
    bool waking = false;                 // woken by a model, waiting training.wake_us for its core
    bool gradient_ok = false;
    // training.workers_read_between_rollouts: CREDITs and FEEDBACKs that reached it while it was
    // computing or waiting for its core, read (in order) once it can.
    struct Received {
        bool feedback = false;
        std::uint8_t flags = 0;
        proto::CreditBody credit{};
        proto::FeedbackBody feedback_body{};
    };
    std::vector<Received> inbox;
};

std::uint64_t to_ns(double x) { return static_cast<std::uint64_t>(std::llround(x)); }

// The packet store: blocks of kPoolBlock packets and their frame buffers, a free list of
// pointers. Grows by a block when the high-water mark rises, never per packet.
class PacketPool {
public:
    PacketPool(std::size_t frame_capacity, std::uint64_t max_packets) : frame_capacity_(frame_capacity), max_(max_packets) {}
    Packet* alloc() {
        if (free_.empty()) {
            if (size_ + kPoolBlock > max_) return nullptr;
            packet_blocks_.push_back(std::make_unique<Packet[]>(kPoolBlock));
            buffer_blocks_.push_back(std::make_unique<std::uint8_t[]>(kPoolBlock * frame_capacity_));
            free_.reserve(size_ + kPoolBlock);
            for (std::uint32_t i = kPoolBlock; i-- > 0;) {
                Packet& p = packet_blocks_.back()[i];
                p.frame = buffer_blocks_.back().get() + std::size_t{i} * frame_capacity_;
                free_.push_back(&p);
            }
            size_ += kPoolBlock;
        }
        Packet* p = free_.back();
        free_.pop_back();
        return p;
    }
    void free(Packet* p) { free_.push_back(p); }
    std::size_t frame_capacity() const noexcept { return frame_capacity_; }
    std::uint64_t size() const noexcept { return size_; }

private:
    std::size_t frame_capacity_;
    std::uint64_t max_;
    std::vector<std::unique_ptr<Packet[]>> packet_blocks_;
    std::vector<std::unique_ptr<std::uint8_t[]>> buffer_blocks_;
    std::vector<Packet*> free_;
    std::uint64_t size_ = 0;
};

// Where a switch's FEEDBACK goes: the simulator delivers it to the worker it is addressed to.
struct FeedbackSink {
    virtual void on_feedback(std::uint32_t sw, Packet* p) = 0;
    virtual ~FeedbackSink() = default;
};

// The pipeline's packet operations on pooled simulator packets (pull mode: no tx_burst).
struct SimIo {
    using Handle = Packet*;
    static std::uint8_t* data(Packet* p) noexcept { return p->frame; }
    static std::uint32_t pkt_len(Packet* p) noexcept { return p->len; }
    static std::uint32_t data_len(Packet* p) noexcept { return p->len; }
    static bool multi_segment(Packet*) noexcept { return false; }
    static void prefetch(Packet*) noexcept {}
    void free_bulk(Packet** p, std::uint32_t n) noexcept {
        for (std::uint32_t i = 0; i < n; ++i) pool->free(p[i]);
    }
    void free(Packet* p) noexcept { pool->free(p); }
    Packet* copy(Packet* p) noexcept {
        Packet* c = pool->alloc();
        if (c == nullptr) return nullptr;
        std::memcpy(c->frame, p->frame, p->len);
        c->len = p->len;
        return c;
    }
    // A simulated replica costs no memory bandwidth worth modelling: a whole copy.
    Packet* replicate(Packet* p, std::uint32_t header_len, std::uint8_t** header) noexcept {
        if (header_len == 0 || header_len >= p->len) return nullptr;
        Packet* c = copy(p);
        if (c != nullptr) *header = c->frame;
        return c;
    }
    Packet* alloc(std::uint32_t len, std::uint8_t** bytes) noexcept {
        if (len > pool->frame_capacity()) return nullptr;
        Packet* p = pool->alloc();
        if (p == nullptr) return nullptr;
        p->len = len;
        *bytes = p->frame;
        return p;
    }
    bool send_now(std::uint16_t, Packet* p) noexcept {
        sink->on_feedback(sw, p);
        return true;
    }
    std::uint16_t tx_burst(std::uint16_t, Packet**, std::uint16_t) noexcept { return 0; }

    PacketPool* pool = nullptr;
    FeedbackSink* sink = nullptr;
    std::uint32_t sw = 0;
};

// A simulated switch: the real pipeline, its RX counters, and the link behind each egress port.
// Ports [0, up_ports) face the learners (their egress carries gradients up, and in two-directional
// runs they receive CREDIT and MODEL from above); the others face the workers.
struct SimSwitch {
    SimIo io;
    std::unique_ptr<core::Pipeline<SimIo>> pipeline;
    core::SwitchCounters rx;
    std::vector<std::uint32_t> egress_links;  // links whose egress is one of this switch's up ports
    std::vector<std::uint32_t> down_links;    // links whose egress is one of its down ports (two-directional)
    std::vector<std::uint32_t> link_of_port;  // egress link per port, or kNoLink
    std::uint32_t up_ports = 0;
    std::uint32_t hops_from_workers = 1;      // links between a worker and this switch
};

}  // namespace

struct Simulator::Impl final : FeedbackSink {
    Scenario sc;
    const TrainingBackend* backend;
    std::vector<drl::ClusterConfig> train_cfgs;  // training: the clusters' YAMLs, loaded
    std::uint64_t duration_ns;
    std::uint64_t compute_ns_mean;
    std::uint64_t sample_ns;
    std::uint64_t now = 0;
    std::uint64_t next_seq = 0;
    std::uint64_t rng_state;

    std::priority_queue<Event, std::vector<Event>, Later> events;
    std::vector<Link> links;
    std::vector<std::unique_ptr<SimSwitch>> switches;
    std::vector<std::uint32_t> worker_nic;  // per worker: its NIC link
    std::vector<Worker> workers;
    std::vector<std::unique_ptr<Learner>> learners;

    std::size_t frame_capacity;
    PacketPool pool;

    // Training workload.
    bool training = false;
    std::vector<TrainCluster> tclusters;
    std::vector<Packet*> reading;   // on_learner_wake: the datagrams a learner reads at once
    std::vector<std::uint8_t> writer_woken;  // per cluster: a LearnerWritable event is on its way
    std::uint32_t next_writer_first = 0;     // wake_writers' rotation
    std::vector<TrainWorker> tworkers;
    // Every cluster reached its target (training.stop_at_target): no new rollouts, ticks, requests
    // or samples; what is in flight drains (so contributions stay conserved), then the run ends.
    bool stopped = false;
    double compute_wall_ns = 0;
    std::unique_ptr<GradientPool> gradient_pool;  // training.compute_threads > 0
    std::function<void(const TrainingPoint&, double)> evaluation_hook;
    std::chrono::steady_clock::time_point wall_start;

    // A worker's update is pattern::fill(cluster, chunk, worker), which depends on the worker only
    // through its weight 1 + w % 4: filled once per (cluster, weight) and offered from here.
    std::vector<std::vector<float>> gradients;  // [cluster * 4 + w % 4]
    std::vector<proto::FeedbackBody> feedback_bodies;  // bodies of scheduled FEEDBACK events
    std::vector<std::uint32_t> free_feedback;
    std::vector<float> scratch_payload;   // an aligned copy of a received payload
    transport::ChunkLayout layout;
    std::uint64_t host_drop_contributions = 0;  // tail drops at worker NICs
    std::uint64_t credit_waits = 0;             // CREDITs that left a learner host's send queue
    std::uint64_t credit_wait_sum_ns = 0, credit_wait_max_ns = 0;  // and how long they waited in it

    // Two-directional runs (model.delivery unicast or replicated).
    bool two_way = false;
    bool replicated = false;
    std::vector<std::uint64_t> port_up_bytes, port_down_bytes;  // per learner port, for the series
    std::vector<std::uint64_t> port_up_sampled, port_down_sampled;
    std::uint64_t up_busy_ns = 0, down_busy_ns = 0;  // wire time inside [0, duration)
    std::uint32_t learner_port_count = 0;
    std::uint64_t first_model_sum_ns = 0;
    double delivery_sum_ns = 0;
    double model_age_sum_us = 0;  // sum over samples of the mean age over workers with a model
    std::uint64_t model_age_samples = 0;
    Summary sum;
    std::vector<SeriesRow> series;

    static std::vector<drl::ClusterConfig> load_training(const Scenario& s, const TrainingBackend* backend) {
        std::vector<drl::ClusterConfig> out;
        if (!s.training()) return out;
        if (backend == nullptr)
            throw ConfigError("workload.kind: training needs libtorch (real A3C gradients), and this shesha-sim was "
                              "built without it: install libtorch-dev and reconfigure with meson setup -Dtorch=enabled "
                              "(workload.kind: synthetic needs no libtorch)");
        for (std::size_t c = 0; c < s.training_clusters.size(); ++c) {
            try {
                out.push_back(drl::load_cluster_config(s.training_clusters[c]));
            } catch (const std::exception& e) {
                throw ConfigError(fmt::format("training.clusters[{}]: {}", c, e.what()));
            }
        }
        return out;
    }

    static std::size_t frame_capacity_for(const Scenario& s, const std::vector<drl::ClusterConfig>& train) {
        std::uint32_t elems = s.chunk_elems;
        for (const auto& c : train) elems = std::max(elems, c.transport.chunk_elems);
        const std::size_t gradient = frame::kUdpPayloadOffset + proto::kHeaderSize + elems * sizeof(float);
        return (std::max(gradient, core::kFeedbackFrameLen) + 63) & ~std::size_t{63};
    }

    explicit Impl(const Scenario& s, const TrainingBackend* b)
        : sc(s),
          backend(b),
          train_cfgs(load_training(s, b)),
          duration_ns(to_ns(s.duration_ms * 1e6)),
          compute_ns_mean(std::max<std::uint64_t>(1, to_ns(s.compute_us * 1e3))),
          sample_ns(std::max<std::uint64_t>(1, to_ns(s.sample_us * 1e3))),
          rng_state(s.seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull),
          frame_capacity(frame_capacity_for(s, train_cfgs)),
          pool(frame_capacity, s.pool_max_packets),
          two_way(s.model_delivery != ModelDelivery::None),
          replicated(s.model_delivery == ModelDelivery::Replicated) {
        layout = *transport::make_layout(s.chunks * s.chunk_elems, s.chunk_elems);
        gradients.resize(std::size_t{s.clusters} * 4);
        for (std::uint32_t c = 0; c < s.clusters; ++c)
            for (std::uint32_t q = 0; q < 4; ++q) {
                std::vector<float>& g = gradients[c * 4 + q];
                g.resize(layout.model_elems);
                for (std::uint16_t k = 0; k < layout.chunk_count; ++k)
                    pattern::fill(g.data() + layout.offset(k), layout.elems_in(k), static_cast<std::uint16_t>(c), k, q);
            }
        scratch_payload.resize(s.chunk_elems);
        if (s.training()) setup_training();
        build_topology();
        if (training) start_learner_cores();
    }

    // ---- deterministic randomness (splitmix64: same sequence on every platform) ----
    std::uint64_t next_random() noexcept {
        std::uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    double uniform01() noexcept { return static_cast<double>(next_random() >> 11) * 0x1.0p-53; }

    // ---- events ----
    void schedule(Event e) {
        e.seq = next_seq++;
        events.push(e);
    }
    void schedule_simple(std::uint64_t t, EventType type, std::uint32_t index, Packet* p = nullptr) {
        Event e;
        e.t = t;
        e.type = type;
        e.index = index;
        e.packet = p;
        schedule(e);
    }

    // ---- topology ----
    static core::Mac learner_mac(std::uint32_t c) {
        return {0x02, 0xFF, 0, 0, static_cast<std::uint8_t>(c >> 8), static_cast<std::uint8_t>(c)};
    }
    static std::uint32_t worker_ip(std::uint32_t w) { return 0x0A000000u | (w + 1); }
    static core::Mac worker_mac(std::uint32_t w) {
        return {0x02, 0x00, static_cast<std::uint8_t>(w >> 24), static_cast<std::uint8_t>(w >> 16),
                static_cast<std::uint8_t>(w >> 8), static_cast<std::uint8_t>(w)};
    }
    static std::uint32_t learner_ip(std::uint32_t c) { return 0x0B000000u | c; }
    // Cluster c's group, 239.77.x.y as in the lab (239.77.0.<id>), and its Ethernet multicast MAC.
    static std::uint32_t group_ip(std::uint32_t c) { return 0xEF4D0000u + c + 1; }
    static core::Mac group_mac(std::uint32_t ip) {
        return {0x01, 0x00, 0x5E, static_cast<std::uint8_t>((ip >> 16) & 0x7F), static_cast<std::uint8_t>(ip >> 8),
                static_cast<std::uint8_t>(ip)};
    }

    // A switch port in the pipeline's config: an egress toward the learners (a link at `gbps`) or
    // a port that only receives (from workers or a lower tier; its queue never fills).
    core::PortConfig port_config(std::size_t index, double gbps, bool egress, double down_gbps) const {
        core::PortConfig pc;
        pc.name = fmt::format("p{}", index);
        pc.device = "sim";
        pc.mtu = core::kMaxMtu;
        if (!egress && down_gbps > 0) {
            // Toward the workers (two-directional runs): CREDIT and MODEL, shaped at the link rate;
            // no GRADIENT goes this way, so no class queues and no marking.
            pc.queue_packets = sc.capacity_packets;
            pc.queue_bytes = sc.capacity_bytes;
            pc.scheduling = core::Scheduling::Fifo;
            pc.marking.depth_packets = 0;
            pc.shaper.rate_bps = static_cast<std::uint64_t>(std::llround(down_gbps * 1e9));
            pc.shaper.burst_bytes = frame_capacity * 2;
        } else if (egress) {
            pc.queue_packets = sc.capacity_packets;
            pc.queue_bytes = sc.capacity_bytes;
            pc.marking.depth_packets = sc.mark_depth_packets;
            // The switch shapes its port at the link rate, as the lab does: FEEDBACK then reports
            // the backlog's wire time (sojourn_us), and the link never idles behind the shaper.
            pc.shaper.rate_bps = static_cast<std::uint64_t>(std::llround(gbps * 1e9));
            pc.shaper.burst_bytes = frame_capacity * 2;
        } else {
            pc.queue_packets = 2;
            pc.queue_bytes = frame_capacity * 2;
            pc.scheduling = core::Scheduling::Fifo;  // nothing queues here: no class queues
            pc.marking.depth_packets = 0;
        }
        pc.marking.sojourn_us = 0;
        pc.marking.ip_ecn = true;
        return pc;
    }

    // A switch with `egress` ports toward the learners (ports 0..) and `ingress` ports toward the
    // workers after them (receive-only, or at down_gbps in two-directional runs); dst_port(c) is the
    // egress port for cluster c's learner. `replicates`: a replicated cluster's group is configured
    // here (the switch the learners hang off; with a multicast tree every switch), and
    // fabric_ports(c) lists the ports behind which another switch replicates cluster c's group.
    using FabricPorts = std::function<std::vector<std::uint32_t>(std::uint32_t)>;
    std::uint32_t add_switch(std::uint32_t egress, double egress_gbps, std::uint32_t ingress, std::uint32_t hops,
                             const std::function<std::uint32_t(std::uint32_t)>& dst_port, double down_gbps = 0,
                             bool replicates = false, const FabricPorts& fabric_ports = {}) {
        core::SwitchConfig cfg;
        cfg.burst = 32;
        // Every sender can be learned: below, the hosts of its ports; in two-directional runs every
        // worker, whose CREDIT and MODEL come back through each tier (an unknown one would be
        // flooded, and a leaf-spine fabric has loops).
        cfg.fdb_capacity = (two_way ? 2 * sc.total_workers() : ingress) + sc.clusters + 64;  // room to spare: open addressing
        cfg.mac_aging_s = 300;
        cfg.udp_port = proto::kDefaultUdpPort;
        cfg.aggregation = sc.aggregation;
        cfg.feedback = sc.switch_feedback;
        cfg.feedback_interval_us = static_cast<std::uint32_t>(std::llround(sc.feedback_interval_us));
        cfg.non_member = core::NonMemberAction::ForwardUnmerged;
        cfg.scheduling = sc.fair_scheduling ? core::Scheduling::Drr : core::Scheduling::Fifo;
        cfg.fair_lag = sc.fair_lag;
        cfg.chunk_follow = sc.chunk_follow;
        for (std::uint32_t i = 0; i < egress + ingress; ++i)
            cfg.ports.push_back(port_config(i, egress_gbps, i < egress, two_way ? down_gbps : 0));
        for (std::uint32_t c = 0; c < sc.clusters; ++c) {
            cfg.static_fdb.push_back({learner_mac(c), cfg.ports[dst_port(c)].name});
            core::ClusterConfig cc;
            cc.id = static_cast<std::uint16_t>(c);
            cc.aggregation = sc.aggregation;
            cc.version_tolerance = sc.version_tolerance;
            for (std::uint32_t i = 0; i < sc.workers_in(c); ++i) cc.member_ips.push_back(worker_ip(sc.first_worker(c) + i));
            if (replicated && replicates) {
                core::ModelReplicationConfig mr;
                mr.group = group_ip(c);
                mr.learner = learner_ip(c);
                mr.max_members = sc.workers_in(c);  // checked <= 4096 with the scenario
                if (fabric_ports)
                    for (const std::uint32_t p : fabric_ports(c)) mr.fabric_ports.push_back(cfg.ports[p].name);
                cc.model_replication = mr;
            }
            cfg.clusters.push_back(std::move(cc));
        }
        auto sw = std::make_unique<SimSwitch>();
        sw->io.pool = &pool;
        sw->io.sink = this;
        sw->io.sw = static_cast<std::uint32_t>(switches.size());
        sw->hops_from_workers = hops;
        sw->up_ports = egress;
        sw->link_of_port.assign(egress + ingress, kNoLink);
        sw->pipeline = std::make_unique<core::Pipeline<SimIo>>(cfg, 1'000'000'000ull, sw->io, core::PipelineOptions{.poll_mode = false});
        switches.push_back(std::move(sw));
        return static_cast<std::uint32_t>(switches.size() - 1);
    }

    // One direction of a cable. A host's NIC (sw == kNoLink) is a send queue of nic_packets
    // (host_queue.h): a worker's, a plain FIFO (the sender already merged what waits for credit),
    // or a learner host's, pfifo_fast's three bands by the datagrams' TOS (nic_bands 3), so that
    // a CREDIT the learner marks 0x10 leaves before the MODEL queued ahead of it.
    // A switch port's egress is the port's queue inside that switch's pipeline.
    std::uint32_t add_link(HopLevel level, double gbps, std::uint32_t sw, std::uint16_t sw_port, std::uint32_t to_sw,
                           std::uint16_t to_port, std::uint32_t nic_packets = 0, int nic_bands = 1) {
        const auto id = static_cast<std::uint32_t>(links.size());
        Link l;
        if (sw == kNoLink) {
            l.host_queue = std::make_unique<HostQueue>(nic_packets, std::uint64_t{nic_packets} * frame_capacity, nic_bands);
        } else {
            SimSwitch& s = *switches[sw];
            (sw_port < s.up_ports ? s.egress_links : s.down_links).push_back(id);
            s.link_of_port[sw_port] = id;
        }
        l.sw = sw;
        l.sw_port = sw_port;
        l.to_sw = to_sw;
        l.to_port = to_port;
        l.level = level;
        l.rate_bps = static_cast<std::uint64_t>(std::llround(gbps * 1e9));
        l.prop_ns = to_ns(sc.prop_ns);
        l.learner_facing = level == HopLevel::LearnerPort;
        links.push_back(std::move(l));
        return id;
    }

    // ToR: workers -> one switch -> learner ports. Leaf-spine: workers spread over the leaves
    // (each cluster spans leaves); a cluster's traffic takes one spine (the leaves' static FDB
    // sends learner c's MAC up to spine c % spines), so it can merge at every hop; the spines go
    // down to the learners' leaf. Learner ports: one per cluster, or one shared by all clusters.
    void build_topology() {
        const std::uint32_t n_workers = sc.total_workers();
        const bool leaf_spine = sc.topology == TopologyKind::LeafSpine;
        const std::uint32_t learner_ports = sc.shared_bottleneck ? 1 : sc.clusters;
        const auto learner_port_of = [&](std::uint32_t c) { return sc.shared_bottleneck ? 0u : c; };

        // The last switch, in front of the learners.
        std::vector<std::uint32_t> leaf_of_worker(n_workers, 0);
        std::vector<std::uint32_t> leaf_switch, spine_switch;
        std::uint32_t last;
        if (!leaf_spine) {
            last = add_switch(learner_ports, sc.learner_gbps, n_workers, 1, learner_port_of, sc.host_gbps, true);
        } else {
            // A multicast tree: the learners' leaf sends a group frame once down to the cluster's
            // spine (its traffic's, so the members' requests joined there), which sends it once
            // down to each leaf, where the workers' copies are made.
            const bool tree = replicated && sc.model_tree;
            const std::uint32_t spines = sc.spines, leaves = sc.leaves;
            last = add_switch(learner_ports, sc.learner_gbps, sc.spines, 3, learner_port_of, sc.fabric_gbps, true,
                              tree ? FabricPorts([=](std::uint32_t c) { return std::vector<std::uint32_t>{learner_ports + c % spines}; })
                                   : FabricPorts{});
            for (std::uint32_t s = 0; s < sc.spines; ++s)
                spine_switch.push_back(add_switch(1, sc.fabric_gbps, sc.leaves, 2, [](std::uint32_t) { return 0u; },
                                                  sc.fabric_gbps, tree, [=](std::uint32_t) {
                                                      std::vector<std::uint32_t> down(leaves);
                                                      for (std::uint32_t l = 0; l < leaves; ++l) down[l] = 1 + l;
                                                      return down;
                                                  }));
            std::vector<std::uint32_t> on_leaf(sc.leaves, 0);
            for (std::uint32_t w = 0; w < n_workers; ++w) ++on_leaf[w % sc.leaves];
            for (std::uint32_t l = 0; l < sc.leaves; ++l)
                leaf_switch.push_back(add_switch(sc.spines, sc.fabric_gbps, on_leaf[l], 1,
                                                 [spines](std::uint32_t c) { return c % spines; }, sc.host_gbps, tree));
        }
        learner_port_count = learner_ports;
        for (std::uint32_t p = 0; p < learner_ports; ++p) {
            const std::uint32_t id = add_link(HopLevel::LearnerPort, sc.learner_gbps, last, static_cast<std::uint16_t>(p), kNoLink, 0);
            links[id].learner_port = p;
        }
        if (leaf_spine) {
            for (std::uint32_t s = 0; s < sc.spines; ++s) {
                add_link(HopLevel::SpineDown, sc.fabric_gbps, spine_switch[s], 0, last,
                         static_cast<std::uint16_t>(learner_ports + s));
                for (std::uint32_t l = 0; l < sc.leaves; ++l)
                    add_link(HopLevel::LeafUplink, sc.fabric_gbps, leaf_switch[l], static_cast<std::uint16_t>(s),
                             spine_switch[s], static_cast<std::uint16_t>(1 + l));
            }
        }
        // The way back (two-directional runs): each learner port's host send queue into the last
        // switch, and the fabric's ports toward the leaves; the workers' own ports come below.
        std::vector<std::uint32_t> learner_nic(learner_ports, kNoLink);
        if (two_way) {
            for (std::uint32_t p = 0; p < learner_ports; ++p) {
                // links.learner_down_gbps: the learner host's own link (on the rack only the
                // switch's egress toward the learners is shaped; the learners send at host speed).
                learner_nic[p] = add_link(HopLevel::LearnerNic, sc.learner_down_rate_gbps(), kNoLink, 0, last,
                                          static_cast<std::uint16_t>(p), sc.learner_nic_packets, 3);
                links[learner_nic[p]].learner_port = p;
            }
            if (leaf_spine)
                for (std::uint32_t s = 0; s < sc.spines; ++s) {
                    add_link(HopLevel::FabricReturn, sc.fabric_gbps, last, static_cast<std::uint16_t>(learner_ports + s),
                             spine_switch[s], 0);
                    for (std::uint32_t l = 0; l < sc.leaves; ++l)
                        add_link(HopLevel::FabricReturn, sc.fabric_gbps, spine_switch[s], static_cast<std::uint16_t>(1 + l),
                                 leaf_switch[l], static_cast<std::uint16_t>(s));
                }
            port_up_bytes.assign(learner_ports, 0);
            port_down_bytes.assign(learner_ports, 0);
            port_up_sampled.assign(learner_ports, 0);
            port_down_sampled.assign(learner_ports, 0);
        }

        workers.resize(n_workers);
        worker_nic.resize(n_workers);
        std::vector<std::uint32_t> next_leaf_port(sc.leaves, sc.spines);
        std::uint16_t cluster_of_worker = 0;
        std::uint32_t next_cluster_at = sc.workers_in(0);
        for (std::uint32_t w = 0; w < n_workers; ++w) {
            while (w == next_cluster_at) next_cluster_at += sc.workers_in(++cluster_of_worker);
            Worker& wk = workers[w];
            wk.cluster = cluster_of_worker;
            transport::SenderConfig cfg;
            cfg.cluster_id = cluster_of_worker;
            cfg.worker_id = w;
            cfg.model_elems = layout.model_elems;
            cfg.chunk_elems = sc.chunk_elems;
            if (training) {
                // The cluster YAML's transport section, as shesha-worker builds it; only the FIFO
                // arm's window_control: false pins the window open, below.
                const TrainCluster& T = tclusters[cluster_of_worker];
                cfg = drl::sender_config(T.cfg, cluster_of_worker, w, T.layout.model_elems);
                cfg.cumulative_ack = sc.cumulative_ack;
                // Else the cluster YAML's transport.bank_excess, flight_expiry_rtts and flight_expiry_ms.
                if (sc.bank_excess) cfg.bank_excess = true;
                if (!sc.slow_start) cfg.slow_start = false;
                if (sc.flight_expiry_us > 0) cfg.flight_expiry_ns = to_ns(sc.flight_expiry_us * 1e3);
                if (sc.flight_expiry_rtts >= 0) cfg.flight_expiry_rtts = sc.flight_expiry_rtts;
                if (!sc.window_control) {
                    // As shesha-worker --congestion-control off: no window and no leak repairs.
                    cfg.w_init = cfg.w_min = cfg.w_max = 1e9;
                    cfg.credit_timeout_ns = 0;
                    transport::turn_off_leak_repairs(cfg);
                }
            } else if (sc.window_control) {
                cfg.w_init = sc.w_init;
                cfg.w_min = sc.w_min;
                cfg.w_max = sc.w_max;
                cfg.merge_aware = sc.merge_aware;
                cfg.merge_floor = sc.merge_floor;
                cfg.cumulative_ack = sc.cumulative_ack;
                cfg.bank_excess = sc.bank_excess;
                cfg.slow_start = sc.slow_start;
                cfg.flight_expiry_ns = to_ns(sc.flight_expiry_us * 1e3);
                if (sc.flight_expiry_rtts >= 0) cfg.flight_expiry_rtts = sc.flight_expiry_rtts;
                cfg.credit_timeout_ns = to_ns(sc.credit_timeout_us * 1e3);
            } else {
                // No window: every pending chunk goes out at once, whatever the credits say (a window
                // of K would stall a worker whose unit the planner gave to another after a merge).
                cfg.w_init = cfg.w_min = cfg.w_max = 1e9;
                cfg.credit_timeout_ns = 0;
                transport::turn_off_leak_repairs(cfg);
            }
            wk.sender = std::make_unique<transport::CreditSender>(cfg);
            if (two_way)
                wk.receiver = std::make_unique<drl::ModelReceiver>(training ? tclusters[cluster_of_worker].layout : layout,
                                                                   cluster_of_worker);
            wk.ep.src_mac = worker_mac(w);
            wk.ep.dst_mac = learner_mac(cluster_of_worker);
            wk.ep.src_ip = worker_ip(w);
            wk.ep.dst_ip = learner_ip(cluster_of_worker);
            wk.ep.src_port = proto::kDefaultUdpPort;
            wk.ep.dst_port = proto::kDefaultUdpPort;
            wk.ep.ecn = 1;  // ECT(1): the queues may set CE
            const std::uint32_t edge = leaf_spine ? leaf_switch[w % sc.leaves] : last;
            const auto edge_port = static_cast<std::uint16_t>(leaf_spine ? next_leaf_port[w % sc.leaves]++ : learner_ports + w);
            worker_nic[w] = add_link(HopLevel::HostNic, sc.host_gbps, kNoLink, 0, edge, edge_port, sc.host_capacity_packets);
            if (two_way) {
                const std::uint32_t down = add_link(HopLevel::WorkerPort, sc.host_gbps, edge, edge_port, kNoLink, 0);
                links[down].to_worker = w;
            }
        }
        for (std::uint32_t c = 0; c < sc.clusters; ++c) {
            auto L = std::make_unique<Learner>(sample_ns);
            std::vector<std::uint32_t> ids(sc.workers_in(c));
            for (std::uint32_t i = 0; i < sc.workers_in(c); ++i) ids[i] = sc.first_worker(c) + i;
            L->reassembler = std::make_unique<transport::Reassembler>(layout, static_cast<std::uint16_t>(c));
            if (!two_way) {  // two directions: the plan holds the workers registered so far (heard_from)
                L->planner = std::make_unique<transport::CreditPlanner>(static_cast<std::uint16_t>(c), ids);
                L->grants.resize(L->planner->max_grants());
            }
            L->target.assign(layout.model_elems, 0.0f);
            L->workers = sc.workers_in(c);
            L->first_worker = sc.first_worker(c);
            // The learner's CREDIT TOS: its cluster YAML's learner.credit_priority in training runs,
            // the scenario's model.credit_priority for the synthetic learners.
            L->credit_priority = training ? tclusters[c].cfg.learner.credit_priority : sc.credit_priority;
            if (two_way) {
                L->nic = learner_nic[learner_port_of(c)];
                L->known.assign(L->workers, KnownWorker{});
                L->published_params.resize(layout.model_elems);
                fill_published(*L, static_cast<std::uint16_t>(c));
            }
            learners.push_back(std::move(L));
        }
        writer_woken.assign(learners.size(), 0);
    }

    // ---- data path ----
    std::uint64_t serialization_ns(std::uint32_t frame_len, std::uint64_t rate_bps) const noexcept {
        const std::uint64_t bits = std::uint64_t{frame_len + frame::kWireOverhead} * 8;
        return (bits * 1'000'000'000ull + rate_bps - 1) / rate_bps;
    }

    std::uint32_t depth_of(const Link& l) const {
        return l.host_queue ? l.host_queue->depth() : switches[l.sw]->pipeline->port(l.sw_port).queue.depth();
    }
    core::QueueStats stats_of(const Link& l) const {
        return l.host_queue ? l.host_queue->stats() : switches[l.sw]->pipeline->port(l.sw_port).queue.stats();
    }

    // The link is free: its egress sends the head packet, if any (a switch port through the
    // pipeline's shaper; a head the shaper holds back is tried again shortly).
    void start_tx(std::uint32_t link_id) {
        Link& link = links[link_id];
        core::Departure d;
        const bool got = link.host_queue ? link.host_queue->dequeue(now, d)
                                         : switches[link.sw]->pipeline->dequeue_one(link.sw_port, now, d);
        if (!got) {
            if (depth_of(link) != 0) {
                link.busy = true;
                schedule_simple(now + kShaperRetryNs, EventType::TxDone, link_id);
            } else {
                link.busy = false;
            }
            return;
        }
        link.busy = true;
        auto* p = static_cast<Packet*>(d.handle);
        const std::uint64_t tx = serialization_ns(d.frame_len, link.rate_bps);
        if (link.learner_facing) {
            const std::uint16_t c = be::load16(p->frame + frame::kUdpPayloadOffset + proto::off::kClusterId);
            if (c < learners.size()) learners[c]->bottleneck_bytes += d.frame_len;
        }
        if (link.learner_port != kNoLink) count_learner_port(link, *p, d.frame_len, tx);
        if (link.level == HopLevel::LearnerNic && link.host_queue->writable()) wake_writers(link_id);
        if (link.level == HopLevel::LearnerNic && is_credit(p->frame[frame::kUdpPayloadOffset + proto::off::kType])) {
            // How long CREDITs waited in the learner host's send queue (behind MODEL, unless served ahead).
            ++credit_waits;
            credit_wait_sum_ns += d.sojourn_ticks;
            credit_wait_max_ns = std::max(credit_wait_max_ns, d.sojourn_ticks);
        }
        schedule_simple(now + tx, EventType::TxDone, link_id);
        Event e;
        e.t = now + tx + link.prop_ns;
        e.type = EventType::Arrive;
        e.index = link_id;
        e.packet = p;
        schedule(e);
    }

    // CREDIT traffic: a CREDIT, or a CREDIT_BATCH on its way to the switch that fans it out.
    std::array<std::uint8_t, transport::kCreditBatchBufferSize> batch_buf{};  // synthetic learners' CREDIT_BATCH
    static bool is_credit(std::uint8_t type) noexcept {
        return type == static_cast<std::uint8_t>(proto::MsgType::Credit) ||
               type == static_cast<std::uint8_t>(proto::MsgType::CreditBatch);
    }

    // The learner port's bytes per direction, and its wire time inside [0, duration) (utilisation).
    void count_learner_port(const Link& link, const Packet& p, std::uint32_t len, std::uint64_t tx) {
        const std::uint64_t busy = std::min(now + tx, duration_ns) - std::min(now, duration_ns);
        ModelTraffic& m = sum.model;
        if (link.level == HopLevel::LearnerPort) {
            m.up_bytes += len;
            up_busy_ns += busy;
            if (two_way) port_up_bytes[link.learner_port] += len;
            return;
        }
        m.down_bytes += len;
        down_busy_ns += busy;
        port_down_bytes[link.learner_port] += len;
        const auto type = static_cast<proto::MsgType>(p.frame[frame::kUdpPayloadOffset + proto::off::kType]);
        if (type == proto::MsgType::Model) {
            m.down_model_bytes += len;
            ++m.down_model_chunks;
        } else if (is_credit(static_cast<std::uint8_t>(type))) {
            m.down_credit_bytes += len;
        }
    }

    // A host's NIC takes a frame: a worker's (from its sender, or a model request) or a learner's.
    // Only GRADIENTs carry contributions; a datagram the queue refuses is lost (counted).
    void enqueue_at_nic(std::uint32_t link_id, Packet* p) {
        Link& link = links[link_id];
        core::Arrival a;
        a.handle = p;
        a.frame = p->frame;
        a.frame_len = p->len;
        const std::uint8_t* shesha = p->frame + frame::kUdpPayloadOffset;
        const auto type = static_cast<proto::MsgType>(shesha[proto::off::kType]);
        a.contributions = type == proto::MsgType::Gradient ? proto::inplace::contrib_count(shesha) : 0;
        ++sum.packets_forwarded;
        const core::EnqueueResult r = link.host_queue->enqueue(a, now);
        if (r.status != core::EnqueueStatus::Queued) {
            host_drop_contributions += a.contributions;
            if (link.level == HopLevel::LearnerNic) {
                ++sum.model.learner_nic_drops;
                if (type == proto::MsgType::Model) ++sum.model.learner_nic_model_drops;
                if (is_credit(static_cast<std::uint8_t>(type))) ++sum.model.learner_nic_credit_drops;
            }
            pool.free(p);
        }
        if (!link.busy) start_tx(link_id);
    }

    // A frame reaches a switch port: the switch's pipeline decides, then the egress links it may
    // have queued onto start sending if idle. A frame from below goes up (the learners' ports or
    // the uplinks); one from above (two-directional runs) goes down to the port the FDB names, or
    // to every down port for a group's MODEL or an unknown destination (replication, flooding).
    void receive_at_switch(std::uint32_t sw_id, std::uint16_t port, Packet* p) {
        SimSwitch& sw = *switches[sw_id];
        ++sum.packets_forwarded;
        const bool from_above = two_way && port < sw.up_ports;
        const core::MacKey dst = core::mac_key(p->frame);
        const bool multicast = (p->frame[0] & 1) != 0;
        sw.pipeline->receive_burst(sw.rx, port, &p, 1, now);
        if (!from_above) {
            for (std::uint32_t l : sw.egress_links)
                if (!links[l].busy) start_tx(l);
            return;
        }
        const std::uint16_t out = multicast ? core::kNoPort : sw.pipeline->fdb().lookup(dst, now);
        if (out != core::kNoPort && out < sw.link_of_port.size()) {
            const std::uint32_t l = sw.link_of_port[out];
            if (l != kNoLink && !links[l].busy) start_tx(l);
            return;
        }
        for (std::uint32_t l : sw.down_links)
            if (!links[l].busy) start_tx(l);
    }

    // FEEDBACK from switch sw, addressed to a worker's IP, back over an uncongested path.
    void on_feedback(std::uint32_t sw, Packet* p) override {
        proto::Message m;
        const frame::FrameInfo info = frame::classify({p->frame, p->len}, proto::kDefaultUdpPort);
        const std::uint32_t worker = info.dst_ip - worker_ip(0);
        if (info.kind == frame::FrameKind::Shesha &&
            proto::decode({p->frame + info.payload_offset, info.payload_len}, m) == proto::DecodeError::Ok &&
            m.hdr.type == proto::MsgType::Feedback && worker < workers.size()) {
            proto::FeedbackBody body;
            if (!proto::decode_feedback(m.payload, body)) {
                pool.free(p);
                return;
            }
            std::uint32_t slot;
            if (free_feedback.empty()) {
                slot = static_cast<std::uint32_t>(feedback_bodies.size());
                feedback_bodies.emplace_back();  // grows to the peak number of FEEDBACKs in flight, then reused
            } else {
                slot = free_feedback.back();
                free_feedback.pop_back();
            }
            feedback_bodies[slot] = body;
            Event e;
            e.type = EventType::Feedback;
            e.index = worker;
            e.index2 = slot;
            e.t = now + std::uint64_t{switches[sw]->hops_from_workers} * to_ns(sc.prop_ns);
            schedule(e);
        }
        pool.free(p);
    }

    // Encodes one Shesha message into a pooled frame; null (counted) when the pool is exhausted.
    Packet* build_frame(const frame::Endpoints& ep, const proto::Header& h, std::span<const std::uint8_t> body) {
        Packet* p = pool.alloc();
        if (p == nullptr) {
            ++sum.pool_exhausted;
            return nullptr;
        }
        const std::span<std::uint8_t> buf(p->frame, frame_capacity);
        const std::size_t payload = proto::encode(h, body, buf.subspan(frame::kUdpPayloadOffset));
        p->len = static_cast<std::uint32_t>(frame::build_udp_frame(ep, payload, buf, false));
        return p;
    }

    // A frame around a Shesha message already encoded (a learner's datagram), or null (too big, or
    // the pool is exhausted: counted).
    Packet* message_frame(const frame::Endpoints& ep, std::span<const std::uint8_t> message) {
        if (frame::kUdpPayloadOffset + message.size() > frame_capacity) return nullptr;
        Packet* p = pool.alloc();
        if (p == nullptr) {
            ++sum.pool_exhausted;
            return nullptr;
        }
        std::memcpy(p->frame + frame::kUdpPayloadOffset, message.data(), message.size());
        p->len = static_cast<std::uint32_t>(frame::build_udp_frame(ep, message.size(), {p->frame, frame_capacity}, false));
        return p;
    }

    void try_send(std::uint32_t w) {
        Worker& wk = workers[w];
        if (training && tclusters[wk.cluster].stopped) return;  // its worker process has exited
        while (auto chunk = wk.sender->next_to_send(now)) {
            Packet* p = pool.alloc();
            if (p == nullptr) {
                ++sum.pool_exhausted;
                sum.contributions_dropped += chunk->header.contrib_count;
                continue;
            }
            const std::span<std::uint8_t> buf(p->frame, frame_capacity);
            const std::span<const std::uint8_t> body(reinterpret_cast<const std::uint8_t*>(chunk->elements.data()),
                                                     chunk->elements.size_bytes());
            const std::size_t payload = proto::encode(chunk->header, body, buf.subspan(frame::kUdpPayloadOffset));
            if (training) drl::set_gradient_env_steps(buf.subspan(frame::kUdpPayloadOffset, payload), tworkers[w].env_steps);
            p->len = static_cast<std::uint32_t>(frame::build_udp_frame(wk.ep, payload, buf, false));
            enqueue_at_nic(worker_nic[w], p);
        }
    }

    void on_compute(std::uint32_t w) {
        Worker& wk = workers[w];
        wk.sender->on_timeout(now);
        // The version it computes on: the one it adopted, or (one direction) the last CREDIT's.
        const std::uint32_t base = wk.receiver ? wk.receiver->version() : wk.sender->learner_version();
        wk.sender->offer_update(base, now, gradients[std::size_t{wk.cluster} * 4 + w % 4]);
        ++wk.updates;
        try_send(w);
        schedule_next_compute(w);
    }

    void schedule_next_compute(std::uint32_t w) {
        if (sc.max_updates != 0 && workers[w].updates >= sc.max_updates) return;
        const double factor = 1.0 + sc.jitter * (2.0 * uniform01() - 1.0);
        const std::uint64_t t = now + std::max<std::uint64_t>(1, to_ns(static_cast<double>(compute_ns_mean) * factor));
        if (t < duration_ns) schedule_simple(t, EventType::Compute, w);
    }

    void on_arrive(std::uint32_t link_id, Packet* p) {
        const Link& link = links[link_id];
        if (link.to_sw != kNoLink) {
            receive_at_switch(link.to_sw, link.to_port, p);
        } else if (link.to_worker != kNoLink) {
            deliver_to_worker(link.to_worker, p);
        } else {
            deliver(p);
        }
    }

    // ---- model distribution (two-directional runs) ----
    // The worker API's request loop: ask while without a model, every model.request_us (the
    // request also joins the worker to its cluster's group at a replicating switch).
    void on_model_request(std::uint32_t w) {
        Worker& wk = workers[w];
        if (wk.receiver->has_model()) return;
        const proto::Header h = drl::model_request_header(wk.cluster, w, wk.receiver->version(), now);
        if (Packet* p = build_frame(wk.ep, h, {})) {
            ++sum.model.requests_sent;
            enqueue_at_nic(worker_nic[w], p);
        }
        const std::uint64_t next = now + (training ? tclusters[wk.cluster].request_ns : to_ns(sc.model_request_us * 1e3));
        if (next < duration_ns && !stopped && !(training && tclusters[wk.cluster].stopped))
            schedule_simple(next, EventType::ModelRequest, w);
    }

    // The published parameters of the learner's current version: the exact pattern of chunk k with
    // the weight of the version (1 + version % 4), so a worker can check what it adopted bit for bit.
    void fill_published(Learner& L, std::uint16_t c) {
        for (std::uint16_t k = 0; k < layout.chunk_count; ++k)
            pattern::fill(L.published_params.data() + layout.offset(k), layout.elems_in(k), c, k, L.published - 1);
    }

    // A learner's datagram onto its host's send queue, with the TOS the real learner gives it
    // (learner::datagram_tos: 0x10 for CREDIT with credit priority, else 0), which decides its band.
    void learner_send(Learner& L, Packet* p) {
        drl::LearnerConfig lc;
        lc.credit_priority = L.credit_priority;
        const std::uint8_t tos =
            learner::datagram_tos(lc, {p->frame + frame::kUdpPayloadOffset, p->len - frame::kUdpPayloadOffset});
        if (tos != 0) {
            std::uint8_t* ip = p->frame + frame::kEthHeaderSize;
            ip[1] = tos;  // the learner's frames are not ECN-capable: ECN bits 0
            constexpr std::size_t kChecksum = 10;  // the IPv4 header checksum's offset
            be::store16(ip + kChecksum, frame::ipv4_header_checksum(ip, frame::kIpv4MinHeaderSize));
        }
        enqueue_at_nic(L.nic, p);
    }

    frame::Endpoints learner_to(std::uint16_t c, const core::Mac& mac, std::uint32_t ip) const {
        frame::Endpoints ep;
        ep.src_mac = learner_mac(c);
        ep.dst_mac = mac;
        ep.src_ip = learner_ip(c);
        ep.dst_ip = ip;
        ep.src_port = proto::kDefaultUdpPort;
        ep.dst_port = proto::kDefaultUdpPort;
        ep.ecn = 0;
        return ep;
    }

    // LearnerCore::send_chunks: every chunk of the published version to one destination.
    void send_chunks(Learner& L, std::uint16_t c, const frame::Endpoints& ep, std::uint32_t worker_id) {
        for (std::uint16_t k = 0; k < layout.chunk_count; ++k) send_chunk(L, c, ep, worker_id, k);
    }

    // LearnerCore::send_chunk: chunk k of the published version. False, with nothing sent, when it
    // is a unicast chunk and the learner's send queue is half full or more (shesha-learner's
    // WouldBlock: it sends unicast MODEL only while its socket is writable).
    bool send_chunk(Learner& L, std::uint16_t c, const frame::Endpoints& ep, std::uint32_t worker_id, std::uint16_t k) {
        proto::Header h;
        h.type = proto::MsgType::Model;
        h.elem_type = proto::ElemType::F32;
        h.cluster_id = c;
        h.worker_id = worker_id;
        h.model_version = L.published;
        transport::set_chunk_fields(layout, k, h);
        h.ts_earliest_ns = L.published_ns;
        h.ts_latest_ns = L.published_ns;
        const float* elems = L.published_params.data() + layout.offset(k);
        const std::span<const std::uint8_t> body(reinterpret_cast<const std::uint8_t*>(elems),
                                                 std::size_t{layout.elems_in(k)} * sizeof(float));
        Packet* p = build_frame(ep, h, body);
        if (p == nullptr) return true;
        const bool unicast = worker_id != drl::kEveryWorker;
        if (unicast && !owed_model_fits(L, p->len)) {
            pool.free(p);
            return false;
        }
        if (unicast) ++sum.model.unicast_chunks;
        else ++sum.model.group_chunks;
        learner_send(L, p);
        return true;
    }

    // Whether a unicast MODEL chunk of len bytes may enter the learner host's send queue now:
    // with replicated delivery always (answers go at once), with unicast delivery only while the
    // queue is less than half full and has room for it (shesha-learner's POLLOUT rule).
    bool owed_model_fits(const Learner& L, std::uint32_t len) const {
        const HostQueue& q = *links[L.nic].host_queue;
        return replicated || (q.writable() && q.has_room(len));
    }

    // LearnerCore::send_model: owes one worker a unicast copy (send_owed() sends it); with
    // replicated delivery (only answers are unicast) the copy goes at once.
    void send_model(Learner& L, std::uint16_t c, std::uint32_t index, bool answer = false) {
        KnownWorker& k = L.known[index];
        k.sent_any = true;
        k.last_model_sent_ns = now;
        ++k.models_since_heard;
        if (replicated) {
            const std::uint32_t w = L.first_worker + index;
            const std::uint64_t before = sum.model.unicast_chunks;
            send_chunks(L, c, learner_to(c, worker_mac(w), worker_ip(w)), w);
            if (answer) sum.model.answer_chunks += sum.model.unicast_chunks - before;
            return;
        }
        k.owed_answer = k.owed_answer || answer;
        if (k.owed) return;
        k.owed = true;
        k.owed_version = L.published;
        k.owed_chunk = 0;
        ++L.owed;
    }

    // LearnerCore::send_owed: the owed copies, whole and workers in turn, while the send queue
    // takes them; the rest wait for it to drain below half (wake_writers).
    void send_owed(Learner& L, std::uint16_t c) {
        for (std::uint32_t looked = 0; looked < L.workers && L.owed != 0 && !L.send_blocked; ++looked) {
            if (L.owed_cursor >= L.workers) L.owed_cursor = 0;
            const std::uint32_t i = L.owed_cursor;
            KnownWorker& k = L.known[i];
            if (k.owed) {
                if (k.owed_version != L.published) {
                    k.owed_version = L.published;
                    k.owed_chunk = 0;
                }
                const std::uint32_t w = L.first_worker + i;
                const frame::Endpoints ep = learner_to(c, worker_mac(w), worker_ip(w));
                while (k.owed_chunk < layout.chunk_count) {
                    if (!send_chunk(L, c, ep, w, k.owed_chunk)) {
                        L.send_blocked = true;
                        ++sum.model.sends_deferred;
                        return;
                    }
                    if (k.owed_answer) ++sum.model.answer_chunks;
                    ++k.owed_chunk;
                }
                k.owed = false;
                k.owed_answer = false;
                --L.owed;
            }
            ++L.owed_cursor;
        }
        if (L.owed == 0) L.owed_cursor = 0;
    }

    // poll(2)'s POLLOUT: the learners whose MODEL copies waited for this send queue go on.
    // Learners sharing the queue are woken from a rotating first one, so that none always fills
    // the room before the others.
    void wake_writers(std::uint32_t link_id) {
        const auto n = static_cast<std::uint32_t>(learners.size());
        const std::uint32_t first = next_writer_first++ % std::max<std::uint32_t>(n, 1);
        for (std::uint32_t j = 0; j < n; ++j) {
            const std::uint32_t c = first + j < n ? first + j : first + j - n;
            if (learners[c]->nic != link_id) continue;
            const bool waiting = training ? tclusters[c].core->wants_writable() : learners[c]->send_blocked;
            if (!waiting || writer_woken[c]) continue;
            writer_woken[c] = 1;
            schedule_simple(now, EventType::LearnerWritable, c);
        }
    }
    void on_writable(std::uint16_t c) {
        writer_woken[c] = 0;
        if (training) {
            if (!tclusters[c].stopped) tclusters[c].core->on_writable();
            return;
        }
        learners[c]->send_blocked = false;
        send_owed(*learners[c], c);
    }

    // LearnerCore::broadcast_model and broadcast_group: a publish or rebroadcast, to every known
    // worker with budget left (unicast), or once to the group while any has budget (replicated).
    void broadcast(Learner& L, std::uint16_t c) {
        bool any_budget = false;
        for (std::uint32_t i = 0; i < L.workers; ++i) {
            KnownWorker& k = L.known[i];
            if (!k.known) continue;
            if (k.models_since_heard >= sc.model_budget) {
                ++sum.model.models_withheld;
                continue;
            }
            if (!replicated) {
                send_model(L, c, i);
                continue;
            }
            any_budget = true;
            k.sent_any = true;
            k.last_model_sent_ns = now;
            ++k.models_since_heard;
        }
        if (replicated && any_budget) send_chunks(L, c, learner_to(c, group_mac(group_ip(c)), group_ip(c)), drl::kEveryWorker);
        send_owed(L, c);
    }

    // LearnerCore::publish_now: a new version once the interval passed and something was applied.
    void publish(Learner& L, std::uint16_t c) {
        ++L.published;
        ++L.versions_published;
        L.publish_times.push_back(now);
        ++sum.model.versions_published;
        L.published_ns = now;
        fill_published(L, c);
        L.applied_since_publish = 0;
        L.publish_due = false;
        ++L.rebroadcast_epoch;
        schedule_learner_ticks(c);
        broadcast(L, c);
    }

    void schedule_learner_ticks(std::uint16_t c) {
        const std::uint64_t publish_at = now + std::max<std::uint64_t>(1, to_ns(sc.publish_interval_us * 1e3));
        if (publish_at < duration_ns) schedule_simple(publish_at, EventType::PublishTick, c);
        const std::uint64_t rebroadcast_at = now + std::max<std::uint64_t>(1, to_ns(sc.rebroadcast_us * 1e3));
        if (rebroadcast_at < duration_ns) {
            Event e;
            e.t = rebroadcast_at;
            e.type = EventType::RebroadcastTick;
            e.index = c;
            e.index2 = learners[c]->rebroadcast_epoch;
            schedule(e);
        }
    }

    void on_publish_tick(std::uint16_t c) {
        Learner& L = *learners[c];
        if (L.applied_since_publish != 0) publish(L, c);
        else L.publish_due = true;  // LearnerCore checks at every tick: the next applied chunk publishes
    }

    void on_rebroadcast_tick(std::uint16_t c, std::uint32_t epoch) {
        Learner& L = *learners[c];
        if (epoch != L.rebroadcast_epoch) return;  // a publish since restarted the period
        broadcast(L, c);
        const std::uint64_t next = now + std::max<std::uint64_t>(1, to_ns(sc.rebroadcast_us * 1e3));
        if (next < duration_ns) {
            Event e;
            e.t = next;
            e.type = EventType::RebroadcastTick;
            e.index = c;
            e.index2 = epoch;
            schedule(e);
        }
    }

    // The learner hears from worker w (LearnerCore::register_worker): a new worker joins the
    // credit plan (rebuild_planner), so CREDIT only ever goes to workers the learner knows.
    KnownWorker* heard_from(Learner& L, std::uint16_t c, std::uint32_t w) {
        if (w < L.first_worker || w - L.first_worker >= L.workers) return nullptr;
        KnownWorker& k = L.known[w - L.first_worker];
        if (!k.known) {
            k.known = true;
            L.registered.push_back(w);
            L.planner = std::make_unique<transport::CreditPlanner>(c, L.registered);
            L.grants.resize(L.planner->max_grants());
        }
        k.models_since_heard = 0;
        return &k;
    }

    // LearnerCore::handle_model_request: the whole model to the asker, at most every 20 ms.
    void on_request_at_learner(Learner& L, std::uint16_t c, std::uint32_t w) {
        KnownWorker* k = heard_from(L, c, w);
        if (k == nullptr) return;
        if (k->sent_any && now - k->last_model_sent_ns < kModelResendMinNs) {
            ++sum.model.requests_rate_limited;
            return;
        }
        ++sum.model.requests_answered;
        send_model(L, c, w - L.first_worker, true);
        send_owed(L, c);
    }

    // A frame reaches a worker down its port: CREDIT for its sender, MODEL for its receiver.
    void deliver_to_worker(std::uint32_t w, Packet* p) {
        Worker& wk = workers[w];
        proto::Message m;
        const frame::FrameInfo info = frame::classify({p->frame, p->len}, proto::kDefaultUdpPort);
        if (info.kind == frame::FrameKind::Shesha &&
            proto::decode({p->frame + info.payload_offset, info.payload_len}, m) == proto::DecodeError::Ok &&
            m.hdr.cluster_id == wk.cluster) {
            if (m.hdr.type == proto::MsgType::Credit && m.hdr.worker_id == w) {
                proto::CreditBody body;
                if (proto::decode_credit(m.payload, body)) {
                    if (training && sc.workers_read_between_rollouts) {
                        TrainWorker::Received r;
                        r.flags = m.hdr.flags;
                        r.credit = body;
                        receive_between_rollouts(w, r);
                    } else {
                        wk.sender->on_credit(body, m.hdr.flags, now);
                        try_send(w);
                    }
                }
            } else if (m.hdr.type == proto::MsgType::Model && m.hdr.elem_count != 0) {
                ++sum.model.chunks_received;
                const drl::ModelChunkResult r = wk.receiver->on_chunk(m.hdr, m.payload);
                if (r == drl::ModelChunkResult::Adopted) {
                    adopt(w, m.hdr);
                } else if (training && r == drl::ModelChunkResult::Stale &&
                           tworkers[w].budget.refill_if_resent(wk.receiver->stats().adopted_resent)) {
                    ++tclusters[wk.cluster].summary.budget_refills;
                    wake_training_worker(w);
                }
            }
        }
        pool.free(p);
    }

    // Every chunk of a version arrived: the worker computes on it from now on.
    void adopt(std::uint32_t w, const proto::Header& h) {
        Worker& wk = workers[w];
        ++sum.model.versions_adopted;
        const std::uint64_t delivery = now - std::min(now, h.ts_latest_ns);
        delivery_sum_ns += static_cast<double>(delivery);
        sum.model.delivery_max_us = std::max(sum.model.delivery_max_us, static_cast<double>(delivery) / 1e3);
        wk.adopted_published_ns = h.ts_latest_ns;
        if (training) {
            // A real model: the worker computes on it from its next rollout (a rollout under way
            // keeps the version it started with, as shesha-worker's loop does).
            tworkers[w].budget.on_adopted();
            if (!wk.computing) {
                wk.computing = true;
                first_model_sum_ns += now;
            }
            wake_training_worker(w);
            return;
        }
        // The learner's parameters of that version, bit for bit (weight 1 + version % 4 per chunk).
        const std::span<const float> params = wk.receiver->parameters();
        const float weight = pattern::weight(wk.receiver->version() - 1);
        for (std::uint16_t k = 0; k < layout.chunk_count; ++k) {
            const float* x = params.data() + layout.offset(k);
            if (pattern::verify(x, layout.elems_in(k), wk.cluster, k, 1) != pattern::Check::Ok || x[1] != weight) {
                ++sum.model.verify_failures;
                break;
            }
        }
        if (!wk.computing) {
            wk.computing = true;
            first_model_sum_ns += now;
            schedule_next_compute(w);
        }
    }

    // A datagram reaches a cluster's learner host. With training.learner_wake_us the learner is a
    // shesha-learner blocked in poll(): the first datagram wakes it, it gets a core that much later
    // (with the compute's jitter), and then reads everything that arrived meanwhile. Its CREDITs,
    // and so its workers' next sends, leave that much later: on the rack this breaks up the credit
    // clock that lets a FIFO's always-backlogged senders refill every slot the port frees
    // (docs/simulation.md, "Learners wake late").
    void deliver(Packet* p) {
        if (training) {
            const std::uint16_t c = be::load16(p->frame + frame::kUdpPayloadOffset + proto::off::kClusterId);
            const double wake_ns = c < tclusters.size() ? sc.learner_wake_us_of(c) * 1e3 : 0;
            if (wake_ns <= 0) {
                deliver_to_learner_core(p);
                return;
            }
            TrainCluster& T = tclusters[c];
            T.arrived.push_back(p);
            if (!T.learner_waking) {
                T.learner_waking = true;
                const double factor = 1.0 + sc.jitter * (2.0 * uniform01() - 1.0);
                schedule_simple(now + std::max<std::uint64_t>(1, to_ns(wake_ns * factor)), EventType::LearnerWake, c);
            }
            return;
        }
        proto::Message m;
        const frame::FrameInfo info = frame::classify({p->frame, p->len}, proto::kDefaultUdpPort);
        if (info.kind != frame::FrameKind::Shesha ||
            proto::decode({p->frame + info.payload_offset, info.payload_len}, m) != proto::DecodeError::Ok ||
            m.hdr.cluster_id >= learners.size()) {
            ++sum.learner_rejects;
            sum.contributions_dropped += proto::inplace::contrib_count(p->frame + frame::kUdpPayloadOffset);
            pool.free(p);
            return;
        }
        Learner& L = *learners[m.hdr.cluster_id];
        if (two_way && drl::is_model_request(m.hdr)) {
            on_request_at_learner(L, m.hdr.cluster_id, m.hdr.worker_id);
            pool.free(p);
            return;
        }
        // Exact sums: the payload must be contrib_count times the pattern, bit for bit.
        std::memcpy(scratch_payload.data(), m.payload.data(), std::min(m.payload.size(), scratch_payload.size() * sizeof(float)));
        if (pattern::verify(scratch_payload.data(), m.hdr.elem_count, m.hdr.cluster_id, m.hdr.chunk_index,
                            m.hdr.contrib_count) != pattern::Check::Ok)
            ++sum.verify_failures;
        // The version a chunk is stale against: the published one (two directions), else the
        // number of times every chunk was covered (the one-directional stand-in).
        if (L.reassembler->apply(m, L.target) == transport::ApplyResult::Ok) {
            L.contributions += m.hdr.contrib_count;
            ++L.chunks;
            const std::uint32_t version = two_way ? L.published : L.version;
            const std::uint32_t stale = version >= m.hdr.model_version ? version - m.hdr.model_version : 0;
            L.staleness_sum += stale;
            if (two_way) {
                // Split the staleness: versions the worker was already behind when it generated (its
                // model's delivery), the rest published while the gradient travelled and waited.
                const auto behind_at = std::upper_bound(L.publish_times.begin(), L.publish_times.end(), m.hdr.ts_earliest_ns);
                const auto published_then = static_cast<std::uint32_t>(1 + (behind_at - L.publish_times.begin()));
                L.staleness_at_generation_sum += published_then > m.hdr.model_version ? published_then - m.hdr.model_version : 0;
            }
            L.staleness_max = std::max(L.staleness_max, stale);
            if (L.reassembler->complete()) {
                ++L.version;
                L.reassembler->reset();
                std::fill(L.target.begin(), L.target.end(), 0.0f);
            }
            ++L.applied_since_publish;
        } else {
            ++sum.learner_rejects;
            sum.contributions_dropped += m.hdr.contrib_count;
        }
        if (now <= duration_ns) L.aom.on_receive(now, m.hdr.ts_latest_ns);
        if (!two_way) {
            const std::size_t n = L.planner->plan(m.hdr, L.version, L.grants);
            const std::uint64_t back = std::uint64_t{switches.front()->hops_from_workers + 1} * to_ns(sc.prop_ns);
            for (std::size_t i = 0; i < n; ++i) {
                Event e;
                e.t = now + back;
                e.type = EventType::Credit;
                e.index = L.grants[i].worker_id;
                e.flags = L.grants[i].flags;
                e.credit = L.grants[i].body;
                schedule(e);
            }
            pool.free(p);
            return;
        }
        // Two directions: the named worker is heard from, each CREDIT is a frame on the way back
        // (LearnerCore::send_credits), and an overdue publish happens now.
        const std::uint16_t c = m.hdr.cluster_id;
        heard_from(L, c, m.hdr.worker_id);
        const std::size_t n = L.planner ? L.planner->plan(m.hdr, L.published, L.grants) : 0;
        const bool batching = replicated && sc.credit_batching != drl::CreditBatching::Off;
        if (batching) {
            // learner.credit_batching: one CREDIT_BATCH per 56 grants to the group, fanned out by the switch.
            proto::Header out;
            out.cluster_id = c;
            out.model_version = L.published;
            out.ts_earliest_ns = m.hdr.ts_latest_ns;
            out.ts_latest_ns = m.hdr.ts_latest_ns;
            const std::uint32_t gip = group_ip(c);
            transport::encode_credit_batches(out, std::span<const transport::CreditGrant>(L.grants.data(), n), batch_buf,
                                             [&](std::span<const std::uint8_t> bytes, auto) {
                                                 if (Packet* q = message_frame(learner_to(c, group_mac(gip), gip), bytes))
                                                     learner_send(L, q);
                                             });
        }
        for (std::size_t i = 0; i < (batching ? 0 : n); ++i) {
            const transport::CreditGrant& g = L.grants[i];
            proto::Header out;
            out.type = proto::MsgType::Credit;
            out.elem_type = proto::ElemType::None;
            out.flags = g.flags;
            out.cluster_id = c;
            out.worker_id = g.worker_id;
            out.model_version = L.published;
            out.elem_count = 0;
            out.ts_earliest_ns = m.hdr.ts_latest_ns;
            out.ts_latest_ns = m.hdr.ts_latest_ns;
            std::array<std::uint8_t, proto::kCreditBodySize> body{};
            proto::encode_credit(g.body, body);
            if (Packet* q = build_frame(learner_to(c, worker_mac(g.worker_id), worker_ip(g.worker_id)), out, body))
                learner_send(L, q);
        }
        if (L.publish_due && L.applied_since_publish != 0 && now < duration_ns) publish(L, c);
        pool.free(p);
    }

    // ---- training workload ----
    // The clusters' jobs: models, layouts and learner settings from their YAMLs (the scenario's
    // seed replaces the YAML's, as --seed does for shesha-worker and shesha-learner).
    void setup_training() {
        training = true;
        using worker::envs::derive_worker_seed;
        for (std::uint32_t c = 0; c < sc.clusters; ++c) {
            TrainCluster T;
            T.cfg = train_cfgs[c];
            T.cfg.seed = sc.seed;
            const std::string& path = sc.training_clusters[c];
            std::string error;
            T.model = backend->create_model(T.cfg.model, derive_worker_seed(sc.seed, drl::kInitialWeightsStream), &error);
            if (!T.model) throw ConfigError(fmt::format("training.clusters[{}]: {}: model: {}", c, path, error));
            T.eval_model = backend->create_model(T.cfg.model, 0, &error);
            if (!T.eval_model) throw ConfigError(fmt::format("training.clusters[{}]: {}: model: {}", c, path, error));
            const auto n = static_cast<std::uint32_t>(T.model->parameter_count());
            auto l = transport::make_layout(n, T.cfg.transport.chunk_elems, &error);
            if (!l) throw ConfigError(fmt::format("training.clusters[{}]: {}: transport.chunk_elems: {}", c, path, error));
            T.layout = *l;
            if (sc.learner_max_workers != 0) T.cfg.learner.max_workers = sc.learner_max_workers;
            if (sc.workers_in(c) > T.cfg.learner.max_workers)
                throw ConfigError(fmt::format("training.clusters[{}]: {}: {} workers, but learner.max_workers is {} (raise "
                                              "it in the YAML, or set training.learner_max_workers)",
                                              c, path, sc.workers_in(c), T.cfg.learner.max_workers));
            // The arm's model delivery: replicated sends to the group the simulated switch fans out.
            T.cfg.learner.model_delivery = replicated ? drl::ModelDelivery::Replicated : drl::ModelDelivery::Unicast;
            T.cfg.learner.model_group = replicated ? group_ip(c) : 0;
            // model.credit_batching true or false decides for every cluster; auto leaves the YAML's.
            if (sc.credit_batching != drl::CreditBatching::Auto) T.cfg.learner.credit_batching = sc.credit_batching;
            T.eval_seed = derive_worker_seed(sc.seed, drl::kEvaluationStream);
            // Evaluation takes no virtual time, so a finer cadence than the YAML's costs only wall time.
            T.eval_ns = std::max<std::uint64_t>(1, sc.eval_interval_ms > 0 ? to_ns(sc.eval_interval_ms * 1e6)
                                                                           : std::uint64_t{T.cfg.learner.eval_interval_ms} * 1'000'000);
            T.request_ns = std::max<std::uint64_t>(1, std::uint64_t{T.cfg.worker.model_request_ms} * 1'000'000);
            TrainingClusterSummary& ts = T.summary;
            ts.env = T.cfg.model.env_name;
            ts.source = path;
            ts.parameters = n;
            ts.chunks = T.layout.chunk_count;
            if (c < sc.training_targets.size() && !std::isnan(sc.training_targets[c])) {
                ts.has_target = true;
                ts.target = sc.training_targets[c];
            }
            tclusters.push_back(std::move(T));
        }
    }

    // After build_topology: a LearnerCore per cluster, sending through its host's send queue, and
    // each worker's environment and RNG (worker_main.cpp: both seeded with the worker's id).
    void start_learner_cores() {
        for (std::uint32_t c = 0; c < sc.clusters; ++c) {
            TrainCluster& T = tclusters[c];
            std::vector<float> initial(T.model->parameter_count());
            T.model->get_parameters(initial);
            const auto cid = static_cast<std::uint16_t>(c);
            T.core = std::make_unique<learner::LearnerCore>(
                T.cfg, cid, std::move(initial), 1,
                [this, cid](const sockaddr_in& to, std::span<const std::uint8_t> message) { return core_send(cid, to, message); });
        }
        tworkers.resize(workers.size());
        for (std::uint32_t w = 0; w < workers.size(); ++w) {
            TrainWorker& tw = tworkers[w];
            const TrainCluster& T = tclusters[workers[w].cluster];
            tw.env = worker::envs::make_environment(T.cfg.model.env_name);
            tw.rng = worker::envs::Rng(worker::envs::derive_worker_seed(sc.seed, w));
            tw.observation = tw.env->reset(tw.rng);
            tw.gradient.assign(T.layout.model_elems, 0.0F);
            tw.budget = drl::UpdateBudget(T.cfg.worker.max_updates_per_version);
        }
        if (sc.compute_threads > 0) {
            std::vector<std::vector<std::unique_ptr<rl::ActorCritic>>> models(sc.compute_threads);
            for (auto& per_thread : models)
                for (const TrainCluster& T : tclusters) per_thread.push_back(backend->create_model(T.cfg.model, 0, nullptr));
            gradient_pool = std::make_unique<GradientPool>(sc.compute_threads, workers.size(), std::move(models));
        }
    }

    // LearnerCore's send function: a datagram to a worker (or to the cluster's group) onto the
    // learner host's send queue, as shesha-learner's socket does: a unicast MODEL chunk only while
    // the queue is less than half full (writable), else WouldBlock and nothing sent (the core keeps
    // its copy owed); anything else is lost when the queue is full (MSG_DONTWAIT's EAGAIN, counted).
    learner::SendResult core_send(std::uint16_t c, const sockaddr_in& to, std::span<const std::uint8_t> message) {
        const std::uint32_t ip = ntohl(to.sin_addr.s_addr);
        core::Mac mac;
        if (replicated && ip == group_ip(c)) {
            mac = group_mac(ip);
        } else {
            const std::uint32_t w = ip - worker_ip(0);
            if (w >= workers.size()) return false;
            mac = worker_mac(w);
        }
        Packet* p = message_frame(learner_to(c, mac, ip), message);
        if (p == nullptr) return false;
        const auto type = static_cast<proto::MsgType>(message[proto::off::kType]);
        const bool unicast_model =
            type == proto::MsgType::Model && be::load32(message.data() + proto::off::kWorkerId) != drl::kEveryWorker;
        if (unicast_model && !owed_model_fits(*learners[c], p->len)) {
            pool.free(p);
            return learner::SendStatus::WouldBlock;
        }
        if (type == proto::MsgType::Model) {
            if (unicast_model) ++sum.model.unicast_chunks;
            else ++sum.model.group_chunks;
        }
        const std::uint64_t drops = sum.model.learner_nic_drops;
        learner_send(*learners[c], p);
        return sum.model.learner_nic_drops == drops ? learner::SendStatus::Sent : learner::SendStatus::WouldBlock;
    }

    void on_learner_wake(std::uint32_t c) {
        TrainCluster& T = tclusters[c];
        T.learner_waking = false;
        reading.swap(T.arrived);
        for (Packet* p : reading) deliver_to_learner_core(p);
        reading.clear();
    }

    // A datagram reaches a cluster's learner: LearnerCore takes it as shesha-learner's receive loop
    // does. A GRADIENT it does not apply (hardening, duplicates, a rejected layout) is counted as
    // refused, so sent = applied + dropped in the network + refused.
    void deliver_to_learner_core(Packet* p) {
        const frame::FrameInfo info = frame::classify({p->frame, p->len}, proto::kDefaultUdpPort);
        proto::Message m;
        if (info.kind != frame::FrameKind::Shesha ||
            proto::decode({p->frame + info.payload_offset, info.payload_len}, m) != proto::DecodeError::Ok ||
            m.hdr.cluster_id >= tclusters.size()) {
            ++sum.learner_rejects;
            sum.contributions_dropped += proto::inplace::contrib_count(p->frame + frame::kUdpPayloadOffset);
            pool.free(p);
            return;
        }
        TrainCluster& T = tclusters[m.hdr.cluster_id];
        Learner& L = *learners[m.hdr.cluster_id];
        sockaddr_in from{};
        from.sin_family = AF_INET;
        from.sin_addr.s_addr = htonl(info.src_ip);
        from.sin_port = htons(info.src_port);
        const std::uint64_t before = T.core->counters().contributions_applied;
        const std::uint64_t chunks_before = T.core->counters().chunks_applied;
        T.core->on_datagram({p->frame + info.payload_offset, info.payload_len}, from, now, now);
        if (m.hdr.type == proto::MsgType::Gradient) {
            const std::uint64_t applied = T.core->counters().contributions_applied - before;
            L.contributions += applied;
            L.chunks += T.core->counters().chunks_applied - chunks_before;
            if (applied < m.hdr.contrib_count) {
                const std::uint64_t refused = m.hdr.contrib_count - applied;
                T.summary.contributions_refused += refused;
                sum.contributions_refused += refused;
            }
        }
        pool.free(p);
    }

    // training.workers_read_between_rollouts: shesha-worker is one loop that reads its socket only
    // between rollouts (poll(0)), or, with nothing to compute, sleeps in poll() until a datagram
    // wakes it and then waits for a core. A CREDIT or FEEDBACK waits for the same: the rollout
    // under way, or training.wake_us. So its next chunks leave then, not when the CREDIT arrived.
    void receive_between_rollouts(std::uint32_t w, const TrainWorker::Received& r) {
        TrainWorker& tw = tworkers[w];
        tw.inbox.push_back(r);
        if (!tw.busy && !tw.waking && !wake_later(w)) read_inbox(w);
    }

    // Worker w, asleep in poll(), was woken: it runs training.wake_us later (TrainWake, with the
    // compute's jitter), or, with 0, now (false: the caller runs it).
    bool wake_later(std::uint32_t w) {
        const double wake_ns = sc.wake_us_of(workers[w].cluster) * 1e3;
        if (wake_ns <= 0) return false;
        tworkers[w].waking = true;
        const double factor = 1.0 + sc.jitter * (2.0 * uniform01() - 1.0);
        schedule_simple(now + std::max<std::uint64_t>(1, to_ns(wake_ns * factor)), EventType::TrainWake, w);
        return true;
    }

    void read_inbox(std::uint32_t w) {
        TrainWorker& tw = tworkers[w];
        if (tw.inbox.empty()) return;
        Worker& wk = workers[w];
        for (const TrainWorker::Received& r : tw.inbox) {
            if (!r.feedback) wk.sender->on_credit(r.credit, r.flags, now);
            else if (sc.window_control) wk.sender->on_feedback(r.feedback_body, now);
        }
        tw.inbox.clear();
        try_send(w);
    }

    // A model arrived that may let worker w compute. One that is computing takes it with its next
    // rollout; one that was waiting starts after training.wake_us (with the compute's jitter), on
    // the newest version it holds by then, as shesha-worker does after its poll() returns.
    void wake_training_worker(std::uint32_t w) {
        TrainWorker& tw = tworkers[w];
        if (!tw.busy && !tw.waking && !wake_later(w)) start_training_compute(w);
    }

    // A worker with a model and nothing under way starts a rollout on the version it holds
    // (worker_main.cpp's loop). Its env steps, actions and gradient are computed now; the gradient
    // is offered when the virtual compute time has passed: steps * step_us + update_us, times a
    // seeded jitter in [1 - jitter, 1 + jitter].
    void start_training_compute(std::uint32_t w) {
        Worker& wk = workers[w];
        TrainWorker& tw = tworkers[w];
        TrainCluster& T = tclusters[wk.cluster];
        if (tw.busy || stopped || T.stopped || now >= duration_ns || !wk.receiver->has_model()) return;
        const drl::ClusterConfig& cfg = T.cfg;
        if (!tw.budget.can_compute()) {
            ++T.summary.waits_for_version;  // until a newer version is adopted, or the learner resends this one
            return;
        }
        const auto wall0 = std::chrono::steady_clock::now();
        const std::uint64_t key = (std::uint64_t{wk.receiver->incarnation()} << 32) | wk.receiver->version();
        if (T.loaded_key != key) {
            T.model->set_parameters(wk.receiver->parameters());
            T.loaded_key = key;
        }
        rl::Rollout& rollout = tw.rollout;
        rollout.clear();
        bool episode_over = false;
        while (rollout.steps() < cfg.a3c.n_steps && !episode_over) {
            const auto obs = tw.observation.view();
            const rl::PolicyDecision decision = T.model->act(obs, tw.rng, false);
            const auto result = tw.env->step(decision.env_action);
            rollout.observations.insert(rollout.observations.end(), obs.begin(), obs.end());
            rollout.actions.push_back(decision.sampled);
            rollout.rewards.push_back(static_cast<float>(result.reward));
            tw.episode_return += result.reward;
            tw.observation = result.observation;
            ++tw.env_steps;
            ++T.summary.env_steps;
            if (result.terminated || result.truncated) {
                episode_over = true;
                rollout.terminated = result.terminated;
            }
        }
        const auto last = tw.observation.view();
        rollout.bootstrap_observation.assign(last.begin(), last.end());
        if (episode_over) {
            ++T.summary.episodes;
            tw.episode_return = 0;
            tw.observation = tw.env->reset(tw.rng);
        }
        if (gradient_pool)
            gradient_pool->submit(w, wk.cluster, key, wk.receiver->parameters(), rollout, cfg.a3c.loss, tw.gradient);
        else
            tw.gradient_ok = T.model->compute_gradient(rollout, cfg.a3c.loss, tw.gradient);
        tw.base_version = wk.receiver->version();
        compute_wall_ns += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - wall0).count();
        tw.busy = true;
        const double virtual_ns = static_cast<double>(rollout.steps()) * sc.step_us_of(wk.cluster) * 1e3 +
                                  sc.update_us_of(wk.cluster) * 1e3;
        const double factor = 1.0 + sc.jitter * (2.0 * uniform01() - 1.0);
        schedule_simple(now + std::max<std::uint64_t>(1, to_ns(virtual_ns * factor)), EventType::TrainDone, w);
    }

    // The gradient is ready: offered to the worker's CreditSender (shesha-worker's transport.send),
    // then the next rollout starts.
    void on_train_done(std::uint32_t w) {
        Worker& wk = workers[w];
        TrainWorker& tw = tworkers[w];
        TrainCluster& T = tclusters[wk.cluster];
        tw.busy = false;
        if (gradient_pool) tw.gradient_ok = gradient_pool->wait(w);
        if (T.stopped) return;  // the cluster stopped while this rollout was under way: its worker exited
        wk.sender->on_timeout(now);
        if (tw.gradient_ok) {
            ++T.summary.gradients_computed;
            tw.budget.on_update(wk.receiver->stats().adopted_resent);
            wk.sender->offer_update(tw.base_version, now, tw.gradient);
            ++wk.updates;
            try_send(w);
        } else {
            ++T.summary.gradients_failed;
        }
        read_inbox(w);
        start_training_compute(w);
    }

    // shesha-learner's poll loop: LearnerCore's timers (publish, rebroadcast, expiry) every
    // training.learner_tick_us; the cluster's workers run their senders' timers on the same tick.
    void on_learner_tick(std::uint32_t c) {
        TrainCluster& T = tclusters[c];
        T.core->on_tick(now, now);
        const Learner& L = *learners[c];
        for (std::uint32_t i = 0; i < L.workers; ++i) {
            const std::uint32_t w = L.first_worker + i;
            // With workers_read_between_rollouts a worker's timers, like its socket, wait for its
            // loop: the end of the rollout under way (on_train_done), or its core.
            if (sc.workers_read_between_rollouts && (tworkers[w].busy || tworkers[w].waking)) continue;
            workers[w].sender->on_timeout(now);
            try_send(w);
        }
        const std::uint64_t next = now + std::max<std::uint64_t>(1, to_ns(sc.learner_tick_us * 1e3));
        if (next < duration_ns && !stopped && !T.stopped) schedule_simple(next, EventType::LearnerTick, c);
    }

    // shesha-learner's evaluation: publish what was applied, evaluate the published parameters with
    // deterministic actions (learner.eval_episodes from the evaluation seed). It takes no virtual
    // time (shesha-learner runs it on a thread of its own).
    void on_evaluate(std::uint32_t c) {
        TrainCluster& T = tclusters[c];
        T.core->publish_now(now, now);
        const auto wall0 = std::chrono::steady_clock::now();
        T.eval_model->set_parameters(T.core->published());
        const rl::EvaluationResult eval = backend->evaluate(*T.eval_model, T.cfg.learner.eval_episodes, T.eval_seed);
        compute_wall_ns += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - wall0).count();
        const learner::LearnerCounters& lc = T.core->counters();
        TrainingPoint pt;
        pt.cluster = static_cast<std::uint16_t>(c);
        pt.t_s = static_cast<double>(now) / 1e9;
        pt.env_steps = T.core->env_steps();
        pt.version = T.core->version();
        pt.eval_mean_return = eval.mean_return;
        pt.eval_min_return = eval.min_return;
        pt.chunks_applied = lc.chunks_applied;
        pt.contributions_applied = lc.contributions_applied;
        sum.curve.push_back(pt);
        if (evaluation_hook)
            evaluation_hook(pt, std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count());
        TrainingClusterSummary& ts = T.summary;
        ts.best_eval_mean = ts.evaluations == 0 ? eval.mean_return : std::max(ts.best_eval_mean, eval.mean_return);
        ts.last_eval_mean = eval.mean_return;
        ++ts.evaluations;
        if (ts.has_target && !ts.reached && eval.mean_return >= ts.target) {
            ts.reached = true;
            ts.seconds_to_target = pt.t_s;
            ts.env_steps_to_target = pt.env_steps;
            ts.version_at_target = pt.version;
        }
        bool any_target = false, all_reached = true, all_stopped = true;
        for (const TrainCluster& x : tclusters) {
            if (!x.summary.has_target) continue;
            any_target = true;
            all_reached = all_reached && x.summary.reached;
        }
        if (sc.stop_at_target == StopAtTarget::Cluster && ts.reached) stop_cluster(c);
        if (sc.stop_at_target == StopAtTarget::All && any_target && all_reached)
            for (std::uint32_t x = 0; x < tclusters.size(); ++x) stop_cluster(x);
        for (const TrainCluster& x : tclusters) all_stopped = all_stopped && x.stopped;
        if (all_stopped) stopped = true;  // nothing left to run: what is in flight drains, then the run ends
        if (now + T.eval_ns <= duration_ns && !stopped && !T.stopped) schedule_simple(now + T.eval_ns, EventType::Evaluate, c);
    }

    // training.stop_at_target: cluster c stops now, as shesha-learner does at --target-return and
    // its workers with it. Its AoM figure ends here.
    void stop_cluster(std::uint32_t c) {
        TrainCluster& T = tclusters[c];
        if (T.stopped) return;
        T.stopped = true;
        T.stop_ns = now;
        T.core->aom().advance(now);
        T.aom_mean_us = T.core->aom().mean_ns() / 1e3;
        T.aom_peak_us = static_cast<double>(T.core->aom().peak_ns()) / 1e3;
    }

    void summarize_training() {
        for (std::uint32_t c = 0; c < tclusters.size(); ++c) {
            TrainCluster& T = tclusters[c];
            TrainingClusterSummary& ts = T.summary;
            const learner::LearnerCounters& lc = T.core->counters();
            ts.chunks_applied = lc.chunks_applied;
            ts.contributions_applied = lc.contributions_applied;
            ts.optimizer_steps = lc.optimizer_steps;
            ts.rejected = lc.rejected_total() + T.core->reassembler_stats().rejected_total();
            ts.duplicates = lc.duplicates;
            ts.versions_published = lc.versions_published;
            ts.version = T.core->version();
            sum.training.push_back(ts);
            // The per-cluster network view from the learner core's own AoM and staleness.
            // A stopped cluster's AoM is the one frozen at its stop (what arrives while the network
            // drains, and the time after, do not count).
            ClusterSummary& cs = sum.per_cluster[c];
            if (T.stopped) {
                cs.aom_mean_us = T.aom_mean_us;
                cs.aom_peak_us = T.aom_peak_us;
            } else {
                T.core->aom().advance(now);
                cs.aom_mean_us = T.core->aom().mean_ns() / 1e3;
                cs.aom_peak_us = static_cast<double>(T.core->aom().peak_ns()) / 1e3;
            }
            cs.staleness_mean = T.core->staleness().mean();
            cs.staleness_max = T.core->staleness().max;
            cs.versions_published = static_cast<std::uint32_t>(lc.versions_published);
            cs.learner_version = T.core->version();
        }
        sum.aom_mean_us = 0;
        sum.aom_peak_us = 0;
        double stale_sum = 0;
        std::uint64_t stale_n = 0;
        sum.staleness_max = 0;
        for (std::uint32_t c = 0; c < tclusters.size(); ++c) {
            const ClusterSummary& cs = sum.per_cluster[c];
            sum.aom_mean_us += cs.aom_mean_us / static_cast<double>(tclusters.size());
            sum.aom_peak_us = std::max(sum.aom_peak_us, cs.aom_peak_us);
            sum.staleness_max = std::max(sum.staleness_max, cs.staleness_max);
            stale_sum += tclusters[c].core->staleness().sum;
            stale_n += tclusters[c].core->staleness().count;
        }
        sum.staleness_mean = stale_n ? stale_sum / static_cast<double>(stale_n) : 0;
        // The model-distribution counters the learner cores kept (the synthetic learners count these
        // themselves).
        sum.model.versions_published = 0;
        for (const auto& ts : sum.training) sum.model.versions_published += ts.versions_published;
        for (const TrainCluster& T : tclusters) {
            const learner::LearnerCounters& lc = T.core->counters();
            sum.model.requests_answered += lc.model_requests - lc.model_requests_rate_limited;
            sum.model.requests_rate_limited += lc.model_requests_rate_limited;
            sum.model.models_withheld += lc.models_withheld + lc.model_group_withheld;
            sum.model.sends_deferred += lc.model_sends_deferred;
        }
        sum.compute_wall_s = compute_wall_ns / 1e9;
    }

    void on_sample() {
        const double t_ms = static_cast<double>(now) / 1e6;
        const double interval_s = static_cast<double>(sample_ns) / 1e9;
        for (std::uint32_t c = 0; c < learners.size(); ++c) {
            Learner& L = *learners[c];
            if (training && tclusters[c].stopped) {
                // a stopped cluster's AoM series ends at its stop, as its summary figure does
            } else if (training && tclusters[c].core->aom().started())
                series.push_back({t_ms, "aom_us", c,
                                  static_cast<double>(now - std::min(now, tclusters[c].core->aom().latest_generation_ns())) / 1e3});
            else if (L.aom.started())
                series.push_back({t_ms, "aom_us", c, static_cast<double>(now - std::min(now, L.aom.latest_generation_ns())) / 1e3});
            series.push_back({t_ms, "bottleneck_gbps", c,
                              static_cast<double>(L.bottleneck_bytes - L.bottleneck_bytes_sampled) * 8 / interval_s / 1e9});
            L.bottleneck_bytes_sampled = L.bottleneck_bytes;
        }
        std::array<std::uint64_t, kHopLevels> depth_max{};
        for (const Link& l : links) {
            auto& m = depth_max[static_cast<int>(l.level)];
            m = std::max<std::uint64_t>(m, depth_of(l));
        }
        const int levels = two_way ? kHopLevels : static_cast<int>(HopLevel::LearnerNic);  // the way back only exists in two-directional runs
        for (int h = 0; h < levels; ++h) series.push_back({t_ms, "depth_max", static_cast<std::uint32_t>(h), static_cast<double>(depth_max[h])});
        double wsum = 0;
        std::uint64_t in_flight = 0;
        for (const Worker& w : workers) {
            wsum += w.sender->window();
            in_flight += w.sender->in_flight();
        }
        series.push_back({t_ms, "window_mean", 0, wsum / static_cast<double>(workers.size())});
        series.push_back({t_ms, "in_flight_sum", 0, static_cast<double>(in_flight)});
        if (two_way) {
            // Both directions of each learner port, and how old the workers' models are.
            for (std::uint32_t p = 0; p < learner_port_count; ++p) {
                series.push_back({t_ms, "learner_up_gbps", p,
                                  static_cast<double>(port_up_bytes[p] - port_up_sampled[p]) * 8 / interval_s / 1e9});
                series.push_back({t_ms, "learner_down_gbps", p,
                                  static_cast<double>(port_down_bytes[p] - port_down_sampled[p]) * 8 / interval_s / 1e9});
                port_up_sampled[p] = port_up_bytes[p];
                port_down_sampled[p] = port_down_bytes[p];
            }
            double age_sum = 0;
            std::uint32_t with_model = 0;
            for (const Worker& w : workers)
                if (w.receiver->has_model()) {
                    age_sum += static_cast<double>(now - std::min(now, w.adopted_published_ns)) / 1e3;
                    ++with_model;
                }
            if (with_model != 0) {
                series.push_back({t_ms, "model_age_us", 0, age_sum / with_model});
                model_age_sum_us += age_sum / with_model;
                ++model_age_samples;
            }
        }
        if (now + sample_ns <= duration_ns && !stopped) schedule_simple(now + sample_ns, EventType::Sample, 0);
    }

    Summary run() {
        const auto wall0 = std::chrono::steady_clock::now();
        wall_start = wall0;
        // A worker starts at its offset: computing (one direction), or asking for the model it will
        // compute on (two directions; the learners publish version 1 at t = 0).
        for (std::uint32_t w = 0; w < workers.size(); ++w) {
            const std::uint64_t start = sc.start_together ? 0 : to_ns(uniform01() * static_cast<double>(compute_ns_mean));
            if (start < duration_ns) schedule_simple(start, two_way ? EventType::ModelRequest : EventType::Compute, w);
        }
        if (training) {
            // The learner cores tick from t = 0 (version 1 is published at start) and evaluate
            // every learner.eval_interval_ms.
            for (std::uint32_t c = 0; c < learners.size(); ++c) {
                schedule_simple(0, EventType::LearnerTick, c);
                if (tclusters[c].eval_ns <= duration_ns) schedule_simple(tclusters[c].eval_ns, EventType::Evaluate, c);
            }
        } else if (two_way) {
            for (std::uint32_t c = 0; c < learners.size(); ++c) schedule_learner_ticks(static_cast<std::uint16_t>(c));
        }
        schedule_simple(sample_ns, EventType::Sample, 0);
        while (!events.empty()) {
            const Event e = events.top();
            events.pop();
            now = e.t;
            ++sum.events;
            switch (e.type) {
                case EventType::Compute: on_compute(e.index); break;
                case EventType::TxDone: start_tx(e.index); break;
                case EventType::Arrive: on_arrive(e.index, e.packet); break;
                case EventType::Credit:
                    workers[e.index].sender->on_credit(e.credit, e.flags, now);
                    try_send(e.index);
                    break;
                case EventType::Feedback:
                    if (training && sc.workers_read_between_rollouts) {
                        TrainWorker::Received r;
                        r.feedback = true;
                        r.feedback_body = feedback_bodies[e.index2];
                        receive_between_rollouts(e.index, r);
                    } else if (sc.window_control) {
                        workers[e.index].sender->on_feedback(feedback_bodies[e.index2], now);
                    }
                    free_feedback.push_back(e.index2);
                    break;
                case EventType::Sample: on_sample(); break;
                case EventType::ModelRequest: on_model_request(e.index); break;
                case EventType::PublishTick: on_publish_tick(static_cast<std::uint16_t>(e.index)); break;
                case EventType::RebroadcastTick: on_rebroadcast_tick(static_cast<std::uint16_t>(e.index), e.index2); break;
                case EventType::TrainDone: on_train_done(e.index); break;
                case EventType::TrainWake:
                    tworkers[e.index].waking = false;
                    read_inbox(e.index);
                    start_training_compute(e.index);
                    break;
                case EventType::LearnerTick: on_learner_tick(e.index); break;
                case EventType::Evaluate: on_evaluate(e.index); break;
                case EventType::LearnerWake: on_learner_wake(e.index); break;
                case EventType::LearnerWritable: on_writable(static_cast<std::uint16_t>(e.index)); break;
            }
        }
        const auto wall1 = std::chrono::steady_clock::now();
        sum.wall_s = std::chrono::duration<double>(wall1 - wall0).count();
        summarize();
        if (training) summarize_training();
        return sum;
    }

    void summarize() {
        Summary& s = sum;
        s.arm = arm_name(sc);
        s.model_delivery = to_string(sc.model_delivery);
        s.workers = static_cast<std::uint32_t>(workers.size());
        s.clusters = sc.clusters;
        s.sim_end_ms = static_cast<double>(now) / 1e6;
        s.pool_packets = pool.size();
        s.packets_per_wall_s = s.wall_s > 0 ? static_cast<double>(s.packets_forwarded) / s.wall_s : 0;
        double wsum = 0;
        for (const Worker& w : workers) {
            const auto& c = w.sender->counters();
            s.updates += c.updates_offered;
            s.chunks_sent += c.chunks_sent;
            s.contributions_sent += c.contributions_sent;
            s.sender_merges += c.chunks_merged;
            s.credit_timeouts += c.credit_timeouts;
            s.chunks_expired += c.chunks_expired;
            s.credits_excess += c.credits_excess;
            wsum += w.sender->window();
        }
        s.window_mean = wsum / static_cast<double>(workers.size());

        std::array<double, kHopLevels> depth_sum{}, depth_samples{}, sojourn_sum{};
        for (const Link& l : links) {
            const core::QueueStats q = stats_of(l);
            HopSummary& h = s.hops[static_cast<int>(l.level)];
            ++h.ports;
            h.arrivals += q.depth_samples;
            h.departures += q.dequeued;
            h.merges += q.merged;
            h.bytes_saved += q.bytes_saved;
            h.drops += q.dropped;
            h.marks += q.marked;
            h.depth_max = std::max(h.depth_max, q.depth_max);
            h.sojourn_max_us = std::max(h.sojourn_max_us, static_cast<double>(q.sojourn_max_ticks) / 1e3);
            depth_sum[static_cast<int>(l.level)] += static_cast<double>(q.depth_sum);
            depth_samples[static_cast<int>(l.level)] += static_cast<double>(q.depth_samples);
            sojourn_sum[static_cast<int>(l.level)] += static_cast<double>(q.sojourn_sum_ticks);
            s.merges += q.merged;
            s.bytes_saved += q.bytes_saved;
            s.drops += q.dropped;
        }
        // What the switches' pipelines counted: FEEDBACK, and the contributions in their tail drops.
        s.contributions_dropped += host_drop_contributions;
        core::SwitchCounters total;
        core::PortCounters ports_total;
        for (const auto& sw : switches) {
            total += sw->rx;
            total += sw->pipeline->egress();
            for (std::size_t i = 0; i < sw->pipeline->port_count(); ++i) {
                ports_total += sw->pipeline->port(i).rx;
                ports_total += sw->pipeline->port(i).tx;
            }
        }
        s.feedback_sent = total[core::SwitchCounter::FeedbackSent];
        s.feedback_suppressed = total[core::SwitchCounter::FeedbackSuppressed];
        s.contributions_dropped += ports_total[core::PortCounter::TxDroppedContributions];
        s.switch_counters = total;
        s.switch_port_counters = ports_total;
        for (int i = 0; i < kHopLevels; ++i) {
            HopSummary& h = s.hops[i];
            h.depth_mean = depth_samples[i] > 0 ? depth_sum[i] / depth_samples[i] : 0;
            h.sojourn_mean_us = h.departures > 0 ? sojourn_sum[i] / static_cast<double>(h.departures) / 1e3 : 0;
        }

        std::uint64_t bottleneck_total = 0;
        for (const auto& L : learners) bottleneck_total += L->bottleneck_bytes;
        double jain_num = 0, jain_den = 0, stale_sum = 0, stale_at_generation_sum = 0;
        std::uint64_t chunk_total = 0;
        for (auto& Lp : learners) {
            Learner& L = *Lp;
            L.aom.advance(duration_ns);
            ClusterSummary c;
            c.workers = L.workers;
            c.aom_mean_us = L.aom.mean_ns() / 1e3;
            c.aom_peak_us = static_cast<double>(L.aom.peak_ns()) / 1e3;
            c.staleness_mean = L.chunks ? L.staleness_sum / static_cast<double>(L.chunks) : 0;
            c.staleness_max = L.staleness_max;
            c.chunks_applied = L.chunks;
            c.contributions_applied = L.contributions;
            c.bottleneck_bytes = L.bottleneck_bytes;
            c.bottleneck_share = bottleneck_total ? static_cast<double>(L.bottleneck_bytes) / static_cast<double>(bottleneck_total) : 0;
            c.learner_version = L.version;
            c.versions_published = L.versions_published;
            if (two_way)
                for (std::uint32_t i = 0; i < L.workers; ++i)
                    c.workers_without_model += workers[L.first_worker + i].receiver->has_model() ? 0 : 1;
            s.contributions_applied += L.contributions;
            s.aom_mean_us += c.aom_mean_us / static_cast<double>(learners.size());
            s.aom_peak_us = std::max(s.aom_peak_us, c.aom_peak_us);
            s.staleness_max = std::max(s.staleness_max, c.staleness_max);
            stale_sum += L.staleness_sum;
            stale_at_generation_sum += L.staleness_at_generation_sum;
            chunk_total += L.chunks;
            const double x = static_cast<double>(L.contributions) / L.workers;
            jain_num += x;
            jain_den += x * x;
            s.per_cluster.push_back(c);
        }
        s.staleness_mean = chunk_total ? stale_sum / static_cast<double>(chunk_total) : 0;
        s.staleness_at_generation_mean = chunk_total ? stale_at_generation_sum / static_cast<double>(chunk_total) : 0;
        s.staleness_split = two_way;
        s.jain_fairness = jain_den > 0 ? jain_num * jain_num / (static_cast<double>(learners.size()) * jain_den) : 0;
        // Over the ports' contended service in packets (PortQueue::shares, every port of every switch, what
        // scheduling: drr shares out), per unit of weight.
        std::map<std::uint16_t, double> contended;
        for (const auto& sw : switches)
            for (std::size_t i = 0; i < sw->pipeline->port_count(); ++i)
                for (const core::ClusterShare& c : sw->pipeline->port(i).queue.shares())
                    contended[c.cluster_id] += static_cast<double>(c.contended_packets) / c.weight;
        double cn = 0, cd = 0;
        for (const auto& [id, x] : contended) {
            cn += x;
            cd += x * x;
        }
        s.jain_contended = cd > 0 ? cn * cn / (static_cast<double>(contended.size()) * cd) : 0;

        ModelTraffic& m = s.model;
        // A training run that stopped at its targets ended before duration_ms.
        const double port_ns = static_cast<double>(stopped ? std::min(now, duration_ns) : duration_ns) * learner_port_count;
        m.up_utilisation = port_ns > 0 ? static_cast<double>(up_busy_ns) / port_ns : 0;
        m.down_utilisation = port_ns > 0 ? static_cast<double>(down_busy_ns) / port_ns : 0;
        if (two_way) {
            std::uint32_t computing = 0;
            for (const Worker& w : workers) {
                computing += w.computing ? 1 : 0;
                m.assemblies_abandoned += w.receiver->stats().assemblies_abandoned;
                if (!w.receiver->has_model()) ++m.workers_without_model;
            }
            m.delivery_mean_us = m.versions_adopted ? delivery_sum_ns / static_cast<double>(m.versions_adopted) / 1e3 : 0;
            m.first_model_mean_us = computing ? static_cast<double>(first_model_sum_ns) / computing / 1e3 : 0;
            m.model_age_mean_us = model_age_samples ? model_age_sum_us / static_cast<double>(model_age_samples) : 0;
            m.credits_sent = credit_waits;
            m.credit_wait_mean_us = credit_waits ? static_cast<double>(credit_wait_sum_ns) / static_cast<double>(credit_waits) / 1e3 : 0;
            m.credit_wait_max_us = static_cast<double>(credit_wait_max_ns) / 1e3;
        }
    }
};

Simulator::Simulator(const Scenario& s, const TrainingBackend* backend) : impl_(std::make_unique<Impl>(s, backend)) {}
Simulator::~Simulator() = default;
Summary Simulator::run() { return impl_->run(); }
const std::vector<SeriesRow>& Simulator::series() const noexcept { return impl_->series; }
void Simulator::on_evaluation(std::function<void(const TrainingPoint&, double)> f) { impl_->evaluation_hook = std::move(f); }

// ---- CSV ----
std::string summary_csv_header() {
    std::string h =
        "label,arm,topology,shared_bottleneck,clusters,workers,host_gbps,learner_gbps,chunks,chunk_elems,compute_us,"
        "duration_ms,seed,updates,chunks_sent,contributions_sent,contributions_applied,contributions_dropped,"
        "sender_merges,credit_timeouts,feedback_sent,feedback_suppressed,window_mean,packets_forwarded,merges,"
        "bytes_saved,drops,pool_exhausted,pool_packets,verify_failures,learner_rejects,aom_mean_us,aom_peak_us,"
        "staleness_mean,staleness_max,jain_fairness,jain_contended";
    for (int i = 0; i < kHopLevels; ++i) {
        const std::string n = to_string(static_cast<HopLevel>(i));
        h += fmt::format(",{0}_depth_mean,{0}_depth_max,{0}_sojourn_mean_us,{0}_sojourn_max_us,{0}_merges,{0}_drops,{0}_marks", n);
    }
    h += ",model_delivery,learner_up_bytes,learner_down_bytes,learner_down_model_bytes,learner_down_credit_bytes,"
         "learner_up_utilisation,learner_down_utilisation,model_chunks_down,learner_send_drops,learner_send_model_drops,"
         "learner_send_credit_drops,versions_published,model_unicast_chunks,model_group_chunks,model_answer_chunks,model_requests_sent,"
         "model_requests_answered,model_requests_rate_limited,models_withheld,model_chunks_received,versions_adopted,"
         "model_assemblies_abandoned,model_verify_failures,workers_without_model,model_delivery_mean_us,"
         "model_delivery_max_us,model_age_mean_us,first_model_mean_us,learner_send_credit_wait_mean_us,"
         "learner_send_credit_wait_max_us,chunks_expired,credits_excess,model_sends_deferred";
    h += ",sim_end_ms,events,wall_s,packets_per_wall_s\n";
    return h;
}

std::string summary_csv_row(const std::string& label, const Scenario& s, const Summary& r) {
    std::string row = fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.3f},{},{},{},{},{},{},{},{},{:.3f},{:.3f},{:.4f},{},{:.6f},{:.6f}",
        label, r.arm, s.topology == TopologyKind::Tor ? "tor" : "leaf_spine", s.shared_bottleneck ? 1 : 0, r.clusters,
        r.workers, s.host_gbps, s.learner_gbps, s.chunks, s.chunk_elems, s.compute_us, s.duration_ms, s.seed, r.updates,
        r.chunks_sent, r.contributions_sent, r.contributions_applied, r.contributions_dropped, r.sender_merges,
        r.credit_timeouts, r.feedback_sent, r.feedback_suppressed, r.window_mean, r.packets_forwarded, r.merges,
        r.bytes_saved, r.drops, r.pool_exhausted, r.pool_packets, r.verify_failures, r.learner_rejects, r.aom_mean_us,
        r.aom_peak_us, r.staleness_mean, r.staleness_max, r.jain_fairness, r.jain_contended);
    for (const HopSummary& h : r.hops)
        row += fmt::format(",{:.3f},{},{:.3f},{:.3f},{},{},{}", h.depth_mean, h.depth_max, h.sojourn_mean_us,
                           h.sojourn_max_us, h.merges, h.drops, h.marks);
    const ModelTraffic& m = r.model;
    row += fmt::format(",{},{},{},{},{},{:.6f},{:.6f},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f}",
                       r.model_delivery, m.up_bytes, m.down_bytes, m.down_model_bytes, m.down_credit_bytes,
                       m.up_utilisation, m.down_utilisation, m.down_model_chunks, m.learner_nic_drops,
                       m.learner_nic_model_drops, m.learner_nic_credit_drops, m.versions_published, m.unicast_chunks,
                       m.group_chunks, m.answer_chunks, m.requests_sent, m.requests_answered, m.requests_rate_limited, m.models_withheld,
                       m.chunks_received, m.versions_adopted, m.assemblies_abandoned, m.verify_failures,
                       m.workers_without_model, m.delivery_mean_us, m.delivery_max_us, m.model_age_mean_us,
                       m.first_model_mean_us, m.credit_wait_mean_us, m.credit_wait_max_us);
    row += fmt::format(",{},{},{}", r.chunks_expired, r.credits_excess, m.sends_deferred);
    row += fmt::format(",{:.3f},{},{:.3f},{:.0f}\n", r.sim_end_ms, r.events, r.wall_s, r.packets_per_wall_s);
    return row;
}

std::string cluster_csv(const std::string& label, const Summary& r) {
    std::string out =
        "label,cluster,workers,aom_mean_us,aom_peak_us,staleness_mean,staleness_max,chunks_applied,"
        "contributions_applied,bottleneck_bytes,bottleneck_share,learner_version,versions_published,"
        "workers_without_model\n";
    for (std::size_t c = 0; c < r.per_cluster.size(); ++c) {
        const ClusterSummary& x = r.per_cluster[c];
        out += fmt::format("{},{},{},{:.3f},{:.3f},{:.4f},{},{},{},{},{:.6f},{},{},{}\n", label, c, x.workers,
                           x.aom_mean_us, x.aom_peak_us, x.staleness_mean, x.staleness_max, x.chunks_applied,
                           x.contributions_applied, x.bottleneck_bytes, x.bottleneck_share, x.learner_version,
                           x.versions_published, x.workers_without_model);
    }
    return out;
}

std::string series_csv(const std::string& label, const std::vector<SeriesRow>& rows) {
    std::string out = "label,t_ms,metric,key,value\n";
    for (const SeriesRow& r : rows) out += fmt::format("{},{:.4f},{},{},{:.4f}\n", label, r.t_ms, r.metric, r.key, r.value);
    return out;
}

std::string training_curve_csv(const std::string& label, const Summary& r) {
    std::string out = "label,cluster,env,t_s,env_steps,version,eval_mean_return,eval_min_return,chunks_applied,contributions_applied\n";
    for (const TrainingPoint& p : r.curve)
        out += fmt::format("{},{},{},{:.6f},{},{},{:.3f},{:.3f},{},{}\n", label, p.cluster,
                           p.cluster < r.training.size() ? r.training[p.cluster].env : std::string(), p.t_s, p.env_steps,
                           p.version, p.eval_mean_return, p.eval_min_return, p.chunks_applied, p.contributions_applied);
    return out;
}

std::string training_csv(const std::string& label, const Summary& r) {
    std::string out =
        "label,cluster,env,source,parameters,chunks,target,reached,seconds_to_target,env_steps_to_target,"
        "version_at_target,best_eval_mean,last_eval_mean,evaluations,env_steps,episodes,gradients_computed,"
        "gradients_failed,waits_for_version,budget_refills,chunks_applied,contributions_applied,contributions_refused,"
        "optimizer_steps,rejected,duplicates,versions_published,version,wall_s,compute_wall_s\n";
    for (std::size_t c = 0; c < r.training.size(); ++c) {
        const TrainingClusterSummary& t = r.training[c];
        out += fmt::format("{},{},{},{},{},{},{},{},{:.6f},{},{},{:.3f},{:.3f},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.3f},{:.3f}\n",
                           label, c, t.env, t.source, t.parameters, t.chunks,
                           t.has_target ? fmt::format("{}", t.target) : std::string(), t.reached ? 1 : 0,
                           t.seconds_to_target, t.env_steps_to_target, t.version_at_target, t.best_eval_mean,
                           t.last_eval_mean, t.evaluations, t.env_steps, t.episodes, t.gradients_computed,
                           t.gradients_failed, t.waits_for_version, t.budget_refills, t.chunks_applied, t.contributions_applied,
                           t.contributions_refused, t.optimizer_steps, t.rejected, t.duplicates, t.versions_published,
                           t.version, r.wall_s, r.compute_wall_s);
    }
    return out;
}

}  // namespace shesha::sim

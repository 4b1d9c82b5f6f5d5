// shesha-sim engine (see simulator.h). One event heap ordered by (time, insertion sequence), a
// pooled packet store grown in blocks (never per packet), and per-port serialization.
#include "simulator.h"
#include "big_endian.h"

#include <algorithm>
#include <map>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <queue>

#include <fmt/format.h>

#include "aggregating_queue.h"
#include "aom_tracker.h"
#include "pipeline.h"
#include "frame.h"
#include "gradient_pattern.h"
#include "protocol.h"
#include "transport/chunking.h"
#include "transport/credit_planner.h"
#include "transport/credit_sender.h"

namespace shesha::sim {

const char* to_string(HopLevel h) noexcept {
    switch (h) {
        case HopLevel::HostNic: return "host_nic";
        case HopLevel::LeafUplink: return "leaf_uplink";
        case HopLevel::SpineDown: return "spine_down";
        case HopLevel::LearnerPort: return "learner_port";
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

enum class EventType : std::uint8_t { Compute, TxDone, Arrive, Credit, Feedback, Sample };

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
    std::unique_ptr<core::AggregatingQueue> host_queue;  // worker NIC only (a plain FIFO)
    std::uint32_t sw = kNoLink;        // switch whose port is the egress, or kNoLink (NIC)
    std::uint16_t sw_port = 0;
    std::uint32_t to_sw = kNoLink;     // switch at the far end, or kNoLink (the learners)
    std::uint16_t to_port = 0;
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
};

struct Learner {
    std::unique_ptr<transport::Reassembler> reassembler;
    std::unique_ptr<transport::CreditPlanner> planner;
    std::vector<float> target;
    std::vector<transport::CreditGrant> grants;
    std::uint32_t version = 0;
    metrics::AomTracker aom;
    double staleness_sum = 0;
    std::uint32_t staleness_max = 0;
    std::uint64_t chunks = 0;
    std::uint64_t contributions = 0;
    std::uint64_t bottleneck_bytes = 0;
    std::uint64_t bottleneck_bytes_sampled = 0;  // at the previous sample
    std::uint32_t workers = 0;
    explicit Learner(std::uint64_t period) : aom(period) {}
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
struct SimSwitch {
    SimIo io;
    std::unique_ptr<core::Pipeline<SimIo>> pipeline;
    core::SwitchCounters rx;
    std::vector<std::uint32_t> egress_links;  // links whose egress is one of this switch's ports
    std::uint32_t hops_from_workers = 1;      // links between a worker and this switch
};

}  // namespace

struct Simulator::Impl final : FeedbackSink {
    Scenario sc;
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

    // A worker's update is pattern::fill(cluster, chunk, worker), which depends on the worker only
    // through its weight 1 + w % 4: filled once per (cluster, weight) and offered from here.
    std::vector<std::vector<float>> gradients;  // [cluster * 4 + w % 4]
    std::vector<proto::FeedbackBody> feedback_bodies;  // bodies of scheduled FEEDBACK events
    std::vector<std::uint32_t> free_feedback;
    std::vector<float> scratch_payload;   // an aligned copy of a received payload
    transport::ChunkLayout layout;
    std::uint64_t host_drop_contributions = 0;  // tail drops at worker NICs

    Summary sum;
    std::vector<SeriesRow> series;

    static std::size_t frame_capacity_for(const Scenario& s) {
        const std::size_t gradient = frame::kUdpPayloadOffset + proto::kHeaderSize + s.chunk_elems * sizeof(float);
        return (std::max(gradient, core::kFeedbackFrameLen) + 63) & ~std::size_t{63};
    }

    explicit Impl(const Scenario& s)
        : sc(s),
          duration_ns(to_ns(s.duration_ms * 1e6)),
          compute_ns_mean(std::max<std::uint64_t>(1, to_ns(s.compute_us * 1e3))),
          sample_ns(std::max<std::uint64_t>(1, to_ns(s.sample_us * 1e3))),
          rng_state(s.seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull),
          frame_capacity(frame_capacity_for(s)),
          pool(frame_capacity, s.pool_max_packets) {
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
        build_topology();
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

    // A switch port in the pipeline's config: an egress toward the learners (a link at `gbps`) or
    // a port that only receives (from workers or a lower tier; its queue never fills).
    core::PortConfig port_config(std::size_t index, double gbps, bool egress) const {
        core::PortConfig pc;
        pc.name = fmt::format("p{}", index);
        pc.device = "sim";
        pc.mtu = core::kMaxMtu;
        if (egress) {
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

    // A switch with `egress` ports toward the learners (ports 0..) and `ingress` receive-only
    // ports after them; dst_port(c) is the egress port for cluster c's learner.
    std::uint32_t add_switch(std::uint32_t egress, double egress_gbps, std::uint32_t ingress, std::uint32_t hops,
                             const std::function<std::uint32_t(std::uint32_t)>& dst_port) {
        core::SwitchConfig cfg;
        cfg.burst = 32;
        cfg.fdb_capacity = ingress + sc.clusters + 64;  // every sender can be learned
        cfg.mac_aging_s = 300;
        cfg.udp_port = proto::kDefaultUdpPort;
        cfg.aggregation = sc.aggregation;
        cfg.feedback = sc.switch_feedback;
        cfg.feedback_interval_us = static_cast<std::uint32_t>(std::llround(sc.feedback_interval_us));
        cfg.non_member = core::NonMemberAction::ForwardUnmerged;
        cfg.scheduling = sc.fair_scheduling ? core::Scheduling::Drr : core::Scheduling::Fifo;
        cfg.fair_lag = sc.fair_lag;
        cfg.chunk_follow = sc.chunk_follow;
        for (std::uint32_t i = 0; i < egress + ingress; ++i) cfg.ports.push_back(port_config(i, egress_gbps, i < egress));
        for (std::uint32_t c = 0; c < sc.clusters; ++c) {
            cfg.static_fdb.push_back({learner_mac(c), cfg.ports[dst_port(c)].name});
            core::ClusterConfig cc;
            cc.id = static_cast<std::uint16_t>(c);
            cc.aggregation = sc.aggregation;
            cc.version_tolerance = sc.version_tolerance;
            for (std::uint32_t i = 0; i < sc.workers_in(c); ++i) cc.member_ips.push_back(worker_ip(sc.first_worker(c) + i));
            cfg.clusters.push_back(std::move(cc));
        }
        auto sw = std::make_unique<SimSwitch>();
        sw->io.pool = &pool;
        sw->io.sink = this;
        sw->io.sw = static_cast<std::uint32_t>(switches.size());
        sw->hops_from_workers = hops;
        sw->pipeline = std::make_unique<core::Pipeline<SimIo>>(cfg, 1'000'000'000ull, sw->io, core::PipelineOptions{.poll_mode = false});
        switches.push_back(std::move(sw));
        return static_cast<std::uint32_t>(switches.size() - 1);
    }

    std::uint32_t add_link(HopLevel level, double gbps, std::uint32_t sw, std::uint16_t sw_port, std::uint32_t to_sw,
                           std::uint16_t to_port) {
        Link l;
        if (sw == kNoLink) {
            // A worker's NIC: a plain FIFO (the sender already merged what waits for credit).
            core::QueueConfig qc;
            qc.capacity_packets = sc.host_capacity_packets;
            qc.capacity_bytes = std::uint64_t{sc.host_capacity_packets} * frame_capacity;
            qc.aggregation = false;
            qc.mark_depth_packets = 0;
            l.host_queue = std::make_unique<core::AggregatingQueue>(qc);
        } else {
            switches[sw]->egress_links.push_back(static_cast<std::uint32_t>(links.size()));
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
        return static_cast<std::uint32_t>(links.size() - 1);
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
            last = add_switch(learner_ports, sc.learner_gbps, n_workers, 1, learner_port_of);
        } else {
            last = add_switch(learner_ports, sc.learner_gbps, sc.spines, 3, learner_port_of);
            for (std::uint32_t s = 0; s < sc.spines; ++s)
                spine_switch.push_back(add_switch(1, sc.fabric_gbps, sc.leaves, 2, [](std::uint32_t) { return 0u; }));
            std::vector<std::uint32_t> on_leaf(sc.leaves, 0);
            for (std::uint32_t w = 0; w < n_workers; ++w) ++on_leaf[w % sc.leaves];
            const std::uint32_t spines = sc.spines;
            for (std::uint32_t l = 0; l < sc.leaves; ++l)
                leaf_switch.push_back(add_switch(sc.spines, sc.fabric_gbps, on_leaf[l], 1,
                                                 [spines](std::uint32_t c) { return c % spines; }));
        }
        for (std::uint32_t p = 0; p < learner_ports; ++p)
            add_link(HopLevel::LearnerPort, sc.learner_gbps, last, static_cast<std::uint16_t>(p), kNoLink, 0);
        if (leaf_spine) {
            for (std::uint32_t s = 0; s < sc.spines; ++s) {
                add_link(HopLevel::SpineDown, sc.fabric_gbps, spine_switch[s], 0, last,
                         static_cast<std::uint16_t>(learner_ports + s));
                for (std::uint32_t l = 0; l < sc.leaves; ++l)
                    add_link(HopLevel::LeafUplink, sc.fabric_gbps, leaf_switch[l], static_cast<std::uint16_t>(s),
                             spine_switch[s], static_cast<std::uint16_t>(1 + l));
            }
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
            if (sc.window_control) {
                cfg.w_init = sc.w_init;
                cfg.w_min = sc.w_min;
                cfg.w_max = sc.w_max;
                cfg.merge_aware = sc.merge_aware;
                cfg.merge_floor = sc.merge_floor;
                cfg.credit_timeout_ns = to_ns(sc.credit_timeout_us * 1e3);
            } else {
                // No window: every pending chunk goes out at once, whatever the credits say (a window
                // of K would stall a worker whose unit the planner gave to another after a merge).
                cfg.w_init = cfg.w_min = cfg.w_max = 1e9;
                cfg.credit_timeout_ns = 0;
            }
            wk.sender = std::make_unique<transport::CreditSender>(cfg);
            wk.ep.src_mac = {0x02, 0x00, static_cast<std::uint8_t>(w >> 24), static_cast<std::uint8_t>(w >> 16),
                             static_cast<std::uint8_t>(w >> 8), static_cast<std::uint8_t>(w)};
            wk.ep.dst_mac = learner_mac(cluster_of_worker);
            wk.ep.src_ip = worker_ip(w);
            wk.ep.dst_ip = 0x0B000000u | cluster_of_worker;
            wk.ep.src_port = proto::kDefaultUdpPort;
            wk.ep.dst_port = proto::kDefaultUdpPort;
            wk.ep.ecn = 1;  // ECT(1): the queues may set CE
            if (leaf_spine) {
                const std::uint32_t leaf = w % sc.leaves;
                worker_nic[w] = add_link(HopLevel::HostNic, sc.host_gbps, kNoLink, 0, leaf_switch[leaf],
                                         static_cast<std::uint16_t>(next_leaf_port[leaf]++));
            } else {
                worker_nic[w] = add_link(HopLevel::HostNic, sc.host_gbps, kNoLink, 0, last,
                                         static_cast<std::uint16_t>(learner_ports + w));
            }
        }
        for (std::uint32_t c = 0; c < sc.clusters; ++c) {
            auto L = std::make_unique<Learner>(sample_ns);
            std::vector<std::uint32_t> ids(sc.workers_in(c));
            for (std::uint32_t i = 0; i < sc.workers_in(c); ++i) ids[i] = sc.first_worker(c) + i;
            L->reassembler = std::make_unique<transport::Reassembler>(layout, static_cast<std::uint16_t>(c));
            L->planner = std::make_unique<transport::CreditPlanner>(static_cast<std::uint16_t>(c), ids);
            L->grants.resize(L->planner->max_grants());
            L->target.assign(layout.model_elems, 0.0f);
            L->workers = sc.workers_in(c);
            learners.push_back(std::move(L));
        }
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
        if (link.learner_facing) {
            const std::uint16_t c = be::load16(p->frame + frame::kUdpPayloadOffset + proto::off::kClusterId);
            if (c < learners.size()) learners[c]->bottleneck_bytes += d.frame_len;
        }
        const std::uint64_t tx = serialization_ns(d.frame_len, link.rate_bps);
        schedule_simple(now + tx, EventType::TxDone, link_id);
        Event e;
        e.t = now + tx + link.prop_ns;
        e.type = EventType::Arrive;
        e.index = link_id;
        e.packet = p;
        schedule(e);
    }

    // A worker's NIC takes a frame from its sender.
    void enqueue_at_nic(std::uint32_t link_id, Packet* p) {
        Link& link = links[link_id];
        core::Arrival a;
        a.handle = p;
        a.frame = p->frame;
        a.frame_len = p->len;
        a.contributions = proto::inplace::contrib_count(p->frame + frame::kUdpPayloadOffset);
        ++sum.packets_forwarded;
        const core::EnqueueResult r = link.host_queue->enqueue(a, now);
        if (r.status != core::EnqueueStatus::Queued) {
            host_drop_contributions += a.contributions;
            pool.free(p);
        }
        if (!link.busy) start_tx(link_id);
    }

    // A frame reaches a switch port: the switch's pipeline decides, then every idle egress link of
    // that switch starts sending.
    void receive_at_switch(std::uint32_t sw_id, std::uint16_t port, Packet* p) {
        SimSwitch& sw = *switches[sw_id];
        ++sum.packets_forwarded;
        sw.pipeline->receive_burst(sw.rx, port, &p, 1, now);
        for (std::uint32_t l : sw.egress_links)
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

    void try_send(std::uint32_t w) {
        Worker& wk = workers[w];
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
            p->len = static_cast<std::uint32_t>(frame::build_udp_frame(wk.ep, payload, buf, false));
            enqueue_at_nic(worker_nic[w], p);
        }
    }

    void on_compute(std::uint32_t w) {
        Worker& wk = workers[w];
        wk.sender->on_timeout(now);
        wk.sender->offer_update(wk.sender->learner_version(), now, gradients[std::size_t{wk.cluster} * 4 + w % 4]);
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
        if (link.to_sw == kNoLink) {
            deliver(p);
            return;
        }
        receive_at_switch(link.to_sw, link.to_port, p);
    }

    void deliver(Packet* p) {
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
        // Exact sums: the payload must be contrib_count times the pattern, bit for bit.
        std::memcpy(scratch_payload.data(), m.payload.data(), std::min(m.payload.size(), scratch_payload.size() * sizeof(float)));
        if (pattern::verify(scratch_payload.data(), m.hdr.elem_count, m.hdr.cluster_id, m.hdr.chunk_index,
                            m.hdr.contrib_count) != pattern::Check::Ok)
            ++sum.verify_failures;
        if (L.reassembler->apply(m, L.target) == transport::ApplyResult::Ok) {
            L.contributions += m.hdr.contrib_count;
            ++L.chunks;
            const std::uint32_t stale = L.version >= m.hdr.model_version ? L.version - m.hdr.model_version : 0;
            L.staleness_sum += stale;
            L.staleness_max = std::max(L.staleness_max, stale);
            if (L.reassembler->complete()) {
                ++L.version;
                L.reassembler->reset();
                std::fill(L.target.begin(), L.target.end(), 0.0f);
            }
        } else {
            ++sum.learner_rejects;
            sum.contributions_dropped += m.hdr.contrib_count;
        }
        if (now <= duration_ns) L.aom.on_receive(now, m.hdr.ts_latest_ns);
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
    }

    void on_sample() {
        const double t_ms = static_cast<double>(now) / 1e6;
        const double interval_s = static_cast<double>(sample_ns) / 1e9;
        for (std::uint32_t c = 0; c < learners.size(); ++c) {
            Learner& L = *learners[c];
            if (L.aom.started())
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
        for (int h = 0; h < kHopLevels; ++h) series.push_back({t_ms, "depth_max", static_cast<std::uint32_t>(h), static_cast<double>(depth_max[h])});
        double wsum = 0;
        for (const Worker& w : workers) wsum += w.sender->window();
        series.push_back({t_ms, "window_mean", 0, wsum / static_cast<double>(workers.size())});
        if (now + sample_ns <= duration_ns) schedule_simple(now + sample_ns, EventType::Sample, 0);
    }

    Summary run() {
        const auto wall0 = std::chrono::steady_clock::now();
        for (std::uint32_t w = 0; w < workers.size(); ++w) {
            const std::uint64_t start = sc.start_together ? 0 : to_ns(uniform01() * static_cast<double>(compute_ns_mean));
            if (start < duration_ns) schedule_simple(start, EventType::Compute, w);
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
                    if (sc.window_control) workers[e.index].sender->on_feedback(feedback_bodies[e.index2], now);
                    free_feedback.push_back(e.index2);
                    break;
                case EventType::Sample: on_sample(); break;
            }
        }
        const auto wall1 = std::chrono::steady_clock::now();
        sum.wall_s = std::chrono::duration<double>(wall1 - wall0).count();
        summarize();
        return sum;
    }

    void summarize() {
        Summary& s = sum;
        s.arm = arm_name(sc);
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
        double jain_num = 0, jain_den = 0, stale_sum = 0;
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
            s.contributions_applied += L.contributions;
            s.aom_mean_us += c.aom_mean_us / static_cast<double>(learners.size());
            s.aom_peak_us = std::max(s.aom_peak_us, c.aom_peak_us);
            s.staleness_max = std::max(s.staleness_max, c.staleness_max);
            stale_sum += L.staleness_sum;
            chunk_total += L.chunks;
            const double x = static_cast<double>(L.contributions) / L.workers;
            jain_num += x;
            jain_den += x * x;
            s.per_cluster.push_back(c);
        }
        s.staleness_mean = chunk_total ? stale_sum / static_cast<double>(chunk_total) : 0;
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
    }
};

Simulator::Simulator(const Scenario& s) : impl_(std::make_unique<Impl>(s)) {}
Simulator::~Simulator() = default;
Summary Simulator::run() { return impl_->run(); }
const std::vector<SeriesRow>& Simulator::series() const noexcept { return impl_->series; }

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
    row += fmt::format(",{:.3f},{},{:.3f},{:.0f}\n", r.sim_end_ms, r.events, r.wall_s, r.packets_per_wall_s);
    return row;
}

std::string cluster_csv(const std::string& label, const Summary& r) {
    std::string out =
        "label,cluster,workers,aom_mean_us,aom_peak_us,staleness_mean,staleness_max,chunks_applied,"
        "contributions_applied,bottleneck_bytes,bottleneck_share,learner_version\n";
    for (std::size_t c = 0; c < r.per_cluster.size(); ++c) {
        const ClusterSummary& x = r.per_cluster[c];
        out += fmt::format("{},{},{},{:.3f},{:.3f},{:.4f},{},{},{},{},{:.6f},{}\n", label, c, x.workers, x.aom_mean_us,
                           x.aom_peak_us, x.staleness_mean, x.staleness_max, x.chunks_applied, x.contributions_applied,
                           x.bottleneck_bytes, x.bottleneck_share, x.learner_version);
    }
    return out;
}

std::string series_csv(const std::string& label, const std::vector<SeriesRow>& rows) {
    std::string out = "label,t_ms,metric,key,value\n";
    for (const SeriesRow& r : rows) out += fmt::format("{},{:.4f},{},{},{:.4f}\n", label, r.t_ms, r.metric, r.key, r.value);
    return out;
}

}  // namespace shesha::sim

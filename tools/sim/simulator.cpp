// shesha-sim engine (see simulator.h). One event heap ordered by (time, insertion sequence), a
// pooled packet store grown in blocks (never per packet), and per-port serialization.
#include "simulator.h"
#include "big_endian.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <queue>

#include <fmt/format.h>

#include "aggregating_queue.h"
#include "aom_tracker.h"
#include "feedback_limiter.h"
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
constexpr std::size_t kMaxRouteLen = 4;
constexpr std::uint32_t kFeedbackLimiterSlots = 4096;
constexpr double kMarkEwmaGain = 1.0 / 16;


struct Packet {
    std::uint8_t* frame = nullptr;
    std::uint32_t len = 0;
    std::uint32_t route = 0;  // index of the route (the first contributor's worker)
    std::uint8_t hop = 0;     // index into the route of the port it is at / heading to
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

struct Port {
    std::unique_ptr<core::AggregatingQueue> queue;
    std::unique_ptr<core::FeedbackLimiter> limiter;  // switch ports only
    HopLevel level = HopLevel::HostNic;
    std::uint64_t rate_bps = 0;
    std::uint64_t prop_ns = 0;
    std::uint8_t hop_index = 0;  // position in the routes that use it
    bool busy = false;
    bool learner_facing = false;
    double mark_ewma = 0;  // recent fraction of marked arrivals, for FEEDBACK's mark_permille
};

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
    tools::AomTracker aom;
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

}  // namespace

struct Simulator::Impl {
    Scenario sc;
    std::uint64_t duration_ns;
    std::uint64_t compute_ns_mean;
    std::uint64_t sample_ns;
    std::uint64_t now = 0;
    std::uint64_t next_seq = 0;
    std::uint64_t rng_state;

    std::priority_queue<Event, std::vector<Event>, Later> events;
    std::vector<Port> ports;
    std::vector<std::array<std::uint32_t, kMaxRouteLen>> routes;  // per worker: port ids
    std::uint8_t route_len = 0;
    std::vector<Worker> workers;
    std::vector<std::unique_ptr<Learner>> learners;

    // Packet pool: blocks of kPoolBlock packets and their frame buffers, a free list of pointers.
    std::size_t frame_capacity;
    std::vector<std::unique_ptr<Packet[]>> packet_blocks;
    std::vector<std::unique_ptr<std::uint8_t[]>> buffer_blocks;
    std::vector<Packet*> free_packets;
    std::uint64_t pool_size = 0;

    // A worker's update is pattern::fill(cluster, chunk, worker), which depends on the worker only
    // through its weight 1 + w % 4: filled once per (cluster, weight) and offered from here.
    std::vector<std::vector<float>> gradients;  // [cluster * 4 + w % 4]
    std::vector<proto::FeedbackBody> feedback_bodies;  // bodies of scheduled FEEDBACK events
    std::vector<std::uint32_t> free_feedback;
    std::vector<float> scratch_payload;   // an aligned copy of a received payload
    transport::ChunkLayout layout;

    Summary sum;
    std::vector<SeriesRow> series;

    explicit Impl(const Scenario& s)
        : sc(s),
          duration_ns(to_ns(s.duration_ms * 1e6)),
          compute_ns_mean(std::max<std::uint64_t>(1, to_ns(s.compute_us * 1e3))),
          sample_ns(std::max<std::uint64_t>(1, to_ns(s.sample_us * 1e3))),
          rng_state(s.seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {
        layout = *transport::make_layout(s.chunks * s.chunk_elems, s.chunk_elems);
        frame_capacity = (frame::kUdpPayloadOffset + proto::kHeaderSize + s.chunk_elems * sizeof(float) + 63) & ~std::size_t{63};
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
    std::uint32_t add_port(HopLevel level, double gbps, std::uint8_t hop_index, bool switch_port) {
        Port p;
        core::QueueConfig qc;
        if (switch_port) {
            qc.capacity_packets = sc.capacity_packets;
            qc.capacity_bytes = sc.capacity_bytes;
            qc.aggregation = sc.aggregation;
            qc.mark_depth_packets = sc.mark_depth_packets;
            p.limiter = std::make_unique<core::FeedbackLimiter>(kFeedbackLimiterSlots, to_ns(sc.feedback_interval_us * 1e3));
        } else {
            // A worker's NIC: a plain FIFO (the sender already merged what waits for credit).
            qc.capacity_packets = sc.host_capacity_packets;
            qc.capacity_bytes = std::uint64_t{sc.host_capacity_packets} * frame_capacity;
            qc.aggregation = false;
            qc.mark_depth_packets = 0;
        }
        p.queue = std::make_unique<core::AggregatingQueue>(qc);
        p.level = level;
        p.rate_bps = static_cast<std::uint64_t>(std::llround(gbps * 1e9));
        p.prop_ns = to_ns(sc.prop_ns);
        p.hop_index = hop_index;
        ports.push_back(std::move(p));
        return static_cast<std::uint32_t>(ports.size() - 1);
    }

    void build_topology() {
        const std::uint32_t n_workers = sc.clusters * sc.workers_per_cluster;
        const bool leaf_spine = sc.topology == TopologyKind::LeafSpine;
        route_len = leaf_spine ? 4 : 2;
        const std::uint8_t last_hop = static_cast<std::uint8_t>(route_len - 1);

        // Learner-facing ports at the last switch: one per cluster, or one shared by all clusters.
        std::vector<std::uint32_t> learner_port(sc.clusters);
        for (std::uint32_t c = 0; c < sc.clusters; ++c) {
            if (sc.shared_bottleneck && c > 0) {
                learner_port[c] = learner_port[0];
            } else {
                learner_port[c] = add_port(HopLevel::LearnerPort, sc.learner_gbps, last_hop, true);
                ports[learner_port[c]].learner_facing = true;
            }
        }
        // Leaf-spine: leaf l -> spine s uplinks, and spine s -> learner-leaf downlinks.
        std::vector<std::uint32_t> uplink(std::size_t{sc.leaves} * sc.spines);
        std::vector<std::uint32_t> downlink(sc.spines);
        if (leaf_spine) {
            for (std::uint32_t l = 0; l < sc.leaves; ++l)
                for (std::uint32_t s = 0; s < sc.spines; ++s)
                    uplink[std::size_t{l} * sc.spines + s] = add_port(HopLevel::LeafUplink, sc.fabric_gbps, 1, true);
            for (std::uint32_t s = 0; s < sc.spines; ++s) downlink[s] = add_port(HopLevel::SpineDown, sc.fabric_gbps, 2, true);
        }

        workers.resize(n_workers);
        routes.resize(n_workers);
        for (std::uint32_t w = 0; w < n_workers; ++w) {
            const std::uint16_t c = static_cast<std::uint16_t>(w / sc.workers_per_cluster);
            Worker& wk = workers[w];
            wk.cluster = c;
            transport::SenderConfig cfg;
            cfg.cluster_id = c;
            cfg.worker_id = w;
            cfg.model_elems = layout.model_elems;
            cfg.chunk_elems = sc.chunk_elems;
            if (sc.window_control) {
                cfg.w_init = sc.w_init;
                cfg.w_min = sc.w_min;
                cfg.w_max = sc.w_max;
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
            wk.ep.dst_mac = {0x02, 0xFF, 0, 0, static_cast<std::uint8_t>(c >> 8), static_cast<std::uint8_t>(c)};
            wk.ep.src_ip = 0x0A000000u | (w + 1);
            wk.ep.dst_ip = 0x0B000000u | c;
            wk.ep.src_port = proto::kDefaultUdpPort;
            wk.ep.dst_port = proto::kDefaultUdpPort;
            wk.ep.ecn = 1;  // ECT(1): the queues may set CE

            auto& r = routes[w];
            r[0] = add_port(HopLevel::HostNic, sc.host_gbps, 0, false);
            if (leaf_spine) {
                // Workers spread over the leaves (each cluster spans leaves); a cluster's traffic
                // takes one spine (ECMP hashed on the cluster), so it can merge at every hop.
                const std::uint32_t leaf = w % sc.leaves;
                const std::uint32_t spine = c % sc.spines;
                r[1] = uplink[std::size_t{leaf} * sc.spines + spine];
                r[2] = downlink[spine];
                r[3] = learner_port[c];
            } else {
                r[1] = learner_port[c];
            }
        }
        for (std::uint32_t c = 0; c < sc.clusters; ++c) {
            auto L = std::make_unique<Learner>(sample_ns);
            std::vector<std::uint32_t> ids(sc.workers_per_cluster);
            for (std::uint32_t i = 0; i < sc.workers_per_cluster; ++i) ids[i] = c * sc.workers_per_cluster + i;
            L->reassembler = std::make_unique<transport::Reassembler>(layout, static_cast<std::uint16_t>(c));
            L->planner = std::make_unique<transport::CreditPlanner>(static_cast<std::uint16_t>(c), ids);
            L->grants.resize(L->planner->max_grants());
            L->target.assign(layout.model_elems, 0.0f);
            L->workers = sc.workers_per_cluster;
            learners.push_back(std::move(L));
        }
    }

    // ---- packet pool ----
    Packet* alloc_packet() {
        if (free_packets.empty()) {
            if (pool_size + kPoolBlock > sc.pool_max_packets) return nullptr;
            // Rare: grows by a block when the pool's high-water mark rises, never per packet.
            packet_blocks.push_back(std::make_unique<Packet[]>(kPoolBlock));
            buffer_blocks.push_back(std::make_unique<std::uint8_t[]>(kPoolBlock * frame_capacity));
            free_packets.reserve(pool_size + kPoolBlock);
            for (std::uint32_t i = kPoolBlock; i-- > 0;) {
                Packet& p = packet_blocks.back()[i];
                p.frame = buffer_blocks.back().get() + std::size_t{i} * frame_capacity;
                free_packets.push_back(&p);
            }
            pool_size += kPoolBlock;
        }
        Packet* p = free_packets.back();
        free_packets.pop_back();
        return p;
    }
    void free_packet(Packet* p) { free_packets.push_back(p); }

    // ---- data path ----
    std::uint64_t serialization_ns(std::uint32_t frame_len, std::uint64_t rate_bps) const noexcept {
        const std::uint64_t bits = std::uint64_t{frame_len + frame::kWireOverhead} * 8;
        return (bits * 1'000'000'000ull + rate_bps - 1) / rate_bps;
    }

    void start_tx(std::uint32_t port_id) {
        Port& port = ports[port_id];
        core::Departure d;
        if (!port.queue->dequeue(now, d)) {
            port.busy = false;
            return;
        }
        port.busy = true;
        auto* p = static_cast<Packet*>(d.handle);
        if (port.learner_facing) {
            const std::uint16_t c = be::load16(p->frame + frame::kUdpPayloadOffset + proto::off::kClusterId);
            if (c < learners.size()) learners[c]->bottleneck_bytes += d.frame_len;
        }
        const std::uint64_t tx = serialization_ns(d.frame_len, port.rate_bps);
        schedule_simple(now + tx, EventType::TxDone, port_id);
        schedule_simple(now + tx + port.prop_ns, EventType::Arrive, 0, p);
    }

    void drop(Packet* p, std::uint16_t shesha_offset) {
        sum.contributions_dropped += proto::inplace::contrib_count(p->frame + shesha_offset);
        free_packet(p);
    }

    void enqueue_at(std::uint32_t port_id, Packet* p) {
        Port& port = ports[port_id];
        core::Arrival a;
        a.handle = p;
        a.frame = p->frame;
        a.frame_len = p->len;
        proto::Header h;
        bool is_gradient = false;
        const frame::FrameInfo info = frame::classify({p->frame, p->len}, proto::kDefaultUdpPort);
        if (info.kind == frame::FrameKind::Shesha &&
            proto::decode_header({p->frame + info.payload_offset, info.payload_len}, h) == proto::DecodeError::Ok) {
            a.l3_offset = info.l3_offset;
            a.l4_offset = info.l4_offset;
            a.shesha_offset = info.payload_offset;
            is_gradient = h.type == proto::MsgType::Gradient;
            if (is_gradient) a.contributions = h.contrib_count;
            // The switch's classifier: fp32 gradients may merge (the queue knows whether aggregation is on).
            a.mergeable = is_gradient && h.elem_type == proto::ElemType::F32 && port.level != HopLevel::HostNic;
            a.cluster_id = h.cluster_id;
            a.chunk_index = h.chunk_index;
            a.elem_count = h.elem_count;
            a.model_version = h.model_version;
            a.dst_ip = info.dst_ip;
            a.version_tolerance = sc.version_tolerance;
        }
        ++sum.packets_forwarded;
        const core::EnqueueResult r = port.queue->enqueue(a, now);
        port.mark_ewma += kMarkEwmaGain * ((r.marked ? 1.0 : 0.0) - port.mark_ewma);
        if (r.marked && is_gradient && sc.switch_feedback && port.limiter && port.limiter->allow(info.src_ip, now))
            send_feedback(port_id, h.worker_id);
        if (r.status == core::EnqueueStatus::Merged) {
            free_packet(p);
        } else if (r.status == core::EnqueueStatus::DroppedFull) {
            drop(p, a.shesha_offset != 0 ? a.shesha_offset : static_cast<std::uint16_t>(frame::kUdpPayloadOffset));
        }
        if (!port.busy) start_tx(port_id);
    }

    void send_feedback(std::uint32_t port_id, std::uint32_t worker) {
        if (worker >= workers.size()) return;
        const Port& port = ports[port_id];
        const core::QueueStats& st = port.queue->stats();
        std::uint32_t slot;
        if (free_feedback.empty()) {
            slot = static_cast<std::uint32_t>(feedback_bodies.size());
            feedback_bodies.emplace_back();  // grows to the peak number of FEEDBACKs in flight, then reused
        } else {
            slot = free_feedback.back();
            free_feedback.pop_back();
        }
        proto::FeedbackBody& fb = feedback_bodies[slot];
        fb = proto::FeedbackBody{};
        Event e;
        e.type = EventType::Feedback;
        e.index = worker;
        e.index2 = slot;
        fb.port_id = static_cast<std::uint16_t>(port_id);
        fb.queue_capacity = static_cast<std::uint16_t>(std::min<std::uint32_t>(port.queue->capacity(), 0xFFFF));
        fb.queue_depth = static_cast<std::uint16_t>(std::min<std::uint32_t>(port.queue->depth(), 0xFFFF));
        fb.mark_permille = static_cast<std::uint16_t>(std::lround(port.mark_ewma * 1000));
        fb.queue_bytes = static_cast<std::uint32_t>(std::min<std::uint64_t>(port.queue->depth_bytes(), UINT32_MAX));
        fb.merge_permille = static_cast<std::uint16_t>(
            st.mergeable_arrivals ? st.merged * 1000 / st.mergeable_arrivals : 0);
        fb.drops = static_cast<std::uint32_t>(st.dropped);
        // Uncongested return path: one propagation delay per link back to the worker.
        e.t = now + std::uint64_t{port.hop_index} * port.prop_ns;
        schedule(e);
        ++sum.feedback_sent;
    }

    void try_send(std::uint32_t w) {
        Worker& wk = workers[w];
        while (auto chunk = wk.sender->next_to_send(now)) {
            Packet* p = alloc_packet();
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
            p->route = w;
            p->hop = 0;
            enqueue_at(routes[w][0], p);
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

    void on_arrive(Packet* p) {
        ++p->hop;
        if (p->hop < route_len) {
            enqueue_at(routes[p->route][p->hop], p);
            return;
        }
        deliver(p);
    }

    void deliver(Packet* p) {
        proto::Message m;
        const frame::FrameInfo info = frame::classify({p->frame, p->len}, proto::kDefaultUdpPort);
        if (info.kind != frame::FrameKind::Shesha ||
            proto::decode({p->frame + info.payload_offset, info.payload_len}, m) != proto::DecodeError::Ok ||
            m.hdr.cluster_id >= learners.size()) {
            ++sum.learner_rejects;
            drop(p, static_cast<std::uint16_t>(frame::kUdpPayloadOffset));
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
        const std::uint64_t back = std::uint64_t{route_len} * to_ns(sc.prop_ns);
        for (std::size_t i = 0; i < n; ++i) {
            Event e;
            e.t = now + back;
            e.type = EventType::Credit;
            e.index = L.grants[i].worker_id;
            e.flags = L.grants[i].flags;
            e.credit = L.grants[i].body;
            schedule(e);
        }
        free_packet(p);
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
        for (const Port& p : ports) {
            auto& m = depth_max[static_cast<int>(p.level)];
            m = std::max<std::uint64_t>(m, p.queue->depth());
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
                case EventType::Arrive: on_arrive(e.packet); break;
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
        s.pool_packets = pool_size;
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
        for (const Port& p : ports) {
            const core::QueueStats& q = p.queue->stats();
            HopSummary& h = s.hops[static_cast<int>(p.level)];
            ++h.ports;
            h.arrivals += q.depth_samples;
            h.departures += q.dequeued;
            h.merges += q.merged;
            h.bytes_saved += q.bytes_saved;
            h.drops += q.dropped;
            h.marks += q.marked;
            h.depth_max = std::max(h.depth_max, q.depth_max);
            h.sojourn_max_us = std::max(h.sojourn_max_us, static_cast<double>(q.sojourn_max_ticks) / 1e3);
            depth_sum[static_cast<int>(p.level)] += static_cast<double>(q.depth_sum);
            depth_samples[static_cast<int>(p.level)] += static_cast<double>(q.depth_samples);
            sojourn_sum[static_cast<int>(p.level)] += static_cast<double>(q.sojourn_sum_ticks);
            s.merges += q.merged;
            s.bytes_saved += q.bytes_saved;
            s.drops += q.dropped;
            if (p.limiter) s.feedback_suppressed += p.limiter->suppressed();
        }
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
        "staleness_mean,staleness_max,jain_fairness";
    for (int i = 0; i < kHopLevels; ++i) {
        const std::string n = to_string(static_cast<HopLevel>(i));
        h += fmt::format(",{0}_depth_mean,{0}_depth_max,{0}_sojourn_mean_us,{0}_sojourn_max_us,{0}_merges,{0}_drops,{0}_marks", n);
    }
    h += ",sim_end_ms,events,wall_s,packets_per_wall_s\n";
    return h;
}

std::string summary_csv_row(const std::string& label, const Scenario& s, const Summary& r) {
    std::string row = fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.3f},{},{},{},{},{},{},{},{},{:.3f},{:.3f},{:.4f},{},{:.6f}",
        label, r.arm, s.topology == TopologyKind::Tor ? "tor" : "leaf_spine", s.shared_bottleneck ? 1 : 0, r.clusters,
        r.workers, s.host_gbps, s.learner_gbps, s.chunks, s.chunk_elems, s.compute_us, s.duration_ms, s.seed, r.updates,
        r.chunks_sent, r.contributions_sent, r.contributions_applied, r.contributions_dropped, r.sender_merges,
        r.credit_timeouts, r.feedback_sent, r.feedback_suppressed, r.window_mean, r.packets_forwarded, r.merges,
        r.bytes_saved, r.drops, r.pool_exhausted, r.pool_packets, r.verify_failures, r.learner_rejects, r.aom_mean_us,
        r.aom_peak_us, r.staleness_mean, r.staleness_max, r.jain_fairness);
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

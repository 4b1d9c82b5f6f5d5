// `shesha-bench queue`: AggregatingQueue packets/s against a plain pointer ring doing the same
// enqueue/dequeue pattern.
//
// One round = a burst of kBurst arrivals enqueued, then the queue drained. An arrival with key
// i % keys either takes a slot or merges into the waiting packet with its key, so a burst has
// kBurst - keys merges: keys = kBurst * (1 - merge fraction). Throughput counts arrivals (each one
// an enqueue and then a dequeue or a merge of 1 KB into a waiting packet).
#include <fmt/core.h>

#include <array>
#include <cmath>

#include "aggregating_queue.h"
#include "bench_frames.h"
#include "bench_main.h"
#include "bench_util.h"
#include "protocol.h"

namespace shesha::bench {
namespace {

constexpr std::uint32_t kBurst = 40;      // divisible into 40, 20 and 4 keys for fractions 0, .5, .9
constexpr std::uint16_t kElems = 256;     // 1 KB gradients
constexpr std::size_t kFrameCap = 1536;

// The reference: the cheapest FIFO there is, a power-of-two std::array ring of pointers. Its
// operations are kept out of line, like AggregatingQueue's (which sit behind a pimpl in another
// translation unit), so both pay one call per operation.
class PlainRing {
public:
    __attribute__((noinline)) bool enqueue(void* p) noexcept {
        if (tail_ - head_ == slots_.size()) return false;
        slots_[tail_++ & (slots_.size() - 1)] = p;
        return true;
    }
    __attribute__((noinline)) bool dequeue(void*& p) noexcept {
        if (head_ == tail_) return false;
        p = slots_[head_++ & (slots_.size() - 1)];
        return true;
    }

private:
    std::array<void*, 1024> slots_{};
    std::uint64_t head_ = 0;
    std::uint64_t tail_ = 0;
};

struct Workload {
    std::vector<std::array<std::uint8_t, kFrameCap>> frames;
    std::vector<core::Arrival> arrivals;
};

Workload make_workload(std::uint32_t keys) {
    Workload w;
    w.frames.resize(kBurst);
    w.arrivals.resize(kBurst);
    for (std::uint32_t i = 0; i < kBurst; ++i) {
        GradientFrameSpec spec;
        spec.worker_id = i;
        spec.ep = bench_endpoints(i);
        spec.chunk_index = static_cast<std::uint16_t>(i % keys);
        spec.chunk_count = static_cast<std::uint16_t>(keys);
        spec.elem_count = kElems;
        const std::size_t len = build_gradient_frame(spec, w.frames[i]);
        core::Arrival& a = w.arrivals[i];
        a.handle = &w.frames[i];
        a.frame = w.frames[i].data();
        a.frame_len = static_cast<std::uint32_t>(len);
        a.contributions = 1;
        a.mergeable = true;
        a.l3_offset = frame::kEthHeaderSize;
        a.l4_offset = frame::kEthHeaderSize + frame::kIpv4MinHeaderSize;
        a.shesha_offset = static_cast<std::uint16_t>(frame::kUdpPayloadOffset);
        a.cluster_id = spec.cluster_id;
        a.chunk_index = spec.chunk_index;
        a.elem_count = kElems;
        a.model_version = 0;
        a.dst_ip = spec.ep.dst_ip;
    }
    return w;
}

// Per-arrival harness work done identically for the queue and the reference: merges raise the
// target's contrib_count, so every frame is reset to a single contribution before it is reused
// (otherwise merges would be refused after 65535 rounds).
inline void reset_contributions(const core::Arrival& a) noexcept {
    proto::inplace::set_contrib_count(a.frame + a.shesha_offset, 1);
}

// Rounds per repetition so that one repetition lasts about rep_seconds.
template <class Round>
std::uint64_t calibrate(Round& round, double rep_seconds) {
    std::uint64_t rounds = 64;
    for (;;) {
        const auto t0 = std::chrono::steady_clock::now();
        for (std::uint64_t r = 0; r < rounds; ++r) round();
        const double s = seconds_since(t0);
        if (s >= rep_seconds / 4) return static_cast<std::uint64_t>(static_cast<double>(rounds) * rep_seconds / s) + 1;
        rounds *= 4;
    }
}

template <class Round>
double time_mpps(Round& round, std::uint64_t rounds) {
    const auto t0 = std::chrono::steady_clock::now();
    for (std::uint64_t r = 0; r < rounds; ++r) round();
    return static_cast<double>(rounds * kBurst) / seconds_since(t0) / 1e6;
}

struct Measured {
    double queue_mpps = 0, ring_mpps = 0, ratio = 0;
    double merge_fraction = 0;
    std::uint64_t checksum = 0;
};

// The queue and the reference ring run the same arrivals; their repetitions alternate so load from
// other processes hits both alike, and the ratio is the median of per-repetition ratios.
Measured measure_case(bool aggregation, std::uint32_t keys, std::uint32_t capacity, int reps, double rep_seconds) {
    Workload wq = make_workload(keys), wr = make_workload(keys);
    core::QueueConfig cfg;
    cfg.capacity_packets = capacity;
    cfg.aggregation = aggregation;
    core::AggregatingQueue q(cfg);
    PlainRing ring;
    std::uint64_t now = 0, checksum = 0;
    auto queue_round = [&] {
        for (const core::Arrival& a : wq.arrivals) {
            reset_contributions(a);
            const core::EnqueueResult r = q.enqueue(a, ++now);
            checksum += static_cast<std::uint64_t>(r.status);
        }
        core::Departure d;
        while (q.dequeue(++now, d)) checksum += d.frame_len;
    };
    auto ring_round = [&] {
        for (const core::Arrival& a : wr.arrivals) {
            reset_contributions(a);
            checksum += ring.enqueue(a.handle);
        }
        void* p;
        while (ring.dequeue(p)) checksum += reinterpret_cast<std::uintptr_t>(p) & 0xFF;
    };
    const std::uint64_t queue_rounds = calibrate(queue_round, rep_seconds);
    const std::uint64_t ring_rounds = calibrate(ring_round, rep_seconds);
    std::vector<double> qm, rm, ratio;
    for (int i = 0; i < reps; ++i) {
        qm.push_back(time_mpps(queue_round, queue_rounds));
        rm.push_back(time_mpps(ring_round, ring_rounds));
        ratio.push_back(qm.back() / rm.back());
    }
    Measured m;
    m.queue_mpps = median(qm);
    m.ring_mpps = median(rm);
    m.ratio = median(ratio);
    const core::QueueStats& s = q.stats();
    m.merge_fraction = static_cast<double>(s.merged) / static_cast<double>(s.merged + s.enqueued);
    m.checksum = checksum;
    if (s.dropped != 0 || s.merge_refused != 0) m.queue_mpps = std::nan("");  // the workload is broken
    return m;
}

}  // namespace

Table run_queue_bench(const RunOptions& opt) {
    const int reps = opt.quick ? 3 : 15;
    const double rep_seconds = opt.quick ? 0.003 : 0.03;
    Table t("queue: AggregatingQueue vs plain pointer ring (1 KB gradients, bursts of 40)",
            {"workload", "merge frac", "queue Mpps", "ring Mpps", "queue/ring"});
    std::uint64_t checksum = 0;

    struct Case {
        std::string name;
        bool aggregation;
        double fraction;
        std::uint32_t capacity = 1024;
    };
    const Case cases[] = {
        {"fifo, aggregation off", false, 0.0},
        {"aggregating, 0% merge", true, 0.0},
        {"aggregating, 50% merge", true, 0.5},
        {"aggregating, 90% merge", true, 0.9},
        // Same as the first rows with a queue whose ring and index fit in L1 easily: shows how much
        // of the cost is the cache footprint of walking a 1024-slot ring.
        {"fifo, aggregation off, 64 slots", false, 0.0, 64},
        {"aggregating, 50% merge, 64 slots", true, 0.5, 64},
    };
    for (const Case& c : cases) {
        const auto keys = static_cast<std::uint32_t>(std::lround(kBurst * (1.0 - c.fraction)));
        const Measured m = measure_case(c.aggregation, keys, c.capacity, reps, rep_seconds);
        checksum += m.checksum;
        t.add_row({c.name, m.merge_fraction, m.queue_mpps, m.ring_mpps, m.ratio});
    }
    t.add_note(fmt::format("median of {} interleaved repetitions of ~{} ms (ratio paired per repetition); Mpps = arrivals per second (enqueue, then dequeue "
                           "or merge); merge frac measured from queue stats",
                           reps, rep_seconds * 1e3));
    t.add_note(fmt::format("checksum {}", checksum));
    return t;
}

}  // namespace shesha::bench

// A host's send queue toward its link, as shesha-sim models it (docs/simulation.md): the socket
// buffer and the qdisc under one capacity in packets, a datagram that finds it full lost (the
// senders use MSG_DONTWAIT). Two kinds:
//   - one band: a plain FIFO (a worker's NIC; the learner host's before credit priority);
//   - three bands: Linux's pfifo_fast (and prio's default priomap), the learner host's. Each
//     datagram's band comes from its IPv4 TOS byte as the kernel derives it: the priority is
//     rt_tos2priority(tos) (ip_tos2prio[(tos & 0x1E) >> 1], net/ipv4/route.c), the band
//     prio2band[priority] (sch_generic.c). TOS 0x10 (IPTOS_LOWDELAY: the learner's CREDIT with
//     learner.credit_priority) is band 0; TOS 0 and the ECN-only values are band 1. Band 0 is served
//     before band 1 before band 2, each band FIFO, and the capacity is shared by the bands (the
//     socket's send buffer holds both; pfifo_fast's own rings are per band and larger than what
//     the buffer lets through in these runs).
// With every datagram in one band the three-band queue is that band's FIFO exactly: the same
// departures, drops and statistics as the one-band queue (shesha-sim's runs with credit priority
// off are the runs from before it, to the byte).
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "aggregating_queue.h"
#include "frame.h"

namespace shesha::sim {

class HostQueue {
public:
    static constexpr int kMaxBands = 3;

    // bands: 1 (FIFO) or 3 (pfifo_fast); capacity for all bands together.
    HostQueue(std::uint32_t capacity_packets, std::uint64_t capacity_bytes, int bands) : bands_(bands == 3 ? 3 : 1) {
        core::QueueConfig qc;
        qc.capacity_packets = capacity_packets;
        qc.capacity_bytes = capacity_bytes;
        qc.aggregation = false;
        qc.mark_depth_packets = 0;
        capacity_bytes_ = capacity_bytes;
        for (int b = 0; b < bands_; ++b) band_[b] = std::make_unique<core::AggregatingQueue>(qc);
    }

    // pfifo_fast's band for an IPv4 TOS byte (rt_tos2priority, then the default priomap).
    static int tos_band(std::uint8_t tos) noexcept {
        // ip_tos2prio: BESTEFFORT 0, FILLER 1, BULK 2, INTERACTIVE_BULK 4, INTERACTIVE 6 (TC_PRIO_*).
        static constexpr std::array<std::uint8_t, 16> kTos2Prio = {0, 0, 0, 0, 2, 2, 2, 2, 6, 6, 6, 6, 4, 4, 4, 4};
        static constexpr std::array<std::uint8_t, 16> kPrio2Band = {1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
        return kPrio2Band[kTos2Prio[(tos & 0x1E) >> 1] & 15];
    }
    // The TOS byte of an untagged Ethernet/IPv4 frame (0 for anything else).
    static std::uint8_t frame_tos(const std::uint8_t* frame, std::uint32_t len) noexcept {
        if (len < frame::kEthHeaderSize + 2 || frame[12] != 0x08 || frame[13] != 0x00) return 0;
        return frame[frame::kEthHeaderSize + 1];
    }

    core::EnqueueResult enqueue(const core::Arrival& a, std::uint64_t now) noexcept {
        if (bands_ == 1) return band_[0]->enqueue(a, now);
        // The depth every arrival finds, and the tail drop, over all bands together (one band's
        // own would see only its part).
        const std::uint32_t d = depth();
        stats_.depth_sum += d;
        ++stats_.depth_samples;
        if (d > stats_.depth_max) stats_.depth_max = d;
        if (d >= band_[0]->capacity() || depth_bytes() + a.frame_len > capacity_bytes_) {
            ++stats_.dropped;
            stats_.dropped_bytes += a.frame_len;
            return {core::EnqueueStatus::DroppedFull, false};
        }
        return band_[tos_band(frame_tos(a.frame, a.frame_len))]->enqueue(a, now);
    }

    // The head of the first band with anything waiting.
    bool dequeue(std::uint64_t now, core::Departure& out) noexcept {
        for (int b = 0; b < bands_; ++b)
            if (band_[b]->depth() != 0) return band_[b]->dequeue(now, out);
        return false;
    }

    std::uint32_t depth() const noexcept {
        std::uint32_t d = 0;
        for (int b = 0; b < bands_; ++b) d += band_[b]->depth();
        return d;
    }
    std::uint64_t depth_bytes() const noexcept {
        std::uint64_t d = 0;
        for (int b = 0; b < bands_; ++b) d += band_[b]->depth_bytes();
        return d;
    }
    // Whether a datagram of frame_len bytes would be taken now (the socket would not say EAGAIN).
    bool has_room(std::uint32_t frame_len) const noexcept {
        return depth() < band_[0]->capacity() && depth_bytes() + frame_len <= capacity_bytes_;
    }
    // Writable as poll(2) reports it for a UDP socket (sock_writeable): less than half the buffer in
    // use. The learners send unicast MODEL only then, so that CREDIT always finds the other half.
    bool writable() const noexcept { return 2 * std::uint64_t{depth()} < band_[0]->capacity(); }
    std::uint32_t depth_of_band(int b) const noexcept { return b < bands_ ? band_[b]->depth() : 0; }
    int bands() const noexcept { return bands_; }

    // Enqueued, dequeued and sojourn from the bands; arrivals, depth seen and drops over the whole.
    core::QueueStats stats() const noexcept {
        if (bands_ == 1) return band_[0]->stats();
        core::QueueStats s;
        for (int b = 0; b < bands_; ++b) s += band_[b]->stats();
        s.depth_sum = stats_.depth_sum;
        s.depth_samples = stats_.depth_samples;
        s.depth_max = stats_.depth_max;
        s.dropped += stats_.dropped;
        s.dropped_bytes += stats_.dropped_bytes;
        return s;
    }

private:
    int bands_;
    std::uint64_t capacity_bytes_ = 0;
    std::array<std::unique_ptr<core::AggregatingQueue>, kMaxBands> band_;
    core::QueueStats stats_;  // three bands: what the whole saw (arrivals, depth, drops)
};

}  // namespace shesha::sim

// Stage 5 of the pipeline, FEEDBACK: the switch's answer to a GRADIENT that its egress queue
// marked.
//
// Contract: for a marked GRADIENT (its frame and meta), builds one FEEDBACK frame describing the
// queue it was marked in (its cluster's class under DRR) and hands it to Io::send_now on the
// gradient's ingress port, bypassing every queue. At most one per sender IP per
// feedback_interval_us (FeedbackLimiter); the rest are counted as suppressed. The switch has no
// address of its own, so it answers from the address the gradient was sent to (the learner's IP)
// and the Shesha port: a worker's socket connected to the learner receives it. Owned by the
// forwarding thread.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>

#include "aggregating_queue.h"
#include "big_endian.h"
#include "classify.h"
#include "counters.h"
#include "feedback_limiter.h"
#include "frame.h"
#include "protocol.h"

namespace shesha::core {

inline constexpr std::uint32_t kFeedbackLimiterSlots = 1024;

// The FEEDBACK answering a marked GRADIENT (header `grad`, sent from src_mac/src_ip/src_port to
// the learner at dst_ip): the frame's bytes, ready to send out of the gradient's ingress port.
// Returns the frame length (kFeedbackFrameLen), 0 on a build failure.
inline constexpr std::size_t kFeedbackPayloadLen = proto::kHeaderSize + proto::kFeedbackBodySize;
inline constexpr std::size_t kFeedbackFrameLen = frame::kUdpPayloadOffset + kFeedbackPayloadLen;
std::size_t build_feedback_frame(const proto::Header& grad, const proto::FeedbackBody& body,
                                 const frame::Endpoints& ep, std::span<std::uint8_t> out) noexcept;

// The FEEDBACK body describing an egress queue right after an arrival: depth, capacity, recent mark
// fraction, the backlog's wire time at the shaped rate (0 on an unshaped port), merge ratio, drops.
proto::FeedbackBody feedback_body(std::uint16_t port_index, const AggregatingQueue& q, std::int64_t mark_ewma,
                                  std::uint64_t shaper_rate_bps) noexcept;

// Where a marked GRADIENT was queued, as its FEEDBACK reports it.
struct MarkedAt {
    std::uint16_t port_index;          // the egress port
    const AggregatingQueue& queue;     // the queue (class) it was marked in
    std::int64_t mark_ewma;            // that port's recent mark fraction
    std::uint64_t shaper_rate_bps;     // that port's shaped rate (0: unshaped)
};

class FeedbackStage {
public:
    FeedbackStage(std::uint64_t interval_ticks, std::uint16_t udp_port)
        : limiter_(kFeedbackLimiterSlots, interval_ticks), udp_port_(udp_port) {}

    // `frame` is the gradient's frame, `reply_mac` the source MAC of the port it leaves by.
    template <class Io>
    void send(Io& io, const PacketMeta& meta, const std::uint8_t* frame, const MarkedAt& at,
              const frame::MacAddr& reply_mac, std::uint64_t now, SwitchCounters& counters) noexcept {
        if (!limiter_.allow(meta.src_ip, now)) {
            counters.add(SwitchCounter::FeedbackSuppressed);
            return;
        }
        proto::Header grad;
        if (proto::decode_header({frame + meta.shesha_offset, proto::kHeaderSize}, grad) != proto::DecodeError::Ok) {
            counters.add(SwitchCounter::FeedbackFailed);
            return;
        }
        std::uint8_t* out = nullptr;
        const auto fb = io.alloc(static_cast<std::uint32_t>(kFeedbackFrameLen), &out);
        if (!fb) [[unlikely]] {
            counters.add(SwitchCounter::FeedbackFailed);
            return;
        }
        const proto::FeedbackBody body = feedback_body(at.port_index, at.queue, at.mark_ewma, at.shaper_rate_bps);
        frame::Endpoints ep;
        ep.src_mac = reply_mac;
        std::memcpy(ep.dst_mac.data(), frame + 6, 6);
        ep.src_ip = meta.dst_ip;
        ep.dst_ip = meta.src_ip;
        ep.src_port = udp_port_;
        ep.dst_port = be::load16(frame + meta.l4_offset);  // the gradient's UDP source port
        if (build_feedback_frame(grad, body, ep, {out, kFeedbackFrameLen}) == 0 || !io.send_now(meta.in_port, fb)) {
            io.free(fb);
            counters.add(SwitchCounter::FeedbackFailed);
            return;
        }
        counters.add(SwitchCounter::FeedbackSent);
    }

private:
    FeedbackLimiter limiter_;
    std::uint16_t udp_port_;
};

}  // namespace shesha::core

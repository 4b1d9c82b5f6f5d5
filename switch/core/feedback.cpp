#include "feedback.h"

#include <algorithm>

namespace shesha::core {

namespace {

std::uint16_t clamp16(std::uint64_t v) noexcept { return static_cast<std::uint16_t>(std::min<std::uint64_t>(v, 0xFFFF)); }

}  // namespace

proto::FeedbackBody feedback_body(std::uint16_t port_index, const AggregatingQueue& q, std::int64_t mark_ewma,
                                  std::uint64_t shaper_rate_bps) noexcept {
    const QueueStats& qs = q.stats();
    proto::FeedbackBody body;
    body.port_id = port_index;
    body.queue_capacity = clamp16(q.capacity());
    body.queue_depth = clamp16(q.depth());
    body.mark_permille = clamp16(static_cast<std::uint64_t>(std::max<std::int64_t>(mark_ewma, 0) >> 10));
    body.queue_bytes = static_cast<std::uint32_t>(std::min<std::uint64_t>(q.depth_bytes(), 0xFFFFFFFFu));
    // The triggering packet has just arrived: report the wait it faces, the backlog's wire time at
    // the shaped rate (0 on an unshaped port).
    if (shaper_rate_bps != 0) {
        const std::uint64_t wire_bits = (q.depth_bytes() + std::uint64_t{q.depth()} * frame::kWireOverhead) * 8;
        body.sojourn_us = static_cast<std::uint32_t>(
            std::min<unsigned __int128>(static_cast<unsigned __int128>(wire_bits) * 1'000'000 / shaper_rate_bps, 0xFFFFFFFFu));
    }
    body.merge_permille = qs.mergeable_arrivals ? clamp16(qs.merged * 1000 / qs.mergeable_arrivals) : 0;
    body.drops = static_cast<std::uint32_t>(qs.dropped);
    return body;
}

std::size_t build_feedback_frame(const proto::Header& grad, const proto::FeedbackBody& body,
                                 const frame::Endpoints& ep, std::span<std::uint8_t> out) noexcept {
    if (out.size() < kFeedbackFrameLen) return 0;
    proto::Header h;
    h.type = proto::MsgType::Feedback;
    h.elem_type = proto::ElemType::None;
    h.flags = 0;
    h.cluster_id = grad.cluster_id;
    h.worker_id = grad.worker_id;
    h.model_version = grad.model_version;
    h.seq = grad.seq;
    h.chunk_index = grad.chunk_index;
    h.chunk_count = grad.chunk_count;
    h.elem_count = 0;
    h.contrib_count = 1;
    h.ts_earliest_ns = grad.ts_latest_ns;
    h.ts_latest_ns = grad.ts_latest_ns;
    std::uint8_t* payload = out.data() + frame::kUdpPayloadOffset;
    proto::encode_header(h, {payload, proto::kHeaderSize});
    proto::encode_feedback(body, {payload + proto::kHeaderSize, proto::kFeedbackBodySize});
    return frame::build_udp_frame(ep, kFeedbackPayloadLen, out.first(kFeedbackFrameLen));
}

}  // namespace shesha::core

// Stage 1 of the pipeline, classification: what a received frame is.
//
// Contract: reads the frame's bytes only (never writes them); fills the frame's PacketMeta, counts
// common outcomes in the burst's RxTally and rare ones (multi-segment, malformed per reason) in
// the RX counters it is given. Holds no state, so it runs on any thread: the forwarding lcore, or
// an RX lcore that hands frames to it. settle_rx() adds a burst's tally once per burst.
#pragma once

#include <cstdint>

#include "big_endian.h"
#include "counters.h"
#include "frame.h"
#include "protocol.h"

namespace shesha::core {

// What classification learned about a packet; travels with it to the later stages.
enum class PacketClass : std::uint8_t {
    Plain,         // non-IP, other IP, or a Shesha message that is not an fp32 GRADIENT
    MultiSegment,  // forwarded without looking past the Ethernet header
    Gradient,      // valid fp32 GRADIENT: candidate for merging
    Malformed,     // bad IPv4/UDP headers or a Shesha message that failed to decode
    Model,         // a valid MODEL (a chunk, or a request without elements): forwarded like Plain
                   // unless MODEL replication is configured (replication.h)
};

struct PacketMeta {
    std::uint16_t in_port = 0;        // port index (position in the config's port list)
    PacketClass cls = PacketClass::Plain;
    std::uint8_t shesha = 0;          // 1: a Shesha message that decoded cleanly
    std::uint16_t l3_offset = 0;      // 0 if not IPv4
    std::uint16_t l4_offset = 0;
    std::uint16_t shesha_offset = 0;  // 0 if not a valid Shesha message
    std::uint16_t cluster_id = 0;
    std::uint16_t chunk_index = 0;
    std::uint16_t elem_count = 0;
    std::uint32_t model_version = 0;
    std::uint16_t contributions = 0;  // a GRADIENT's contrib_count (any element type), else 0
    std::uint32_t worker_id = 0;      // a GRADIENT's worker_id and seq (admission tells copies by them)
    std::uint32_t seq = 0;
    std::uint32_t src_ip = 0;         // host byte order
    std::uint32_t dst_ip = 0;
};

// Counts of one RX burst, kept in registers and added to the shared counters once per burst.
struct RxTally {
    std::uint64_t bytes = 0;
    std::uint64_t non_ip = 0;
    std::uint64_t ip_other = 0;
    std::uint64_t shesha_valid = 0;
    std::uint64_t gradient_f32 = 0;
};

// Classifies and decodes one frame that arrived on port `in` (udp_port: the Shesha port).
template <class Io>
[[gnu::always_inline]] inline void classify_frame(typename Io::Handle h, std::uint16_t in, std::uint16_t udp_port,
                                                  PortCounters& port_rx, SwitchCounters& rx, PacketMeta& meta,
                                                  RxTally& tally) noexcept {
    meta = PacketMeta{};
    meta.in_port = in;
    tally.bytes += Io::pkt_len(h);

    if (Io::multi_segment(h)) [[unlikely]] {
        // Only the Ethernet header is used; the payload is not contiguous, so it is never merged.
        meta.cls = PacketClass::MultiSegment;
        port_rx.add(PortCounter::RxMultiSegment);
        rx.add(SwitchCounter::MultiSegment);
        return;
    }

    const std::uint8_t* data = Io::data(h);
    const std::uint32_t data_len = Io::data_len(h);
    if (data_len < frame::kEthHeaderSize ||
        (be::load16(data + 12) != frame::kEtherTypeIpv4 && be::load16(data + 12) != frame::kEtherTypeVlan)) {
        meta.cls = PacketClass::Plain;
        ++tally.non_ip;
        return;
    }
    const frame::FrameInfo info = frame::classify({data, data_len}, udp_port);
    switch (info.kind) {
    case frame::FrameKind::NonIp:
        meta.cls = PacketClass::Plain;
        ++tally.non_ip;
        return;
    case frame::FrameKind::IpOther:
        meta.cls = PacketClass::Plain;
        ++tally.ip_other;
        meta.l3_offset = info.l3_offset;
        return;
    case frame::FrameKind::Malformed:
        meta.cls = PacketClass::Malformed;
        rx.add(SwitchCounter::BadFrames);
        return;
    case frame::FrameKind::Shesha:
        break;
    }

    meta.l3_offset = info.l3_offset;
    meta.l4_offset = info.l4_offset;
    meta.src_ip = info.src_ip;
    meta.dst_ip = info.dst_ip;
    proto::Message msg;
    const proto::DecodeError err = proto::decode({data + info.payload_offset, info.payload_len}, msg);
    if (err != proto::DecodeError::Ok) {
        meta.cls = PacketClass::Malformed;
        rx.add(malformed_counter(err));
        return;
    }
    ++tally.shesha_valid;
    meta.shesha = 1;
    meta.shesha_offset = info.payload_offset;
    meta.cluster_id = msg.hdr.cluster_id;
    meta.chunk_index = msg.hdr.chunk_index;
    meta.elem_count = msg.hdr.elem_count;
    meta.model_version = msg.hdr.model_version;
    // Type and element type from the frame, not from msg.hdr: the compiler fuses the two byte
    // compares into one wider load of the two byte stores decode() just made, which cannot be
    // store-forwarded (a 10-20 cycle stall per frame, measured with perf on grad1k).
    const std::uint8_t* shesha = data + info.payload_offset;
    const auto type = static_cast<proto::MsgType>(shesha[proto::off::kType]);
    if (type == proto::MsgType::Gradient) {
        meta.contributions = msg.hdr.contrib_count;
        meta.worker_id = msg.hdr.worker_id;
        meta.seq = msg.hdr.seq;
    }
    if (type == proto::MsgType::Gradient &&
        static_cast<proto::ElemType>(shesha[proto::off::kElemType]) == proto::ElemType::F32) {
        meta.cls = PacketClass::Gradient;
        ++tally.gradient_f32;
    } else if (type == proto::MsgType::Model) {
        meta.cls = PacketClass::Model;
    } else {
        meta.cls = PacketClass::Plain;
    }
}

// Adds one classified burst of `packets` frames of a port to its counters and the RX table.
inline void settle_rx(PortCounters& port_rx, SwitchCounters& rx, std::uint32_t packets, const RxTally& tally) noexcept {
    port_rx.add(PortCounter::RxPackets, packets);
    port_rx.add(PortCounter::RxBytes, tally.bytes);
    if (tally.non_ip != 0) rx.add(SwitchCounter::NonIp, tally.non_ip);
    if (tally.ip_other != 0) rx.add(SwitchCounter::IpOther, tally.ip_other);
    if (tally.shesha_valid != 0) rx.add(SwitchCounter::Shesha, tally.shesha_valid);
    if (tally.gradient_f32 != 0) rx.add(SwitchCounter::GradientF32, tally.gradient_f32);
}

}  // namespace shesha::core

// Stage 1 of the pipeline, classification: what a received frame is.
//
// Contract: reads the frame's bytes only (never writes them); fills the frame's PacketMeta, counts
// common outcomes in the burst's RxTally and rare ones (multi-segment, malformed per reason) in
// the RX counters it is given. Holds no state, so it runs on any thread: the forwarding lcore, or
// an RX lcore that hands frames to it. settle_rx() adds a burst's tally once per burst.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

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
    CreditBatch,   // a valid CREDIT_BATCH: expanded for a replication group's members, else like Plain
    Runt,          // shorter than an Ethernet header: no addresses to learn or forward by; dropped
};

struct PacketMeta {
    std::uint16_t in_port = 0;        // port index (position in the config's port list)
    PacketClass cls = PacketClass::Plain;
    std::uint8_t shesha = 0;          // 1: a Shesha message that decoded cleanly
    std::uint8_t train = 0;           // 1: UDP to another port, by classify_ipv4_udp_fast (a train may follow)
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

// proto::decode with everything it calls inlined: in the forwarding loop GCC judged the Shesha
// path unlikely and called the out-of-line be::load64 for both timestamps of every message.
[[gnu::always_inline, gnu::flatten]] inline proto::DecodeError decode_inline(std::span<const std::uint8_t> bytes,
                                                                             proto::Message& out) noexcept {
    return proto::decode(bytes, out);
}

// The common frame in one pass: untagged IPv4 without options, not a fragment, UDP, with lengths
// that fit the frame. For such a frame, fills what frame::classify() would (kind IpOther or
// Shesha, the offsets, for Shesha the addresses and lengths) and returns true; for any other frame
// returns false without deciding anything (the caller asks frame::classify()). It skips the VLAN,
// IHL and short-frame branches of the general parser and, for UDP to another port, reading the
// addresses at all. tests/test_pipeline.cpp checks it against frame::classify() on mutated frames.
[[gnu::always_inline]] inline bool classify_ipv4_udp_fast(const std::uint8_t* f, std::uint32_t len,
                                                          std::uint16_t udp_port, frame::FrameInfo& info) noexcept {
    constexpr std::uint32_t kL3 = frame::kEthHeaderSize;
    constexpr std::uint32_t kL4 = kL3 + frame::kIpv4MinHeaderSize;
    if (len < kL4 || be::load16(f + 12) != frame::kEtherTypeIpv4 || f[kL3] != 0x45) return false;
    const std::uint8_t* ip = f + kL3;
    const std::uint32_t total_len = be::load16(ip + 2);
    // At least a UDP header, and the datagram inside the frame (Ethernet padding may follow it).
    if (total_len < frame::kIpv4MinHeaderSize + frame::kUdpHeaderSize || total_len > len - kL3) return false;
    // Not a fragment (no offset, no MF), and UDP.
    if ((be::load16(ip + 6) & 0x3FFF) != 0 || ip[9] != frame::kIpProtoUdp) return false;
    const std::uint8_t* udp = f + kL4;
    const std::uint32_t udp_len = be::load16(udp + 4);
    if (udp_len < frame::kUdpHeaderSize || udp_len > total_len - frame::kIpv4MinHeaderSize) return false;
    info.l3_offset = kL3;
    info.dst_port = be::load16(udp + 2);
    if (info.dst_port != udp_port) {
        info.kind = frame::FrameKind::IpOther;
        return true;
    }
    info.kind = frame::FrameKind::Shesha;
    info.l4_offset = kL4;
    info.payload_offset = kL4 + frame::kUdpHeaderSize;
    info.payload_len = static_cast<std::uint16_t>(udp_len - frame::kUdpHeaderSize);
    info.src_port = be::load16(udp);
    info.ecn = ip[1] & 0x03;
    info.src_ip = be::load32(ip + 12);
    info.dst_ip = be::load32(ip + 16);
    return true;
}

// The first 15 bytes a frame from `src` to `dst` (MacKeys, fdb.h) must start with to be untagged
// IPv4 without options: the addresses, EtherType 0x0800 and version/IHL 0x45, as two 64-bit words
// in memory order (the second masked by kTrainHeadMask).
struct TrainHead {
    std::uint64_t lo, hi;
};
inline constexpr std::uint64_t kTrainHeadMask = 0x00FF'FFFF'FFFF'FFFFull;
[[gnu::always_inline]] inline TrainHead train_head(std::uint64_t dst, std::uint64_t src) noexcept {
    static_assert(std::endian::native == std::endian::little);
    return {(dst & 0xFFFF'FFFF'FFFFull) | (src << 48), ((src >> 16) & 0xFFFF'FFFFull) | (0x0008ull << 32) | (0x45ull << 48)};
}

// Below this many bytes no IPv4 datagram with a UDP header fits: classify_ipv4_udp_fast() defers.
inline constexpr std::uint32_t kTrainMinLen = frame::kEthHeaderSize + frame::kIpv4MinHeaderSize + frame::kUdpHeaderSize;

// The bytes of a frame that decide whether it is a train frame, in four loads: 0-7, 8-15, 16-23
// (IPv4 total length, id, flags and fragment offset, TTL, protocol) and 36-39 (UDP destination
// port and length). The frame must hold at least kTrainMinLen bytes.
struct TrainWords {
    std::uint64_t w0, w1, w2;
    std::uint32_t udp;
};
[[gnu::always_inline]] inline TrainWords load_train_words(const std::uint8_t* f) noexcept {
    TrainWords w;
    std::memcpy(&w.w0, f, 8);
    std::memcpy(&w.w1, f + 8, 8);
    std::memcpy(&w.w2, f + 16, 8);
    std::memcpy(&w.udp, f + 36, 4);
    return w;
}
// The bytes of w2 the decision reads: the total length, the flags and fragment offset, the protocol.
inline constexpr std::uint64_t kTrainIpMask = 0xFF00'FFFF'0000'FFFFull;

// True exactly when classify_ipv4_udp_fast() would decide IpOther (UDP to a port other than
// `udp_port`) for a frame of `len` bytes (at least kTrainMinLen) whose first 15 bytes are `head`'s:
// the same checks. The pipeline's trains (pipeline.h, forward_train) use it; tests/test_pipeline.cpp
// checks it against classify_ipv4_udp_fast() on mutated frames.
[[gnu::always_inline]] inline bool is_plain_udp_train_frame(const TrainWords& w, std::uint32_t len, TrainHead head,
                                                            std::uint16_t udp_port) noexcept {
    const std::uint32_t total_len = __builtin_bswap16(static_cast<std::uint16_t>(w.w2));
    const std::uint32_t frag = __builtin_bswap16(static_cast<std::uint16_t>(w.w2 >> 32)) & 0x3FFFu;
    const std::uint32_t proto = static_cast<std::uint32_t>(w.w2 >> 56);
    const std::uint16_t dst_port = __builtin_bswap16(static_cast<std::uint16_t>(w.udp));
    const std::uint32_t udp_len = __builtin_bswap16(static_cast<std::uint16_t>(w.udp >> 16));
    return ((w.w0 ^ head.lo) | ((w.w1 & kTrainHeadMask) ^ head.hi)) == 0 &&
           total_len >= frame::kIpv4MinHeaderSize + frame::kUdpHeaderSize && total_len <= len - frame::kEthHeaderSize &&
           frag == 0 && proto == frame::kIpProtoUdp && udp_len >= frame::kUdpHeaderSize &&
           udp_len <= total_len - frame::kIpv4MinHeaderSize && dst_port != udp_port;
}
// The same for a frame of any length.
inline bool is_plain_udp_train_frame(const std::uint8_t* f, std::uint32_t len, TrainHead head,
                                     std::uint16_t udp_port) noexcept {
    return len >= kTrainMinLen && is_plain_udp_train_frame(load_train_words(f), len, head, udp_port);
}

// A GRADIENT of fp32 elements that proto::decode() accepts, checked in one pass over the header:
// returns true and fills meta's message fields as classify_frame() does from the decoded header;
// false for any other message, valid or not, without deciding anything (the caller decodes it).
// The same checks as decode() for this type: magic, version, known flags, chunk index below a
// non-zero count, at most kMaxElements, a non-zero contribution count (more than one only when
// MERGED or SENDER_MERGED), ordered timestamps, and a body of exactly elem_count fp32.
// tests/test_pipeline.cpp checks it against proto::decode() on mutated headers.
[[gnu::always_inline]] inline bool decode_gradient_f32_fast(const std::uint8_t* p, std::uint32_t len,
                                                            PacketMeta& meta) noexcept {
    if (len < proto::kHeaderSize) return false;
    // Bytes 0-5 in one 8-byte load (the header is longer; kMask ignores bytes 6 and 7): magic,
    // version, type GRADIENT, flags with no unknown bit, element type F32. A 6-byte memcpy became a
    // 4- and a 2-byte store and an 8-byte reload that store forwarding cannot serve (grad1k: a
    // fifth of the receive pass's samples sat on it).
    std::uint64_t head;
    std::memcpy(&head, p, sizeof head);
    constexpr std::uint64_t kFlagsUnknown = std::uint64_t{static_cast<std::uint8_t>(~proto::flag::kKnown)} << 32;
    constexpr std::uint64_t kMask = 0xFFFF'FFFFull | kFlagsUnknown | (std::uint64_t{0xFF} << 40);
    constexpr std::uint64_t kWant = std::uint64_t{proto::kMagic >> 8} | (std::uint64_t{proto::kMagic & 0xFF} << 8) |
                                    (std::uint64_t{proto::kVersion} << 16) |
                                    (std::uint64_t{static_cast<std::uint8_t>(proto::MsgType::Gradient)} << 24) |
                                    (std::uint64_t{static_cast<std::uint8_t>(proto::ElemType::F32)} << 40);
    static_assert(std::endian::native == std::endian::little);
    if ((head & kMask) != kWant) return false;
    const std::uint8_t flags = p[proto::off::kFlags];
    const std::uint32_t chunk_index = be::load16(p + proto::off::kChunkIndex);
    const std::uint32_t chunk_count = be::load16(p + proto::off::kChunkCount);
    const std::uint32_t elem_count = be::load16(p + proto::off::kElemCount);
    const std::uint32_t contributions = be::load16(p + proto::off::kContribCount);
    if (chunk_index >= chunk_count || elem_count > proto::kMaxElements) return false;  // (also: a count of 0)
    if (contributions == 0 ||
        (contributions > 1 && (flags & (proto::flag::kMerged | proto::flag::kSenderMerged)) == 0))
        return false;
    std::uint64_t earliest, latest;
    std::memcpy(&earliest, p + proto::off::kTsEarliest, sizeof earliest);
    std::memcpy(&latest, p + proto::off::kTsLatest, sizeof latest);
    if (__builtin_bswap64(earliest) > __builtin_bswap64(latest)) return false;
    if (len - proto::kHeaderSize != elem_count * sizeof(float)) return false;
    meta.cluster_id = be::load16(p + proto::off::kClusterId);
    meta.chunk_index = static_cast<std::uint16_t>(chunk_index);
    meta.elem_count = static_cast<std::uint16_t>(elem_count);
    meta.model_version = be::load32(p + proto::off::kModelVersion);
    meta.contributions = static_cast<std::uint16_t>(contributions);
    meta.worker_id = be::load32(p + proto::off::kWorkerId);
    meta.seq = be::load32(p + proto::off::kSeq);
    return true;
}

// Classifies and decodes one frame that arrived on port `in` (udp_port: the Shesha port).
template <class Io>
[[gnu::always_inline]] inline void classify_frame(typename Io::Handle h, std::uint16_t in, std::uint16_t udp_port,
                                                  PortCounters& port_rx, SwitchCounters& rx, PacketMeta& meta,
                                                  RxTally& tally) noexcept {
    meta = PacketMeta{};
    meta.in_port = in;
    tally.bytes += Io::pkt_len(h);

    if (Io::multi_segment(h)) [[unlikely]] {
        if (Io::data_len(h) < frame::kEthHeaderSize) {
            meta.cls = PacketClass::Runt;
            rx.add(SwitchCounter::Runts);
            return;
        }
        // Only the Ethernet header is used; the payload is not contiguous, so it is never merged.
        meta.cls = PacketClass::MultiSegment;
        port_rx.add(PortCounter::RxMultiSegment);
        rx.add(SwitchCounter::MultiSegment);
        return;
    }

    const std::uint8_t* data = Io::data(h);
    const std::uint32_t data_len = Io::data_len(h);
    frame::FrameInfo info;
    if (!classify_ipv4_udp_fast(data, data_len, udp_port, info)) {
        if (data_len < frame::kEthHeaderSize) [[unlikely]] {
            meta.cls = PacketClass::Runt;
            rx.add(SwitchCounter::Runts);
            return;
        }
        if (be::load16(data + 12) != frame::kEtherTypeIpv4 && be::load16(data + 12) != frame::kEtherTypeVlan) {
            meta.cls = PacketClass::Plain;
            ++tally.non_ip;
            return;
        }
        info = frame::classify({data, data_len}, udp_port);
    } else if (info.kind == frame::FrameKind::IpOther) {
        meta.cls = PacketClass::Plain;
        meta.train = 1;
        ++tally.ip_other;
        meta.l3_offset = info.l3_offset;
        return;
    }
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
    if (decode_gradient_f32_fast(data + info.payload_offset, info.payload_len, meta)) [[likely]] {
        ++tally.shesha_valid;
        meta.shesha = 1;
        meta.shesha_offset = info.payload_offset;
        meta.cls = PacketClass::Gradient;
        ++tally.gradient_f32;
        return;
    }
    proto::Message msg;
    const proto::DecodeError err = decode_inline({data + info.payload_offset, info.payload_len}, msg);
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
    } else if (type == proto::MsgType::CreditBatch) {
        meta.cls = PacketClass::CreditBatch;
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

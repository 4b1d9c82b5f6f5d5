// The Shesha wire protocol: one codec for every binary (switch, tools, workers, learners).
// The byte-by-byte layout is documented in docs/protocol.md; keep the two in step.
//
// A Shesha message is the payload of a UDP datagram (default port kDefaultUdpPort). It starts with
// a fixed 48-byte header in network byte order, followed by a type-specific body:
//   GRADIENT / MODEL: elem_count elements of elem_type (fp32: IEEE 754 binary32, little-endian,
//                     so the switch adds them with SIMD without byte swaps);
//   CREDIT:           CreditBody (network byte order);
//   FEEDBACK:         FeedbackBody (network byte order);
//   CREDIT_BATCH:     elem_count CreditBatchEntry records (learner -> switch, expanded there into
//                     one CREDIT per entry; docs/protocol.md, "CREDIT_BATCH").
//
// The codec never allocates and never throws: decode() validates every field and length and says
// why it rejects a message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "big_endian.h"

namespace shesha::proto {

inline constexpr std::uint16_t kMagic = 0x5348;        // "SH"
inline constexpr std::uint8_t kVersion = 2;  // 2: byte 44 became packet_count (docs/protocol.md)
inline constexpr std::uint16_t kDefaultUdpPort = 17717;
inline constexpr std::size_t kHeaderSize = 48;
// Largest element count a single chunk may carry: keeps a chunk inside a 9000 B jumbo frame.
inline constexpr std::uint16_t kMaxElements = 2048;
// Highest contribution count a header can hold; merges that would exceed it are refused.
inline constexpr std::uint16_t kMaxContributions = 0xFFFF;

enum class MsgType : std::uint8_t {
    Gradient = 1,  // worker -> learner: a chunk of a gradient (possibly merged in the network)
    Model = 2,     // learner -> worker: a chunk of the model parameters
    Credit = 3,    // learner -> worker: acknowledgement, credits and congestion echo
    Feedback = 4,  // switch -> sender: egress queue state
    // learner -> switch: the CREDITs of several workers in one datagram to the cluster's MODEL
    // group; the switch sends each worker its own CREDIT (switch/core/replication.h).
    CreditBatch = 5,
};

enum class ElemType : std::uint8_t {
    None = 0,  // CREDIT and FEEDBACK carry no elements
    F32 = 1,
    BF16 = 2,  // decoded and forwarded; the switch merges only F32
};

// Header field offsets (bytes from the start of the Shesha header). All multi-byte fields are
// big-endian. Byte 44 is a GRADIENT's packet count (0 = unknown); bytes 45..47 are sender info, in
// a GRADIENT the worker's cumulative env steps (docs/protocol.md). The codec checks neither.
namespace off {
inline constexpr std::size_t kMagic = 0;          // u16
inline constexpr std::size_t kVersion = 2;        // u8
inline constexpr std::size_t kType = 3;           // u8
inline constexpr std::size_t kFlags = 4;          // u8
inline constexpr std::size_t kElemType = 5;       // u8
inline constexpr std::size_t kClusterId = 6;      // u16
inline constexpr std::size_t kWorkerId = 8;       // u32
inline constexpr std::size_t kModelVersion = 12;  // u32
inline constexpr std::size_t kSeq = 16;           // u32
inline constexpr std::size_t kChunkIndex = 20;    // u16
inline constexpr std::size_t kChunkCount = 22;    // u16
inline constexpr std::size_t kElemCount = 24;     // u16
inline constexpr std::size_t kContribCount = 26;  // u16
inline constexpr std::size_t kTsEarliest = 28;    // u64
inline constexpr std::size_t kTsLatest = 36;      // u64
inline constexpr std::size_t kPacketCount = 44;   // u8 GRADIENT: packets summed into this one, 0 = unknown
inline constexpr std::size_t kSenderInfo = 45;    // u24 GRADIENT: the worker's env steps, wrapping
}  // namespace off

// Header flag bits.
namespace flag {
inline constexpr std::uint8_t kMerged = 0x01;               // holds >1 contribution merged in-network
inline constexpr std::uint8_t kCongestionExperienced = 0x02; // a switch queue marked it
inline constexpr std::uint8_t kCongestionEcho = 0x04;       // CREDIT: echoes CE seen on gradients
inline constexpr std::uint8_t kSenderMerged = 0x08;         // summed at the sender before sending
inline constexpr std::uint8_t kKnown = 0x0F;                // any other bit is rejected
}  // namespace flag

// Decoded header, host byte order.
struct Header {
    std::uint8_t version = kVersion;
    MsgType type = MsgType::Gradient;
    std::uint8_t flags = 0;
    ElemType elem_type = ElemType::F32;
    std::uint16_t cluster_id = 0;
    std::uint32_t worker_id = 0;
    std::uint32_t model_version = 0;   // base model version the update was computed on
    std::uint32_t seq = 0;             // update sequence number, per worker
    std::uint16_t chunk_index = 0;
    std::uint16_t chunk_count = 1;
    std::uint16_t elem_count = 0;
    std::uint16_t contrib_count = 1;   // original updates this message holds
    std::uint64_t ts_earliest_ns = 0;  // generation time of the oldest contribution (CLOCK_REALTIME)
    std::uint64_t ts_latest_ns = 0;    // generation time of the newest contribution
    // GRADIENT: packets the network summed into this one, each counting once however many
    // contributions its sender had summed; 0 = unknown (a sender that does not count). Lets the
    // learner return exactly one CREDIT unit per packet that left flight (docs/transport.md).
    std::uint8_t packet_count = 0;
};
inline constexpr std::uint8_t kMaxPacketCount = 0xFF;

// CREDIT body (16 bytes): what the learner tells a worker.
struct CreditBody {
    std::uint32_t credits = 0;        // chunks the worker may have in flight from now on
    std::uint32_t acked_seq = 0;      // highest update seq applied from this worker
    std::uint32_t learner_version = 0;
    std::uint32_t ce_count = 0;       // CE-marked chunks seen from this worker since the last CREDIT
};

// FEEDBACK body (24 bytes): egress queue state at the moment of sending.
struct FeedbackBody {
    std::uint16_t port_id = 0;
    std::uint16_t queue_capacity = 0;   // packets
    std::uint16_t queue_depth = 0;      // packets waiting
    std::uint16_t mark_permille = 0;    // fraction of recent packets marked, in 1/1000
    std::uint32_t queue_bytes = 0;
    std::uint32_t sojourn_us = 0;       // sojourn of the packet that triggered the feedback
    std::uint16_t merge_permille = 0;   // merged arrivals / mergeable arrivals, in 1/1000
    std::uint16_t reserved = 0;
    std::uint32_t drops = 0;            // tail drops on this queue, wrapping counter
};
inline constexpr std::size_t kCreditBodySize = 16;
inline constexpr std::size_t kFeedbackBodySize = 24;

// One worker's CREDIT inside a CREDIT_BATCH (24 bytes): the worker, the CREDIT's flags (only
// CONGESTION_ECHO may be set), 3 reserved bytes (written 0, ignored) and the CREDIT body.
struct CreditBatchEntry {
    std::uint32_t worker_id = 0;
    std::uint8_t flags = 0;
    CreditBody body;
};
inline constexpr std::size_t kCreditBatchEntrySize = 24;
// Entries per CREDIT_BATCH: 56 x 24 + 48 bytes of header keep the IPv4 datagram within 1,500 bytes.
inline constexpr std::uint16_t kMaxCreditBatchEntries = 56;

enum class DecodeError : std::uint8_t {
    Ok = 0,
    ShortPacket,          // fewer bytes than the header (or a fixed body) needs
    BadMagic,
    BadVersion,
    UnknownType,
    UnknownFlags,
    BadElemType,          // unknown element type, or one not allowed for the message type
    BadChunk,             // chunk_count == 0 or chunk_index >= chunk_count
    TooManyElements,      // elem_count > kMaxElements
    LengthMismatch,       // elem_count * elem size (or body size) != bytes after the header
    BadContribCount,      // contrib_count == 0, or > 1 without the merged/sender-merged flag
    BadTimestamps,        // ts_earliest > ts_latest
};
inline constexpr int kDecodeErrorCount = 12;
std::string_view to_string(DecodeError e) noexcept;


// A validated view of one message inside a caller-owned buffer. payload points into that buffer.
struct Message {
    Header hdr;
    std::span<const std::uint8_t> payload;  // body after the header (elements or fixed body)
};


// Encodes the header into out[0..kHeaderSize). Returns false if out is too small.
bool encode_header(const Header& h, std::span<std::uint8_t> out) noexcept;
bool encode_credit(const CreditBody& c, std::span<std::uint8_t> out) noexcept;
bool encode_feedback(const FeedbackBody& f, std::span<std::uint8_t> out) noexcept;
bool decode_credit(std::span<const std::uint8_t> body, CreditBody& out) noexcept;
bool decode_feedback(std::span<const std::uint8_t> body, FeedbackBody& out) noexcept;
// Entry i of a CREDIT_BATCH body (validated by decode(): i < elem_count). Returns false if the
// body is too short or the entry's flags are not a CREDIT's.
bool encode_credit_batch_entry(const CreditBatchEntry& e, std::span<std::uint8_t> out) noexcept;
bool decode_credit_batch_entry(std::span<const std::uint8_t> body, std::size_t i, CreditBatchEntry& out) noexcept;

// Encodes a whole message: header then body. Returns bytes written, or 0 if out is too small or
// the body length does not match the header (elem_count for GRADIENT/MODEL).
std::size_t encode(const Header& h, std::span<const std::uint8_t> body,
                   std::span<std::uint8_t> out) noexcept;


// ---- Decoding and in-place access: inline, since the switch runs them for every packet ----

namespace detail {
inline bool carries_elements(MsgType t) noexcept { return t == MsgType::Gradient || t == MsgType::Model; }

// Fixed body size of CREDIT / FEEDBACK; 0 for element-carrying types and CREDIT_BATCH.
inline std::size_t fixed_body_size(MsgType t) noexcept {
    switch (t) {
    case MsgType::Credit: return kCreditBodySize;
    case MsgType::Feedback: return kFeedbackBodySize;
    default: return 0;
    }
}

inline bool known_type(std::uint8_t t) noexcept {
    return t >= static_cast<std::uint8_t>(MsgType::Gradient) &&
           t <= static_cast<std::uint8_t>(MsgType::CreditBatch);
}
}  // namespace detail

// bytes per element; 0 for None or unknown
inline std::size_t elem_size(ElemType t) noexcept {
    switch (t) {
    case ElemType::F32: return 4;
    case ElemType::BF16: return 2;
    default: return 0;
    }
}

// Header only, with the same checks as decode() except the body length check (used on fast paths
// that only need the key fields and then check the length themselves).
[[gnu::always_inline]] inline DecodeError decode_header(std::span<const std::uint8_t> bytes, Header& out) noexcept {
    if (bytes.size() < kHeaderSize) return DecodeError::ShortPacket;
    const std::uint8_t* p = bytes.data();
    if (be::load16(p + off::kMagic) != kMagic) return DecodeError::BadMagic;
    if (p[off::kVersion] != kVersion) return DecodeError::BadVersion;
    if (!detail::known_type(p[off::kType])) return DecodeError::UnknownType;
    if ((p[off::kFlags] & ~flag::kKnown) != 0) return DecodeError::UnknownFlags;

    out.version = p[off::kVersion];
    out.type = static_cast<MsgType>(p[off::kType]);
    out.flags = p[off::kFlags];
    out.elem_type = static_cast<ElemType>(p[off::kElemType]);
    out.cluster_id = be::load16(p + off::kClusterId);
    out.worker_id = be::load32(p + off::kWorkerId);
    out.model_version = be::load32(p + off::kModelVersion);
    out.seq = be::load32(p + off::kSeq);
    out.chunk_index = be::load16(p + off::kChunkIndex);
    out.chunk_count = be::load16(p + off::kChunkCount);
    out.elem_count = be::load16(p + off::kElemCount);
    out.contrib_count = be::load16(p + off::kContribCount);
    out.ts_earliest_ns = be::load64(p + off::kTsEarliest);
    out.ts_latest_ns = be::load64(p + off::kTsLatest);
    out.packet_count = p[off::kPacketCount];

    if (detail::carries_elements(out.type)) {
        if (out.elem_type != ElemType::F32 && out.elem_type != ElemType::BF16) return DecodeError::BadElemType;
    } else if (out.elem_type != ElemType::None) {
        return DecodeError::BadElemType;
    }
    if (out.chunk_count == 0 || out.chunk_index >= out.chunk_count) return DecodeError::BadChunk;
    if (out.elem_count > kMaxElements) return DecodeError::TooManyElements;
    // CREDIT/FEEDBACK bodies are fixed: a non-zero element count contradicts their length. A
    // CREDIT_BATCH counts its entries there.
    if (out.type == MsgType::CreditBatch) {
        if (out.elem_count == 0 || out.elem_count > kMaxCreditBatchEntries) return DecodeError::LengthMismatch;
    } else if (!detail::carries_elements(out.type) && out.elem_count != 0) {
        return DecodeError::LengthMismatch;
    }
    if (out.contrib_count == 0) return DecodeError::BadContribCount;
    if (out.contrib_count > 1 && (out.flags & (flag::kMerged | flag::kSenderMerged)) == 0)
        return DecodeError::BadContribCount;
    // CREDIT, FEEDBACK and CREDIT_BATCH are control messages of one sender: they never sum anything.
    if (!detail::carries_elements(out.type) &&
        (out.contrib_count != 1 || (out.flags & (flag::kMerged | flag::kSenderMerged)) != 0))
        return DecodeError::BadContribCount;
    if (out.ts_earliest_ns > out.ts_latest_ns) return DecodeError::BadTimestamps;
    return DecodeError::Ok;
}

// Validates and decodes. On error, out is unspecified.
inline DecodeError decode(std::span<const std::uint8_t> bytes, Message& out) noexcept {
    const DecodeError e = decode_header(bytes, out.hdr);
    if (e != DecodeError::Ok) return e;
    const std::span<const std::uint8_t> body = bytes.subspan(kHeaderSize);
    if (detail::carries_elements(out.hdr.type)) {
        if (body.size() != std::size_t{out.hdr.elem_count} * elem_size(out.hdr.elem_type))
            return DecodeError::LengthMismatch;
    } else if (out.hdr.type == MsgType::CreditBatch) {
        const std::size_t need = std::size_t{out.hdr.elem_count} * kCreditBatchEntrySize;
        if (body.size() < need) return DecodeError::ShortPacket;
        if (body.size() != need) return DecodeError::LengthMismatch;
    } else {
        const std::size_t need = detail::fixed_body_size(out.hdr.type);
        if (body.size() < need) return DecodeError::ShortPacket;
        if (body.size() != need) return DecodeError::LengthMismatch;
    }
    out.payload = body;
    return DecodeError::Ok;
}

// In-place accessors for fields the switch rewrites on a packet it holds (no full re-encode).
// p points at the first byte of the Shesha header, which has already been validated.
namespace inplace {
inline std::uint8_t flags(const std::uint8_t* p) noexcept { return p[off::kFlags]; }
inline void set_flags(std::uint8_t* p, std::uint8_t f) noexcept { p[off::kFlags] = f; }
inline std::uint32_t model_version(const std::uint8_t* p) noexcept { return be::load32(p + off::kModelVersion); }
inline void set_model_version(std::uint8_t* p, std::uint32_t v) noexcept { be::store32(p + off::kModelVersion, v); }
inline std::uint16_t contrib_count(const std::uint8_t* p) noexcept { return be::load16(p + off::kContribCount); }
inline void set_contrib_count(std::uint8_t* p, std::uint16_t n) noexcept { be::store16(p + off::kContribCount, n); }
inline std::uint64_t ts_earliest(const std::uint8_t* p) noexcept { return be::load64(p + off::kTsEarliest); }
inline void set_ts_earliest(std::uint8_t* p, std::uint64_t ns) noexcept { be::store64(p + off::kTsEarliest, ns); }
inline std::uint64_t ts_latest(const std::uint8_t* p) noexcept { return be::load64(p + off::kTsLatest); }
inline void set_ts_latest(std::uint8_t* p, std::uint64_t ns) noexcept { be::store64(p + off::kTsLatest, ns); }
inline std::uint8_t packet_count(const std::uint8_t* p) noexcept { return p[off::kPacketCount]; }
inline void set_packet_count(std::uint8_t* p, std::uint8_t n) noexcept { p[off::kPacketCount] = n; }
}  // namespace inplace

// The packet count of two GRADIENTs summed into one: exact while both are known and the sum fits,
// else 0 (unknown), so the learner falls back to its contribution rule rather than under-credit.
[[gnu::always_inline]] constexpr std::uint8_t merged_packet_count(std::uint8_t waiting, std::uint8_t arriving) noexcept {
    const unsigned sum = unsigned{waiting} + arriving;
    return waiting != 0 && arriving != 0 && sum <= kMaxPacketCount ? static_cast<std::uint8_t>(sum) : 0;
}

}  // namespace shesha::proto

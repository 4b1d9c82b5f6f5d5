// The Shesha wire codec. Layout and rules: common/protocol.h and docs/protocol.md.
#include "protocol.h"
#include "big_endian.h"

#include <cstring>

namespace shesha::proto {

std::string_view to_string(DecodeError e) noexcept {
    switch (e) {
    case DecodeError::Ok: return "ok";
    case DecodeError::ShortPacket: return "short packet";
    case DecodeError::BadMagic: return "bad magic";
    case DecodeError::BadVersion: return "bad version";
    case DecodeError::UnknownType: return "unknown type";
    case DecodeError::UnknownFlags: return "unknown flags";
    case DecodeError::BadElemType: return "bad element type";
    case DecodeError::BadChunk: return "bad chunk index/count";
    case DecodeError::TooManyElements: return "too many elements";
    case DecodeError::LengthMismatch: return "length mismatch";
    case DecodeError::BadContribCount: return "bad contribution count";
    case DecodeError::BadTimestamps: return "bad timestamps";
    }
    return "unknown decode error";
}

bool encode_header(const Header& h, std::span<std::uint8_t> out) noexcept {
    if (out.size() < kHeaderSize) return false;
    std::uint8_t* p = out.data();
    be::store16(p + off::kMagic, kMagic);
    p[off::kVersion] = h.version;
    p[off::kType] = static_cast<std::uint8_t>(h.type);
    p[off::kFlags] = h.flags;
    p[off::kElemType] = static_cast<std::uint8_t>(h.elem_type);
    be::store16(p + off::kClusterId, h.cluster_id);
    be::store32(p + off::kWorkerId, h.worker_id);
    be::store32(p + off::kModelVersion, h.model_version);
    be::store32(p + off::kSeq, h.seq);
    be::store16(p + off::kChunkIndex, h.chunk_index);
    be::store16(p + off::kChunkCount, h.chunk_count);
    be::store16(p + off::kElemCount, h.elem_count);
    be::store16(p + off::kContribCount, h.contrib_count);
    be::store64(p + off::kTsEarliest, h.ts_earliest_ns);
    be::store64(p + off::kTsLatest, h.ts_latest_ns);
    p[off::kPacketCount] = h.packet_count;
    p[off::kSenderInfo] = p[off::kSenderInfo + 1] = p[off::kSenderInfo + 2] = 0;
    return true;
}

bool encode_credit(const CreditBody& c, std::span<std::uint8_t> out) noexcept {
    if (out.size() < kCreditBodySize) return false;
    std::uint8_t* p = out.data();
    be::store32(p + 0, c.credits);
    be::store32(p + 4, c.acked_seq);
    be::store32(p + 8, c.learner_version);
    be::store32(p + 12, c.ce_count);
    return true;
}

bool decode_credit(std::span<const std::uint8_t> body, CreditBody& out) noexcept {
    if (body.size() != kCreditBodySize) return false;
    const std::uint8_t* p = body.data();
    out.credits = be::load32(p + 0);
    out.acked_seq = be::load32(p + 4);
    out.learner_version = be::load32(p + 8);
    out.ce_count = be::load32(p + 12);
    return true;
}

bool encode_feedback(const FeedbackBody& f, std::span<std::uint8_t> out) noexcept {
    if (out.size() < kFeedbackBodySize) return false;
    std::uint8_t* p = out.data();
    be::store16(p + 0, f.port_id);
    be::store16(p + 2, f.queue_capacity);
    be::store16(p + 4, f.queue_depth);
    be::store16(p + 6, f.mark_permille);
    be::store32(p + 8, f.queue_bytes);
    be::store32(p + 12, f.sojourn_us);
    be::store16(p + 16, f.merge_permille);
    be::store16(p + 18, 0);  // reserved: always written as zero
    be::store32(p + 20, f.drops);
    return true;
}

bool decode_feedback(std::span<const std::uint8_t> body, FeedbackBody& out) noexcept {
    if (body.size() != kFeedbackBodySize) return false;
    const std::uint8_t* p = body.data();
    out.port_id = be::load16(p + 0);
    out.queue_capacity = be::load16(p + 2);
    out.queue_depth = be::load16(p + 4);
    out.mark_permille = be::load16(p + 6);
    out.queue_bytes = be::load32(p + 8);
    out.sojourn_us = be::load32(p + 12);
    out.merge_permille = be::load16(p + 16);
    out.reserved = 0;  // ignored on decode
    out.drops = be::load32(p + 20);
    return true;
}

bool encode_credit_batch_entry(const CreditBatchEntry& e, std::span<std::uint8_t> out) noexcept {
    if (out.size() < kCreditBatchEntrySize || (e.flags & ~flag::kCongestionEcho) != 0) return false;
    std::uint8_t* p = out.data();
    be::store32(p, e.worker_id);
    p[4] = e.flags;
    p[5] = p[6] = p[7] = 0;
    return encode_credit(e.body, out.subspan(8, kCreditBodySize));
}

bool decode_credit_batch_entry(std::span<const std::uint8_t> body, std::size_t i, CreditBatchEntry& out) noexcept {
    if (body.size() < (i + 1) * kCreditBatchEntrySize) return false;
    const std::uint8_t* p = body.data() + i * kCreditBatchEntrySize;
    out.worker_id = be::load32(p);
    out.flags = p[4];
    if ((out.flags & ~flag::kCongestionEcho) != 0) return false;
    return decode_credit(std::span<const std::uint8_t>(p + 8, kCreditBodySize), out.body);
}

std::size_t encode(const Header& h, std::span<const std::uint8_t> body,
                   std::span<std::uint8_t> out) noexcept {
    std::size_t expected = 0;
    if (detail::carries_elements(h.type)) {
        const std::size_t es = elem_size(h.elem_type);
        if (es == 0) return 0;
        expected = std::size_t{h.elem_count} * es;
    } else if (h.type == MsgType::CreditBatch) {
        if (h.elem_count == 0 || h.elem_count > kMaxCreditBatchEntries) return 0;
        expected = std::size_t{h.elem_count} * kCreditBatchEntrySize;
    } else {
        expected = detail::fixed_body_size(h.type);
        if (expected == 0) return 0;  // unknown type
    }
    if (body.size() != expected) return 0;
    const std::size_t total = kHeaderSize + expected;
    if (out.size() < total) return 0;
    // The body may already sit where it belongs (zero-copy callers) or overlap the output.
    if (expected != 0 && body.data() != out.data() + kHeaderSize)
        std::memmove(out.data() + kHeaderSize, body.data(), expected);
    encode_header(h, out);
    return total;
}

}  // namespace shesha::proto

// Wire codec: exact layout, round trips, every rejection reason, in-place accessors.
#include <catch2/catch.hpp>

#include <array>
#include <cstring>
#include <set>
#include <vector>

#include "protocol.h"

using namespace shesha::proto;

namespace {

Header gradient_header(std::uint16_t elems) {
    Header h;
    h.type = MsgType::Gradient;
    h.elem_type = ElemType::F32;
    h.flags = 0;
    h.cluster_id = 0x0102;
    h.worker_id = 0x03040506;
    h.model_version = 0x0708090A;
    h.seq = 0x0B0C0D0E;
    h.chunk_index = 2;
    h.chunk_count = 5;
    h.elem_count = elems;
    h.contrib_count = 1;
    h.ts_earliest_ns = 0x1112131415161718ull;
    h.ts_latest_ns = 0x1112131415161719ull;
    return h;
}

std::vector<std::uint8_t> encode_gradient(const Header& h) {
    std::vector<std::uint8_t> body(std::size_t{h.elem_count} * elem_size(h.elem_type));
    for (std::size_t i = 0; i < body.size(); ++i) body[i] = static_cast<std::uint8_t>(i * 7 + 1);
    std::vector<std::uint8_t> out(kHeaderSize + body.size());
    REQUIRE(encode(h, body, out) == out.size());
    return out;
}

Header control_header(MsgType t) {
    Header h;
    h.type = t;
    h.elem_type = ElemType::None;
    h.elem_count = 0;
    h.worker_id = 42;
    h.ts_earliest_ns = h.ts_latest_ns = 1000;
    return h;
}

std::vector<std::uint8_t> encode_credit_msg() {
    CreditBody c{7, 99, 12, 3};
    std::array<std::uint8_t, kCreditBodySize> body{};
    REQUIRE(encode_credit(c, body));
    std::vector<std::uint8_t> out(kHeaderSize + kCreditBodySize);
    REQUIRE(encode(control_header(MsgType::Credit), body, out) == out.size());
    return out;
}

std::vector<std::uint8_t> encode_feedback_msg() {
    FeedbackBody f{};
    std::array<std::uint8_t, kFeedbackBodySize> body{};
    REQUIRE(encode_feedback(f, body));
    std::vector<std::uint8_t> out(kHeaderSize + kFeedbackBodySize);
    REQUIRE(encode(control_header(MsgType::Feedback), body, out) == out.size());
    return out;
}

DecodeError decode_bytes(const std::vector<std::uint8_t>& b) {
    Message m;
    return decode(b, m);
}

void put_be16(std::vector<std::uint8_t>& b, std::size_t at, std::uint16_t v) {
    b[at] = static_cast<std::uint8_t>(v >> 8);
    b[at + 1] = static_cast<std::uint8_t>(v);
}
void put_be64(std::vector<std::uint8_t>& b, std::size_t at, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) b[at + i] = static_cast<std::uint8_t>(v >> (56 - 8 * i));
}

}  // namespace

TEST_CASE("header layout matches the documented bytes exactly", "[protocol]") {
    Header h = gradient_header(1);
    h.flags = flag::kMerged | flag::kCongestionExperienced;
    h.contrib_count = 0x0203;
    h.packet_count = 0x21;
    const std::array<std::uint8_t, 4> elem{0x00, 0x00, 0x80, 0x3F};  // 1.0f little-endian
    std::vector<std::uint8_t> out(kHeaderSize + 4, 0xAA);
    REQUIRE(encode(h, elem, out) == kHeaderSize + 4);
    const std::vector<std::uint8_t> expected{
        0x53, 0x48,              // magic "SH"
        0x02,                    // version
        0x01,                    // type GRADIENT
        0x03,                    // flags MERGED|CE
        0x01,                    // elem type F32
        0x01, 0x02,              // cluster
        0x03, 0x04, 0x05, 0x06,  // worker
        0x07, 0x08, 0x09, 0x0A,  // model version
        0x0B, 0x0C, 0x0D, 0x0E,  // seq
        0x00, 0x02,              // chunk index
        0x00, 0x05,              // chunk count
        0x00, 0x01,              // elem count
        0x02, 0x03,              // contrib count
        0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,  // ts earliest
        0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x19,  // ts latest
        0x21,                    // packet count
        0x00, 0x00, 0x00,        // sender info, written as zero over the 0xAA fill
        0x00, 0x00, 0x80, 0x3F,  // element 0 = 1.0f, little-endian
    };
    CHECK(out == expected);
}

TEST_CASE("CREDIT and FEEDBACK bodies are big-endian in declaration order", "[protocol]") {
    std::array<std::uint8_t, kCreditBodySize> cb{};
    REQUIRE(encode_credit(CreditBody{0x01020304, 0x05060708, 0x090A0B0C, 0x0D0E0F10}, cb));
    const std::array<std::uint8_t, kCreditBodySize> cexp{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    CHECK(cb == cexp);

    FeedbackBody f;
    f.port_id = 0x0102;
    f.queue_capacity = 0x0304;
    f.queue_depth = 0x0506;
    f.mark_permille = 0x0708;
    f.queue_bytes = 0x090A0B0C;
    f.sojourn_us = 0x0D0E0F10;
    f.merge_permille = 0x1112;
    f.reserved = 0xFFFF;  // must be written as zero
    f.drops = 0x13141516;
    std::array<std::uint8_t, kFeedbackBodySize> fb{};
    REQUIRE(encode_feedback(f, fb));
    const std::array<std::uint8_t, kFeedbackBodySize> fexp{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
                                                          13, 14, 15, 16, 0x11, 0x12, 0, 0, 0x13, 0x14, 0x15, 0x16};
    CHECK(fb == fexp);

    std::array<std::uint8_t, kCreditBodySize - 1> small{};
    CHECK_FALSE(encode_credit(CreditBody{}, small));
    std::array<std::uint8_t, kFeedbackBodySize - 1> fsmall{};
    CHECK_FALSE(encode_feedback(FeedbackBody{}, fsmall));
}

TEST_CASE("round trip of every message type", "[protocol]") {
    SECTION("GRADIENT f32") {
        const Header h = gradient_header(3);
        const auto bytes = encode_gradient(h);
        Message m;
        REQUIRE(decode(bytes, m) == DecodeError::Ok);
        CHECK(m.hdr.version == kVersion);
        CHECK(m.hdr.type == MsgType::Gradient);
        CHECK(m.hdr.flags == 0);
        CHECK(m.hdr.elem_type == ElemType::F32);
        CHECK(m.hdr.cluster_id == h.cluster_id);
        CHECK(m.hdr.worker_id == h.worker_id);
        CHECK(m.hdr.model_version == h.model_version);
        CHECK(m.hdr.seq == h.seq);
        CHECK(m.hdr.chunk_index == 2);
        CHECK(m.hdr.chunk_count == 5);
        CHECK(m.hdr.elem_count == 3);
        CHECK(m.hdr.contrib_count == 1);
        CHECK(m.hdr.ts_earliest_ns == h.ts_earliest_ns);
        CHECK(m.hdr.ts_latest_ns == h.ts_latest_ns);
        REQUIRE(m.payload.size() == 12);
        CHECK(m.payload.data() == bytes.data() + kHeaderSize);
        for (std::size_t i = 0; i < 12; ++i) CHECK(m.payload[i] == static_cast<std::uint8_t>(i * 7 + 1));
    }
    SECTION("merged GRADIENT with flags and full-size chunk") {
        Header h = gradient_header(kMaxElements);
        h.flags = flag::kMerged | flag::kCongestionExperienced | flag::kSenderMerged;
        h.contrib_count = kMaxContributions;
        h.chunk_index = 0xFFFE;
        h.chunk_count = 0xFFFF;
        const auto bytes = encode_gradient(h);
        Message m;
        REQUIRE(decode(bytes, m) == DecodeError::Ok);
        CHECK(m.hdr.flags == (flag::kMerged | flag::kCongestionExperienced | flag::kSenderMerged));
        CHECK(m.hdr.contrib_count == kMaxContributions);
        CHECK(m.hdr.chunk_index == 0xFFFE);
        CHECK(m.hdr.chunk_count == 0xFFFF);
        CHECK(m.payload.size() == std::size_t{kMaxElements} * 4);
    }
    SECTION("GRADIENT bf16 and MODEL") {
        Header h = gradient_header(5);
        h.elem_type = ElemType::BF16;
        auto bytes = encode_gradient(h);
        Message m;
        REQUIRE(decode(bytes, m) == DecodeError::Ok);
        CHECK(m.hdr.elem_type == ElemType::BF16);
        CHECK(m.payload.size() == 10);

        h = gradient_header(4);
        h.type = MsgType::Model;
        bytes = encode_gradient(h);
        REQUIRE(decode(bytes, m) == DecodeError::Ok);
        CHECK(m.hdr.type == MsgType::Model);
        CHECK(m.payload.size() == 16);
    }
    SECTION("CREDIT") {
        const CreditBody c{0xDEADBEEF, 123456, 77, 0xFFFFFFFF};
        std::array<std::uint8_t, kCreditBodySize> body{};
        REQUIRE(encode_credit(c, body));
        Header h = control_header(MsgType::Credit);
        h.flags = flag::kCongestionEcho;
        std::vector<std::uint8_t> out(100);
        REQUIRE(encode(h, body, out) == kHeaderSize + kCreditBodySize);
        out.resize(kHeaderSize + kCreditBodySize);
        Message m;
        REQUIRE(decode(out, m) == DecodeError::Ok);
        CHECK(m.hdr.type == MsgType::Credit);
        CHECK(m.hdr.flags == flag::kCongestionEcho);
        CHECK(m.hdr.worker_id == 42);
        CreditBody d;
        REQUIRE(decode_credit(m.payload, d));
        CHECK(d.credits == c.credits);
        CHECK(d.acked_seq == c.acked_seq);
        CHECK(d.learner_version == c.learner_version);
        CHECK(d.ce_count == c.ce_count);
    }
    SECTION("FEEDBACK") {
        FeedbackBody f;
        f.port_id = 3;
        f.queue_capacity = 1024;
        f.queue_depth = 1000;
        f.mark_permille = 999;
        f.queue_bytes = 0x01000000;
        f.sojourn_us = 250;
        f.merge_permille = 500;
        f.drops = 0xFFFFFFFE;
        std::array<std::uint8_t, kFeedbackBodySize> body{};
        REQUIRE(encode_feedback(f, body));
        std::vector<std::uint8_t> out(kHeaderSize + kFeedbackBodySize);
        REQUIRE(encode(control_header(MsgType::Feedback), body, out) == out.size());
        Message m;
        REQUIRE(decode(out, m) == DecodeError::Ok);
        CHECK(m.hdr.type == MsgType::Feedback);
        FeedbackBody d;
        d.reserved = 0x1234;
        REQUIRE(decode_feedback(m.payload, d));
        CHECK(d.port_id == 3);
        CHECK(d.queue_capacity == 1024);
        CHECK(d.queue_depth == 1000);
        CHECK(d.mark_permille == 999);
        CHECK(d.queue_bytes == 0x01000000u);
        CHECK(d.sojourn_us == 250);
        CHECK(d.merge_permille == 500);
        CHECK(d.reserved == 0);
        CHECK(d.drops == 0xFFFFFFFEu);
    }
}

TEST_CASE("the packet count and sender info are decoded or ignored, never refused", "[protocol]") {
    auto bytes = encode_gradient(gradient_header(2));
    for (std::size_t i = 0; i < 4; ++i) bytes[off::kPacketCount + i] = 0xFF;
    Message m;
    REQUIRE(decode(bytes, m) == DecodeError::Ok);
    CHECK(m.hdr.seq == 0x0B0C0D0E);
    CHECK(m.hdr.packet_count == 0xFF);  // above contrib_count: the learner clamps, the codec does not judge

    auto fb = encode_feedback_msg();
    fb[kHeaderSize + 18] = 0xAB;  // FEEDBACK reserved field
    REQUIRE(decode(fb, m) == DecodeError::Ok);
    FeedbackBody d;
    REQUIRE(decode_feedback(m.payload, d));
    CHECK(d.reserved == 0);
}

TEST_CASE("every DecodeError from crafted bytes", "[protocol]") {
    const auto good = encode_gradient(gradient_header(4));
    REQUIRE(decode_bytes(good) == DecodeError::Ok);
    std::set<DecodeError> seen;
    auto expect = [&](const std::vector<std::uint8_t>& b, DecodeError e) {
        CHECK(decode_bytes(b) == e);
        seen.insert(e);
    };

    SECTION("ShortPacket") {
        expect(std::vector<std::uint8_t>(good.begin(), good.begin() + kHeaderSize - 1), DecodeError::ShortPacket);
        expect({}, DecodeError::ShortPacket);
        auto c = encode_credit_msg();
        c.pop_back();
        expect(c, DecodeError::ShortPacket);
        auto f = encode_feedback_msg();
        f.resize(kHeaderSize);
        expect(f, DecodeError::ShortPacket);
    }
    SECTION("BadMagic") {
        auto b = good;
        b[0] = 0x48;
        b[1] = 0x53;
        expect(b, DecodeError::BadMagic);
    }
    SECTION("BadVersion") {
        auto b = good;
        b[off::kVersion] = 0;
        expect(b, DecodeError::BadVersion);
        b[off::kVersion] = 1;  // the layout before the packet count: refused, not misread
        expect(b, DecodeError::BadVersion);
        b[off::kVersion] = 3;
        expect(b, DecodeError::BadVersion);
    }
    SECTION("UnknownType") {
        auto b = good;
        b[off::kType] = 0;
        expect(b, DecodeError::UnknownType);
        b[off::kType] = 6;  // 5 is CREDIT_BATCH
        expect(b, DecodeError::UnknownType);
    }
    SECTION("UnknownFlags") {
        for (std::uint8_t bit : {0x10, 0x20, 0x40, 0x80}) {
            auto b = good;
            b[off::kFlags] = static_cast<std::uint8_t>(bit | flag::kCongestionExperienced);
            expect(b, DecodeError::UnknownFlags);
        }
    }
    SECTION("BadElemType") {
        auto b = good;
        b[off::kElemType] = static_cast<std::uint8_t>(ElemType::None);
        expect(b, DecodeError::BadElemType);
        b[off::kElemType] = 3;
        expect(b, DecodeError::BadElemType);
        auto c = encode_credit_msg();
        c[off::kElemType] = static_cast<std::uint8_t>(ElemType::F32);
        expect(c, DecodeError::BadElemType);
        auto f = encode_feedback_msg();
        f[off::kElemType] = static_cast<std::uint8_t>(ElemType::BF16);
        expect(f, DecodeError::BadElemType);
    }
    SECTION("BadChunk") {
        auto b = good;
        put_be16(b, off::kChunkCount, 0);
        put_be16(b, off::kChunkIndex, 0);
        expect(b, DecodeError::BadChunk);
        put_be16(b, off::kChunkCount, 5);
        put_be16(b, off::kChunkIndex, 5);
        expect(b, DecodeError::BadChunk);
        put_be16(b, off::kChunkIndex, 4);
        CHECK(decode_bytes(b) == DecodeError::Ok);
    }
    SECTION("TooManyElements") {
        Header h = gradient_header(kMaxElements);
        auto b = encode_gradient(h);
        REQUIRE(decode_bytes(b) == DecodeError::Ok);
        put_be16(b, off::kElemCount, kMaxElements + 1);
        b.resize(b.size() + 4);
        expect(b, DecodeError::TooManyElements);
    }
    SECTION("LengthMismatch") {
        auto b = good;
        b.pop_back();
        expect(b, DecodeError::LengthMismatch);
        b = good;
        b.push_back(0);
        expect(b, DecodeError::LengthMismatch);
        b = good;
        b[off::kElemType] = static_cast<std::uint8_t>(ElemType::BF16);  // 4 elems need 8 bytes, not 16
        expect(b, DecodeError::LengthMismatch);
        auto c = encode_credit_msg();
        c.push_back(0);
        expect(c, DecodeError::LengthMismatch);
        c = encode_credit_msg();
        put_be16(c, off::kElemCount, 1);
        expect(c, DecodeError::LengthMismatch);
        auto f = encode_feedback_msg();
        f.push_back(0);
        expect(f, DecodeError::LengthMismatch);
    }
    SECTION("BadContribCount") {
        auto b = good;
        put_be16(b, off::kContribCount, 0);
        expect(b, DecodeError::BadContribCount);
        put_be16(b, off::kContribCount, 2);
        expect(b, DecodeError::BadContribCount);
        b[off::kFlags] = flag::kCongestionExperienced | flag::kCongestionEcho;  // not a merge flag
        expect(b, DecodeError::BadContribCount);
        b[off::kFlags] = flag::kMerged;
        CHECK(decode_bytes(b) == DecodeError::Ok);
        b[off::kFlags] = flag::kSenderMerged;
        CHECK(decode_bytes(b) == DecodeError::Ok);
        auto c = encode_credit_msg();
        put_be16(c, off::kContribCount, 0);
        expect(c, DecodeError::BadContribCount);
        // CREDIT and FEEDBACK carry exactly one contribution and no merge flag (docs/protocol.md #10).
        for (auto control : {encode_credit_msg(), encode_feedback_msg()}) {
            REQUIRE(decode_bytes(control) == DecodeError::Ok);
            auto x = control;
            put_be16(x, off::kContribCount, 3);
            x[off::kFlags] = flag::kMerged;
            expect(x, DecodeError::BadContribCount);
            x[off::kFlags] = flag::kSenderMerged;
            expect(x, DecodeError::BadContribCount);
            x = control;
            x[off::kFlags] = static_cast<std::uint8_t>(x[off::kFlags] | flag::kMerged);
            expect(x, DecodeError::BadContribCount);
            x = control;
            x[off::kFlags] = static_cast<std::uint8_t>(x[off::kFlags] | flag::kSenderMerged);
            expect(x, DecodeError::BadContribCount);
        }
    }
    SECTION("BadTimestamps") {
        auto b = good;
        put_be64(b, off::kTsEarliest, 1001);
        put_be64(b, off::kTsLatest, 1000);
        expect(b, DecodeError::BadTimestamps);
        put_be64(b, off::kTsLatest, 1001);
        CHECK(decode_bytes(b) == DecodeError::Ok);
    }
    CHECK(seen.size() == 1);  // each section produced the one error it is named after
}

TEST_CASE("decode_header skips only the body length check", "[protocol]") {
    auto b = encode_gradient(gradient_header(4));
    b.resize(kHeaderSize);  // header says 4 elements, no body
    Header h;
    CHECK(decode_header(b, h) == DecodeError::Ok);
    CHECK(h.elem_count == 4);
    CHECK(decode_bytes(b) == DecodeError::LengthMismatch);
    b[off::kType] = 9;
    CHECK(decode_header(b, h) == DecodeError::UnknownType);
    b.resize(kHeaderSize - 1);
    CHECK(decode_header(b, h) == DecodeError::ShortPacket);
}

TEST_CASE("every DecodeError has a distinct name", "[protocol]") {
    std::set<std::string_view> names;
    for (int i = 0; i < kDecodeErrorCount; ++i) {
        const auto n = to_string(static_cast<DecodeError>(i));
        CHECK(n != "unknown decode error");
        names.insert(n);
    }
    CHECK(names.size() == kDecodeErrorCount);
    CHECK(to_string(DecodeError::Ok) == "ok");
    CHECK(to_string(static_cast<DecodeError>(kDecodeErrorCount)) == "unknown decode error");
}

TEST_CASE("encode refuses inconsistent bodies and small buffers", "[protocol]") {
    std::array<std::uint8_t, 256> out{};
    std::array<std::uint8_t, 16> body{};
    Header h = gradient_header(4);
    CHECK(encode(h, body, out) == kHeaderSize + 16);
    CHECK(encode(h, std::span(body).first(15), out) == 0);
    CHECK(encode(h, body, std::span(out).first(kHeaderSize + 15)) == 0);
    h.elem_type = ElemType::None;
    CHECK(encode(h, {}, out) == 0);
    Header c = control_header(MsgType::Credit);
    CHECK(encode(c, body, out) == kHeaderSize + kCreditBodySize);
    CHECK(encode(c, std::span(body).first(8), out) == 0);
    Header f = control_header(MsgType::Feedback);
    CHECK(encode(f, body, out) == 0);  // FEEDBACK needs 24 bytes
    CHECK_FALSE(encode_header(h, std::span(out).first(kHeaderSize - 1)));
    CHECK(elem_size(ElemType::F32) == 4);
    CHECK(elem_size(ElemType::BF16) == 2);
    CHECK(elem_size(ElemType::None) == 0);
    CHECK(elem_size(static_cast<ElemType>(9)) == 0);
}

TEST_CASE("encode accepts a body already in place", "[protocol]") {
    std::array<std::uint8_t, kHeaderSize + 8> buf{};
    for (std::size_t i = 0; i < 8; ++i) buf[kHeaderSize + i] = static_cast<std::uint8_t>(0xA0 + i);
    const Header h = gradient_header(2);
    REQUIRE(encode(h, std::span<const std::uint8_t>(buf.data() + kHeaderSize, 8), buf) == buf.size());
    Message m;
    REQUIRE(decode(buf, m) == DecodeError::Ok);
    for (std::size_t i = 0; i < 8; ++i) CHECK(m.payload[i] == 0xA0 + i);
}

TEST_CASE("in-place accessors read and rewrite only their own fields", "[protocol]") {
    Header h = gradient_header(2);
    h.flags = flag::kCongestionExperienced;
    auto b = encode_gradient(h);
    const auto before = b;
    std::uint8_t* p = b.data();
    CHECK(inplace::flags(p) == flag::kCongestionExperienced);
    CHECK(inplace::model_version(p) == 0x0708090Au);
    CHECK(inplace::contrib_count(p) == 1);
    CHECK(inplace::ts_earliest(p) == 0x1112131415161718ull);
    CHECK(inplace::ts_latest(p) == 0x1112131415161719ull);

    inplace::set_flags(p, flag::kMerged | flag::kCongestionExperienced);
    inplace::set_model_version(p, 0xA1B2C3D4);
    inplace::set_contrib_count(p, 0xBEEF);
    inplace::set_ts_earliest(p, 5);
    inplace::set_ts_latest(p, 0xFFFFFFFFFFFFFFFFull);
    CHECK(inplace::packet_count(p) == 0);
    inplace::set_packet_count(p, 7);

    CHECK(b[off::kPacketCount] == 7);
    CHECK(b[off::kSenderInfo] == 0);
    CHECK(b[off::kModelVersion] == 0xA1);
    CHECK(b[off::kModelVersion + 3] == 0xD4);
    CHECK(b[off::kContribCount] == 0xBE);
    CHECK(b[off::kContribCount + 1] == 0xEF);
    CHECK(b[off::kTsEarliest + 7] == 5);
    Message m;
    REQUIRE(decode(b, m) == DecodeError::Ok);
    CHECK(m.hdr.flags == (flag::kMerged | flag::kCongestionExperienced));
    CHECK(m.hdr.model_version == 0xA1B2C3D4u);
    CHECK(m.hdr.contrib_count == 0xBEEF);
    CHECK(m.hdr.ts_earliest_ns == 5);
    CHECK(m.hdr.ts_latest_ns == 0xFFFFFFFFFFFFFFFFull);
    CHECK(m.hdr.packet_count == 7);
    // Nothing else moved.
    CHECK(m.hdr.worker_id == h.worker_id);
    CHECK(m.hdr.seq == h.seq);
    CHECK(m.hdr.cluster_id == h.cluster_id);
    CHECK(m.hdr.chunk_index == h.chunk_index);
    CHECK(m.hdr.elem_count == 2);
    CHECK(std::equal(b.begin() + kHeaderSize, b.end(), before.begin() + kHeaderSize));
    CHECK(std::equal(b.begin(), b.begin() + off::kFlags, before.begin()));
}

TEST_CASE("merged_packet_count: exact while both counts are known and the sum fits, else unknown", "[protocol]") {
    CHECK(merged_packet_count(1, 1) == 2);
    CHECK(merged_packet_count(3, 4) == 7);
    CHECK(merged_packet_count(254, 1) == 255);
    CHECK(merged_packet_count(255, 1) == 0);   // would overflow: unknown, never a wrapped small count
    CHECK(merged_packet_count(200, 100) == 0);
    CHECK(merged_packet_count(0, 5) == 0);     // an arrival or a waiting packet without a count
    CHECK(merged_packet_count(5, 0) == 0);
    CHECK(merged_packet_count(0, 0) == 0);
}

TEST_CASE("CREDIT_BATCH: entry layout, round trip and every rejection", "[protocol]") {
    const CreditBatchEntry e0{0x01020304, flag::kCongestionEcho, CreditBody{7, 99, 12, 3}};
    const CreditBatchEntry e1{0x0A0B0C0D, 0, CreditBody{1, 2, 3, 0}};
    std::vector<std::uint8_t> body(2 * kCreditBatchEntrySize, 0xEE);
    REQUIRE(encode_credit_batch_entry(e0, body));
    REQUIRE(encode_credit_batch_entry(e1, std::span<std::uint8_t>(body).subspan(kCreditBatchEntrySize)));
    // worker_id, flags, three reserved zero bytes, then the CREDIT body as a CREDIT has it.
    const std::vector<std::uint8_t> first(body.begin(), body.begin() + kCreditBatchEntrySize);
    CHECK(first == std::vector<std::uint8_t>{0x01, 0x02, 0x03, 0x04, 0x04, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 99,
                                             0, 0, 0, 12, 0, 0, 0, 3});
    Header h = control_header(MsgType::CreditBatch);
    h.worker_id = 0;
    h.elem_count = 2;
    std::vector<std::uint8_t> msg(kHeaderSize + body.size());
    REQUIRE(encode(h, body, msg) == msg.size());
    Message m;
    REQUIRE(decode(msg, m) == DecodeError::Ok);
    CHECK(m.hdr.type == MsgType::CreditBatch);
    CHECK(m.hdr.elem_count == 2);
    CreditBatchEntry d;
    REQUIRE(decode_credit_batch_entry(m.payload, 1, d));
    CHECK(d.worker_id == e1.worker_id);
    CHECK(d.flags == 0);
    CHECK(d.body.credits == 1);
    CHECK(d.body.acked_seq == 2);
    CHECK(d.body.learner_version == 3);
    REQUIRE(decode_credit_batch_entry(m.payload, 0, d));
    CHECK(d.flags == flag::kCongestionEcho);
    CHECK(d.body.ce_count == 3);
    CHECK_FALSE(decode_credit_batch_entry(m.payload, 2, d));  // past the body

    SECTION("a body one byte short or long, or not a whole number of entries") {
        auto b = msg;
        b.pop_back();
        CHECK(decode(b, m) == DecodeError::ShortPacket);
        b = msg;
        b.push_back(0);
        CHECK(decode(b, m) == DecodeError::LengthMismatch);
    }
    SECTION("no entries, or more than fit a 1,500-byte datagram") {
        auto b = msg;
        shesha::be::store16(b.data() + off::kElemCount, 0);
        CHECK(decode(b, m) == DecodeError::LengthMismatch);
        shesha::be::store16(b.data() + off::kElemCount, kMaxCreditBatchEntries + 1);
        CHECK(decode(b, m) == DecodeError::LengthMismatch);
        CHECK(kHeaderSize + kMaxCreditBatchEntries * kCreditBatchEntrySize + 28 <= 1500);
    }
    SECTION("an element type, or a merged flag") {
        auto b = msg;
        b[off::kElemType] = static_cast<std::uint8_t>(ElemType::F32);
        CHECK(decode(b, m) == DecodeError::BadElemType);
        b = msg;
        b[off::kFlags] = flag::kMerged;
        CHECK(decode(b, m) == DecodeError::BadContribCount);
    }
    SECTION("an entry with flags a CREDIT may not carry is refused by the entry decoder") {
        auto b = msg;
        b[kHeaderSize + kCreditBatchEntrySize + 4] = flag::kCongestionExperienced;
        REQUIRE(decode(b, m) == DecodeError::Ok);
        CHECK_FALSE(decode_credit_batch_entry(m.payload, 1, d));
        CHECK_FALSE(encode_credit_batch_entry(CreditBatchEntry{1, flag::kMerged, {}}, body));
    }
    SECTION("encode refuses 0 or too many entries") {
        h.elem_count = 0;
        CHECK(encode(h, {}, msg) == 0);
        h.elem_count = kMaxCreditBatchEntries + 1;
        std::vector<std::uint8_t> big((kMaxCreditBatchEntries + 1) * kCreditBatchEntrySize);
        std::vector<std::uint8_t> out(kHeaderSize + big.size());
        CHECK(encode(h, big, out) == 0);
    }
}

// Chunk layout, finiteness checks, the Reassembler's validation (every rejection counted, nothing
// partially applied), and the whole path: CreditSender split -> wire -> merge as the switch does
// (switch/core add_f32, header rewrite as docs/protocol.md says) -> wire -> Reassembler, which
// must equal the in-process sum bit for bit.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "gradient_pattern.h"
#include "merge_kernel.h"
#include "protocol.h"
#include "transport/chunking.h"
#include "transport/credit_sender.h"
#include "seq_window.h"

using namespace shesha;
using namespace shesha::transport;

namespace {

constexpr std::uint16_t kCluster = 11;

std::vector<std::uint8_t> to_bytes(std::span<const float> v) {
    std::vector<std::uint8_t> b(v.size_bytes());
    std::memcpy(b.data(), v.data(), b.size());
    return b;
}

proto::Header gradient_header(const ChunkLayout& l, std::uint16_t chunk) {
    proto::Header h;
    h.type = proto::MsgType::Gradient;
    h.elem_type = proto::ElemType::F32;
    h.cluster_id = kCluster;
    set_chunk_fields(l, chunk, h);
    return h;
}

// Encodes an outgoing chunk into a wire message, as a worker would.
std::vector<std::uint8_t> encode_chunk(const OutgoingChunk& c) {
    std::vector<std::uint8_t> wire(proto::kHeaderSize + c.elements.size_bytes());
    const std::size_t n = proto::encode(c.header, to_bytes(c.elements), wire);
    REQUIRE(n == wire.size());
    return wire;
}

// What the switch's aggregating queue does to the waiting message when an arrival merges into it
// (docs/protocol.md, "What the switch rewrites when it merges").
void switch_merge(std::vector<std::uint8_t>& waiting, const std::vector<std::uint8_t>& arrival) {
    std::uint8_t* w = waiting.data();
    const std::uint8_t* a = arrival.data();
    REQUIRE(waiting.size() == arrival.size());
    const std::size_t n = (waiting.size() - proto::kHeaderSize) / sizeof(float);
    core::add_f32(reinterpret_cast<float*>(w + proto::kHeaderSize),
                  reinterpret_cast<const float*>(a + proto::kHeaderSize), n);
    proto::inplace::set_contrib_count(w, proto::inplace::contrib_count(w) + proto::inplace::contrib_count(a));
    proto::inplace::set_ts_earliest(w, std::min(proto::inplace::ts_earliest(w), proto::inplace::ts_earliest(a)));
    proto::inplace::set_ts_latest(w, std::max(proto::inplace::ts_latest(w), proto::inplace::ts_latest(a)));
    proto::inplace::set_model_version(w, std::min(proto::inplace::model_version(w), proto::inplace::model_version(a)));
    proto::inplace::set_flags(w, proto::inplace::flags(w) | proto::flag::kMerged |
                                     (proto::inplace::flags(a) & proto::flag::kCongestionExperienced));
}

}  // namespace

TEST_CASE("make_layout: chunk counts, the short last chunk, and refusals") {
    auto l = make_layout(10, 4);
    REQUIRE(l);
    CHECK(l->chunk_count == 3);
    CHECK(l->elems_in(0) == 4);
    CHECK(l->elems_in(1) == 4);
    CHECK(l->elems_in(2) == 2);
    CHECK(l->elems_in(3) == 0);
    CHECK(l->offset(2) == 8);

    l = make_layout(8, 4);
    REQUIRE(l);
    CHECK(l->chunk_count == 2);
    CHECK(l->elems_in(1) == 4);

    l = make_layout(1, 2048);
    REQUIRE(l);
    CHECK(l->chunk_count == 1);
    CHECK(l->elems_in(0) == 1);

    REQUIRE(make_layout(65535, 1));
    CHECK(make_layout(65535, 1)->chunk_count == 65535);
    std::string error;
    CHECK_FALSE(make_layout(65536, 1, &error));
    CHECK(error.find("65535") != std::string::npos);
    CHECK_FALSE(make_layout(0, 4, &error));
    CHECK_FALSE(make_layout(10, 0, &error));
    CHECK_FALSE(make_layout(10, 2049, &error));
    CHECK(error.find("kMaxElements") != std::string::npos);
}

TEST_CASE("chunk_slice and set_chunk_fields follow the layout") {
    const ChunkLayout l = *make_layout(10, 4);
    std::vector<float> flat{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    const std::span<const float> cflat(flat);
    const auto s2 = chunk_slice(l, cflat, 2);
    REQUIRE(s2.size() == 2);
    CHECK(s2[0] == 8);
    CHECK(s2[1] == 9);
    CHECK(chunk_slice(l, cflat, 3).empty());
    CHECK(chunk_slice(l, cflat.first(9), 0).empty());  // wrong model size
    chunk_slice(l, std::span<float>(flat), 1)[0] = 40;
    CHECK(flat[4] == 40);

    proto::Header h;
    set_chunk_fields(l, 2, h);
    CHECK(h.chunk_index == 2);
    CHECK(h.chunk_count == 3);
    CHECK(h.elem_count == 2);
}

TEST_CASE("all_finite rejects NaN and infinities, accepts every finite value") {
    const float finite[] = {0.0f, -0.0f, 1.0f, -3.5f, std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::lowest(), std::numeric_limits<float>::denorm_min(),
                            std::numeric_limits<float>::min()};
    CHECK(all_finite(finite));
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::signaling_NaN(),
                      std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                      std::bit_cast<float>(0xFFFFFFFFu)}) {
        std::vector<float> v(37, 1.0f);
        v[29] = bad;
        CHECK_FALSE(all_finite(v));
    }
    // Unaligned bytes, as in a received frame.
    std::vector<std::uint8_t> buf(1 + 3 * 4);
    const float vals[] = {1.0f, 2.0f, std::numeric_limits<float>::infinity()};
    std::memcpy(buf.data() + 1, vals, sizeof vals);
    CHECK(all_finite(buf.data() + 1, 2));
    CHECK_FALSE(all_finite(buf.data() + 1, 3));
}

TEST_CASE("Reassembler applies valid chunks at their offsets and counts contributions") {
    const ChunkLayout l = *make_layout(10, 4);
    Reassembler r(l, kCluster);
    std::vector<float> target(10, 100.0f);
    const std::vector<float> c2{1.5f, -2.0f};
    proto::Header h = gradient_header(l, 2);
    h.contrib_count = 3;
    h.flags = proto::flag::kMerged;
    CHECK(r.apply(h, to_bytes(c2), target) == ApplyResult::Ok);
    CHECK(target[8] == 101.5f);
    CHECK(target[9] == 98.0f);
    for (int i = 0; i < 8; ++i) CHECK(target[i] == 100.0f);
    CHECK(r.contributions(2) == 3);
    CHECK(r.contributions(0) == 0);
    CHECK(r.chunks_covered() == 1);
    CHECK_FALSE(r.complete());

    const std::vector<float> c0{1, 2, 3, 4}, c1{5, 6, 7, 8};
    CHECK(r.apply(gradient_header(l, 0), to_bytes(c0), target) == ApplyResult::Ok);
    CHECK(r.apply(gradient_header(l, 1), to_bytes(c1), target) == ApplyResult::Ok);
    CHECK(r.apply(gradient_header(l, 1), to_bytes(c1), target) == ApplyResult::Ok);
    CHECK(r.complete());
    CHECK(r.chunks_covered() == 3);
    CHECK(r.contributions(1) == 2);
    CHECK(target[5] == 112.0f);
    CHECK(r.stats().applied == 4);
    CHECK(r.stats().contributions == 6);
    CHECK(r.stats().rejected_total() == 0);
    r.reset();
    CHECK(r.chunks_covered() == 0);
    CHECK(r.contributions(1) == 0);
    CHECK(r.stats().applied == 4);  // stats survive a reset
}

TEST_CASE("Reassembler refuses bad chunks, applies nothing of them, and counts each reason") {
    const ChunkLayout l = *make_layout(10, 4);
    Reassembler r(l, kCluster);
    std::vector<float> target(10, 0.0f);
    const std::vector<float> full{1, 2, 3, 4};
    const std::vector<float> last{1, 2};

    proto::Header h = gradient_header(l, 0);
    h.type = proto::MsgType::Model;
    CHECK(r.apply(h, to_bytes(full), target) == ApplyResult::WrongType);

    h = gradient_header(l, 0);
    h.elem_type = proto::ElemType::BF16;
    CHECK(r.apply(h, to_bytes(full), target) == ApplyResult::WrongElemType);

    h = gradient_header(l, 0);
    h.cluster_id = kCluster + 1;
    CHECK(r.apply(h, to_bytes(full), target) == ApplyResult::WrongCluster);

    h = gradient_header(l, 0);
    h.chunk_count = 4;  // a different model size
    CHECK(r.apply(h, to_bytes(full), target) == ApplyResult::WrongChunkCount);

    h = gradient_header(l, 0);
    h.chunk_index = 3;  // out of range (a hand-built header: proto::decode would refuse it too)
    CHECK(r.apply(h, to_bytes(full), target) == ApplyResult::BadChunkIndex);
    h.chunk_index = 0xFFFF;
    CHECK(r.apply(h, to_bytes(full), target) == ApplyResult::BadChunkIndex);

    h = gradient_header(l, 2);
    h.elem_count = 4;  // the last chunk claims a full chunk
    CHECK(r.apply(h, to_bytes(full), target) == ApplyResult::WrongElemCount);
    h = gradient_header(l, 0);
    h.elem_count = 3;
    CHECK(r.apply(h, to_bytes(std::span<const float>(full).first(3)), target) == ApplyResult::WrongElemCount);

    h = gradient_header(l, 2);
    CHECK(r.apply(h, to_bytes(full), target) == ApplyResult::LengthMismatch);

    std::vector<float> poisoned{1, 2, 3, std::numeric_limits<float>::quiet_NaN()};
    CHECK(r.apply(gradient_header(l, 1), to_bytes(poisoned), target) == ApplyResult::NonFinite);
    poisoned[3] = std::numeric_limits<float>::infinity();
    CHECK(r.apply(gradient_header(l, 1), to_bytes(poisoned), target) == ApplyResult::NonFinite);
    poisoned[0] = -std::numeric_limits<float>::infinity();
    poisoned[3] = 4;
    CHECK(r.apply(gradient_header(l, 1), to_bytes(poisoned), target) == ApplyResult::NonFinite);

    std::vector<float> short_target(9, 0.0f);
    CHECK(r.apply(gradient_header(l, 2), to_bytes(last), short_target) == ApplyResult::TargetSize);

    for (float x : target) CHECK(x == 0.0f);  // nothing of any rejected chunk was applied
    for (float x : short_target) CHECK(x == 0.0f);
    const auto& rej = r.stats().rejected;
    CHECK(rej[static_cast<int>(ApplyResult::WrongType)] == 1);
    CHECK(rej[static_cast<int>(ApplyResult::WrongElemType)] == 1);
    CHECK(rej[static_cast<int>(ApplyResult::WrongCluster)] == 1);
    CHECK(rej[static_cast<int>(ApplyResult::WrongChunkCount)] == 1);
    CHECK(rej[static_cast<int>(ApplyResult::BadChunkIndex)] == 2);
    CHECK(rej[static_cast<int>(ApplyResult::WrongElemCount)] == 2);
    CHECK(rej[static_cast<int>(ApplyResult::LengthMismatch)] == 1);
    CHECK(rej[static_cast<int>(ApplyResult::NonFinite)] == 3);
    CHECK(rej[static_cast<int>(ApplyResult::TargetSize)] == 1);
    CHECK(r.stats().rejected_total() == 13);
    CHECK(r.stats().applied == 0);
    CHECK(r.chunks_covered() == 0);
    CHECK(to_string(ApplyResult::NonFinite) == "NonFinite");
}

TEST_CASE("Reassembler in Overwrite mode installs MODEL chunks") {
    const ChunkLayout l = *make_layout(6, 4);
    Reassembler r(l, kCluster, proto::MsgType::Model, ApplyMode::Overwrite);
    std::vector<float> params(6, 9.0f);
    proto::Header h = gradient_header(l, 1);
    h.type = proto::MsgType::Model;
    const std::vector<float> c1{-1, -2};
    CHECK(r.apply(h, to_bytes(c1), params) == ApplyResult::Ok);
    CHECK(r.apply(h, to_bytes(c1), params) == ApplyResult::Ok);  // idempotent, not summed
    CHECK(params == std::vector<float>{9, 9, 9, 9, -1, -2});
    CHECK(r.apply(gradient_header(l, 1), to_bytes(c1), params) == ApplyResult::WrongType);
}

TEST_CASE("Reassembler refuses an inconsistent hand-made layout") {
    ChunkLayout bad;
    bad.model_elems = 10;
    bad.chunk_elems = 4;
    bad.chunk_count = 2;  // covers only 8
    CHECK_THROWS_AS(Reassembler(bad, kCluster), std::invalid_argument);
    bad.chunk_count = 4;  // one chunk too many
    CHECK_THROWS_AS(Reassembler(bad, kCluster), std::invalid_argument);
}

TEST_CASE("split -> switch merge -> reassemble equals the in-process sum, bit for bit") {
    SenderConfig c;
    c.cluster_id = kCluster;
    c.model_elems = 2048 * 2 + 777;  // 3 chunks, the last short
    c.chunk_elems = 2048;
    c.w_init = c.w_max = 8;
    c.w_min = 1;

    constexpr int kWorkers = 3;
    std::mt19937 rng(2024);
    std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
    std::vector<std::vector<float>> grads(kWorkers, std::vector<float>(c.model_elems));
    std::vector<CreditSender> senders;
    for (int w = 0; w < kWorkers; ++w) {
        c.worker_id = 100 + w;
        senders.emplace_back(c);
        for (float& x : grads[w]) x = dist(rng);
        REQUIRE(senders[w].offer_update(20 + w, 1000 * (w + 1), grads[w]) == OfferResult::Ok);
    }
    // In-process reference: the switch adds arrivals into the waiting packet in arrival order.
    std::vector<float> expected = grads[0];
    for (int w = 1; w < kWorkers; ++w)
        for (std::size_t i = 0; i < expected.size(); ++i) expected[i] += grads[w][i];

    const ChunkLayout& l = senders[0].layout();
    Reassembler r(l, kCluster);
    std::vector<float> target(c.model_elems, 0.0f);
    for (std::uint16_t k = 0; k < l.chunk_count; ++k) {
        std::vector<std::vector<std::uint8_t>> wires;
        for (auto& s : senders) {
            const auto out = s.next_to_send(0);
            REQUIRE(out);
            REQUIRE(out->header.chunk_index == k);
            wires.push_back(encode_chunk(*out));
        }
        for (int w = 1; w < kWorkers; ++w) switch_merge(wires[0], wires[w]);

        proto::Message m;
        REQUIRE(proto::decode(wires[0], m) == proto::DecodeError::Ok);
        CHECK(m.hdr.contrib_count == kWorkers);
        CHECK(m.hdr.flags == proto::flag::kMerged);
        CHECK(m.hdr.model_version == 20);
        CHECK(m.hdr.worker_id == 100);
        CHECK(m.hdr.ts_earliest_ns == 1000);
        CHECK(m.hdr.ts_latest_ns == 3000);
        REQUIRE(r.apply(m, target) == ApplyResult::Ok);
        CHECK(r.contributions(k) == kWorkers);
    }
    CHECK(r.complete());
    for (std::size_t i = 0; i < target.size(); ++i)
        REQUIRE(std::bit_cast<std::uint32_t>(target[i]) == std::bit_cast<std::uint32_t>(0.0f + expected[i]));
}

TEST_CASE("sender-side and in-network merges compose: pattern sums verify with the total count") {
    SenderConfig c;
    c.cluster_id = kCluster;
    c.model_elems = 1000;
    c.chunk_elems = 300;  // 300, 300, 300, 100
    c.w_init = c.w_min = c.w_max = 4;
    c.additive_increase = 0;
    const ChunkLayout l = *make_layout(c.model_elems, c.chunk_elems);
    auto pattern_gradient = [&](std::uint32_t worker) {
        std::vector<float> g(l.model_elems);
        for (std::uint16_t k = 0; k < l.chunk_count; ++k) {
            std::span<float> s = chunk_slice(l, std::span<float>(g), k);
            pattern::fill(s.data(), s.size(), kCluster, k, worker);
        }
        return g;
    };
    // Worker A: three updates merged at the sender; worker B: one update.
    c.worker_id = 1;
    CreditSender a(c);
    for (int u = 0; u < 3; ++u) REQUIRE(a.offer_update(5, 10 + u, pattern_gradient(1)) == OfferResult::Ok);
    c.worker_id = 2;
    CreditSender b(c);
    REQUIRE(b.offer_update(5, 7, pattern_gradient(2)) == OfferResult::Ok);

    Reassembler r(l, kCluster);
    std::vector<float> sum(l.model_elems, 0.0f);
    for (std::uint16_t k = 0; k < l.chunk_count; ++k) {
        const auto oa = a.next_to_send(0);
        const auto ob = b.next_to_send(0);
        REQUIRE(oa);
        REQUIRE(ob);
        CHECK(oa->header.flags == proto::flag::kSenderMerged);
        std::vector<std::uint8_t> wa = encode_chunk(*oa);
        switch_merge(wa, encode_chunk(*ob));
        proto::Message m;
        REQUIRE(proto::decode(wa, m) == proto::DecodeError::Ok);
        CHECK(m.hdr.contrib_count == 4);
        CHECK(m.hdr.flags == (proto::flag::kSenderMerged | proto::flag::kMerged));
        REQUIRE(r.apply(m, sum) == ApplyResult::Ok);
        const std::span<const float> slice = chunk_slice(l, std::span<const float>(sum), k);
        CHECK(slice[1] == 3 * 2 + 3);  // weights: worker 1 is 2 (three times), worker 2 is 3
        CHECK(pattern::verify(slice.data(), slice.size(), kCluster, k, 4) == pattern::Check::Ok);
    }
    CHECK(r.stats().contributions == 4 * 4);
}

TEST_CASE("SeqWindow: a seq is new once; reordering within the window is not a duplicate; too old is said") {
    SeqWindow w;
    CHECK(w.empty());
    CHECK(w.classify(100) == SeqVerdict::New);
    w.mark(100);
    CHECK(w.classify(100) == SeqVerdict::Duplicate);
    // Ahead: new; the window slides.
    CHECK(w.classify(105) == SeqVerdict::New);
    w.mark(105);
    CHECK(w.highest() == 105);
    // Reordered: 101..104 arrive after 105, each new once, then duplicates.
    for (std::uint32_t s = 101; s <= 104; ++s) {
        CHECK(w.classify(s) == SeqVerdict::New);
        w.mark(s);
        CHECK(w.classify(s) == SeqVerdict::Duplicate);
    }
    CHECK(w.classify(100) == SeqVerdict::Duplicate);
    // The oldest seq the window still remembers is highest - 63; one more back cannot be told.
    CHECK(w.classify(105 - 63) == SeqVerdict::New);
    CHECK(w.classify(105 - 64) == SeqVerdict::TooOld);
    // A jump of the whole width forgets everything older.
    w.mark(105 + 64);
    CHECK(w.classify(105) == SeqVerdict::TooOld);
    CHECK(w.classify(105 + 1) == SeqVerdict::New);
    CHECK(w.classify(105 + 64) == SeqVerdict::Duplicate);
    // Marking a too-old seq changes nothing.
    w.mark(3);
    CHECK(w.classify(3) == SeqVerdict::TooOld);
    w.clear();
    CHECK(w.classify(3) == SeqVerdict::New);
}

TEST_CASE("SeqWindow: serial order across the 32-bit wrap") {
    SeqWindow w;
    w.mark(0xFFFFFFFEU);
    CHECK(w.classify(0xFFFFFFFFU) == SeqVerdict::New);
    CHECK(w.classify(1) == SeqVerdict::New);  // ahead across the wrap
    w.mark(1);
    CHECK(w.highest() == 1);
    CHECK(w.classify(0xFFFFFFFEU) == SeqVerdict::Duplicate);  // 3 behind, seen
    CHECK(w.classify(0xFFFFFFFFU) == SeqVerdict::New);        // 2 behind, not seen
    CHECK(w.classify(0) == SeqVerdict::New);
    CHECK(w.classify(1U - 64U) == SeqVerdict::TooOld);
}

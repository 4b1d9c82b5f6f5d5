// CreditSender and CreditPlanner: scripted credits, marks, feedback and timeouts give exact
// windows, alphas and counters; the sender-side merge gives exact sums (pattern::verify) in
// bounded memory; planned credits close the loop through an in-network merge without leaks.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "gradient_pattern.h"
#include "protocol.h"
#include "transport/credit_planner.h"
#include "transport/credit_sender.h"

using namespace shesha;
using namespace shesha::transport;

namespace {

constexpr std::uint16_t kCluster = 7;

SenderConfig small_config() {
    SenderConfig c;
    c.cluster_id = kCluster;
    c.worker_id = 3;
    c.model_elems = 64;
    c.chunk_elems = 1;  // 64 one-element chunks: plenty of pending chunks for window scripts
    c.w_init = 4;
    c.w_min = 1;
    c.w_max = 6;
    c.additive_increase = 1;
    c.gain = 0.25;  // a power of two, so every alpha below is exact in binary
    c.alpha_init = 0;
    c.credit_timeout_ns = 200;
    c.slow_start = false;  // most scripts below are about congestion avoidance; slow start has its own
    return c;
}

void offer_ones(CreditSender& s, std::uint32_t version = 1, std::uint64_t ts = 1) {
    std::vector<float> g(s.layout().model_elems, 1.0f);
    REQUIRE(s.offer_update(version, ts, g) == OfferResult::Ok);
}

// Sends every chunk the window allows; returns how many went out.
std::uint32_t send_burst(CreditSender& s, std::uint64_t now = 0) {
    std::uint32_t n = 0;
    while (s.next_to_send(now)) ++n;
    return n;
}

proto::CreditBody credit(std::uint32_t credits, std::uint32_t ce = 0) {
    proto::CreditBody b;
    b.credits = credits;
    b.ce_count = ce;
    return b;
}

// Fills a flat gradient with worker w's pattern, chunk by chunk.
std::vector<float> pattern_gradient(const ChunkLayout& l, std::uint32_t worker) {
    std::vector<float> g(l.model_elems);
    for (std::uint16_t k = 0; k < l.chunk_count; ++k) {
        std::span<float> slice = chunk_slice(l, std::span<float>(g), k);
        pattern::fill(slice.data(), slice.size(), kCluster, k, worker);
    }
    return g;
}

}  // namespace

TEST_CASE("config validation names the problem and the constructor refuses bad configs") {
    SenderConfig c = small_config();
    CHECK(validate(c).empty());
    c.w_min = 0;
    CHECK(validate(c).find("w_min") != std::string::npos);
    c.w_min = 0.5;  // below one chunk: pacing
    CHECK(validate(c).empty());
    c = small_config();
    c.w_init = 7;
    CHECK(validate(c).find("w_init") != std::string::npos);
    c = small_config();
    c.w_max = 0.9;
    CHECK(validate(c).find("w_max") != std::string::npos);
    c = small_config();
    c.gain = 0;
    CHECK(validate(c).find("gain") != std::string::npos);
    c = small_config();
    c.alpha_init = 1.5;
    CHECK(validate(c).find("alpha_init") != std::string::npos);
    c = small_config();
    c.chunk_elems = 4096;
    CHECK(validate(c).find("kMaxElements") != std::string::npos);
    CHECK_THROWS_AS(CreditSender(c), std::invalid_argument);
    c = small_config();
    c.model_elems = 0;
    CHECK_FALSE(validate(c).empty());
}

TEST_CASE("credits gate sending exactly") {
    SenderConfig c = small_config();
    c.w_init = 3;
    c.additive_increase = 0;  // keep W fixed: this test is about credits only
    CreditSender s(c);
    CHECK(s.credits_available() == 3);
    CHECK_FALSE(s.next_to_send(0));  // nothing pending yet
    CHECK(s.counters().chunks_sent == 0);

    offer_ones(s);
    CHECK(s.pending_chunks() == 64);
    CHECK(send_burst(s) == 3);
    CHECK(s.in_flight() == 3);
    CHECK(s.credits_available() == 0);
    CHECK(s.pending_chunks() == 61);

    s.on_credit(credit(1), 0, 10);
    CHECK(s.in_flight() == 2);
    CHECK(s.credits_available() == 1);
    CHECK(send_burst(s) == 1);
    CHECK_FALSE(s.next_to_send(10));

    s.on_credit(credit(2), 0, 11);
    CHECK(send_burst(s) == 2);
    CHECK(s.in_flight() == 3);

    // Credits beyond what is in flight are counted and ignored: they never open the window wider.
    s.on_credit(credit(10), 0, 12);
    CHECK(s.in_flight() == 0);
    CHECK(s.counters().credits_excess == 7);
    CHECK(s.counters().credits_received == 13);
    CHECK(s.counters().credit_messages == 3);
    CHECK(send_burst(s) == 3);
    CHECK(s.counters().chunks_sent == 9);
    CHECK(s.window() == 3.0);
}

TEST_CASE("chunks go out oldest first with complete headers") {
    SenderConfig c = small_config();
    c.model_elems = 10;
    c.chunk_elems = 4;  // chunks of 4, 4, 2
    c.w_init = c.w_max = 6;
    CreditSender s(c);
    std::vector<float> g{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    REQUIRE(s.offer_update(42, 1000, g) == OfferResult::Ok);
    for (std::uint16_t k = 0; k < 3; ++k) {
        const auto out = s.next_to_send(5);
        REQUIRE(out);
        const proto::Header& h = out->header;
        CHECK(h.type == proto::MsgType::Gradient);
        CHECK(h.elem_type == proto::ElemType::F32);
        CHECK(h.flags == 0);
        CHECK(h.cluster_id == kCluster);
        CHECK(h.worker_id == 3);
        CHECK(h.model_version == 42);
        CHECK(h.seq == 1);
        CHECK(h.chunk_index == k);
        CHECK(h.chunk_count == 3);
        CHECK(h.elem_count == (k < 2 ? 4 : 2));
        CHECK(h.contrib_count == 1);
        CHECK(h.ts_earliest_ns == 1000);
        CHECK(h.ts_latest_ns == 1000);
        REQUIRE(out->elements.size() == h.elem_count);
        for (std::size_t i = 0; i < out->elements.size(); ++i) CHECK(out->elements[i] == float(4 * k + i));
    }
    CHECK(s.next_seq() == 2);
}

TEST_CASE("window grows by additive_increase per unmarked round and clamps at w_max") {
    CreditSender s(small_config());  // W = 4, w_max = 6
    offer_ones(s);
    CHECK(send_burst(s) == 4);
    s.on_credit(credit(4), 0, 1);
    CHECK(s.window() == 5.0);
    CHECK(send_burst(s) == 5);
    s.on_credit(credit(5), 0, 2);
    CHECK(s.window() == 6.0);
    CHECK(send_burst(s) == 6);
    s.on_credit(credit(6), 0, 3);
    CHECK(s.window() == 6.0);  // clamped
    CHECK(s.counters().rounds == 3);
    CHECK(s.counters().round_increases == 3);
    CHECK(s.counters().round_reductions == 0);
    CHECK(s.alpha() == 0.0);
}

TEST_CASE("slow start doubles the window per unmarked round until the first marked round, then adds") {
    SenderConfig c = small_config();
    c.slow_start = true;
    c.w_max = 64;
    CreditSender s(c);  // W = 4, 64 chunks pending
    offer_ones(s);
    CHECK(s.in_slow_start());
    CHECK(send_burst(s) == 4);
    s.on_credit(credit(4), 0, 1);
    CHECK(s.window() == 8.0);
    CHECK(send_burst(s) == 8);
    s.on_credit(credit(8), 0, 2);
    CHECK(s.window() == 16.0);
    CHECK(s.counters().slow_start_increases == 2);
    // A marked round ends it: F = 2/16, alpha = 0.25 * 0.125 = 0.03125, W = 16 * (1 - 0.015625).
    CHECK(send_burst(s) == 16);
    s.on_credit(credit(16, 2), proto::flag::kCongestionEcho, 3);
    CHECK_FALSE(s.in_slow_start());
    CHECK(s.window() == 15.75);
    // From then on an unmarked round adds additive_increase, as without slow start.
    CHECK(send_burst(s) == 15);
    s.on_credit(credit(15), 0, 4);
    CHECK(s.window() == 16.75);
    CHECK(s.counters().slow_start_increases == 2);
    CHECK(s.counters().round_increases == 3);
    CHECK(s.counters().round_reductions == 1);
}

TEST_CASE("slow start grows by what the round credited, at most doubling, and stops at w_max") {
    SenderConfig c = small_config();
    c.slow_start = true;
    c.model_elems = 3;  // three one-element chunks per update: the sender cannot fill W = 4
    c.w_max = 9;
    CreditSender s(c);
    offer_ones(s);
    CHECK(send_burst(s) == 3);
    s.on_credit(credit(3), 0, 1);
    CHECK(s.window() == 7.0);  // 4 + the 3 credited, not 8
    offer_ones(s, 2);
    CHECK(send_burst(s) == 3);
    s.on_credit(credit(3), 0, 2);
    CHECK(s.window() == 9.0);  // 7 + 3 clamped at w_max
    CHECK(s.in_slow_start());
}

TEST_CASE("slow start ends at a FEEDBACK cut and at a credit timeout") {
    SenderConfig c = small_config();
    c.slow_start = true;
    c.w_max = 64;
    {
        CreditSender s(c);
        offer_ones(s);
        CHECK(send_burst(s) == 4);
        proto::FeedbackBody fb;
        fb.mark_permille = 500;
        s.on_feedback(fb, 1);  // W = 4 * 0.75 = 3
        CHECK_FALSE(s.in_slow_start());
        s.on_credit(credit(4), 0, 2);  // the round that had its cut neither grows nor doubles
        CHECK(s.window() == 3.0);
        CHECK(send_burst(s) == 3);
        s.on_credit(credit(3), 0, 3);
        CHECK(s.window() == 4.0);  // additive from here
        CHECK(s.counters().slow_start_increases == 0);
    }
    {
        CreditSender s(c);
        offer_ones(s);
        CHECK(send_burst(s, 0) == 4);
        CHECK(s.on_timeout(1000));
        CHECK_FALSE(s.in_slow_start());
        CHECK(send_burst(s, 1000) == 4);
        s.on_credit(credit(4), 0, 1001);
        CHECK(s.window() == 5.0);
        CHECK(s.counters().slow_start_increases == 0);
    }
}

TEST_CASE("a round ends only when every chunk sent before it began is credited") {
    SenderConfig c = small_config();
    c.w_max = 16;
    CreditSender s(c);
    offer_ones(s);
    CHECK(send_burst(s) == 4);
    s.on_credit(credit(4), 0, 1);  // round 1 (began with nothing sent) ends: W 4 -> 5
    CHECK(s.counters().rounds == 1);
    CHECK(s.window() == 5.0);
    // Round 2 began with nothing in flight (everything sent was credited), so like DCTCP's
    // snd_una >= next_seq test it ends at its first credit.
    CHECK(send_burst(s) == 5);  // 9 sent
    s.on_credit(credit(1), 0, 2);
    CHECK(s.counters().rounds == 2);
    CHECK(s.window() == 6.0);
    // Round 3 began with chunks 5..9 in flight: it ends when the 9th chunk is retired.
    CHECK(send_burst(s) == 2);  // 11 sent, 6 in flight
    for (int i = 0; i < 3; ++i) s.on_credit(credit(1), 0, 3);
    CHECK(s.counters().rounds == 2);
    CHECK(s.window() == 6.0);
    s.on_credit(credit(1), 0, 4);
    CHECK(s.counters().rounds == 3);
    CHECK(s.window() == 7.0);
    CHECK(s.in_flight() == 2);
}

TEST_CASE("marked rounds cut W to W*(1-alpha/2) with alpha the EWMA of the mark fraction") {
    SenderConfig c = small_config();
    c.w_init = 8;
    c.w_max = 16;
    c.w_min = 2;
    CreditSender s(c);
    offer_ones(s);

    CHECK(send_burst(s) == 8);
    s.on_credit(credit(8, 2), proto::flag::kCongestionEcho, 1);
    // F = 2/8; alpha = 0.75*0 + 0.25*0.25 = 0.0625; W = 8 * (1 - 0.03125) = 7.75
    CHECK(s.alpha() == 0.0625);
    CHECK(s.window() == 7.75);
    CHECK(s.counters().marks_echoed == 2);
    CHECK(s.counters().round_reductions == 1);

    CHECK(send_burst(s) == 7);  // floor(7.75)
    s.on_credit(credit(7, 7), proto::flag::kCongestionEcho, 2);
    // F = 1; alpha = 0.75*0.0625 + 0.25 = 0.296875; W = 7.75 * (1 - 0.1484375) = 6.599609375
    CHECK(s.alpha() == 0.296875);
    CHECK(s.window() == 6.599609375);

    CHECK(send_burst(s) == 6);
    s.on_credit(credit(6, 0), 0, 3);
    // unmarked round: alpha decays (0.75 * 0.296875 = 0.22265625), W grows by 1
    CHECK(s.alpha() == 0.22265625);
    CHECK(s.window() == 7.599609375);

    // Fully marked rounds drive W down to w_min and no lower.
    for (int round = 0; round < 20; ++round) {
        if (s.pending_chunks() < 16) offer_ones(s);
        const std::uint32_t n = send_burst(s);
        REQUIRE(n >= 2);
        s.on_credit(credit(n, n), proto::flag::kCongestionEcho, 4);
    }
    CHECK(s.window() == 2.0);
    CHECK(s.usable_window() == 2);
    CHECK(s.alpha() > 0.99);
    CHECK(s.counters().rounds == 23);
    CHECK(s.counters().round_reductions == 22);
}

TEST_CASE("a congestion echo flag without a count is one mark") {
    SenderConfig c = small_config();
    c.w_init = 8;
    c.w_max = 16;
    CreditSender s(c);
    offer_ones(s);
    CHECK(send_burst(s) == 8);
    s.on_credit(credit(8, 0), proto::flag::kCongestionEcho, 1);
    // F = 1/8; alpha = 0.25/8 = 0.03125; W = 8 * (1 - 0.015625) = 7.875
    CHECK(s.counters().marks_echoed == 1);
    CHECK(s.alpha() == 0.03125);
    CHECK(s.window() == 7.875);
}

TEST_CASE("FEEDBACK cuts the window at most once per round") {
    SenderConfig c = small_config();
    c.w_init = 8;
    c.w_max = 16;
    CreditSender s(c);
    offer_ones(s);
    CHECK(send_burst(s) == 8);

    proto::FeedbackBody fb;
    fb.mark_permille = 500;
    s.on_feedback(fb, 1);  // a = max(alpha 0, 0.5): W = 8 * 0.75 = 6
    CHECK(s.window() == 6.0);
    s.on_feedback(fb, 2);  // same round: ignored
    CHECK(s.window() == 6.0);
    CHECK(s.counters().feedback_received == 2);
    CHECK(s.counters().feedback_reductions == 1);
    CHECK(s.counters().feedback_ignored == 1);
    CHECK(s.last_feedback().mark_permille == 500);

    // The learner's echo for the same chunks closes the round: alpha is updated, but the window
    // is neither cut again nor grown in a round that already had its cut.
    s.on_credit(credit(8, 8), proto::flag::kCongestionEcho, 3);
    CHECK(s.alpha() == 0.25);
    CHECK(s.window() == 6.0);
    CHECK(s.counters().round_reductions == 0);
    CHECK(s.counters().round_increases == 0);

    // Next round: the queue occupancy (512/1024) outweighs mark_permille (100) and alpha (0.25).
    CHECK(send_burst(s) == 6);
    fb.mark_permille = 100;
    fb.queue_depth = 512;
    fb.queue_capacity = 1024;
    CHECK(CreditSender::feedback_fraction(fb) == 0.5);
    s.on_feedback(fb, 4);
    CHECK(s.window() == 4.5);
    CHECK(s.counters().feedback_reductions == 2);

    // Never below w_min.
    s.on_credit(credit(6, 0), 0, 5);
    CHECK(s.window() == 4.5);  // the round was cut: no growth either
    CHECK(send_burst(s) == 4);
    fb.mark_permille = 1000;
    SenderConfig tight = c;
    tight.w_min = 4;
    tight.w_init = 4;
    CreditSender t(tight);
    t.on_feedback(fb, 0);
    CHECK(t.window() == 4.0);
}

TEST_CASE("credit timeout forgets the chunks in flight so the window reopens") {
    SenderConfig c = small_config();
    c.w_init = 2;
    c.additive_increase = 0;
    c.credit_timeout_ns = 200;
    c.flight_expiry_rtts = 0;  // the timeout alone
    CreditSender s(c);
    offer_ones(s);
    CHECK_FALSE(s.on_timeout(1000));  // nothing in flight: nothing to time out
    CHECK(send_burst(s, 1000) == 2);
    CHECK_FALSE(s.next_to_send(1100));
    CHECK_FALSE(s.on_timeout(1199));
    CHECK_FALSE(s.on_timeout(500));  // a clock behind the last progress is not a timeout
    CHECK(s.on_timeout(1200));
    CHECK(s.in_flight() == 0);
    CHECK(s.credits_available() == 2);
    CHECK(s.window() == 2.0);  // not taken as congestion
    CHECK(s.counters().credit_timeouts == 1);
    CHECK(s.counters().chunks_presumed_lost == 2);

    // Late credits for the forgotten chunks are excess and do not end a round.
    s.on_credit(credit(2), 0, 1250);
    CHECK(s.counters().credits_excess == 2);
    CHECK(s.in_flight() == 0);
    CHECK(s.counters().rounds == 0);

    // A credit is progress: the timer restarts from it.
    CHECK(send_burst(s, 1300) == 2);
    s.on_credit(credit(1), 0, 1450);
    CHECK_FALSE(s.on_timeout(1600));
    CHECK(s.on_timeout(1650));
    CHECK(s.counters().chunks_presumed_lost == 3);

    c.credit_timeout_ns = 0;  // disabled
    CreditSender never(c);
    offer_ones(never);
    CHECK(send_burst(never) == 2);
    CHECK_FALSE(never.on_timeout(std::numeric_limits<std::uint64_t>::max()));
}

TEST_CASE("acked_seq keeps the highest in serial order; learner_version follows the last credit") {
    CreditSender s(small_config());
    proto::CreditBody b = credit(0);
    b.acked_seq = 5;
    b.learner_version = 9;
    s.on_credit(b, 0, 1);
    b.acked_seq = 3;
    b.learner_version = 10;
    s.on_credit(b, 0, 2);
    CHECK(s.acked_seq() == 5);
    CHECK(s.learner_version() == 10);
    b.acked_seq = 0xFFFFFFF0u;  // far "behind" 5 in serial order
    s.on_credit(b, 0, 3);
    CHECK(s.acked_seq() == 5);
}

TEST_CASE("sender-side merge sums waiting chunks exactly, like the switch") {
    SenderConfig c = small_config();
    c.model_elems = 64 * 3 + 10;  // 4 chunks: 64, 64, 64, 10
    c.chunk_elems = 64;
    c.w_init = c.w_min = c.w_max = 1;
    c.additive_increase = 0;
    CreditSender s(c);
    const ChunkLayout& l = s.layout();
    REQUIRE(l.chunk_count == 4);

    // Five updates while nothing may be sent: one slot per chunk, the rest merged into it.
    const std::uint32_t versions[] = {10, 9, 12, 11, 13};
    const std::uint64_t stamps[] = {100, 50, 300, 200, 250};
    for (std::uint32_t w = 0; w < 5; ++w)
        REQUIRE(s.offer_update(versions[w], stamps[w], pattern_gradient(l, w)) == OfferResult::Ok);
    CHECK(s.pending_chunks() == 4);
    CHECK(s.counters().chunks_queued == 4);
    CHECK(s.counters().chunks_merged == 16);
    CHECK(s.counters().updates_offered == 5);

    auto out = s.next_to_send(0);
    REQUIRE(out);
    CHECK(out->header.chunk_index == 0);
    CHECK(out->header.contrib_count == 5);
    CHECK(out->header.flags == proto::flag::kSenderMerged);
    CHECK(out->header.model_version == 9);
    CHECK(out->header.seq == 1);  // the first contribution's, as in the switch
    CHECK(out->header.ts_earliest_ns == 50);
    CHECK(out->header.ts_latest_ns == 300);
    CHECK(out->elements[1] == 1 + 2 + 3 + 4 + 1);  // sum of the weights of workers 0..4
    CHECK(pattern::verify(out->elements.data(), out->elements.size(), kCluster, 0, 5) == pattern::Check::Ok);
    CHECK_FALSE(s.next_to_send(0));

    // A sixth update: chunk 0's slot is free again and queues behind the three still waiting.
    REQUIRE(s.offer_update(14, 400, pattern_gradient(l, 5)) == OfferResult::Ok);
    CHECK(s.pending_chunks() == 4);
    const std::uint16_t expected_order[] = {1, 2, 3, 0};
    const std::uint16_t expected_contrib[] = {6, 6, 6, 1};
    for (int i = 0; i < 4; ++i) {
        s.on_credit(credit(1), 0, 1);
        out = s.next_to_send(1);
        REQUIRE(out);
        const proto::Header& h = out->header;
        CHECK(h.chunk_index == expected_order[i]);
        CHECK(h.contrib_count == expected_contrib[i]);
        CHECK(h.elem_count == (h.chunk_index == 3 ? 10 : 64));
        CHECK(h.flags == (h.contrib_count > 1 ? proto::flag::kSenderMerged : 0));
        CHECK(pattern::verify(out->elements.data(), out->elements.size(), kCluster, h.chunk_index,
                              h.contrib_count) == pattern::Check::Ok);
    }
    CHECK(s.counters().contributions_sent == 5 + 6 * 3 + 1);
}

TEST_CASE("sender-side merge adds in the switch's order, bit for bit, on arbitrary floats") {
    SenderConfig c = small_config();
    c.model_elems = 300;
    c.chunk_elems = 128;
    c.w_init = c.w_min = c.w_max = 3;
    CreditSender s(c);
    std::mt19937 rng(12345);
    std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
    std::vector<float> expected(c.model_elems, 0.0f);
    for (int u = 0; u < 7; ++u) {
        std::vector<float> g(c.model_elems);
        for (float& x : g) x = dist(rng);
        REQUIRE(s.offer_update(1, 1, g) == OfferResult::Ok);
        // waiting += arrival, one binary32 addition each, arrivals in order
        for (std::size_t i = 0; i < g.size(); ++i) expected[i] = u == 0 ? g[i] : expected[i] + g[i];
    }
    for (std::uint16_t k = 0; k < 3; ++k) {
        const auto out = s.next_to_send(0);
        REQUIRE(out);
        CHECK(out->header.contrib_count == 7);
        const std::size_t off = s.layout().offset(out->header.chunk_index);
        for (std::size_t i = 0; i < out->elements.size(); ++i)
            REQUIRE(std::bit_cast<std::uint32_t>(out->elements[i]) == std::bit_cast<std::uint32_t>(expected[off + i]));
    }
}

TEST_CASE("pending memory stays bounded whatever the number of updates") {
    SenderConfig c = small_config();
    c.model_elems = 130;
    c.chunk_elems = 64;  // 64, 64, 2
    c.w_init = c.w_min = c.w_max = 1;
    CreditSender s(c);
    const std::size_t bytes = s.pending_buffer_bytes();
    CHECK(bytes == 130 * sizeof(float));
    std::vector<std::vector<float>> grads;
    for (std::uint32_t w = 0; w < 4; ++w) grads.push_back(pattern_gradient(s.layout(), w));
    for (std::uint32_t u = 0; u < 1000; ++u) {
        REQUIRE(s.offer_update(u, u, grads[u % 4]) == OfferResult::Ok);
        REQUIRE(s.pending_chunks() == 3);
        REQUIRE(s.pending_buffer_bytes() == bytes);
    }
    CHECK(s.counters().chunks_merged == 999 * 3);
    for (int k = 0; k < 3; ++k) {
        s.on_credit(credit(1), 0, 0);
        const auto out = s.next_to_send(0);
        REQUIRE(out);
        CHECK(out->header.contrib_count == 1000);
        CHECK(out->elements[1] == 250 * (1 + 2 + 3 + 4));
        CHECK(out->header.model_version == 0);
        CHECK(out->header.ts_latest_ns == 999);
        CHECK(pattern::verify(out->elements.data(), out->elements.size(), kCluster, out->header.chunk_index, 1000) ==
              pattern::Check::Ok);
    }
}

TEST_CASE("a waiting chunk at 65535 contributions refuses further merges, counted") {
    SenderConfig c = small_config();
    c.model_elems = 2;
    c.chunk_elems = 2;
    c.w_init = c.w_min = c.w_max = 1;
    CreditSender s(c);
    const std::vector<float> g = pattern_gradient(s.layout(), 0);  // weight 1
    for (std::uint32_t u = 0; u < proto::kMaxContributions; ++u) REQUIRE(s.offer_update(1, 1, g) == OfferResult::Ok);
    CHECK(s.counters().chunks_dropped_overflow == 0);
    REQUIRE(s.offer_update(1, 1, g) == OfferResult::Ok);
    CHECK(s.counters().chunks_dropped_overflow == 1);
    const auto out = s.next_to_send(0);
    REQUIRE(out);
    CHECK(out->header.contrib_count == proto::kMaxContributions);
    CHECK(pattern::verify(out->elements.data(), 2, kCluster, 0, proto::kMaxContributions) == pattern::Check::Ok);
}

TEST_CASE("merge_version_gap replaces a stale waiting chunk instead of summing into it") {
    SenderConfig c = small_config();
    c.model_elems = 4;
    c.chunk_elems = 4;
    c.w_init = c.w_min = c.w_max = 1;
    c.merge_version_gap = 2;
    CreditSender s(c);
    const std::vector<float> g = pattern_gradient(s.layout(), 1);
    REQUIRE(s.offer_update(10, 100, g) == OfferResult::Ok);
    REQUIRE(s.offer_update(12, 200, g) == OfferResult::Ok);  // gap 2: merged
    CHECK(s.counters().chunks_merged == 1);
    REQUIRE(s.offer_update(13, 300, g) == OfferResult::Ok);  // 13 - 10 > 2: replaced
    CHECK(s.counters().chunks_replaced_stale == 1);
    const auto out = s.next_to_send(0);
    REQUIRE(out);
    CHECK(out->header.contrib_count == 1);
    CHECK(out->header.model_version == 13);
    CHECK(out->header.seq == 3);
    CHECK(out->header.ts_earliest_ns == 300);
    CHECK(out->header.flags == 0);
    CHECK(pattern::verify(out->elements.data(), 4, kCluster, 0, 1) == pattern::Check::Ok);
}

TEST_CASE("non-finite or wrongly sized updates are refused whole and counted") {
    SenderConfig c = small_config();
    c.model_elems = 8;
    c.chunk_elems = 4;
    CreditSender s(c);
    std::vector<float> g(8, 1.0f);
    REQUIRE(s.offer_update(1, 1, g) == OfferResult::Ok);
    g[6] = std::numeric_limits<float>::quiet_NaN();
    CHECK(s.offer_update(2, 2, g) == OfferResult::NonFinite);
    g[6] = -std::numeric_limits<float>::infinity();
    CHECK(s.offer_update(2, 2, g) == OfferResult::NonFinite);
    CHECK(s.offer_update(2, 2, std::span<const float>(g).first(7)) == OfferResult::WrongSize);
    CHECK(s.counters().updates_rejected == 3);
    CHECK(s.counters().updates_offered == 1);
    CHECK(s.counters().chunks_merged == 0);
    CHECK(s.next_seq() == 2);  // refused updates take no seq
    const auto out = s.next_to_send(0);
    REQUIRE(out);
    CHECK(out->header.contrib_count == 1);
    for (float x : out->elements) CHECK(x == 1.0f);
}

// ---- CreditPlanner (the learner's half) and a closed loop through a merging "switch" ----------

namespace {

proto::Header merged_chunk(std::uint32_t named, std::uint16_t contrib, std::uint8_t flags, std::uint32_t seq = 1) {
    proto::Header h;
    h.cluster_id = kCluster;
    h.worker_id = named;
    h.contrib_count = contrib;
    h.flags = flags;
    h.seq = seq;
    return h;
}

}  // namespace

TEST_CASE("CreditPlanner: one unit and the echo to the named worker, merged units to the others") {
    const std::uint32_t ids[] = {10, 11, 12, 13};
    CreditPlanner p(kCluster, ids);
    std::vector<CreditGrant> out(p.max_grants());

    // Unmerged, CE-marked chunk from worker 11.
    std::size_t n = p.plan(merged_chunk(11, 1, proto::flag::kCongestionExperienced, 7), 99, out);
    REQUIRE(n == 1);
    CHECK(out[0].worker_id == 11);
    CHECK(out[0].body.credits == 1);
    CHECK(out[0].body.acked_seq == 7);
    CHECK(out[0].body.learner_version == 99);
    CHECK(out[0].body.ce_count == 1);
    CHECK(out[0].flags == proto::flag::kCongestionEcho);

    // Merged in the network from 4 workers: each gets its unit back, only the named one the echo.
    n = p.plan(merged_chunk(12, 4, proto::flag::kMerged, 3), 100, out);
    REQUIRE(n == 4);
    CHECK(out[0].worker_id == 12);
    CHECK(out[0].body.acked_seq == 3);
    CHECK(out[0].body.ce_count == 0);
    CHECK(out[0].flags == 0);
    for (std::size_t i = 0; i < 4; ++i) CHECK(out[i].body.credits == 1);
    CHECK(out[1].worker_id == 10);
    CHECK(out[2].worker_id == 11);
    CHECK(out[2].body.acked_seq == 7);  // the highest seq seen from 11
    CHECK(out[3].worker_id == 13);
    CHECK(out[3].body.acked_seq == 0);  // nothing seen from 13 yet

    // Partial merges share the surplus round robin: 2 extra units, then 2 more, skip the named one.
    n = p.plan(merged_chunk(10, 3, proto::flag::kMerged), 1, out);  // cursor at 0: 11, 12
    REQUIRE(n == 3);
    CHECK((out[1].worker_id == 11 && out[2].worker_id == 12));
    n = p.plan(merged_chunk(10, 3, proto::flag::kMerged), 1, out);  // then 13, 11
    REQUIRE(n == 3);
    CHECK((out[1].worker_id == 11 && out[2].worker_id == 13));

    // SENDER_MERGED alone is one packet: one unit.
    n = p.plan(merged_chunk(13, 9, proto::flag::kSenderMerged), 1, out);
    REQUIRE(n == 1);
    CHECK(out[0].body.credits == 1);

    // A 10-contribution merge over 3 other workers: 3 each, and the remainder from the cursor.
    n = p.plan(merged_chunk(13, 10, proto::flag::kMerged), 1, out);
    REQUIRE(n == 4);
    std::uint32_t total = 0;
    for (std::size_t i = 0; i < n; ++i) total += out[i].body.credits;
    CHECK(total == 10);

    // Other clusters and unknown workers get nothing, counted.
    proto::Header foreign = merged_chunk(10, 1, 0);
    foreign.cluster_id = kCluster + 1;
    CHECK(p.plan(foreign, 1, out) == 0);
    CHECK(p.plan(merged_chunk(77, 1, 0), 1, out) == 0);
    CHECK(p.stats().wrong_cluster == 1);
    CHECK(p.stats().unknown_worker == 1);
    CHECK(p.stats().chunks == 6);
    CHECK(p.stats().units_named == 6);
    CHECK(p.stats().units_spread == 3 + 2 + 2 + 9);
    CHECK(p.stats().echoes == 1);

    const std::uint32_t one[] = {5};
    CreditPlanner solo(kCluster, one);
    std::vector<CreditGrant> o1(1);
    proto::Header h = merged_chunk(5, 3, proto::flag::kMerged);
    REQUIRE(solo.plan(h, 1, o1) == 1);
    CHECK(o1[0].body.credits == 3);  // the switch merged the worker's own updates

    const std::uint32_t dup[] = {1, 1};
    CHECK_THROWS_AS(CreditPlanner(kCluster, dup), std::invalid_argument);
}

TEST_CASE("CreditPlanner: a merged chunk's packet count, not its contributions, sets the spread") {
    const std::uint32_t ids[] = {10, 11, 12, 13};
    CreditPlanner p(kCluster, ids);
    std::vector<CreditGrant> out(p.max_grants());
    // Two sender-merged packets of 47 contributions each, merged by the switch: two packets left
    // flight, so one unit to the named worker and one to one other worker, not 93.
    proto::Header h = merged_chunk(11, 94, proto::flag::kMerged | proto::flag::kSenderMerged);
    h.packet_count = 2;
    std::size_t n = p.plan(h, 1, out);
    REQUIRE(n == 2);
    CHECK(out[0].worker_id == 11);
    CHECK(out[0].body.credits == 1);
    CHECK(out[1].body.credits == 1);
    // Four packets over three other workers: one each.
    h.packet_count = 4;
    n = p.plan(h, 1, out);
    REQUIRE(n == 4);
    for (std::size_t i = 0; i < n; ++i) CHECK(out[i].body.credits == 1);
    // A count above the contributions is clamped to them (a hostile or broken header).
    h = merged_chunk(11, 3, proto::flag::kMerged);
    h.packet_count = 200;
    n = p.plan(h, 1, out);
    std::uint32_t total = 0;
    for (std::size_t i = 0; i < n; ++i) total += out[i].body.credits;
    CHECK(total == 3);
    // No count (0): the contribution rule, counted.
    h.packet_count = 0;
    n = p.plan(h, 1, out);
    total = 0;
    for (std::size_t i = 0; i < n; ++i) total += out[i].body.credits;
    CHECK(total == 3);
    CHECK(p.stats().merged_without_packet_count == 1);
    CHECK(p.stats().units_spread == 1 + 3 + 2 + 2);
    CHECK(p.stats().units_named == 4);
}

TEST_CASE("CreditPlanner: a quiet worker gets no spread units; the live ones get its share") {
    const std::uint32_t ids[] = {10, 11, 12};
    CreditPlanner p(kCluster, ids);
    std::vector<CreditGrant> out(p.max_grants());
    p.set_quiet(12, true);
    p.set_quiet(99, true);  // unknown: ignored

    // Merged from 3: both extra units go to the one live other worker (11), none to 12.
    std::size_t n = p.plan(merged_chunk(10, 3, proto::flag::kMerged), 1, out);
    REQUIRE(n == 2);
    CHECK(out[0].worker_id == 10);
    CHECK(out[0].body.credits == 1);
    CHECK(out[1].worker_id == 11);
    CHECK(out[1].body.credits == 2);
    CHECK(p.stats().units_spread == 2);
    CHECK(p.stats().units_spread_past_quiet == 2);

    // Round robin remainders skip it too: five merges of 2, all extras to 11.
    for (int i = 0; i < 5; ++i) {
        n = p.plan(merged_chunk(10, 2, proto::flag::kMerged), 1, out);
        REQUIRE(n == 2);
        CHECK(out[1].worker_id == 11);
    }
    // A quiet worker's own (named) chunk is still credited to it.
    n = p.plan(merged_chunk(12, 1, 0), 1, out);
    REQUIRE(n == 1);
    CHECK(out[0].worker_id == 12);

    // Every other worker quiet: the named worker gets the extra units (its own merged updates).
    p.set_quiet(11, true);
    n = p.plan(merged_chunk(10, 3, proto::flag::kMerged), 1, out);
    REQUIRE(n == 1);
    CHECK(out[0].body.credits == 3);

    // Heard again: back in the spread.
    p.set_quiet(11, false);
    p.set_quiet(12, false);
    n = p.plan(merged_chunk(10, 3, proto::flag::kMerged), 1, out);
    REQUIRE(n == 3);
    CHECK(out[1].body.credits == 1);
    CHECK(out[2].body.credits == 1);
    CHECK(p.stats().units_spread == 2 + 5 + 2 + 2);
    CHECK(p.stats().units_spread_past_quiet == 2 + 5 + 2);
}

TEST_CASE("closed loop: workers, an in-network merge of equal chunks, planned credits; nothing leaks") {
    constexpr std::uint32_t kWorkers = 3;
    SenderConfig c = small_config();
    c.model_elems = 16;
    c.chunk_elems = 2;  // 8 chunks
    c.w_init = c.w_min = c.w_max = 4;
    c.additive_increase = 0;
    std::vector<CreditSender> senders;
    std::vector<std::uint32_t> ids;
    for (std::uint32_t w = 0; w < kWorkers; ++w) {
        c.worker_id = 20 + w;
        ids.push_back(c.worker_id);
        senders.emplace_back(c);
    }
    CreditPlanner planner(kCluster, ids);
    std::vector<CreditGrant> grants(planner.max_grants());
    std::uint64_t contributions_delivered = 0;

    for (int update = 0; update < 5; ++update) {
        for (auto& s : senders) REQUIRE(s.offer_update(update, update, pattern_gradient(s.layout(), 0)) == OfferResult::Ok);
        // Two window's worth per update: every worker sends chunks in the same order, the switch
        // merges equal chunk indexes into the first worker's packet.
        for (int burst = 0; burst < 2; ++burst) {
            std::vector<std::vector<OutgoingChunk>> sent(kWorkers);
            for (std::uint32_t w = 0; w < kWorkers; ++w)
                while (auto o = senders[w].next_to_send(0)) sent[w].push_back(*o);
            for (std::size_t i = 0; i < sent[0].size(); ++i) {
                proto::Header merged = sent[0][i].header;
                for (std::uint32_t w = 1; w < kWorkers; ++w) {
                    REQUIRE(sent[w][i].header.chunk_index == merged.chunk_index);
                    merged.contrib_count += sent[w][i].header.contrib_count;
                    merged.packet_count = proto::merged_packet_count(merged.packet_count, sent[w][i].header.packet_count);
                }
                merged.flags |= proto::flag::kMerged;
                contributions_delivered += merged.contrib_count;
                const std::size_t n = planner.plan(merged, 1, grants);
                for (std::size_t g = 0; g < n; ++g) {
                    const std::uint32_t w = grants[g].worker_id - 20;
                    senders[w].on_credit(grants[g].body, grants[g].flags, 0);
                }
            }
        }
    }
    for (auto& s : senders) {
        CHECK(s.in_flight() == 0);
        CHECK(s.counters().credits_excess == 0);
        CHECK(s.counters().chunks_sent == 5 * 8);
        CHECK(s.counters().credits_received == 5 * 8);
        CHECK(s.counters().chunks_merged == 0);
    }
    CHECK(contributions_delivered == 5 * 8 * kWorkers);
}

TEST_CASE("below one chunk the sender paces: one chunk, then (1/W - 1) round trips of quiet") {
    SenderConfig c = small_config();
    c.w_init = c.w_min = 0.25;
    c.w_max = 4;
    CreditSender s(c);
    offer_ones(s);
    REQUIRE(s.pacing());
    CHECK(s.usable_window() == 1);
    CHECK(send_burst(s, 0) == 1);     // one chunk in flight
    CHECK(send_burst(s, 10) == 0);
    s.on_credit(credit(1), 0, 1000);  // its credit after 1000 ns: the first round-trip sample
    CHECK(s.srtt_ns() == 1000);
    CHECK(s.window() == 0.5);         // an unmarked round doubles a paced window (at most)
    // W = 0.5 now: the next chunk waits (1/0.5 - 1) x 1000 ns after the credit.
    CHECK(send_burst(s, 1999) == 0);
    CHECK(send_burst(s, 2000) == 1);
    s.on_credit(credit(1), 0, 2500);  // sample 500: srtt = 1000 - 125 + 62 = 937
    CHECK(s.srtt_ns() == 937);
    CHECK(s.window() == 1.0);         // back at one chunk: no more pacing
    CHECK(!s.pacing());
    CHECK(send_burst(s, 2500) == 1);
}

// A sender with window 8 (at most 16), merge-aware or not, that has sent 8 chunks.
SenderConfig merge_aware_config(bool aware) {
    SenderConfig c = small_config();
    c.w_init = 8;
    c.w_max = 16;
    c.merge_aware = aware;
    return c;
}

TEST_CASE("a FEEDBACK cut shrinks with the merge fraction the switch reports (merge-aware)") {
    CHECK(!SenderConfig{}.merge_aware);  // off unless asked for
    for (bool aware : {true, false}) {
        CreditSender s(merge_aware_config(aware));
        offer_ones(s);
        CHECK(send_burst(s) == 8);
        proto::FeedbackBody fb;
        fb.mark_permille = 500;
        fb.merge_permille = 750;  // the queue merged 3 of 4 mergeable arrivals
        s.on_feedback(fb, 1);
        // a = 0.5, scaled by 1 - 0.75 when merge-aware: W = 8 * (1 - 0.0625) = 7.5; else 8 * 0.75 = 6.
        CHECK(s.window() == (aware ? 7.5 : 6.0));
        CHECK(s.counters().feedback_reductions == 1);
    }
}

TEST_CASE("merge-aware: echoed marks cut less when the switch reports its queue merging") {
    for (bool aware : {true, false}) {
        CreditSender s(merge_aware_config(aware));
        offer_ones(s);
        CHECK(send_burst(s) == 8);
        proto::FeedbackBody fb;
        fb.merge_permille = 750;  // no marks, no depth: the cut fraction is 0, only the merge fraction is news
        s.on_feedback(fb, 1);
        CHECK(s.window() == 8.0);
        s.on_credit(credit(8), 0, 2);  // the round ends; it was cut (by 0), so no growth
        CHECK(s.window() == 8.0);
        CHECK(s.alpha() == 0.0);
        CHECK(send_burst(s, 3) == 8);
        s.on_credit(credit(8, 8), proto::flag::kCongestionEcho, 4);  // every chunk marked: F = 1
        CHECK(s.alpha() == 0.25);
        // alpha 0.25, scaled by 1 - 0.75 when merge-aware: W = 8 * (1 - 0.03125) = 7.75; else 8 * 0.875 = 7.
        CHECK(s.window() == (aware ? 7.75 : 7.0));
        CHECK(s.counters().round_reductions == 1);
    }
}

TEST_CASE("merge-aware floor: no window below merge_floor while the queue merges, w_min once it stops") {
    CHECK(SenderConfig{}.merge_floor == 0);  // off unless asked for
    SenderConfig c = small_config();
    c.w_min = 0.25;
    c.w_init = 2;
    c.w_max = 16;
    c.merge_aware = true;
    c.merge_floor = 4;
    CreditSender s(c);
    offer_ones(s);
    CHECK(send_burst(s) == 2);
    proto::FeedbackBody fb;
    fb.mark_permille = 1000;
    fb.merge_permille = 200;  // a fifth of the mergeable arrivals merged: the floor holds
    s.on_feedback(fb, 1);
    // lifted to the floor, then the cut (1 * (1 - 0.2)) = 0.8 would give 4 * 0.6 = 2.4: kept at 4.
    CHECK(s.window() == 4.0);
    CHECK(s.counters().merge_floor_lifts == 1);
    CHECK(s.counters().feedback_reductions == 1);
    CHECK(send_burst(s) == 2);        // 4 in flight now
    s.on_credit(credit(4), 0, 2);     // the round ends, already cut: no growth; alpha stays 0
    CHECK(s.window() == 4.0);
    fb.merge_permille = 0;            // the queue no longer merges: the floor is w_min again
    s.on_feedback(fb, 3);
    CHECK(s.window() == 2.0);         // cut by max(alpha 0, 1) = 1: 4 * 0.5
    fb.merge_permille = 99;           // just below a tenth: still no floor
    CHECK(send_burst(s) == 2);
    s.on_credit(credit(2), 0, 4);     // the round ends (already cut); the next one starts uncut
    s.on_feedback(fb, 5);
    CHECK(s.window() < 2.0);
    CHECK(s.window() > 1.0);          // 2 * (1 - 0.901 / 2)
    CHECK(s.counters().merge_floor_lifts == 1);
    fb.merge_permille = 100;          // a tenth: lifted to the floor again, even in a round already cut
    s.on_feedback(fb, 6);
    CHECK(s.window() == 4.0);
    CHECK(s.counters().merge_floor_lifts == 2);
    CHECK(s.counters().feedback_ignored == 1);
}

TEST_CASE("merge_floor is validated") {
    SenderConfig c = small_config();
    c.merge_floor = 4;
    CHECK_THAT(validate(c), Catch::Contains("merge_floor needs merge_aware"));
    c.merge_aware = true;
    CHECK(validate(c).empty());
    c.merge_floor = 7;  // above w_max 6
    CHECK_THAT(validate(c), Catch::Contains("merge_floor"));
    c.merge_floor = 0.5;  // below w_min 1
    CHECK_THAT(validate(c), Catch::Contains("merge_floor"));
    c.merge_floor = std::numeric_limits<double>::quiet_NaN();
    CHECK_THAT(validate(c), Catch::Contains("merge_floor"));
}

TEST_CASE("acked_seq retires the chunks sent before the acknowledged update: lost credits do not stay in flight") {
    CHECK(!SenderConfig{}.cumulative_ack);  // off unless asked for (docs/transport.md)
    SenderConfig c = small_config();
    c.cumulative_ack = true;
    c.model_elems = 4;
    c.chunk_elems = 1;  // 4 chunks per update
    c.w_init = 8;
    c.w_max = 16;
    c.additive_increase = 0;  // W stays 8: this test is about what is in flight
    CreditSender s(c);
    std::vector<float> g(4, 1.0f);
    REQUIRE(s.offer_update(1, 10, g) == OfferResult::Ok);  // seq 1
    CHECK(send_burst(s, 10) == 4);
    REQUIRE(s.offer_update(1, 20, g) == OfferResult::Ok);  // seq 2
    CHECK(send_burst(s, 20) == 4);
    CHECK(s.in_flight() == 8);
    CHECK(s.credits_available() == 0);

    // The four CREDITs of update 1 were lost; the learner saw update 2's first chunk and credits it.
    proto::CreditBody b = credit(1);
    b.acked_seq = 2;
    s.on_credit(b, 0, 30);
    CHECK(s.counters().chunks_acked_past == 4);  // seq 1's chunks: sent before update 2's
    CHECK(s.in_flight() == 3);                   // then the unit for the acknowledged chunk
    CHECK(s.counters().credits_excess == 0);
    CHECK(s.acked_seq() == 2);
    CHECK(s.credits_available() == 5);
    CHECK(s.counters().rounds == 1);  // the first round began with nothing sent: it ends at its first CREDIT
    CHECK(s.counters().credit_timeouts == 0);

    // An older acknowledgement (a reordered CREDIT) retires nothing by seq; its unit still counts.
    b.acked_seq = 1;
    s.on_credit(b, 0, 31);
    CHECK(s.counters().chunks_acked_past == 4);
    CHECK(s.in_flight() == 2);
    // acked_seq 0 means "nothing acknowledged" (a worker the learner never saw named): no retirement.
    b.acked_seq = 0;
    b.credits = 0;
    s.on_credit(b, 0, 32);
    CHECK(s.in_flight() == 2);
    CHECK(s.counters().chunks_acked_past == 4);

    // The same acknowledgement again retires nothing more: update 2's own chunks stay until credited.
    b.acked_seq = 2;
    s.on_credit(b, 0, 33);
    CHECK(s.in_flight() == 2);
    b.credits = 2;
    s.on_credit(b, 0, 34);
    CHECK(s.in_flight() == 0);
    CHECK(s.counters().chunks_acked_past == 4);
    CHECK(s.counters().credits_received == 4);
    CHECK(s.counters().credits_excess == 0);
    // Every chunk sent is accounted for, as the rack tests check it: credited units + presumed lost
    // (here all by acknowledgement, no timeout) + in flight.
    CHECK(s.counters().chunks_presumed_lost == 4);
    CHECK(s.counters().credit_timeouts == 0);
    CHECK(s.counters().chunks_sent == 8);
    CHECK(s.counters().credits_received - s.counters().credits_excess + s.counters().chunks_presumed_lost + s.in_flight() == 8);
}

TEST_CASE("acked_seq: a waiting chunk keeps its first seq, so an acknowledgement retires exactly the earlier sends") {
    SenderConfig c = small_config();
    c.cumulative_ack = true;
    c.model_elems = 4;
    c.chunk_elems = 1;
    c.w_init = 3;
    c.w_max = 16;
    c.additive_increase = 0;
    CreditSender s(c);
    std::vector<float> g(4, 1.0f);
    REQUIRE(s.offer_update(1, 10, g) == OfferResult::Ok);  // seq 1: chunks 0..3 wait
    CHECK(send_burst(s, 10) == 3);                          // chunks 0, 1, 2 (seq 1)
    proto::CreditBody b = credit(2);
    b.acked_seq = 1;
    s.on_credit(b, 0, 20);                                  // chunks 0, 1 credited: nothing sent before update 1
    CHECK(s.in_flight() == 1);
    CHECK(s.counters().chunks_acked_past == 0);
    REQUIRE(s.offer_update(1, 30, g) == OfferResult::Ok);  // seq 2: 0, 1, 2 queued anew behind 3; 3 summed (seq 1)
    CHECK(s.counters().chunks_merged == 1);
    CHECK(send_burst(s, 30) == 2);                          // chunk 3 (seq 1, SENDER_MERGED), chunk 0 (seq 2)
    CHECK(s.in_flight() == 3);
    // The CREDITs of chunks 2 and 3 are lost; the learner saw chunk 0 of update 2 and credits it.
    b.credits = 1;
    b.acked_seq = 2;
    s.on_credit(b, 0, 40);
    CHECK(s.counters().chunks_acked_past == 2);  // chunks 2 and 3 (both seq 1) left before it
    CHECK(s.counters().chunks_presumed_lost == 2);
    CHECK(s.in_flight() == 0);
    CHECK(send_burst(s, 40) == 2);               // chunks 1, 2 of update 2, and nothing else waits
    CHECK(s.pending_chunks() == 0);
    b.credits = 0;
    s.on_credit(b, 0, 50);                       // update 2's own chunks are not before it
    CHECK(s.in_flight() == 2);
    CHECK(s.counters().chunks_acked_past == 2);

    // Off (as in the verifier's agreement runs): the acknowledgement retires nothing.
    SenderConfig off = c;
    off.cumulative_ack = false;
    CreditSender t(off);
    REQUIRE(t.offer_update(1, 10, g) == OfferResult::Ok);
    CHECK(send_burst(t, 10) == 3);
    REQUIRE(t.offer_update(1, 20, g) == OfferResult::Ok);
    proto::CreditBody late = credit(0);
    late.acked_seq = 5;
    t.on_credit(late, 0, 30);
    CHECK(t.in_flight() == 3);
    CHECK(t.counters().chunks_acked_past == 0);
}

namespace {
// chunks_sent = units credited (received, minus excess, minus units still kept) + presumed lost + in flight.
bool accounted(const CreditSender& s) {
    const SenderCounters& k = s.counters();
    return k.chunks_sent == k.credits_received - k.credits_excess - s.banked() + k.chunks_presumed_lost + s.in_flight();
}
}  // namespace

TEST_CASE("bank_excess: units that find nothing in flight are kept up to the window, then spent on chunks that find it full") {
    SenderConfig c = small_config();
    c.bank_excess = true;
    c.additive_increase = 0;  // the window stays 4
    c.flight_expiry_rtts = 0;  // the credit timeout empties the bank below, not an expiry before it
    CreditSender s(c);
    offer_ones(s);
    CHECK(send_burst(s) == 4);
    s.on_credit(credit(4), 0, 10);
    CHECK(s.in_flight() == 0);
    s.on_credit(credit(3), 0, 11);  // three units for chunks this worker does not have in flight
    CHECK(s.banked() == 3);
    CHECK(s.counters().credits_banked == 3);
    CHECK(s.counters().credits_excess == 0);
    CHECK(s.credits_available() == 7);
    CHECK(send_burst(s, 12) == 7);  // 4 into flight, 3 more on the kept units
    CHECK(s.in_flight() == 4);
    CHECK(s.banked() == 0);
    CHECK(s.counters().chunks_prepaid == 3);
    CHECK(accounted(s));
    // More than the window's worth beyond the chunks in flight: 4 kept (the window), 2 dropped.
    s.on_credit(credit(10), 0, 20);
    CHECK(s.in_flight() == 0);
    CHECK(s.banked() == 4);
    CHECK(s.counters().credits_excess == 2);
    CHECK(accounted(s));
    // A cut trims the bank to the new window: FEEDBACK of a full queue halves the window to 2.
    proto::FeedbackBody f;
    f.mark_permille = 1000;
    s.on_feedback(f, 30);
    CHECK(s.window() == 2.0);
    CHECK(s.banked() == 2);
    CHECK(s.counters().credits_forfeited == 2);
    CHECK(s.counters().credits_excess == 4);
    CHECK(accounted(s));
    // A credit timeout empties it: one chunk in flight, the learner falls silent.
    CHECK(send_burst(s, 40) == 4);  // 2 into flight, 2 on kept units
    s.on_credit(credit(2), 0, 50);
    s.on_credit(credit(1), 0, 51);
    CHECK(s.banked() == 1);
    CHECK(send_burst(s, 52) == 3);  // 2 into flight, 1 kept
    s.on_credit(credit(1), 0, 53);  // one of them credited; nothing more comes
    s.on_credit(credit(2), 0, 54);  // one unit for the last chunk in flight, one kept
    CHECK(s.in_flight() == 0);
    CHECK(s.banked() == 1);
    CHECK(send_burst(s, 60) == 3);
    CHECK(s.in_flight() == 2);
    CHECK(s.banked() == 0);
    s.on_credit(credit(3), 0, 70);  // two for the flight, one kept
    CHECK(s.banked() == 1);
    REQUIRE(s.next_to_send(80));    // into flight (the window has room): the kept unit stays
    CHECK(s.in_flight() == 1);
    CHECK(s.banked() == 1);
    CHECK(s.on_timeout(80 + 200));
    CHECK(s.banked() == 0);
    CHECK(s.counters().chunks_presumed_lost == 1);
    CHECK(s.counters().credits_forfeited == 3);
    CHECK(accounted(s));
}

TEST_CASE("bank_excess: a pacing sender keeps nothing; off, units beyond the flight are dropped as before") {
    SenderConfig c = small_config();
    c.bank_excess = true;
    c.w_init = c.w_min = 0.5;
    CreditSender paced(c);
    offer_ones(paced);
    CHECK(send_burst(paced) == 1);
    paced.on_credit(credit(3), 0, 100);
    CHECK(paced.banked() == 0);
    CHECK(paced.counters().credits_excess == 2);

    SenderConfig d = small_config();
    d.bank_excess = false;
    d.additive_increase = 0;
    CreditSender off(d);
    offer_ones(off);
    CHECK(send_burst(off) == 4);
    off.on_credit(credit(7), 0, 10);
    CHECK(off.banked() == 0);
    CHECK(off.counters().credits_excess == 3);
    CHECK(send_burst(off, 11) == 4);
    CHECK(accounted(off));
}

TEST_CASE("bank_excess, closed loop: a merged chunk's unit spread to a worker with nothing in flight still pays for a chunk") {
    // Three workers, window 2. Worker 22's chunk merges into worker 21's packet; the planner spreads
    // the extra unit round robin, to worker 20 (nothing in flight), not to 22. Without the bank the
    // unit is dropped and the cluster can send one chunk fewer until 22's credit timeout; with it,
    // 20 sends that chunk.
    for (const bool bank : {false, true}) {
        SenderConfig c = small_config();
        c.model_elems = 8;
        c.chunk_elems = 1;
        c.w_init = c.w_min = c.w_max = 2;
        c.additive_increase = 0;
        c.bank_excess = bank;
        std::vector<CreditSender> senders;
        const std::vector<std::uint32_t> ids{20, 21, 22};
        for (std::uint32_t id : ids) {
            c.worker_id = id;
            senders.emplace_back(c);
        }
        CreditPlanner planner(kCluster, ids);
        std::vector<CreditGrant> grants(planner.max_grants());
        for (auto& s : senders) REQUIRE(s.offer_update(1, 1, pattern_gradient(s.layout(), 0)) == OfferResult::Ok);
        auto named = senders[1].next_to_send(0);
        auto contributor = senders[2].next_to_send(0);
        REQUIRE(named);
        REQUIRE(contributor);
        proto::Header merged = named->header;
        merged.contrib_count = 2;
        merged.packet_count = proto::merged_packet_count(merged.packet_count, contributor->header.packet_count);
        merged.flags |= proto::flag::kMerged;
        const std::size_t n = planner.plan(merged, 1, grants);
        REQUIRE(n == 2);
        CHECK(grants[0].worker_id == 21);
        CHECK(grants[1].worker_id == 20);  // the round robin's first other worker, not the contributor
        for (std::size_t g = 0; g < n; ++g) senders[grants[g].worker_id - 20].on_credit(grants[g].body, 0, 1);
        CHECK(senders[2].in_flight() == 1);  // 22's merged chunk waits for a unit that went elsewhere
        CHECK(senders[0].banked() == (bank ? 1u : 0u));
        // What the cluster can send now: 20 and 21 their windows, 22 one; 20 one more with the bank.
        std::uint32_t can_send = 0;
        for (auto& s : senders) can_send += send_burst(s, 2);
        CHECK(can_send == (bank ? 6u : 5u));
        for (auto& s : senders) CHECK(accounted(s));
    }
}

namespace {
// Flight expiry tests: updates of 4 one-element chunks, a fixed window of 8, no additive increase.
SenderConfig expiry_config() {
    SenderConfig c = small_config();
    c.model_elems = 4;
    c.chunk_elems = 1;
    c.w_init = c.w_max = 8;
    c.additive_increase = 0;
    return c;
}
}  // namespace

TEST_CASE("flight_expiry_ns: the oldest chunks leave flight once out that long, even while credits arrive") {
    CHECK(SenderConfig{}.flight_expiry_ns == 0);  // off unless asked for (a diagnostic, docs/queue.md)
    SenderConfig c = expiry_config();
    c.credit_timeout_ns = 1000;
    c.flight_expiry_ns = 300;
    CreditSender s(c);
    std::vector<float> g(4, 1.0f);
    REQUIRE(s.offer_update(1, 0, g) == OfferResult::Ok);
    CHECK(send_burst(s, 0) == 4);    // update 1: one run sent at 0
    REQUIRE(s.offer_update(1, 100, g) == OfferResult::Ok);
    CHECK(send_burst(s, 100) == 4);  // update 2: a run sent at 100
    s.on_credit(credit(1), 0, 250);  // a unit arrives: the oldest chunk of update 1 leaves flight
    CHECK(s.in_flight() == 7);
    CHECK_FALSE(s.on_timeout(299));  // nothing out for 300 yet
    CHECK(s.in_flight() == 7);
    CHECK_FALSE(s.on_timeout(300));  // update 1's other three: out since 0; credits came, so no timeout
    CHECK(s.in_flight() == 4);
    CHECK(s.counters().chunks_expired == 3);
    CHECK(s.counters().chunks_presumed_lost == 3);
    CHECK(s.counters().credit_timeouts == 0);
    CHECK(accounted(s));
    s.on_credit(credit(1), 0, 350);
    CHECK_FALSE(s.on_timeout(400));  // update 2's run: out since 100
    CHECK(s.in_flight() == 0);
    CHECK(s.counters().chunks_expired == 6);
    CHECK(accounted(s));
}

TEST_CASE("flight_expiry_rtts: chunks out longer than that many acknowledged round trips leave flight; none before a sample") {
    CHECK(SenderConfig{}.flight_expiry_rtts == 2.0);  // on by default (docs/transport.md)
    SenderConfig c = expiry_config();
    c.credit_timeout_ns = 0;
    c.flight_expiry_rtts = 2;
    CreditSender s(c);
    std::vector<float> g(4, 1.0f);
    const std::uint32_t first = c.first_seq;
    REQUIRE(s.offer_update(1, 0, g) == OfferResult::Ok);
    CHECK(send_burst(s, 0) == 4);  // update `first`: sent at 0
    CHECK_FALSE(s.on_timeout(1'000'000));
    CHECK(s.in_flight() == 4);     // no round trip measured yet: nothing expires, however long
    CHECK(s.flight_expiry_ns() == 0);
    // A unit spread to this worker after someone else's merge: acked_seq does not move, no sample.
    s.on_credit(credit(1), 0, 1'000'010);
    CHECK(s.ack_rtt_ns() == 0);
    // The learner acknowledges update `first` (its CREDIT names it): a sample of 1,000,100 ns.
    proto::CreditBody ack = credit(1);
    ack.acked_seq = first;
    s.on_credit(ack, 0, 1'000'100);
    CHECK(s.ack_rtt_ns() == 1'000'100);
    s.on_credit(ack, 0, 1'000'200);  // the same acknowledgement again: no new sample
    CHECK(s.ack_rtt_ns() == 1'000'100);
    CHECK(s.in_flight() == 1);
    CHECK(s.flight_expiry_ns() == 2'000'200);
    CHECK_FALSE(s.on_timeout(2'000'199));  // the last chunk of update `first`, out since 0: not yet
    CHECK(s.in_flight() == 1);
    CHECK_FALSE(s.on_timeout(2'000'200));  // out 2 round trips: it leaves flight
    CHECK(s.in_flight() == 0);
    CHECK(s.counters().chunks_expired == 1);
    CHECK(s.counters().chunks_presumed_lost == 1);
    // A quicker acknowledgement moves the smoothed round trip by 1/8 of the difference.
    REQUIRE(s.offer_update(1, 3'000'000, g) == OfferResult::Ok);
    CHECK(send_burst(s, 3'000'000) == 4);  // update first + 1
    ack = credit(4);
    ack.acked_seq = first + 1;
    s.on_credit(ack, 0, 3'000'100);  // 100 ns
    CHECK(s.ack_rtt_ns() == 1'000'100 - 1'000'100 / 8 + 100 / 8);
    CHECK(s.in_flight() == 0);
    CHECK(accounted(s));
}

TEST_CASE("flight_expiry_rtts: 0 turns it off; a fixed flight_expiry_ns takes precedence; bad values are refused") {
    SenderConfig c = expiry_config();
    c.credit_timeout_ns = 0;
    c.flight_expiry_rtts = 0;
    {
        CreditSender s(c);
        std::vector<float> g(4, 1.0f);
        REQUIRE(s.offer_update(1, 0, g) == OfferResult::Ok);
        CHECK(send_burst(s, 0) == 4);
        proto::CreditBody ack = credit(1);
        ack.acked_seq = c.first_seq;
        s.on_credit(ack, 0, 100);
        CHECK(s.ack_rtt_ns() == 100);  // still measured, for the worker's report
        CHECK(s.flight_expiry_ns() == 0);
        CHECK_FALSE(s.on_timeout(1'000'000'000));
        CHECK(s.in_flight() == 3);
        CHECK(s.counters().chunks_expired == 0);
    }
    c.flight_expiry_rtts = 2;
    c.flight_expiry_ns = 5'000;
    CHECK(CreditSender(c).flight_expiry_ns() == 5'000);
    c.flight_expiry_ns = 0;
    for (double bad : {-1.0, 0.5, 1001.0, std::nan("")}) {
        c.flight_expiry_rtts = bad;
        CHECK_THAT(validate(c), Catch::Contains("flight_expiry_rtts"));
    }
    c.flight_expiry_rtts = 1;
    CHECK(validate(c).empty());
}

namespace {
shesha::proto::Header credit_template() {
    shesha::proto::Header h;
    h.type = shesha::proto::MsgType::Credit;
    h.elem_type = shesha::proto::ElemType::None;
    h.ts_earliest_ns = h.ts_latest_ns = 1000;
    return h;
}
}  // namespace

TEST_CASE("encode_credit_batches: 130 grants in datagrams of 56, 56 and 18, every entry as granted", "[credit_planner]") {
    using namespace shesha::proto;
    std::vector<shesha::transport::CreditGrant> grants(130);
    for (std::uint32_t i = 0; i < grants.size(); ++i) {
        grants[i].worker_id = 1000 + i;
        grants[i].flags = i % 7 == 0 ? flag::kCongestionEcho : 0;
        grants[i].body = CreditBody{1 + i % 3, i, 77, i % 7 == 0 ? 2u : 0u};
    }
    shesha::proto::Header tmpl = credit_template();
    tmpl.cluster_id = 9;
    tmpl.model_version = 77;
    std::vector<std::uint8_t> buf(shesha::transport::kCreditBatchBufferSize);
    std::vector<std::uint16_t> sizes;
    std::uint32_t next = 0;
    const std::size_t n = shesha::transport::encode_credit_batches(
        tmpl, grants, buf, [&](std::span<const std::uint8_t> bytes, std::span<const shesha::transport::CreditGrant> carried) {
            CHECK(carried.data() == grants.data() + next);  // the grants this datagram carries
            Message m;
            REQUIRE(decode(bytes, m) == DecodeError::Ok);
            CHECK(m.hdr.type == MsgType::CreditBatch);
            CHECK(m.hdr.cluster_id == 9);
            CHECK(m.hdr.model_version == 77);
            sizes.push_back(m.hdr.elem_count);
            CHECK(carried.size() == m.hdr.elem_count);
            for (std::uint16_t i = 0; i < m.hdr.elem_count; ++i, ++next) {
                CreditBatchEntry e;
                REQUIRE(decode_credit_batch_entry(m.payload, i, e));
                CHECK(e.worker_id == grants[next].worker_id);
                CHECK(e.flags == grants[next].flags);
                CHECK(e.body.credits == grants[next].body.credits);
                CHECK(e.body.acked_seq == grants[next].body.acked_seq);
                CHECK(e.body.ce_count == grants[next].body.ce_count);
            }
        });
    CHECK(n == 3);
    CHECK(sizes == std::vector<std::uint16_t>{56, 56, 18});
    CHECK(next == 130);
    CHECK(shesha::transport::encode_credit_batches(tmpl, {}, buf, [](auto, auto) { FAIL("no grants, no datagram"); }) == 0);
}

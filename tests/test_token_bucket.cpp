// TokenBucket: exact fixed-point refills, wire overhead, minimum burst, edge cases.
#include <catch2/catch.hpp>

#include "frame.h"
#include "token_bucket.h"

using shesha::core::TokenBucket;
using shesha::frame::kWireOverhead;

namespace {
constexpr std::uint64_t kNs = 1'000'000'000;  // ticks per second in most tests
// Frame length whose wire cost is exactly `wire` bytes.
constexpr std::uint32_t frame_for_wire(std::uint32_t wire) { return wire - kWireOverhead; }
}  // namespace

TEST_CASE("rate 0 is unlimited", "[token_bucket]") {
    TokenBucket tb(0, 0, kNs);
    CHECK(tb.unlimited());
    CHECK(tb.rate_bps() == 0);
    for (int i = 0; i < 100000; ++i) REQUIRE(tb.try_consume(9000, 0));
}

TEST_CASE("the first call starts with a full bucket", "[token_bucket]") {
    TokenBucket tb(8'000'000, 20000, kNs);
    CHECK_FALSE(tb.unlimited());
    CHECK(tb.rate_bps() == 8'000'000);
    const std::uint64_t t0 = 123456789;  // the clock need not start at 0
    for (int i = 0; i < 20; ++i) REQUIRE(tb.try_consume(frame_for_wire(1000), t0));
    CHECK_FALSE(tb.try_consume(frame_for_wire(1000), t0));
    CHECK(tb.try_consume(0, t0 + 0) == false);  // even an empty frame costs its overhead
}

TEST_CASE("each frame is charged its wire overhead", "[token_bucket]") {
    // Minimum burst: 9100 wire bytes.
    TokenBucket exact(1'000'000, 0, kNs);
    CHECK(exact.try_consume(frame_for_wire(4550), 0));
    CHECK(exact.try_consume(frame_for_wire(4550), 0));
    CHECK_FALSE(exact.try_consume(0, 0));
    TokenBucket over(1'000'000, 0, kNs);
    CHECK(over.try_consume(frame_for_wire(4551), 0));
    CHECK_FALSE(over.try_consume(frame_for_wire(4551), 0));  // 9102 > 9100
    CHECK(over.try_consume(frame_for_wire(4549), 0));        // what is left
}

TEST_CASE("a small burst is raised to one jumbo frame", "[token_bucket]") {
    TokenBucket tb(1'000'000, 100, kNs);
    for (int i = 0; i < 9; ++i) REQUIRE(tb.try_consume(frame_for_wire(1000), 0));
    CHECK(tb.try_consume(frame_for_wire(100), 0));
    CHECK_FALSE(tb.try_consume(frame_for_wire(1), 0));
    TokenBucket jumbo(1'000'000, 1, kNs);
    CHECK(jumbo.try_consume(9000, 0));
}

TEST_CASE("refill follows the rate to the tick", "[token_bucket]") {
    // 8 Mbit/s = 1,000,000 B/s = 1 wire byte per microsecond.
    TokenBucket tb(8'000'000, 10000, kNs);
    REQUIRE(tb.try_consume(frame_for_wire(10000), 0));  // drain
    CHECK_FALSE(tb.try_consume(frame_for_wire(1000), 999'999));
    CHECK(tb.try_consume(frame_for_wire(1000), 1'000'000));
    CHECK_FALSE(tb.try_consume(frame_for_wire(1000), 1'000'000));
    // Refill caps at the burst however long the idle period.
    const std::uint64_t later = 3'600 * kNs;
    for (int i = 0; i < 10; ++i) REQUIRE(tb.try_consume(frame_for_wire(1000), later));
    CHECK_FALSE(tb.try_consume(frame_for_wire(1000), later));
}

TEST_CASE("fractional refills accumulate exactly", "[token_bucket]") {
    // 1000 bit/s = 125 B/s with 3 ticks per second: 41.666... bytes per tick. Without the carried
    // remainder three single-tick refills would give 124.998 bytes and the frame would wait.
    TokenBucket tb(1000, 0, 3);
    REQUIRE(tb.try_consume(frame_for_wire(9100), 0));  // drain
    CHECK_FALSE(tb.try_consume(frame_for_wire(125), 1));
    CHECK_FALSE(tb.try_consume(frame_for_wire(125), 2));
    CHECK(tb.try_consume(frame_for_wire(125), 3));
    // Long run: 3000 ticks of single steps = 1000 s = 125000 bytes, 1000 frames of 125 wire bytes.
    int sent = 0;
    for (std::uint64_t t = 4; t <= 3003; ++t) sent += tb.try_consume(frame_for_wire(125), t);
    CHECK(sent == 1000);
}

TEST_CASE("high rates and long gaps do not overflow", "[token_bucket]") {
    TokenBucket tb(400'000'000'000ull, 1 << 20, 3'000'000'000ull);
    REQUIRE(tb.try_consume(frame_for_wire(1 << 20), 0));
    CHECK_FALSE(tb.try_consume(0, 0));
    // 2^40 ticks later: the product ticks * rate * 125 exceeds 64 bits; the bucket is just full.
    const std::uint64_t t = 1ull << 40;
    CHECK(tb.try_consume(frame_for_wire(1 << 20), t));
    CHECK_FALSE(tb.try_consume(0, t));
    // 400 Gbit/s at 3 GHz: 16.67 bytes per tick, so 60 ticks give 1000 bytes.
    CHECK_FALSE(tb.try_consume(frame_for_wire(1000), t + 59));
    CHECK(tb.try_consume(frame_for_wire(1000), t + 60));
}

TEST_CASE("a frame larger than the bucket passes only from a full bucket", "[token_bucket]") {
    TokenBucket tb(8'000'000, 0, kNs);  // 9100 B bucket, 1 B/us
    CHECK(tb.try_consume(20000, 0));     // full: let through, bucket emptied
    CHECK_FALSE(tb.try_consume(0, 0));
    CHECK_FALSE(tb.try_consume(20000, 9'099'000));  // not yet full again
    CHECK(tb.try_consume(20000, 9'100'000));
}

TEST_CASE("a clock stepping backwards adds nothing", "[token_bucket]") {
    TokenBucket tb(8'000'000, 0, kNs);
    REQUIRE(tb.try_consume(frame_for_wire(9100), 1'000'000));
    CHECK_FALSE(tb.try_consume(frame_for_wire(1), 500'000));
    CHECK_FALSE(tb.try_consume(frame_for_wire(100), 1'099'999));  // 1 B per us
    CHECK(tb.try_consume(frame_for_wire(100), 1'100'000));
}

TEST_CASE("buckets that share one SharedTokenBucket draw from one budget", "[token_bucket]") {
    // 8 Mbit/s = 1 byte/us; bucket of 10,000 wire bytes.
    shesha::core::SharedTokenBucket shared(8'000'000, 10'000, kNs);
    TokenBucket a(8'000'000, 10'000, kNs), b(8'000'000, 10'000, kNs);
    a.share(&shared);
    b.share(&shared);
    CHECK(a.try_consume(frame_for_wire(4000), 0));
    CHECK(b.try_consume(frame_for_wire(4000), 0));
    CHECK_FALSE(a.try_consume(frame_for_wire(4000), 0));  // 2,000 left, whichever bucket asks
    CHECK_FALSE(b.try_consume(frame_for_wire(4000), 0));
    CHECK(b.try_consume(frame_for_wire(2000), 0));
    CHECK_FALSE(a.try_consume(frame_for_wire(100), 0));
    CHECK(a.try_consume(frame_for_wire(1000), 1'000'000));  // 1 ms later: 1,000 bytes refilled
    CHECK_FALSE(b.try_consume(frame_for_wire(100), 1'000'000));
    CHECK(a.rate_bps() == 8'000'000);
    CHECK_FALSE(a.unlimited());
}

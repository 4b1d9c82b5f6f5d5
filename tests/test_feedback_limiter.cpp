// FeedbackLimiter: one FEEDBACK per sender per interval; shared slots only ever limit more.
#include <catch2/catch.hpp>

#include "feedback_limiter.h"

using shesha::core::FeedbackLimiter;

TEST_CASE("one message per sender per interval", "[feedback_limiter]") {
    FeedbackLimiter fl(64, 1000);
    const std::uint32_t ip = 0x0A000001;
    CHECK(fl.allow(ip, 5000));
    CHECK_FALSE(fl.allow(ip, 5000));
    CHECK_FALSE(fl.allow(ip, 5999));
    CHECK(fl.suppressed() == 2);
    CHECK(fl.allow(ip, 6000));  // exactly one interval later
    CHECK_FALSE(fl.allow(ip, 6001));
    CHECK(fl.suppressed() == 3);
}

TEST_CASE("the first message from a sender is allowed at any time, even 0", "[feedback_limiter]") {
    FeedbackLimiter fl(8, 1'000'000);
    CHECK(fl.allow(0x0A000001, 0));
    CHECK(fl.suppressed() == 0);
}

TEST_CASE("interval 0 never suppresses", "[feedback_limiter]") {
    FeedbackLimiter fl(4, 0);
    for (int i = 0; i < 100; ++i) REQUIRE(fl.allow(7, 42));
    CHECK(fl.suppressed() == 0);
}

TEST_CASE("a single slot is shared by all senders", "[feedback_limiter]") {
    FeedbackLimiter fl(0, 100);  // 0 slots is raised to 1
    CHECK(fl.allow(1, 0));
    CHECK_FALSE(fl.allow(2, 50));
    CHECK(fl.allow(3, 100));
    CHECK(fl.suppressed() == 1);
}

TEST_CASE("with enough slots most senders are independent", "[feedback_limiter]") {
    FeedbackLimiter fl(4096, 1000);
    int allowed = 0;
    for (std::uint32_t host = 1; host <= 100; ++host) allowed += fl.allow(0x0A000000 + host, 10);
    CHECK(allowed >= 95);  // a few hash collisions are allowed, never more traffic
    CHECK(fl.suppressed() == static_cast<std::uint64_t>(100 - allowed));
    // Every sender is suppressed within its interval, whatever its slot.
    for (std::uint32_t host = 1; host <= 100; ++host) REQUIRE_FALSE(fl.allow(0x0A000000 + host, 500));
    CHECK(fl.suppressed() == static_cast<std::uint64_t>(200 - allowed));
}

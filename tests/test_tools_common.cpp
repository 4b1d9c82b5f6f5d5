// Unit tests for tools/common: the pieces of shesha-gen / shesha-sink that hold logic.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <random>
#include <vector>

#include "aom_tracker.h"
#include "json_io.h"
#include "latency_histogram.h"
#include "udp.h"
#include "version_pattern.h"

using shesha::metrics::AomTracker;
using shesha::metrics::LatencyHistogram;
using shesha::pattern::VersionPattern;

namespace {
constexpr std::uint64_t kMs = 1'000'000;
}

TEST_CASE("histogram buckets cover every value with bounded relative error") {
    std::mt19937_64 rng(7);
    std::vector<std::uint64_t> values = {0, 1, 63, 64, 65, 127, 128, 1000, 123456789, UINT64_MAX, UINT64_MAX - 1,
                                         std::uint64_t{1} << 63};
    for (int i = 0; i < 10000; ++i) values.push_back(rng() >> (rng() % 64));
    std::size_t previous_bucket = 0;
    for (const std::uint64_t v : values) {
        const std::size_t b = LatencyHistogram::bucket_of(v);
        REQUIRE(b < LatencyHistogram::kBucketCount);
        const std::uint64_t upper = LatencyHistogram::bucket_upper_bound(b);
        REQUIRE(upper >= v);
        REQUIRE(LatencyHistogram::bucket_of(upper) == b);
        // upper - v < bucket width <= v / 64
        REQUIRE(static_cast<double>(upper - v) <= static_cast<double>(v) / 64.0);
        (void)previous_bucket;
    }
    // Buckets are ordered: consecutive upper bounds increase and the next bucket starts right after.
    for (std::size_t b = 0; b + 1 < LatencyHistogram::kBucketCount; ++b) {
        REQUIRE(LatencyHistogram::bucket_of(LatencyHistogram::bucket_upper_bound(b) + 1) == b + 1);
    }
    REQUIRE(LatencyHistogram::bucket_upper_bound(LatencyHistogram::kBucketCount - 1) == UINT64_MAX);
}

TEST_CASE("histogram percentiles, mean and max") {
    LatencyHistogram h;
    REQUIRE(h.count() == 0);
    REQUIRE(h.percentile(0.5) == 0);
    REQUIRE(h.mean() == 0.0);
    for (std::uint64_t v = 1; v <= 10; ++v) h.add(v);  // small values have exact buckets
    REQUIRE(h.count() == 10);
    REQUIRE(h.min() == 1);
    REQUIRE(h.max() == 10);
    REQUIRE(h.mean() == 5.5);
    REQUIRE(h.percentile(0.5) == 5);
    REQUIRE(h.percentile(0.51) == 6);
    REQUIRE(h.percentile(0.99) == 10);
    REQUIRE(h.percentile(1.0) == 10);
    REQUIRE(h.percentile(0.0) == 1);

    LatencyHistogram big;
    for (int i = 0; i < 99; ++i) big.add(1'000'000);  // 1 ms
    big.add(50'000'000);                              // one 50 ms outlier
    REQUIRE(big.percentile(0.5) >= 1'000'000);
    REQUIRE(big.percentile(0.5) <= 1'000'000 + 1'000'000 / 64);
    REQUIRE(big.percentile(0.99) <= 1'000'000 + 1'000'000 / 64);
    REQUIRE(big.percentile(0.999) == 50'000'000);  // clamped to the exact max
    REQUIRE(big.max() == 50'000'000);
}

TEST_CASE("AoM samples on a 1 ms grid from the first arrival") {
    AomTracker aom;
    REQUIRE_FALSE(aom.started());
    aom.advance(100 * kMs);  // nothing received yet: no samples
    REQUIRE(aom.samples() == 0);

    aom.on_receive(10 * kMs, 0);            // L = 0, ticks at 11, 12, ... ms
    aom.on_receive(13 * kMs + 500'000, 12 * kMs);  // ticks 11,12,13 see L=0: 11, 12, 13 ms
    REQUIRE(aom.samples() == 3);
    REQUIRE(aom.mean_ns() == Approx(12.0 * kMs));
    REQUIRE(aom.peak_ns() == static_cast<std::int64_t>(13 * kMs));
    aom.on_receive(14 * kMs + 100, 5 * kMs);  // older generation: L stays 12 ms; tick 14 sees 2 ms
    REQUIRE(aom.latest_generation_ns() == 12 * kMs);
    aom.advance(16 * kMs);  // ticks 15, 16: 3 and 4 ms
    REQUIRE(aom.samples() == 6);
    REQUIRE(aom.mean_ns() == Approx((11.0 + 12 + 13 + 2 + 3 + 4) / 6 * kMs));
    REQUIRE(aom.peak_ns() == static_cast<std::int64_t>(13 * kMs));
    aom.advance(16 * kMs + 999'999);  // no new tick yet
    REQUIRE(aom.samples() == 6);
}

TEST_CASE("AoM closed form equals sampling every millisecond") {
    std::mt19937_64 rng(42);
    AomTracker aom;
    // Brute force reference: walk every tick, apply arrivals in time order.
    struct Arrival { std::uint64_t at, gen; };
    std::vector<Arrival> arrivals;
    std::uint64_t t = 1'000 * kMs;
    for (int i = 0; i < 2000; ++i) {
        t += rng() % (5 * kMs);  // gaps of 0..5 ms, often several per tick, sometimes none for ticks
        const std::uint64_t delay = rng() % (3 * kMs);
        arrivals.push_back({t, t - delay});
    }
    const std::uint64_t end = t + 7 * kMs + 3;
    for (const Arrival& a : arrivals) aom.on_receive(a.at, a.gen);
    aom.advance(end);

    std::uint64_t latest = arrivals[0].gen;
    std::size_t next = 1;
    double sum = 0;
    std::uint64_t n = 0;
    std::int64_t peak = INT64_MIN;
    for (std::uint64_t tick = arrivals[0].at + kMs; tick <= end; tick += kMs) {
        while (next < arrivals.size() && arrivals[next].at < tick) latest = std::max(latest, arrivals[next++].gen);
        const auto value = static_cast<std::int64_t>(tick - latest);
        sum += static_cast<double>(value);
        ++n;
        peak = std::max(peak, value);
    }
    REQUIRE(aom.samples() == n);
    REQUIRE(aom.peak_ns() == peak);
    REQUIRE(aom.mean_ns() == Approx(sum / static_cast<double>(n)).epsilon(1e-12));
}

TEST_CASE("JSON output: escaping, 64-bit integers, non-finite doubles as null, layout") {
    // The tools' summaries (json::pretty): one value per line, two-space indentation.
    shesha::json::Json j;
    j["name"] = "a\"b\\c\n";
    j["n"] = std::uint64_t{18446744073709551615ull};
    j["neg"] = std::int64_t{-3};
    j["x"] = 0.25;
    j["nan"] = std::nan("");
    j["ok"] = true;
    j["list"] = shesha::json::Json::array({{{"id", 1}}});
    j["empty"] = shesha::json::Json::object();
    REQUIRE(shesha::json::pretty(j) ==
            "{\n"
            "  \"name\": \"a\\\"b\\\\c\\n\",\n"
            "  \"n\": 18446744073709551615,\n"
            "  \"neg\": -3,\n"
            "  \"x\": 0.25,\n"
            "  \"nan\": null,\n"
            "  \"ok\": true,\n"
            "  \"list\": [\n"
            "    {\n"
            "      \"id\": 1\n"
            "    }\n"
            "  ],\n"
            "  \"empty\": {}\n"
            "}\n");
    REQUIRE(shesha::json::pretty(shesha::json::Json(std::string("\x01", 1))) == "\"\\u0001\"\n");
    REQUIRE(shesha::json::pretty(shesha::json::Json(std::numeric_limits<double>::infinity())) == "null\n");
    // Invalid UTF-8 never throws: replaced.
    REQUIRE_NOTHROW(shesha::json::pretty(shesha::json::Json(std::string("\xff"))));

    // json::rows: one line per record, arrays of objects expanded.
    shesha::json::Json r;
    r["schema"] = "s";
    r["model"] = {{"a", 1}, {"b", {1, 2}}};
    r["steps"] = {{{"t", 0}, {"send", {2, 2}}}, {{"t", 1}, {"send", {0, 0}}}};
    REQUIRE(shesha::json::rows(r) ==
            "{\n"
            "  \"schema\": \"s\",\n"
            "  \"model\": {\"a\": 1, \"b\": [1, 2]},\n"
            "  \"steps\": [\n"
            "    {\"t\": 0, \"send\": [2, 2]},\n"
            "    {\"t\": 1, \"send\": [0, 0]}\n"
            "  ]\n"
            "}\n");
    REQUIRE(shesha::json::fixed(1.23456, 3) == 1.235);
    REQUIRE(shesha::json::significant(1234567.0, 6) == 1234570.0);
}

TEST_CASE("JSON input: errors name the source and the key") {
    using shesha::json::Json;
    auto message = [](auto&& f) {
        try {
            f();
        } catch (const shesha::json::Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    CHECK(message([] { shesha::json::parse("{\"a\": ", "f.json"); }).starts_with("f.json: not valid JSON: "));
    CHECK(message([] { shesha::json::parse_file("/nonexistent/f.json"); })
              .starts_with("/nonexistent/f.json: cannot read the file"));
    const Json j = shesha::json::parse(R"({"a": {"n": 3, "s": "x", "neg": -1, "f": 2.5, "v": [1, 2]}})", "f.json");
    CHECK(shesha::json::required<int>(j["a"], "n", "a.") == 3);
    CHECK(shesha::json::required<double>(j["a"], "n", "a.") == 3.0);
    CHECK(shesha::json::required<std::vector<int>>(j["a"], "v", "a.") == std::vector<int>{1, 2});
    CHECK(!shesha::json::optional<int>(j["a"], "missing", "a."));
    CHECK(message([&] { shesha::json::required<int>(j["a"], "missing", "a."); }) == "missing key a.missing");
    CHECK(message([&] { shesha::json::required<int>(j["a"], "s", "a."); }) == "key a.s: wrong type");
    CHECK(message([&] { shesha::json::required<int>(j["a"], "f", "a."); }) == "key a.f: wrong type");
    CHECK(message([&] { shesha::json::required<unsigned>(j["a"], "neg", "a."); }) == "key a.neg: wrong type");
    CHECK(message([&] { shesha::json::required<std::uint8_t>(j["a"], "n", "a."); }) == "no error");
    CHECK(message([&] { shesha::json::optional<bool>(j["a"], "n", "a."); }) == "key a.n: wrong type");
}

TEST_CASE("version pattern parsing and base version") {
    const auto lock = VersionPattern::parse("lockstep");
    REQUIRE(lock);
    REQUIRE(lock->kind == VersionPattern::Kind::Lockstep);
    const auto skew = VersionPattern::parse("skew:3");
    REQUIRE(skew);
    REQUIRE(skew->kind == VersionPattern::Kind::Skew);
    REQUIRE(skew->max_lag == 3);
    for (const char* bad : {"", "skew", "skew:", "skew:-1", "skew:3x", "skew: 3", "Lockstep", "skew:99999999999"})
        REQUIRE_FALSE(VersionPattern::parse(bad));
    REQUIRE(VersionPattern::base_version(250 * kMs, 100) == 2);
    REQUIRE(VersionPattern::base_version(299'999'999, 100) == 2);
    REQUIRE(VersionPattern::base_version(300 * kMs, 100) == 3);
    // Truncated modulo 2^32: the same for every process at the same wall-clock time.
    REQUIRE(VersionPattern::base_version((std::uint64_t{1} << 32) * kMs + 5 * kMs, 1) == 5);
}

TEST_CASE("helpers: IPv4 parsing and JSON keys") {
    REQUIRE(shesha::net::parse_ipv4("127.0.0.1"));
    REQUIRE_FALSE(shesha::net::parse_ipv4("127.0.0"));
    REQUIRE_FALSE(shesha::net::parse_ipv4("localhost"));
    REQUIRE_FALSE(shesha::net::parse_ipv4("1.2.3.256"));
    REQUIRE(shesha::json::snake_key("bad chunk index/count") == "bad_chunk_index_count");
}

TEST_CASE("UDP sockets: the multicast sender options are set, and a group is reachable from a bound address") {
    shesha::net::UdpSocketOptions o;
    o.bind_addr = shesha::net::parse_ipv4("127.0.0.1");
    o.multicast_if = o.bind_addr;
    o.multicast_ttl = 1;
    o.multicast_loop = false;
    std::string err;
    const int fd = shesha::net::open_udp_socket(o, err);
    REQUIRE(fd >= 0);
    in_addr ifaddr{};
    socklen_t len = sizeof ifaddr;
    REQUIRE(getsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &ifaddr, &len) == 0);
    CHECK(ifaddr.s_addr == htonl(0x7f000001));
    unsigned char byte = 0xFF;
    len = sizeof byte;
    REQUIRE(getsockopt(fd, IPPROTO_IP, IP_MULTICAST_TTL, &byte, &len) == 0);
    CHECK(byte == 1);
    byte = 0xFF;
    len = sizeof byte;
    REQUIRE(getsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &byte, &len) == 0);
    CHECK(byte == 0);
    // The interface of 127.0.0.1 carries the group datagram; no multicast route is involved.
    sockaddr_in group{};
    group.sin_family = AF_INET;
    group.sin_port = htons(17717);
    group.sin_addr.s_addr = htonl(0xEF4D0001);  // 239.77.0.1
    const char payload[8] = {};
    CHECK(sendto(fd, payload, sizeof payload, 0, reinterpret_cast<const sockaddr*>(&group), sizeof group) == 8);
    close(fd);

    // Without them the kernel's defaults stay (loop on).
    shesha::net::UdpSocketOptions plain;
    const int fd2 = shesha::net::open_udp_socket(plain, err);
    REQUIRE(fd2 >= 0);
    byte = 0;
    len = sizeof byte;
    REQUIRE(getsockopt(fd2, IPPROTO_IP, IP_MULTICAST_LOOP, &byte, &len) == 0);
    CHECK(byte == 1);
    close(fd2);
}

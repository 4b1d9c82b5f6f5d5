// common/prometheus: text format details node_exporter's parser insists on.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "prometheus.h"

using namespace shesha::prom;

TEST_CASE("families are contiguous with one HELP and TYPE each, in first-seen order") {
    TextWriter w;
    w.add("shesha_port_rx_packets_total", Type::Counter, "rx", {{"port", "a"}}, std::uint64_t{1});
    w.add("shesha_queue_depth", Type::Gauge, "depth", {{"port", "a"}}, std::uint64_t{7});
    w.add("shesha_port_rx_packets_total", Type::Counter, "rx", {{"port", "b"}}, std::uint64_t{18446744073709551615ull});
    w.add("shesha_queue_depth", Type::Gauge, "depth", {{"port", "b"}}, std::uint64_t{0});
    CHECK(w.families() == 2);
    CHECK(w.str() ==
          "# HELP shesha_port_rx_packets_total rx\n"
          "# TYPE shesha_port_rx_packets_total counter\n"
          "shesha_port_rx_packets_total{port=\"a\"} 1\n"
          "shesha_port_rx_packets_total{port=\"b\"} 18446744073709551615\n"
          "# HELP shesha_queue_depth depth\n"
          "# TYPE shesha_queue_depth gauge\n"
          "shesha_queue_depth{port=\"a\"} 7\n"
          "shesha_queue_depth{port=\"b\"} 0\n");
}

TEST_CASE("names, label values, help and doubles are escaped or spelled as the format wants") {
    CHECK(sanitize_name("a-b.c:d") == "a_b_c:d");
    CHECK(sanitize_name("9x") == "_9x");
    CHECK(escape_label_value("q\"b\\n\nx") == "q\\\"b\\\\n\\nx");
    CHECK(format_value(0.1) == "0.1");
    CHECK(format_value(1e-7) == "1e-07");
    CHECK(format_value(-2.5) == "-2.5");
    CHECK(format_value(0.0 / 0.0) == "NaN");
    CHECK(format_value(1.0 / 0.0) == "+Inf");
    TextWriter w;
    w.add("m", Type::Gauge, "line one\nback\\slash", {{"bad-label", "v"}}, 1.5);
    w.add("n", Type::Counter, "", {}, std::int64_t{-3});
    CHECK(w.str() == "# HELP m line one\\nback\\\\slash\n# TYPE m gauge\nm{bad_label=\"v\"} 1.5\n# TYPE n counter\nn -3\n");
}

TEST_CASE("textfile paths: *.prom only, checked by creating and removing PATH.tmp; writes replace atomically") {
    const auto dir = std::filesystem::temp_directory_path() / ("shesha-prom-unit-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::string error;
    CHECK_FALSE(check_textfile_path((dir / "x.txt").string(), error));
    CHECK(error.find(".prom") != std::string::npos);
    CHECK_FALSE(check_textfile_path((dir / "missing" / "x.prom").string(), error));
    CHECK(error.find("missing/x.prom.tmp") != std::string::npos);
    const std::string path = (dir / "x.prom").string();
    REQUIRE(check_textfile_path(path, error));
    CHECK(std::filesystem::is_empty(dir));
    REQUIRE(write_textfile(path, "a 1\n", error));
    REQUIRE(write_textfile(path, "a 2\n", error));
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    CHECK(ss.str() == "a 2\n");
    CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
    std::filesystem::remove_all(dir);
}

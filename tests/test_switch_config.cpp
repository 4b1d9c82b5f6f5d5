// Switch configuration: value helpers, defaults, a full config and its YAML round trip, a table of
// bad configs whose messages must name file, line, key path and expectation, and every shipped
// configs/switch-*.yaml (directory from SHESHA_CONFIGS_DIR, set by tests/meson.build).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "switch_config.h"

using namespace shesha::core;

namespace {

// The message of the ConfigError that parsing text throws; fails the test if nothing is thrown.
std::string error_of(const std::string& yaml, const std::string& source = "bad.yaml") {
    try {
        parse_switch_config(yaml, source);
    } catch (const ConfigError& e) {
        return e.what();
    }
    FAIL("expected a ConfigError for:\n" << yaml);
    return {};
}

Mac mac(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d, std::uint8_t e, std::uint8_t f) {
    return Mac{a, b, c, d, e, f};
}

constexpr std::uint32_t ip(std::uint32_t a, std::uint32_t b, std::uint32_t c, std::uint32_t d) {
    return (a << 24) | (b << 16) | (c << 8) | d;
}

// Two valid ports on lines 1..3; rows append their lines from line 4 on.
const std::string kTwoPorts =
    "ports:\n"
    "  - {name: a, device: net_null0}\n"
    "  - {name: b, device: net_null1}\n";

}  // namespace

TEST_CASE("parse_rate_bps accepts plain bits/s and k/M/G/T suffixes exactly") {
    CHECK(parse_rate_bps("0") == 0);
    CHECK(parse_rate_bps("1000000") == 1'000'000);
    CHECK(parse_rate_bps("1.5k") == 1'500);
    CHECK(parse_rate_bps("250M") == 250'000'000);
    CHECK(parse_rate_bps("10G") == 10'000'000'000ULL);
    CHECK(parse_rate_bps("10g") == 10'000'000'000ULL);
    CHECK(parse_rate_bps("1.1G") == 1'100'000'000ULL);  // exact, no floating point rounding
    CHECK(parse_rate_bps("2.5Gbps") == 2'500'000'000ULL);
    CHECK(parse_rate_bps("100Mbit/s") == 100'000'000ULL);
    CHECK(parse_rate_bps("1T") == 1'000'000'000'000ULL);
    CHECK(parse_rate_bps(" 40G ") == 40'000'000'000ULL);
    for (const char* bad : {"", "fast", "G", "10X", "-1", "1.5", "1.0005k", "10 G", ".5G", "10.G", "1e9",
                            "0x10", "99999999999999999999", "20000000T"}) {
        INFO("rate '" << bad << "'");
        try {
            parse_rate_bps(bad);
            FAIL("accepted");
        } catch (const ConfigError& e) {
            CHECK(std::string(e.what()) ==
                  std::string("expected a rate like 10G, 250M or 1000000 (bits/s), got '") + bad + "'");
        }
    }
}

TEST_CASE("parse_byte_size: decimal K/M/G, binary Ki/Mi/Gi, optional B") {
    CHECK(parse_byte_size("16384") == 16384);
    CHECK(parse_byte_size("64K") == 64'000);
    CHECK(parse_byte_size("64KB") == 64'000);
    CHECK(parse_byte_size("64KiB") == 65'536);
    CHECK(parse_byte_size("64ki") == 65'536);
    CHECK(parse_byte_size("4MiB") == 4u << 20);
    CHECK(parse_byte_size("1.5MiB") == 3u << 19);
    CHECK(parse_byte_size("2G") == 2'000'000'000ULL);
    CHECK(parse_byte_size("1GiB") == 1ULL << 30);
    for (const char* bad : {"", "4mb", "4Mb", "4MiBB", "4X", "1.5", "0.3KiB", "-4K", "4 MiB", "4TiB"}) {
        INFO("size '" << bad << "'");
        CHECK_THROWS_WITH(parse_byte_size(bad),
                          std::string("expected a byte size like 16384, 64K or 4MiB, got '") + bad + "'");
    }
}

TEST_CASE("MAC and IPv4 helpers parse strictly and format canonically") {
    CHECK(parse_mac("02:00:00:00:00:01") == mac(2, 0, 0, 0, 0, 1));
    CHECK(parse_mac("AA-bb-CC-dd-EE-ff") == mac(0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff));
    for (const char* bad : {"", "02:00:00:00:00", "02:00:00:00:00:01:03", "02:00:00:00:00:0g", "02:00-00:00:00:01",
                            "2:0:0:0:0:1", "02:00:00:00:00:001", "0200.0000.0001"})
        CHECK_FALSE(parse_mac(bad).has_value());
    CHECK(format_mac(mac(0x02, 0x5e, 0x0a, 0x4d, 0x00, 0xff)) == "02:5e:0a:4d:00:ff");

    CHECK(parse_ipv4("10.77.0.1") == ip(10, 77, 0, 1));
    CHECK(parse_ipv4("255.255.255.255") == 0xFFFFFFFFu);
    CHECK(parse_ipv4("0.0.0.0") == 0u);
    for (const char* bad : {"", "10.0.0", "10.0.0.1.2", "10.0.0.256", "010.0.0.1", "10..0.1", "10.0.0.1 ", "a.b.c.d",
                            "1000.0.0.1", "10.0.0.-1"})
        CHECK_FALSE(parse_ipv4(bad).has_value());
    CHECK(format_ipv4(ip(192, 168, 10, 254)) == "192.168.10.254");
}

TEST_CASE("a minimal config gets every documented default") {
    const SwitchConfig cfg = parse_switch_config("ports:\n  - name: only\n    device: net_null0\n");
    REQUIRE(cfg.ports.size() == 1);
    const PortConfig& p = cfg.ports[0];
    CHECK(p.name == "only");
    CHECK(p.device == "net_null0");
    CHECK(p.rx_desc == 1024);
    CHECK(p.tx_desc == 1024);
    CHECK(p.shaper.rate_bps == 0);
    CHECK(p.shaper.burst_bytes == 16384);
    CHECK(p.queue_packets == 1024);
    CHECK(p.queue_bytes == 4u << 20);
    CHECK(p.marking.depth_packets == 0);
    CHECK(p.marking.sojourn_us == 0);
    CHECK(p.marking.ip_ecn);
    CHECK(cfg.eal_args.empty());
    CHECK(cfg.lcores == 1);
    CHECK(cfg.idle_backoff_us == 0);
    CHECK(cfg.burst == 32);
    CHECK(cfg.mbufs == 16384);
    CHECK(cfg.fdb_capacity == 4096);
    CHECK(cfg.mac_aging_s == 300);
    CHECK(cfg.static_fdb.empty());
    CHECK(cfg.udp_port == 17717);
    CHECK(cfg.malformed == MalformedAction::Forward);
    CHECK(cfg.aggregation);
    CHECK(cfg.non_member == NonMemberAction::ForwardUnmerged);
    CHECK(cfg.clusters.empty());
    CHECK_FALSE(cfg.feedback);
    CHECK(cfg.feedback_interval_us == 1000);
    CHECK(cfg.stats_interval_s == 1);
    CHECK(cfg.stats_json.empty());
    CHECK(cfg.telemetry);

    // Empty sections keep their defaults too.
    const SwitchConfig with_empty_sections = parse_switch_config(
        "ports:\n  - name: only\n    device: net_null0\nforwarding:\nprotocol:\naggregation:\nfeedback:\nstats:\n");
    CHECK(with_empty_sections == cfg);
}

namespace {

// Every key set to a value that differs from its default.
const std::string kFullConfig = R"(# a comment
eal: ["--no-huge", "-m", "512", "--no-pci", "--file-prefix", "t"]
lcores: 3
idle_backoff_us: 25
burst: 64
mbufs: 32768
marking: {depth_packets: 100, sojourn_us: 750, ip_ecn: false}
ports:
  - name: w1
    device: "net_af_packet0,iface=shv-h1"
    rx_desc: 512
    tx_desc: 2048
    rx_queues: 2
    shaper: {rate: 2.5G, burst_bytes: 32KiB}
    queue: {packets: 512, bytes: 1MiB}
  - name: learner
    device: "0000:3b:00.1"
    shaper:
      rate: 250Mbps
      burst_bytes: 20000
    queue:
      packets: 4096
      bytes: 3M
    marking:
      depth_packets: 300
      ip_ecn: yes
forwarding:
  fdb_capacity: 128
  mac_aging_s: 60
  static:
    - {mac: "02:5e:0a:4d:00:04", port: learner}
    - mac: "02:5E:0A:4D:00:01"
      port: w1
protocol:
  udp_port: 4791
  malformed: drop
aggregation:
  enabled: false
  non_member: drop
  clusters:
    - id: 7
      aggregation: false
      version_tolerance: 16
      members: ["02:5e:0a:4d:00:01", 10.77.0.2, "02:5e:0a:4d:00:03", "02:5e:0a:4d:00:09@10.77.0.9"]
    - id: 0
      members: []
feedback:
  enabled: true
  interval_us: 250
stats:
  interval_s: 0
  json: /tmp/stats.json
telemetry: false
)";

}  // namespace

TEST_CASE("a full config sets every field, and to_yaml round-trips it") {
    const SwitchConfig cfg = parse_switch_config(kFullConfig, "full.yaml");
    CHECK(cfg.eal_args == std::vector<std::string>{"--no-huge", "-m", "512", "--no-pci", "--file-prefix", "t"});
    CHECK(cfg.lcores == 3);
    CHECK(cfg.idle_backoff_us == 25);
    CHECK(cfg.burst == 64);
    CHECK(cfg.mbufs == 32768);
    REQUIRE(cfg.ports.size() == 2);

    const PortConfig& w1 = cfg.ports[0];
    CHECK(w1.name == "w1");
    CHECK(w1.rx_queues == 2);
    CHECK(cfg.ports[1].rx_queues == 1);
    CHECK(w1.device == "net_af_packet0,iface=shv-h1");
    CHECK(w1.rx_desc == 512);
    CHECK(w1.tx_desc == 2048);
    CHECK(w1.shaper.rate_bps == 2'500'000'000ULL);
    CHECK(w1.shaper.burst_bytes == 32768);
    CHECK(w1.queue_packets == 512);
    CHECK(w1.queue_bytes == 1u << 20);
    // No marking section: the top-level defaults, all three keys.
    CHECK(w1.marking == MarkingConfig{100, 750, false});

    const PortConfig& learner = cfg.ports[1];
    CHECK(learner.name == "learner");
    CHECK(learner.device == "0000:3b:00.1");
    CHECK(learner.rx_desc == 1024);
    CHECK(learner.tx_desc == 1024);
    CHECK(learner.shaper.rate_bps == 250'000'000ULL);
    CHECK(learner.shaper.burst_bytes == 20000);
    CHECK(learner.queue_packets == 4096);
    CHECK(learner.queue_bytes == 3'000'000);
    // Overrides depth and ip_ecn, inherits sojourn_us from the top level.
    CHECK(learner.marking == MarkingConfig{300, 750, true});

    CHECK(cfg.fdb_capacity == 128);
    CHECK(cfg.mac_aging_s == 60);
    REQUIRE(cfg.static_fdb.size() == 2);
    CHECK(cfg.static_fdb[0] == StaticFdbEntry{mac(0x02, 0x5e, 0x0a, 0x4d, 0x00, 0x04), "learner"});
    CHECK(cfg.static_fdb[1] == StaticFdbEntry{mac(0x02, 0x5e, 0x0a, 0x4d, 0x00, 0x01), "w1"});
    CHECK(cfg.udp_port == 4791);
    CHECK(cfg.malformed == MalformedAction::Drop);
    CHECK_FALSE(cfg.aggregation);
    CHECK(cfg.non_member == NonMemberAction::Drop);
    REQUIRE(cfg.clusters.size() == 2);
    CHECK(cfg.clusters[0].id == 7);
    CHECK_FALSE(cfg.clusters[0].aggregation);
    CHECK(cfg.clusters[0].version_tolerance == 16);
    CHECK(cfg.clusters[0].member_macs ==
          std::vector<Mac>{mac(0x02, 0x5e, 0x0a, 0x4d, 0x00, 0x01), mac(0x02, 0x5e, 0x0a, 0x4d, 0x00, 0x03)});
    CHECK(cfg.clusters[0].member_ips == std::vector<std::uint32_t>{ip(10, 77, 0, 2)});
    CHECK(cfg.clusters[0].member_bindings == std::vector<MacIp>{{mac(0x02, 0x5e, 0x0a, 0x4d, 0x00, 0x09), ip(10, 77, 0, 9)}});
    CHECK(cfg.clusters[1].id == 0);
    CHECK(cfg.clusters[1].aggregation);
    CHECK(cfg.clusters[1].version_tolerance == 0);
    CHECK(cfg.clusters[1].member_macs.empty());
    CHECK(cfg.clusters[1].member_ips.empty());
    CHECK(cfg.feedback);
    CHECK(cfg.feedback_interval_us == 250);
    CHECK(cfg.stats_interval_s == 0);
    CHECK(cfg.stats_json == "/tmp/stats.json");
    CHECK_FALSE(cfg.telemetry);

    const std::string yaml = to_yaml(cfg);
    INFO(yaml);
    const SwitchConfig again = parse_switch_config(yaml, "roundtrip.yaml");
    CHECK(again == cfg);
    CHECK(to_yaml(again) == yaml);
    // Sanity of the comparison itself: one changed field is noticed.
    SwitchConfig changed = again;
    changed.clusters[0].member_ips[0] = ip(10, 77, 0, 3);
    CHECK_FALSE(changed == cfg);
}

TEST_CASE("bad configs are rejected with file, line, key path and expectation") {
    struct Row {
        const char* what;
        std::string yaml;
        std::vector<std::string> expected;  // substrings of the message
    };
    const std::vector<Row> rows = {
        {"unknown top-level key, with a suggestion", kTwoPorts + "burts: 32\n",
         {"bad.yaml:4:1: burts: unknown key 'burts' (did you mean 'burst'?); expected one of: eal, lcores"}},
        {"unknown nested key", "ports:\n  - name: a\n    device: net_null0\n    shapper: {rate: 1G}\n",
         {"bad.yaml:4:5: ports[0].shapper: unknown key 'shapper' (did you mean 'shaper'?)", "name, device, rx_desc"}},
        {"unknown key in a deep section", kTwoPorts + "aggregation:\n  clusters:\n    - {id: 1, members: [], tolerance: 2}\n",
         {"bad.yaml:6:28: aggregation.clusters[0].tolerance: unknown key 'tolerance' (did you mean 'version_tolerance'?)"}},
        {"duplicate key", kTwoPorts + "burst: 32\nburst: 64\n",
         {"bad.yaml:5:1: burst: duplicate key 'burst' (first given on line 4)"}},
        {"integer given a word", kTwoPorts + "lcores: two\n",
         {"bad.yaml:4:9: lcores: expected an integer in 1..64, got 'two'"}},
        {"lcores zero", kTwoPorts + "lcores: 0\n", {"bad.yaml:4:9: lcores: expected an integer in 1..64, got 0"}},
        {"more lcores than receive queues", kTwoPorts + "lcores: 3\n",
         {"bad.yaml:4:9: lcores: expected at most 2 lcores: each forwarding lcore polls whole receive queues, and the "
          "ports have 2 (the sum of ports[].rx_queues), got 3"}},
        {"rx_queues zero", "ports:\n  - {name: a, device: net_null0, rx_queues: 0}\n",
         {"ports[0].rx_queues: expected an integer in 1..64, got 0"}},
        {"lcores above RTE_MAX", kTwoPorts + "lcores: 65\n", {"lcores: expected an integer in 1..64, got 65"}},
        {"hex is not an integer here", kTwoPorts + "lcores: 0x2\n", {"lcores: expected an integer in 1..64, got '0x2'"}},
        {"negative integer", kTwoPorts + "idle_backoff_us: -5\n",
         {"bad.yaml:4:18: idle_backoff_us: expected an integer in 0..1000000, got '-5'"}},
        {"burst too large", kTwoPorts + "burst: 513\n", {"bad.yaml:4:8: burst: expected an integer in 1..512, got 513"}},
        {"burst given a list", kTwoPorts + "burst: [32]\n", {"burst: expected an integer in 1..512, got a list"}},
        {"integer left empty", kTwoPorts + "burst:\n", {"bad.yaml:4:1: burst: expected an integer in 1..512, got nothing"}},
        {"bad rate", "ports:\n  - {name: a, device: net_null0}\n  - name: b\n    device: net_null1\n    shaper:\n      rate: fast\n",
         {"bad.yaml:6:13: ports[1].shaper.rate: expected a rate like 10G, 250M or 1000000 (bits/s)", "got 'fast'"}},
        {"rate out of range", "ports:\n  - {name: a, device: net_null0, shaper: {rate: 2T}}\n",
         {"bad.yaml:2:49: ports[0].shaper.rate:", "0 (unshaped) or 1k..1T, got '2T'"}},
        {"bad byte size", "ports:\n  - {name: a, device: net_null0, queue: {bytes: 4mb}}\n",
         {"ports[0].queue.bytes: expected a byte size like 16384, 64K or 4MiB in 2KiB..1GiB, got '4mb'"}},
        {"queue capacity out of range", "ports:\n  - {name: a, device: net_null0, queue: {packets: 65537}}\n",
         {"bad.yaml:2:51: ports[0].queue.packets: expected an integer in 1..65536, got 65537"}},
        {"queue capacity zero", "ports:\n  - {name: a, device: net_null0, queue: {packets: 0}}\n",
         {"ports[0].queue.packets: expected an integer in 1..65536, got 0"}},
        {"marking deeper than the queue",
         "ports:\n  - name: a\n    device: net_null0\n    queue: {packets: 64}\n    marking: {depth_packets: 65}\n",
         {"bad.yaml:5:30: ports[0].marking.depth_packets: expected at most queue.packets (64) or 0 (off)", "got 65"}},
        {"inherited marking deeper than a port's queue",
         "marking:\n  depth_packets: 2000\nports:\n  - {name: a, device: net_null0, queue: {packets: 4096}}\n"
         "  - {name: b, device: net_null1}\n",
         {"bad.yaml:2:18: marking.depth_packets: expected at most the queue.packets of every port that inherits it "
          "(ports[1] has 1024) or 0 (off)", "got 2000"}},
        {"bad MAC in a static entry", kTwoPorts + "forwarding:\n  static:\n    - {mac: \"02:00:00:00:01\", port: a}\n",
         {"bad.yaml:6:13: forwarding.static[0].mac: expected a unicast MAC like 02:00:00:00:00:01, got '02:00:00:00:01'"}},
        {"multicast MAC in a static entry", kTwoPorts + "forwarding:\n  static:\n    - {mac: \"01:00:5e:00:00:01\", port: a}\n",
         {"forwarding.static[0].mac: expected a unicast MAC", "got '01:00:5e:00:00:01'"}},
        {"static entry to an unknown port",
         kTwoPorts + "forwarding:\n  static:\n    - {mac: \"02:00:00:00:00:01\", port: a}\n    - {mac: \"02:00:00:00:00:02\", port: c}\n",
         {"bad.yaml:7:40: forwarding.static[1].port: expected the name of a port (a, b), got 'c'"}},
        {"duplicate static MAC",
         kTwoPorts + "forwarding:\n  static:\n    - {mac: \"02:00:00:00:00:01\", port: a}\n    - {mac: \"02:00:00:00:00:01\", port: b}\n",
         {"bad.yaml:7:13: forwarding.static[1].mac: duplicate static entry for 02:00:00:00:00:01 (first in forwarding.static[0])"}},
        {"duplicate port name", "ports:\n  - {name: a, device: net_null0}\n  - {name: a, device: net_null1}\n",
         {"bad.yaml:3:12: ports[1].name: duplicate port name 'a' (first used by ports[0])"}},
        {"duplicate device", "ports:\n  - {name: a, device: net_null0}\n  - {name: b, device: net_null0}\n",
         {"bad.yaml:3:23: ports[1].device: duplicate device 'net_null0' (already used by ports[0])"}},
        {"two vdevs with the same DPDK name",
         "ports:\n  - {name: a, device: \"net_af_packet0,iface=x\"}\n  - {name: b, device: \"net_af_packet0,iface=y\"}\n",
         {"bad.yaml:3:23: ports[1].device: duplicate device name 'net_af_packet0' (already used by ports[0])"}},
        {"port name with a space", "ports:\n  - {name: \"a b\", device: net_null0}\n",
         {"ports[0].name: expected a port name (letters, digits, '-', '_' or '.', at most 32), got 'a b'"}},
        {"missing ports", "burst: 32\n", {"bad.yaml:1:1: (top level): missing required key 'ports'"}},
        {"empty ports list", "ports: []\n", {"bad.yaml:1:8: ports: expected at least one port, got an empty list"}},
        {"ports given a mapping", "ports:\n  a: net_null0\n",
         {"bad.yaml:2:3: ports: expected a list of ports (mappings with name and device), got a mapping"}},
        {"port without device", "ports:\n  - name: a\n", {"bad.yaml:2:5: ports[0]: missing required key 'device'"}},
        {"too few mbufs", kTwoPorts + "mbufs: 2000\n",
         {"bad.yaml:4:8: mbufs: expected at least 2080 mbufs (the RX rings alone hold 2048", "got 2000"}},
        {"udp_port zero", kTwoPorts + "protocol: {udp_port: 0}\n",
         {"bad.yaml:4:22: protocol.udp_port: expected an integer in 1..65535, got 0"}},
        {"udp_port too large", kTwoPorts + "protocol: {udp_port: 65536}\n",
         {"protocol.udp_port: expected an integer in 1..65535, got 65536"}},
        {"malformed action typo", kTwoPorts + "protocol:\n  malformed: dorp\n",
         {"bad.yaml:5:14: protocol.malformed: expected forward or drop, got 'dorp'"}},
        {"non_member action typo", kTwoPorts + "aggregation: {non_member: merge}\n",
         {"aggregation.non_member: expected forward or drop, got 'merge'"}},
        {"duplicate cluster id",
         kTwoPorts + "aggregation:\n  clusters:\n    - {id: 7, members: []}\n    - {id: 7, members: []}\n",
         {"bad.yaml:7:12: aggregation.clusters[1].id: duplicate cluster id 7 (first used by aggregation.clusters[0])"}},
        {"version tolerance out of range",
         kTwoPorts + "aggregation:\n  clusters:\n    - id: 1\n      version_tolerance: 17\n      members: []\n",
         {"bad.yaml:7:26: aggregation.clusters[0].version_tolerance: expected an integer in 0..16, got 17"}},
        {"cluster without members", kTwoPorts + "aggregation:\n  clusters:\n    - id: 1\n",
         {"bad.yaml:6:7: aggregation.clusters[0]: missing required key 'members'"}},
        {"member neither MAC nor IPv4", kTwoPorts + "aggregation:\n  clusters:\n    - {id: 1, members: [10.0.0.1, host2]}\n",
         {"bad.yaml:6:35: aggregation.clusters[0].members[1]: expected a unicast MAC like 02:00:00:00:00:01, a "
          "unicast IPv4 address like 10.0.0.1 or a binding of both like 02:00:00:00:00:01@10.0.0.1, got 'host2'"}},
        {"scheduling not auto, fifo or drr", kTwoPorts + "aggregation: {scheduling: wfq}\n",
         {"aggregation.scheduling:", "wfq", "auto"}},
        {"port scheduling not fifo or drr", "ports:\n  - {name: a, device: net_null0, queue: {scheduling: sp}}\n  - {name: b, device: net_null1}\n",
         {"ports[0].queue.scheduling:", "sp"}},
        {"fair_lag out of range", kTwoPorts + "aggregation: {scheduling: drr, fair_lag: 70000}\n",
         {"aggregation.fair_lag: expected an integer in 0..65535, got 70000"}},
        {"fair_lag not a number", kTwoPorts + "aggregation: {fair_lag: some}\n", {"aggregation.fair_lag:"}},
        {"fair_lag without fair queues", kTwoPorts + "aggregation: {fair_lag: 32}\n",
         {"aggregation.fair_lag: fair_lag needs fair queues: aggregation.scheduling: drr"}},
        {"chunk_follow not a boolean", kTwoPorts + "aggregation: {scheduling: drr, chunk_follow: 2}\n",
         {"aggregation.chunk_follow:"}},
        {"drop_copies not a boolean", kTwoPorts + "aggregation: {drop_copies: sometimes}\n", {"aggregation.drop_copies:"}},
        {"chunk_follow without fair queues", kTwoPorts + "aggregation: {chunk_follow: true}\n",
         {"aggregation.chunk_follow: chunk_follow needs fair queues: aggregation.scheduling: drr"}},
        {"cluster weight zero", kTwoPorts + "aggregation:\n  clusters:\n    - {id: 1, weight: 0, members: [10.0.0.1]}\n",
         {"aggregation.clusters[0].weight: expected an integer in 1..1000, got 0"}},
        {"mtu above jumbo", "ports:\n  - {name: a, device: net_null0, mtu: 9001}\n  - {name: b, device: net_null1}\n",
         {"ports[0].mtu: expected an integer in 68..9000, got 9001"}},
        {"mtu below IPv4's minimum", "ports:\n  - {name: a, device: net_null0, mtu: 67}\n  - {name: b, device: net_null1}\n",
         {"ports[0].mtu: expected an integer in 68..9000, got 67"}},
        {"binding with a bad half", kTwoPorts + "aggregation:\n  clusters:\n    - {id: 1, members: [\"02:00:00:00:00:01@10.0.0\"]}\n",
         {"aggregation.clusters[0].members[0]: expected a unicast MAC", "got '02:00:00:00:00:01@10.0.0'"}},
        {"binding with a multicast MAC", kTwoPorts + "aggregation:\n  clusters:\n    - {id: 1, members: [\"01:00:5e:00:00:01@10.0.0.1\"]}\n",
         {"aggregation.clusters[0].members[0]:", "got the multicast MAC in '01:00:5e:00:00:01@10.0.0.1'"}},
        {"duplicate binding", kTwoPorts + "aggregation:\n  clusters:\n    - {id: 1, members: [\"02:00:00:00:00:01@10.0.0.1\", \"02:00:00:00:00:01 @ 10.0.0.1\"]}\n",
         {"aggregation.clusters[0].members[1]: duplicate member 02:00:00:00:00:01@10.0.0.1"}},
        {"broadcast member", kTwoPorts + "aggregation:\n  clusters:\n    - {id: 1, members: [\"ff:ff:ff:ff:ff:ff\"]}\n",
         {"aggregation.clusters[0].members[0]:", "got the multicast MAC 'ff:ff:ff:ff:ff:ff'"}},
        {"duplicate member", kTwoPorts + "aggregation:\n  clusters:\n    - {id: 1, members: [\"02:00:00:00:00:0A\", \"02:00:00:00:00:0a\"]}\n",
         {"aggregation.clusters[0].members[1]: duplicate member 02:00:00:00:00:0a (already listed as "
          "aggregation.clusters[0].members[0])"}},
        {"bool given a word", kTwoPorts + "telemetry: maybe\n", {"bad.yaml:4:12: telemetry: expected true or false, got 'maybe'"}},
        {"eal as one string", "eal: \"--no-huge -m 512\"\n" + kTwoPorts,
         {"bad.yaml:1:6: eal: expected a list of strings (EAL arguments)", "got '--no-huge -m 512'"}},
        {"eal item not a string", "eal: [\"--no-huge\", {m: 512}]\n" + kTwoPorts,
         {"bad.yaml:1:20: eal[1]: expected an EAL argument string, got a mapping"}},
        {"section given a scalar", kTwoPorts + "feedback: on\n",
         {"bad.yaml:4:11: feedback: expected a mapping with keys enabled, interval_us, got 'on'"}},
        {"feedback interval zero", kTwoPorts + "feedback: {interval_us: 0}\n",
         {"feedback.interval_us: expected an integer in 1..10000000, got 0"}},
        {"stats json given a list", kTwoPorts + "stats: {json: [a]}\n",
         {"stats.json: expected a file path (or \"\" for none), got a list"}},
        {"syntax error", "ports:\n  - {name: a, device: net_null0\nburst: 32\n",
         {"bad.yaml:3:", "YAML syntax error: end of map flow not found"}},
        {"bad indentation", kTwoPorts + "stats:\n  interval_s: 1\n    json: x\n", {"bad.yaml:6:", "YAML syntax error"}},
        {"two documents", kTwoPorts + "---\n" + kTwoPorts, {"bad.yaml:5:1: (top level): expected one YAML document, got 2"}},
        {"empty file", "# nothing here\n", {"bad.yaml: the configuration is empty; expected a mapping with at least 'ports'"}},
        {"top level is a list", "- ports\n", {"bad.yaml:1:1: (top level): expected a mapping with keys eal, lcores"}},
    };
    REQUIRE(rows.size() >= 25);
    for (const Row& row : rows) {
        INFO(row.what << "\n--- yaml ---\n" << row.yaml);
        const std::string message = error_of(row.yaml);
        INFO("message: " << message);
        CHECK(message.rfind("bad.yaml", 0) == 0);  // always starts with the source name
        for (const std::string& part : row.expected) CHECK(message.find(part) != std::string::npos);
    }
}

TEST_CASE("fair scheduling keys: aggregation.scheduling, clusters[].weight, a port's override, round trip") {
    const std::string yaml = "ports:\n  - {name: a, device: net_null0, queue: {packets: 64, scheduling: fifo}}\n"
                             "  - {name: b, device: net_null1}\n"
                             "aggregation:\n  scheduling: drr\n  clusters:\n"
                             "    - {id: 1, weight: 3, members: [10.0.0.1]}\n    - {id: 2, members: [10.0.0.2]}\n";
    const SwitchConfig cfg = parse_switch_config(yaml, "fair.yaml");
    CHECK(cfg.scheduling == Scheduling::Drr);
    REQUIRE(cfg.clusters.size() == 2);
    CHECK(cfg.clusters[0].weight == 3);
    CHECK(cfg.clusters[1].weight == 1);
    REQUIRE(cfg.ports[0].scheduling.has_value());
    CHECK(*cfg.ports[0].scheduling == Scheduling::Fifo);
    CHECK(!cfg.ports[1].scheduling.has_value());
    CHECK(parse_switch_config(to_yaml(cfg), "round-trip") == cfg);
    CHECK(parse_switch_config(kTwoPorts, "default.yaml").scheduling == Scheduling::Fifo);
    // aggregation.fair_lag: 0 (deficit round robin) unless set; round trip.
    CHECK(cfg.fair_lag == 0);
    CHECK(parse_switch_config(kTwoPorts, "default.yaml").fair_lag == 0);
    const SwitchConfig lag = parse_switch_config(kTwoPorts + "aggregation: {scheduling: drr, fair_lag: 32}\n", "lag.yaml");
    CHECK(lag.fair_lag == 32);
    CHECK(parse_switch_config(to_yaml(lag), "round-trip") == lag);
    // aggregation.chunk_follow: off unless set; round trip.
    CHECK(!cfg.chunk_follow);
    const SwitchConfig follow = parse_switch_config(kTwoPorts + "aggregation: {scheduling: drr, chunk_follow: true}\n", "f.yaml");
    CHECK(follow.chunk_follow);
    CHECK(parse_switch_config(to_yaml(follow), "round-trip") == follow);
    // aggregation.drop_copies: on unless set off; round trip.
    CHECK(cfg.drop_copies);
    const SwitchConfig keep = parse_switch_config(kTwoPorts + "aggregation: {drop_copies: false}\n", "keep.yaml");
    CHECK(!keep.drop_copies);
    CHECK(parse_switch_config(to_yaml(keep), "round-trip") == keep);
}

TEST_CASE("aggregation.scheduling: auto (the default) is drr exactly when aggregation is on and two or more clusters aggregate") {
    const std::string one = "aggregation:\n  clusters:\n    - {id: 1, members: [10.0.0.1]}\n";
    const std::string two = one + "    - {id: 2, members: [10.0.0.2]}\n";
    const std::string two_one_plain = one + "    - {id: 2, aggregation: false, members: [10.0.0.2]}\n";
    // Absent and written out: the same.
    for (const std::string& key : {std::string(), std::string("  scheduling: auto\n")}) {
        INFO("key: '" << key << "'");
        const SwitchConfig c1 = parse_switch_config(kTwoPorts + one + key, "one.yaml");
        CHECK(c1.scheduling_auto);
        CHECK(c1.scheduling == Scheduling::Fifo);
        const SwitchConfig c2 = parse_switch_config(kTwoPorts + two + key, "two.yaml");
        CHECK(c2.scheduling_auto);
        CHECK(c2.scheduling == Scheduling::Drr);
        CHECK(parse_switch_config(kTwoPorts + two_one_plain + key, "plain.yaml").scheduling == Scheduling::Fifo);
        CHECK(parse_switch_config(kTwoPorts + two + "  enabled: false\n" + key, "off.yaml").scheduling == Scheduling::Fifo);
        CHECK(parse_switch_config(to_yaml(c2), "round-trip") == c2);
    }
    // No aggregation section at all: nothing to share, fifo.
    CHECK(parse_switch_config(kTwoPorts, "none.yaml").scheduling == Scheduling::Fifo);
    // An explicit choice stays, whatever the clusters.
    const SwitchConfig fifo = parse_switch_config(kTwoPorts + two + "  scheduling: fifo\n", "fifo.yaml");
    CHECK(!fifo.scheduling_auto);
    CHECK(fifo.scheduling == Scheduling::Fifo);
    CHECK(parse_switch_config(to_yaml(fifo), "round-trip") == fifo);
    CHECK(parse_switch_config(kTwoPorts + one + "  scheduling: drr\n", "drr.yaml").scheduling == Scheduling::Drr);
    // The command line's --aggregation off changes what auto means (shesha-switch re-resolves).
    SwitchConfig c2 = parse_switch_config(kTwoPorts + two, "two.yaml");
    c2.aggregation = false;
    resolve_scheduling(c2);
    CHECK(c2.scheduling == Scheduling::Fifo);
    c2.scheduling_auto = false;
    c2.scheduling = Scheduling::Drr;
    resolve_scheduling(c2);
    CHECK(c2.scheduling == Scheduling::Drr);  // not auto: left alone
    // fair_lag and chunk_follow need drr: auto with two clusters gives it.
    CHECK(parse_switch_config(kTwoPorts + two + "  fair_lag: 8\n", "lag.yaml").fair_lag == 8);
    CHECK_THROWS_WITH(parse_switch_config(kTwoPorts + one + "  fair_lag: 8\n", "lag1.yaml"),
                      Catch::Contains("fair_lag needs fair queues"));
}

TEST_CASE("load_switch_config: missing file and file errors name the path") {
    const std::string missing = "/nonexistent-shesha-dir/switch.yaml";
    CHECK_THROWS_WITH(load_switch_config(missing),
                      missing + ": cannot open the configuration file: No such file or directory");

    const std::string dir = std::filesystem::temp_directory_path().string();
    CHECK_THROWS_WITH(load_switch_config(dir), dir + ": cannot read the configuration file: it is a directory");

    // Unique per process: other build directories may run this test at the same time.
    const auto path = std::filesystem::temp_directory_path() /
                      ("shesha-test-switch-config-" + std::to_string(::getpid()) + ".yaml");
    {
        std::ofstream out(path);
        out << kTwoPorts << "ports:\n  - {name: c, device: net_null2}\n";
    }
    CHECK_THROWS_WITH(load_switch_config(path.string()),
                      path.string() + ":4:1: ports: duplicate key 'ports' (first given on line 1)");
    {
        std::ofstream out(path);
        out << kTwoPorts << "burst: [1, 2\n";
    }
    try {
        load_switch_config(path.string());
        FAIL("syntax error not reported");
    } catch (const ConfigError& e) {
        const std::string message = e.what();
        INFO(message);
        CHECK(message.rfind(path.string() + ":", 0) == 0);
        CHECK(message.find("YAML syntax error") != std::string::npos);
    }
    {
        std::ofstream out(path);
        out << kTwoPorts;
    }
    CHECK(load_switch_config(path.string()).ports.size() == 2);
    std::filesystem::remove(path);
}

TEST_CASE("every configs/switch-*.yaml parses and round-trips") {
    const char* dir = std::getenv("SHESHA_CONFIGS_DIR");
    REQUIRE(dir != nullptr);  // set by tests/meson.build
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("switch-", 0) == 0 && entry.path().extension() == ".yaml") files.push_back(entry.path());
    }
    REQUIRE(files.size() >= 3);
    for (const auto& file : files) {
        INFO(file.string());
        SwitchConfig cfg;
        REQUIRE_NOTHROW(cfg = load_switch_config(file.string()));
        CHECK_FALSE(cfg.ports.empty());
        CHECK(parse_switch_config(to_yaml(cfg), "roundtrip") == cfg);
    }

    const SwitchConfig veth = load_switch_config(std::string(dir) + "/switch-veth.yaml");
    REQUIRE(veth.ports.size() == 4);
    for (std::size_t i = 0; i < 4; ++i)
        CHECK(veth.ports[i].device == "net_af_packet" + std::to_string(i) + ",iface=shv-h" + std::to_string(i + 1));
    CHECK(veth.ports[3].shaper.rate_bps == 500'000'000ULL);
    CHECK(veth.eal_args ==
          std::vector<std::string>{"--no-huge", "-m", "512", "--no-pci", "--file-prefix", "shesha-switch"});
    REQUIRE(veth.clusters.size() == 2);
    CHECK(veth.clusters[0].member_macs.size() == 3);
    CHECK(veth.clusters[1].member_ips.size() == 3);

    const SwitchConfig null = load_switch_config(std::string(dir) + "/switch-null.yaml");
    REQUIRE(null.ports.size() == 2);
    CHECK(null.ports[0].device == "net_null0");
    CHECK(null.ports[1].device == "net_null1");

    const SwitchConfig pci = load_switch_config(std::string(dir) + "/switch-pci.yaml");
    REQUIRE(pci.ports.size() == 4);
    CHECK(pci.ports[0].device == "0000:3b:00.0");
    CHECK(pci.ports[3].shaper.rate_bps == 10'000'000'000ULL);
}

// Strict YAML reader for the shesha-switch configuration. The schema is documented key by key in
// configs/switch-*.yaml; this file is its single source of truth for names, types and ranges.
//
// Every error is a ConfigError "FILE:LINE:COL: KEY.PATH: what was expected, got what", from the
// shared strict reader (common/strict_yaml.h); rates and byte sizes are read as strictly, so "10 G"
// is rejected instead of being silently reinterpreted.
#include "switch_config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string_view>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "strict_yaml.h"

namespace shesha::core {
namespace {

using yaml::describe;
using yaml::lowercase;
using yaml::MapView;
using yaml::Reader;
using yaml::trim;
using yaml::Value;

// ---------------------------------------------------------------------------------------------
// Limits. Kept here, next to the reader, so the error messages and the checks cannot disagree.
constexpr std::uint32_t kMaxLcores = 64;              // RTE_MAX_LCORE of the Debian build is 128
constexpr std::uint32_t kMaxPorts = 32;               // RTE_MAX_ETHPORTS
constexpr std::uint32_t kMaxBurst = 512;
constexpr std::uint32_t kMaxQueuePackets = 65536;
constexpr std::uint32_t kMaxVersionTolerance = 16;    // the queue's merge window is at most 16 versions
constexpr std::uint64_t kMinRateBps = 1000;
constexpr std::uint64_t kMaxRateBps = 1'000'000'000'000ULL;  // 1 Tbit/s

// A non-negative decimal number with an optional fraction ("1.5"), times a multiplier, exactly.
// nullopt if the text is not such a number, the result is not a whole number, or it overflows.
std::optional<std::uint64_t> scaled_decimal(std::string_view digits, std::uint64_t multiplier) {
    if (digits.empty()) return std::nullopt;
    const auto dot = digits.find('.');
    std::string_view int_part = digits.substr(0, dot);
    std::string_view frac_part = dot == std::string_view::npos ? std::string_view{} : digits.substr(dot + 1);
    if (dot != std::string_view::npos && frac_part.empty()) return std::nullopt;  // "10."
    if (int_part.empty()) return std::nullopt;                                     // ".5"
    auto all_digits = [](std::string_view s) {
        return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (!all_digits(int_part) || !all_digits(frac_part)) return std::nullopt;
    if (frac_part.size() > 18) return std::nullopt;

    unsigned __int128 value = 0;
    for (char c : int_part) {
        value = value * 10 + static_cast<unsigned>(c - '0');
        if (value > std::numeric_limits<std::uint64_t>::max()) return std::nullopt;
    }
    value *= multiplier;
    unsigned __int128 frac = 0, frac_scale = 1;
    for (char c : frac_part) {
        frac = frac * 10 + static_cast<unsigned>(c - '0');
        frac_scale *= 10;
    }
    const unsigned __int128 frac_value = frac * multiplier;
    if (frac_value % frac_scale != 0) return std::nullopt;  // fractions of a bit or byte
    value += frac_value / frac_scale;
    if (value > std::numeric_limits<std::uint64_t>::max()) return std::nullopt;
    return static_cast<std::uint64_t>(value);
}

// Splits "12.5Gbps" into the number "12.5" and the unit "Gbps".
std::pair<std::string_view, std::string_view> split_number_unit(std::string_view s) {
    std::size_t i = 0;
    while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.')) ++i;
    return {s.substr(0, i), s.substr(i)};
}

std::string format_rate(std::uint64_t bps) {
    if (bps != 0 && bps % 1'000'000'000'000 == 0) return fmt::format("{}T", bps / 1'000'000'000'000);
    if (bps != 0 && bps % 1'000'000'000 == 0) return fmt::format("{}G", bps / 1'000'000'000);
    if (bps != 0 && bps % 1'000'000 == 0) return fmt::format("{}M", bps / 1'000'000);
    if (bps != 0 && bps % 1'000 == 0) return fmt::format("{}k", bps / 1'000);
    return std::to_string(bps);
}

std::string format_bytes(std::uint64_t bytes) {
    if (bytes != 0 && bytes % (1ULL << 30) == 0) return fmt::format("{}GiB", bytes >> 30);
    if (bytes != 0 && bytes % (1ULL << 20) == 0) return fmt::format("{}MiB", bytes >> 20);
    if (bytes != 0 && bytes % (1ULL << 10) == 0) return fmt::format("{}KiB", bytes >> 10);
    return std::to_string(bytes);
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
    std::string out;
    for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) out += sep;
        out += items[i];
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Switch-specific scalars on top of the shared strict reader.

std::uint64_t read_rate(const Reader& r, const Value& v, std::uint64_t lo, std::uint64_t hi) {
    const std::string expected = fmt::format(
        "expected a rate like 10G, 250M or 1000000 (bits/s): 0 (unshaped) or {}..{}", format_rate(lo), format_rate(hi));
    if (!v.node.IsScalar()) r.fail(v, fmt::format("{}, got {}", expected, describe(v.node)));
    std::uint64_t bps = 0;
    try {
        bps = parse_rate_bps(v.node.Scalar());
    } catch (const ConfigError&) {
        r.fail(v, fmt::format("{}, got {}", expected, describe(v.node)));
    }
    if (bps != 0 && (bps < lo || bps > hi)) r.fail(v, fmt::format("{}, got {}", expected, describe(v.node)));
    return bps;
}

std::uint64_t read_bytes(const Reader& r, const Value& v, std::uint64_t lo, std::uint64_t hi) {
    const std::string expected = fmt::format(
        "expected a byte size like 16384, 64K or 4MiB in {}..{}", format_bytes(lo), format_bytes(hi));
    if (!v.node.IsScalar()) r.fail(v, fmt::format("{}, got {}", expected, describe(v.node)));
    std::uint64_t n = 0;
    try {
        n = parse_byte_size(v.node.Scalar());
    } catch (const ConfigError&) {
        r.fail(v, fmt::format("{}, got {}", expected, describe(v.node)));
    }
    if (n < lo || n > hi) r.fail(v, fmt::format("{}, got {}", expected, describe(v.node)));
    return n;
}

// ---------------------------------------------------------------------------------------------
// Sections.

MarkingConfig read_marking(const Reader& r, const Value& v, const MarkingConfig& defaults) {
    MarkingConfig m = defaults;
    const MapView map = r.map(v, {"depth_packets", "sojourn_us", "ip_ecn"});
    if (auto x = map.get("depth_packets")) m.depth_packets = static_cast<std::uint32_t>(r.uint(*x, 0, kMaxQueuePackets));
    if (auto x = map.get("sojourn_us")) m.sojourn_us = static_cast<std::uint32_t>(r.uint(*x, 0, 10'000'000));
    if (auto x = map.get("ip_ecn")) m.ip_ecn = r.boolean(*x);
    return m;
}

bool valid_port_name(const std::string& name) {
    if (name.empty() || name.size() > 32) return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
    });
}

// default_depth: where the top-level marking.depth_packets was given, if it was.
PortConfig read_port(const Reader& r, const Value& v, const MarkingConfig& marking_defaults,
                     const std::optional<Value>& default_depth) {
    PortConfig p;
    p.marking = marking_defaults;
    const MapView map = r.map(v, {"name", "device", "rx_desc", "tx_desc", "rx_queues", "mtu", "shaper", "queue", "marking"});
    const Value name = map.require("name");
    p.name = r.string(name, "a port name (letters, digits, '-', '_' or '.', at most 32)");
    if (!valid_port_name(p.name))
        r.fail(name, fmt::format("expected a port name (letters, digits, '-', '_' or '.', at most 32), got '{}'", p.name));
    p.device = r.string(map.require("device"),
                        "a DPDK device: a vdev like net_af_packet0,iface=veth0 or a PCI address like 0000:3b:00.0");
    if (auto x = map.get("rx_desc")) p.rx_desc = static_cast<std::uint16_t>(r.uint(*x, 32, 32768));
    if (auto x = map.get("tx_desc")) p.tx_desc = static_cast<std::uint16_t>(r.uint(*x, 32, 32768));
    if (auto x = map.get("rx_queues")) p.rx_queues = static_cast<std::uint16_t>(r.uint(*x, 1, kMaxLcores));
    if (auto x = map.get("mtu")) p.mtu = static_cast<std::uint16_t>(r.uint(*x, kMinMtu, kMaxMtu));
    if (auto x = map.get("shaper")) {
        const MapView shaper = r.map(*x, {"rate", "burst_bytes"});
        if (auto y = shaper.get("rate")) p.shaper.rate_bps = read_rate(r, *y, kMinRateBps, kMaxRateBps);
        if (auto y = shaper.get("burst_bytes")) p.shaper.burst_bytes = static_cast<std::uint32_t>(read_bytes(r, *y, 64, 256ULL << 20));
    }
    if (auto x = map.get("queue")) {
        const MapView queue = r.map(*x, {"packets", "bytes", "scheduling"});
        if (auto y = queue.get("packets")) p.queue_packets = static_cast<std::uint32_t>(r.uint(*y, 1, kMaxQueuePackets));
        if (auto y = queue.get("bytes")) p.queue_bytes = read_bytes(r, *y, 2048, 1ULL << 30);
        if (auto y = queue.get("scheduling"))
            p.scheduling = r.choice(*y, {"fifo", "drr"}) == 0 ? Scheduling::Fifo : Scheduling::Drr;
    }
    if (auto x = map.get("marking")) {
        p.marking = read_marking(r, *x, marking_defaults);
        if (auto y = r.map(*x, {"depth_packets", "sojourn_us", "ip_ecn"}).get("depth_packets");
            y && p.marking.depth_packets > p.queue_packets)
            r.fail(*y, fmt::format("expected at most queue.packets ({}) or 0 (off): a deeper threshold can never trigger, got {}",
                                   p.queue_packets, p.marking.depth_packets));
    }
    if (p.marking.depth_packets > p.queue_packets && default_depth)  // inherited from the top level
        r.fail(*default_depth,
               fmt::format("expected at most the queue.packets of every port that inherits it ({} has {}) or 0 (off): "
                           "a deeper threshold can never trigger, got {}",
                           v.path, p.queue_packets, p.marking.depth_packets));
    return p;
}

bool unicast_ipv4(std::uint32_t ip) {
    return ip != 0 && ip != 0xFFFFFFFFu && (ip >> 28) != 0xE;  // not 0.0.0.0, broadcast or 224/4
}

bool usable_mac(const Mac& m) {
    return !is_multicast(m) && m != Mac{};
}

// The name of one of the config's ports (an error lists them): static FDB entries and fabric ports.
std::string read_port_name(const Reader& r, const Value& v, const std::vector<PortConfig>& ports) {
    const std::string name = r.string(v, "the name of a port");
    if (std::none_of(ports.begin(), ports.end(), [&](const PortConfig& p) { return p.name == name; })) {
        std::vector<std::string> names;
        for (const PortConfig& p : ports) names.push_back(p.name);
        r.fail(v, fmt::format("expected the name of a port ({}), got '{}'", join(names, ", "), name));
    }
    return name;
}

ClusterConfig read_cluster(const Reader& r, const Value& v, const std::vector<PortConfig>& ports) {
    ClusterConfig c;
    const MapView map = r.map(v, {"id", "aggregation", "version_tolerance", "weight", "members", "model_replication"});
    c.id = static_cast<std::uint16_t>(r.uint(map.require("id"), 0, 65535));
    if (auto x = map.get("aggregation")) c.aggregation = r.boolean(*x);
    if (auto x = map.get("weight")) c.weight = static_cast<std::uint32_t>(r.uint(*x, 1, 1000));
    if (auto x = map.get("version_tolerance")) c.version_tolerance = static_cast<std::uint32_t>(r.uint(*x, 0, kMaxVersionTolerance));
    // Required (possibly as []): a cluster without members merges nothing, which is rarely meant.
    const Value members = map.require("members");
    std::map<std::string, std::string> seen;  // canonical member -> path of its first mention
    for (const Value& m : r.list(members, "MAC or IPv4 addresses")) {
        const std::string expected =
            "expected a unicast MAC like 02:00:00:00:00:01, a unicast IPv4 address like 10.0.0.1 or a binding of "
            "both like 02:00:00:00:00:01@10.0.0.1";
        if (!m.node.IsScalar()) r.fail(m, fmt::format("{}, got {}", expected, describe(m.node)));
        const std::string text(trim(m.node.Scalar()));
        std::string canonical;
        if (const auto at = text.find('@'); at != std::string::npos) {
            const auto mac = parse_mac(std::string(trim(std::string_view(text).substr(0, at))));
            const auto ip = parse_ipv4(std::string(trim(std::string_view(text).substr(at + 1))));
            if (!mac || !ip) r.fail(m, fmt::format("{}, got {}", expected, describe(m.node)));
            if (!usable_mac(*mac)) r.fail(m, fmt::format("{}, got the {} MAC in '{}'", expected,
                                                          is_multicast(*mac) ? "multicast" : "all-zero", text));
            if (!unicast_ipv4(*ip)) r.fail(m, fmt::format("{}, got the non-unicast address in '{}'", expected, text));
            canonical = format_mac(*mac) + "@" + format_ipv4(*ip);
            c.member_bindings.push_back({*mac, *ip});
        } else if (auto mac = parse_mac(text)) {
            if (!usable_mac(*mac)) r.fail(m, fmt::format("{}, got the {} MAC '{}'", expected,
                                                          is_multicast(*mac) ? "multicast" : "all-zero", text));
            canonical = format_mac(*mac);
            c.member_macs.push_back(*mac);
        } else if (auto ip = parse_ipv4(text)) {
            if (!unicast_ipv4(*ip)) r.fail(m, fmt::format("{}, got the non-unicast address '{}'", expected, text));
            canonical = format_ipv4(*ip);
            c.member_ips.push_back(*ip);
        } else {
            r.fail(m, fmt::format("{}, got {}", expected, describe(m.node)));
        }
        if (auto [it, inserted] = seen.emplace(canonical, m.path); !inserted)
            r.fail(m, fmt::format("duplicate member {} (already listed as {})", canonical, it->second));
    }
    if (auto x = map.get("model_replication")) {
        const MapView rep = r.map(*x, {"group", "learner", "max_members", "fabric_ports"});
        ModelReplicationConfig mr;
        const Value group = rep.require("group");
        const auto g = group.node.IsScalar() ? parse_ipv4(std::string(trim(group.node.Scalar()))) : std::nullopt;
        if (!g || (*g >> 28) != 0xE)
            r.fail(group, fmt::format("expected an IPv4 multicast group (224.0.0.0/4) like 239.77.0.1, got {}", describe(group.node)));
        mr.group = *g;
        const Value learner = rep.require("learner");
        const auto l = learner.node.IsScalar() ? parse_ipv4(std::string(trim(learner.node.Scalar()))) : std::nullopt;
        if (!l || !unicast_ipv4(*l))
            r.fail(learner, fmt::format("expected the learner's unicast IPv4 address like 10.0.0.9, got {}", describe(learner.node)));
        mr.learner = *l;
        if (auto y = rep.get("max_members")) mr.max_members = static_cast<std::uint32_t>(r.uint(*y, 1, 4096));
        if (auto y = rep.get("fabric_ports")) {
            for (const Value& e : r.list(*y, "port names")) {
                const std::string port = read_port_name(r, e, ports);
                if (std::find(mr.fabric_ports.begin(), mr.fabric_ports.end(), port) != mr.fabric_ports.end())
                    r.fail(e, fmt::format("port '{}' is listed twice", port));
                mr.fabric_ports.push_back(port);
            }
        }
        // Only members join the group, so a cluster without members would replicate to nobody.
        if (c.member_macs.empty() && c.member_ips.empty() && c.member_bindings.empty())
            r.fail(*x, "the cluster has no members: list its workers in members (only members join the group)");
        c.model_replication = mr;
    }
    return c;
}

SwitchConfig read_config(const Reader& r, const Value& root) {
    SwitchConfig cfg;
    const MapView top = r.map(root, {"eal", "lcores", "idle_backoff_us", "burst", "mbufs", "marking", "ports",
                                     "forwarding", "protocol", "aggregation", "feedback", "stats", "telemetry"});

    if (auto x = top.get("eal"))
        for (const Value& arg : r.list(*x, "strings (EAL arguments) like [\"--no-huge\", \"-m\", \"512\"]"))
            cfg.eal_args.push_back(r.string(arg, "an EAL argument string"));
    if (auto x = top.get("lcores")) cfg.lcores = static_cast<std::uint32_t>(r.uint(*x, 1, kMaxLcores));
    if (auto x = top.get("idle_backoff_us")) cfg.idle_backoff_us = static_cast<std::uint32_t>(r.uint(*x, 0, 1'000'000));
    if (auto x = top.get("burst")) cfg.burst = static_cast<std::uint32_t>(r.uint(*x, 1, kMaxBurst));
    std::optional<Value> mbufs = top.get("mbufs");
    if (mbufs) cfg.mbufs = static_cast<std::uint32_t>(r.uint(*mbufs, 512, 1u << 24));

    // The top-level marking section holds defaults for every port, so it is read before the ports.
    MarkingConfig marking_defaults;
    std::optional<Value> default_depth;
    if (auto x = top.get("marking")) {
        marking_defaults = read_marking(r, *x, marking_defaults);
        default_depth = r.map(*x, {"depth_packets", "sojourn_us", "ip_ecn"}).get("depth_packets");
    }

    const Value ports = top.require("ports");
    const std::vector<Value> port_values = r.list(ports, "ports (mappings with name and device)");
    if (port_values.empty()) r.fail(ports, "expected at least one port, got an empty list");
    if (port_values.size() > kMaxPorts)
        r.fail(ports, fmt::format("expected at most {} ports (RTE_MAX_ETHPORTS), got {}", kMaxPorts, port_values.size()));
    for (std::size_t i = 0; i < port_values.size(); ++i) {
        PortConfig p = read_port(r, port_values[i], marking_defaults, default_depth);
        for (std::size_t j = 0; j < cfg.ports.size(); ++j) {
            const MapView map = r.map(port_values[i], {"name", "device", "rx_desc", "tx_desc", "rx_queues", "mtu", "shaper", "queue", "marking"});
            if (cfg.ports[j].name == p.name)
                r.fail(map.require("name"), fmt::format("duplicate port name '{}' (first used by ports[{}])", p.name, j));
            if (cfg.ports[j].device == p.device)
                r.fail(map.require("device"), fmt::format("duplicate device '{}' (already used by ports[{}])", p.device, j));
            // DPDK names a vdev by the part before its first comma; two ports cannot share it.
            const std::string name = p.device.substr(0, p.device.find(','));
            if (cfg.ports[j].device.substr(0, cfg.ports[j].device.find(',')) == name)
                r.fail(map.require("device"),
                       fmt::format("duplicate device name '{}' (already used by ports[{}]): expected a distinct name "
                                   "before the first comma, e.g. net_af_packet0, net_af_packet1", name, j));
        }
        cfg.ports.push_back(std::move(p));
    }
    std::uint64_t rx_queues = 0;
    for (const PortConfig& p : cfg.ports) rx_queues += p.rx_queues;
    if (cfg.lcores > rx_queues)
        r.fail(top.require("lcores"),
               fmt::format("expected at most {} lcores: each forwarding lcore polls whole receive queues, and the ports "
                           "have {} (the sum of ports[].rx_queues), got {}",
                           rx_queues, rx_queues, cfg.lcores));
    std::uint64_t rx_descriptors = 0;
    for (const PortConfig& p : cfg.ports) rx_descriptors += std::uint64_t{p.rx_desc} * p.rx_queues;
    if (rx_descriptors + cfg.burst > cfg.mbufs)
        r.fail(mbufs ? *mbufs : root,
               fmt::format("expected at least {} mbufs (the RX rings alone hold {} = sum of rx_desc, plus one burst of {}), "
                           "got {}", rx_descriptors + cfg.burst, rx_descriptors, cfg.burst, cfg.mbufs));

    if (auto x = top.get("forwarding")) {
        const MapView fwd = r.map(*x, {"fdb_capacity", "mac_aging_s", "static"});
        if (auto y = fwd.get("fdb_capacity")) cfg.fdb_capacity = static_cast<std::uint32_t>(r.uint(*y, 1, 1u << 20));
        if (auto y = fwd.get("mac_aging_s")) cfg.mac_aging_s = static_cast<std::uint32_t>(r.uint(*y, 1, 86400));
        if (auto y = fwd.get("static")) {
            const std::vector<Value> entries = r.list(*y, "static FDB entries ({mac, port})");
            if (entries.size() > cfg.fdb_capacity)
                r.fail(*y, fmt::format("expected at most fdb_capacity ({}) static entries, got {}", cfg.fdb_capacity, entries.size()));
            for (const Value& e : entries) {
                const MapView entry = r.map(e, {"mac", "port"});
                const Value mac_value = entry.require("mac");
                const std::string mac_text = r.string(mac_value, "a unicast MAC like 02:00:00:00:00:01");
                const std::optional<Mac> mac = parse_mac(mac_text);
                if (!mac || !usable_mac(*mac))
                    r.fail(mac_value, fmt::format("expected a unicast MAC like 02:00:00:00:00:01, got '{}'", mac_text));
                const std::string port = read_port_name(r, entry.require("port"), cfg.ports);
                for (std::size_t j = 0; j < cfg.static_fdb.size(); ++j)
                    if (cfg.static_fdb[j].mac == *mac)
                        r.fail(mac_value, fmt::format("duplicate static entry for {} (first in {}[{}])", format_mac(*mac), y->path, j));
                cfg.static_fdb.push_back(StaticFdbEntry{*mac, port});
            }
        }
    }

    if (auto x = top.get("protocol")) {
        const MapView proto = r.map(*x, {"udp_port", "malformed"});
        if (auto y = proto.get("udp_port")) cfg.udp_port = static_cast<std::uint16_t>(r.uint(*y, 1, 65535));
        if (auto y = proto.get("malformed"))
            cfg.malformed = r.choice(*y, {"forward", "drop"}) == 0 ? MalformedAction::Forward : MalformedAction::Drop;
    }

    cfg.scheduling_auto = true;  // aggregation.scheduling absent: auto
    if (auto x = top.get("aggregation")) {
        const MapView agg =
            r.map(*x, {"enabled", "non_member", "scheduling", "fair_lag", "chunk_follow", "drop_copies", "clusters"});
        if (auto y = agg.get("enabled")) cfg.aggregation = r.boolean(*y);
        // Clusters first: scheduling: auto depends on them.
        if (auto y = agg.get("clusters")) {
            for (const Value& c : r.list(*y, "clusters ({id, members, ...})")) {
                ClusterConfig cluster = read_cluster(r, c, cfg.ports);
                for (std::size_t j = 0; j < cfg.clusters.size(); ++j)
                    if (cfg.clusters[j].id == cluster.id)
                        r.fail(r.map(c, {"id", "aggregation", "version_tolerance", "weight", "members", "model_replication"}).require("id"),
                               fmt::format("duplicate cluster id {} (first used by {}[{}])", cluster.id, y->path, j));
                if (cluster.model_replication)
                    for (std::size_t j = 0; j < cfg.clusters.size(); ++j)
                        if (cfg.clusters[j].model_replication && cfg.clusters[j].model_replication->group == cluster.model_replication->group)
                            r.fail(r.map(r.map(c, {"id", "aggregation", "version_tolerance", "weight", "members", "model_replication"})
                                             .require("model_replication"), {"group", "learner", "max_members", "fabric_ports"}).require("group"),
                                   fmt::format("group {} is already {}[{}]'s (one group per cluster)",
                                               format_ipv4(cluster.model_replication->group), y->path, j));
                cfg.clusters.push_back(std::move(cluster));
            }
        }
        if (auto y = agg.get("scheduling")) {
            const std::size_t choice = r.choice(*y, {"auto", "fifo", "drr"});
            cfg.scheduling_auto = choice == 0;
            if (choice != 0) cfg.scheduling = choice == 1 ? Scheduling::Fifo : Scheduling::Drr;
        }
        resolve_scheduling(cfg);
        if (auto y = agg.get("fair_lag")) {
            cfg.fair_lag = static_cast<std::uint32_t>(r.uint(*y, 0, 65535));
            // It only changes how fair (drr) queues take turns: set with none, it would do nothing.
            const bool any_drr = cfg.scheduling == Scheduling::Drr ||
                                 std::any_of(cfg.ports.begin(), cfg.ports.end(), [](const PortConfig& p) {
                                     return p.scheduling == Scheduling::Drr;
                                 });
            if (cfg.fair_lag != 0 && !any_drr)
                r.fail(*y, "fair_lag needs fair queues: aggregation.scheduling: drr (or a port's queue.scheduling: drr)");
        }
        if (auto y = agg.get("chunk_follow")) {
            cfg.chunk_follow = r.boolean(*y);
            // It only reorders inside a fair (drr) queue's cluster classes: set with none, it would do nothing.
            const bool any_drr = cfg.scheduling == Scheduling::Drr ||
                                 std::any_of(cfg.ports.begin(), cfg.ports.end(), [](const PortConfig& p) {
                                     return p.scheduling == Scheduling::Drr;
                                 });
            if (cfg.chunk_follow && !any_drr)
                r.fail(*y, "chunk_follow needs fair queues: aggregation.scheduling: drr (or a port's queue.scheduling: drr)");
        }
        if (auto y = agg.get("drop_copies")) cfg.drop_copies = r.boolean(*y);
        if (auto y = agg.get("non_member"))
            cfg.non_member = r.choice(*y, {"forward", "drop"}) == 0 ? NonMemberAction::ForwardUnmerged : NonMemberAction::Drop;
    }

    resolve_scheduling(cfg);

    if (auto x = top.get("feedback")) {
        const MapView fb = r.map(*x, {"enabled", "interval_us"});
        if (auto y = fb.get("enabled")) cfg.feedback = r.boolean(*y);
        if (auto y = fb.get("interval_us")) cfg.feedback_interval_us = static_cast<std::uint32_t>(r.uint(*y, 1, 10'000'000));
    }

    if (auto x = top.get("stats")) {
        const MapView stats = r.map(*x, {"interval_s", "json"});
        if (auto y = stats.get("interval_s")) cfg.stats_interval_s = static_cast<std::uint32_t>(r.uint(*y, 0, 86400));
        if (auto y = stats.get("json")) cfg.stats_json = r.string(*y, "a file path (or \"\" for none)", true);
    }

    if (auto x = top.get("telemetry")) cfg.telemetry = r.boolean(*x);
    return cfg;
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public entry points.

void resolve_scheduling(SwitchConfig& cfg) noexcept {
    if (!cfg.scheduling_auto) return;
    const auto aggregating =
        std::count_if(cfg.clusters.begin(), cfg.clusters.end(), [](const ClusterConfig& c) { return c.aggregation; });
    cfg.scheduling = cfg.aggregation && aggregating >= 2 ? Scheduling::Drr : Scheduling::Fifo;
}

SwitchConfig parse_switch_config(const std::string& yaml_text, const std::string& source) {
    std::vector<YAML::Node> docs;
    try {
        docs = YAML::LoadAll(yaml_text);
    } catch (const YAML::Exception& e) {
        if (e.mark.line >= 0)
            throw ConfigError(fmt::format("{}:{}:{}: YAML syntax error: {}", source, e.mark.line + 1, e.mark.column + 1, e.msg));
        throw ConfigError(fmt::format("{}: YAML syntax error: {}", source, e.msg));
    }
    const Reader reader(source);
    if (docs.empty() || docs[0].IsNull())
        throw ConfigError(fmt::format("{}: the configuration is empty; expected a mapping with at least 'ports'", source));
    try {
        if (docs.size() > 1)
            reader.fail(docs[1].Mark(), "", fmt::format("expected one YAML document, got {} (remove the '---' separator)", docs.size()));
        return read_config(reader, reader.root(docs[0]));
    } catch (const yaml::Error& e) {
        throw ConfigError(e.what());
    }
}

SwitchConfig load_switch_config(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))  // ifstream opens a directory and then reads nothing
        throw ConfigError(fmt::format("{}: cannot read the configuration file: it is a directory", path));
    std::ifstream in(path, std::ios::binary);
    if (!in) throw ConfigError(fmt::format("{}: cannot open the configuration file: {}", path, std::strerror(errno)));
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) throw ConfigError(fmt::format("{}: cannot read the configuration file", path));
    return parse_switch_config(text.str(), path);
}

std::uint64_t parse_rate_bps(const std::string& text) {
    const auto fail = [&]() -> std::uint64_t {
        throw ConfigError(fmt::format("expected a rate like 10G, 250M or 1000000 (bits/s), got '{}'", text));
    };
    auto [number, unit] = split_number_unit(trim(text));
    std::string u = lowercase(unit);
    if (u.ends_with("bps")) u.resize(u.size() - 3);       // "10Gbps"
    else if (u.ends_with("bit/s")) u.resize(u.size() - 5);  // "10Gbit/s"
    std::uint64_t multiplier = 1;
    if (u == "k") multiplier = 1'000;
    else if (u == "m") multiplier = 1'000'000;  // no milli-bits: m means mega in a rate
    else if (u == "g") multiplier = 1'000'000'000;
    else if (u == "t") multiplier = 1'000'000'000'000;
    else if (!u.empty()) return fail();
    const auto value = scaled_decimal(number, multiplier);
    if (!value) return fail();
    return *value;
}

std::uint64_t parse_byte_size(const std::string& text) {
    const auto fail = [&]() -> std::uint64_t {
        throw ConfigError(fmt::format("expected a byte size like 16384, 64K or 4MiB, got '{}'", text));
    };
    auto [number, unit] = split_number_unit(trim(text));
    std::string u(unit);
    if (u.ends_with('B')) u.pop_back();  // "64KB", "4MiB"; a lowercase b would mean bits: rejected
    std::uint64_t multiplier = 1;
    if (!u.empty()) {
        const char prefix = static_cast<char>(std::toupper(static_cast<unsigned char>(u[0])));
        const bool binary = u.size() == 2 && (u[1] == 'i' || u[1] == 'I');
        if (u.size() > 2 || (u.size() == 2 && !binary)) return fail();
        const int power = prefix == 'K' ? 1 : prefix == 'M' ? 2 : prefix == 'G' ? 3 : 0;
        if (power == 0) return fail();
        for (int i = 0; i < power; ++i) multiplier *= binary ? 1024 : 1000;
    }
    const auto value = scaled_decimal(number, multiplier);
    if (!value) return fail();
    return *value;
}

std::optional<Mac> parse_mac(const std::string& text) {
    // Six two-digit hex groups separated by ':' (or '-', as Windows writes them), one kind only.
    if (text.size() != 17) return std::nullopt;
    const char sep = text[2];
    if (sep != ':' && sep != '-') return std::nullopt;
    Mac mac{};
    for (std::size_t i = 0; i < 6; ++i) {
        const int hi = hex_digit(text[i * 3]), lo = hex_digit(text[i * 3 + 1]);
        if (hi < 0 || lo < 0) return std::nullopt;
        if (i < 5 && text[i * 3 + 2] != sep) return std::nullopt;
        mac[i] = static_cast<std::uint8_t>(hi * 16 + lo);
    }
    return mac;
}

std::optional<std::uint32_t> parse_ipv4(const std::string& text) {
    // Strict dotted quad: four decimal octets, no leading zeros (which some parsers read as octal).
    std::uint32_t ip = 0;
    std::size_t pos = 0;
    for (int octet = 0; octet < 4; ++octet) {
        if (octet > 0) {
            if (pos >= text.size() || text[pos] != '.') return std::nullopt;
            ++pos;
        }
        const std::size_t start = pos;
        unsigned value = 0;
        while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9' && pos - start < 3)
            value = value * 10 + static_cast<unsigned>(text[pos++] - '0');
        const std::size_t len = pos - start;
        if (len == 0 || value > 255 || (len > 1 && text[start] == '0')) return std::nullopt;
        ip = (ip << 8) | value;
    }
    if (pos != text.size()) return std::nullopt;
    return ip;
}

std::string format_mac(const Mac& m) {
    return fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5]);
}

std::string format_ipv4(std::uint32_t ip) {
    return fmt::format("{}.{}.{}.{}", ip >> 24, (ip >> 16) & 0xFF, (ip >> 8) & 0xFF, ip & 0xFF);
}

std::string to_yaml(const SwitchConfig& cfg) {
    YAML::Emitter out;
    out << YAML::BeginMap;
    out << YAML::Key << "eal" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const std::string& arg : cfg.eal_args) out << YAML::DoubleQuoted << arg;
    out << YAML::EndSeq;
    out << YAML::Key << "lcores" << YAML::Value << cfg.lcores;
    out << YAML::Key << "idle_backoff_us" << YAML::Value << cfg.idle_backoff_us;
    out << YAML::Key << "burst" << YAML::Value << cfg.burst;
    out << YAML::Key << "mbufs" << YAML::Value << cfg.mbufs;

    out << YAML::Key << "ports" << YAML::Value << YAML::BeginSeq;
    for (const PortConfig& p : cfg.ports) {
        out << YAML::BeginMap;
        out << YAML::Key << "name" << YAML::Value << YAML::DoubleQuoted << p.name;
        out << YAML::Key << "device" << YAML::Value << YAML::DoubleQuoted << p.device;
        out << YAML::Key << "rx_desc" << YAML::Value << p.rx_desc;
        out << YAML::Key << "tx_desc" << YAML::Value << p.tx_desc;
        out << YAML::Key << "rx_queues" << YAML::Value << p.rx_queues;
        out << YAML::Key << "mtu" << YAML::Value << p.mtu;
        out << YAML::Key << "shaper" << YAML::Value << YAML::Flow << YAML::BeginMap
            << YAML::Key << "rate" << YAML::Value << format_rate(p.shaper.rate_bps)
            << YAML::Key << "burst_bytes" << YAML::Value << format_bytes(p.shaper.burst_bytes) << YAML::EndMap;
        out << YAML::Key << "queue" << YAML::Value << YAML::Flow << YAML::BeginMap
            << YAML::Key << "packets" << YAML::Value << p.queue_packets
            << YAML::Key << "bytes" << YAML::Value << format_bytes(p.queue_bytes);
        if (p.scheduling) out << YAML::Key << "scheduling" << YAML::Value << (*p.scheduling == Scheduling::Fifo ? "fifo" : "drr");
        out << YAML::EndMap;
        out << YAML::Key << "marking" << YAML::Value << YAML::Flow << YAML::BeginMap
            << YAML::Key << "depth_packets" << YAML::Value << p.marking.depth_packets
            << YAML::Key << "sojourn_us" << YAML::Value << p.marking.sojourn_us
            << YAML::Key << "ip_ecn" << YAML::Value << p.marking.ip_ecn << YAML::EndMap;
        out << YAML::EndMap;
    }
    out << YAML::EndSeq;

    out << YAML::Key << "forwarding" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "fdb_capacity" << YAML::Value << cfg.fdb_capacity;
    out << YAML::Key << "mac_aging_s" << YAML::Value << cfg.mac_aging_s;
    out << YAML::Key << "static" << YAML::Value << YAML::BeginSeq;
    for (const StaticFdbEntry& e : cfg.static_fdb)
        out << YAML::Flow << YAML::BeginMap << YAML::Key << "mac" << YAML::Value << YAML::DoubleQuoted << format_mac(e.mac)
            << YAML::Key << "port" << YAML::Value << YAML::DoubleQuoted << e.port << YAML::EndMap;
    out << YAML::EndSeq << YAML::EndMap;

    out << YAML::Key << "protocol" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "udp_port" << YAML::Value << cfg.udp_port;
    out << YAML::Key << "malformed" << YAML::Value << (cfg.malformed == MalformedAction::Forward ? "forward" : "drop");
    out << YAML::EndMap;

    out << YAML::Key << "aggregation" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "enabled" << YAML::Value << cfg.aggregation;
    out << YAML::Key << "non_member" << YAML::Value
        << (cfg.non_member == NonMemberAction::ForwardUnmerged ? "forward" : "drop");
    out << YAML::Key << "scheduling" << YAML::Value
        << (cfg.scheduling_auto ? "auto" : cfg.scheduling == Scheduling::Fifo ? "fifo" : "drr");
    out << YAML::Key << "fair_lag" << YAML::Value << cfg.fair_lag;
    out << YAML::Key << "chunk_follow" << YAML::Value << cfg.chunk_follow;
    out << YAML::Key << "drop_copies" << YAML::Value << cfg.drop_copies;
    out << YAML::Key << "clusters" << YAML::Value << YAML::BeginSeq;
    for (const ClusterConfig& c : cfg.clusters) {
        out << YAML::BeginMap;
        out << YAML::Key << "id" << YAML::Value << c.id;
        out << YAML::Key << "aggregation" << YAML::Value << c.aggregation;
        out << YAML::Key << "version_tolerance" << YAML::Value << c.version_tolerance;
        out << YAML::Key << "weight" << YAML::Value << c.weight;
        out << YAML::Key << "members" << YAML::Value << YAML::Flow << YAML::BeginSeq;
        for (const Mac& m : c.member_macs) out << YAML::DoubleQuoted << format_mac(m);
        for (std::uint32_t ip : c.member_ips) out << YAML::DoubleQuoted << format_ipv4(ip);
        for (const MacIp& b : c.member_bindings) out << YAML::DoubleQuoted << (format_mac(b.mac) + "@" + format_ipv4(b.ip));
        out << YAML::EndSeq;
        if (c.model_replication) {
            out << YAML::Key << "model_replication" << YAML::Value << YAML::BeginMap;
            out << YAML::Key << "group" << YAML::Value << format_ipv4(c.model_replication->group);
            out << YAML::Key << "learner" << YAML::Value << format_ipv4(c.model_replication->learner);
            out << YAML::Key << "max_members" << YAML::Value << c.model_replication->max_members;
            if (!c.model_replication->fabric_ports.empty()) {
                out << YAML::Key << "fabric_ports" << YAML::Value << YAML::Flow << YAML::BeginSeq;
                for (const std::string& p : c.model_replication->fabric_ports) out << p;
                out << YAML::EndSeq;
            }
            out << YAML::EndMap;
        }
        out << YAML::EndMap;
    }
    out << YAML::EndSeq << YAML::EndMap;

    out << YAML::Key << "feedback" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "enabled" << YAML::Value << cfg.feedback;
    out << YAML::Key << "interval_us" << YAML::Value << cfg.feedback_interval_us;
    out << YAML::EndMap;

    out << YAML::Key << "stats" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "interval_s" << YAML::Value << cfg.stats_interval_s;
    out << YAML::Key << "json" << YAML::Value << YAML::DoubleQuoted << cfg.stats_json;
    out << YAML::EndMap;

    out << YAML::Key << "telemetry" << YAML::Value << cfg.telemetry;
    out << YAML::EndMap;
    return std::string(out.c_str()) + "\n";
}

}  // namespace shesha::core

// shesha-switch configuration: one YAML file (see configs/*.yaml for documented examples).
// Parsing is strict: an unknown key, a wrong type or an out-of-range value raises ConfigError whose
// message names the full key path (for example "ports[1].shaper.rate") and what was expected.
// DPDK-free, so config errors are unit-tested without EAL.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "aggregating_queue.h"
#include "cluster_policy.h"
#include "port_queue.h"
#include "fdb.h"

namespace shesha::core {

class ConfigError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct ShaperConfig {
    std::uint64_t rate_bps = 0;        // 0: unshaped. YAML accepts "10G", "250M", "1.5G", 100000000
    std::uint32_t burst_bytes = 16384;

    bool operator==(const ShaperConfig&) const = default;
};

struct MarkingConfig {
    std::uint32_t depth_packets = 0;   // 0: off
    std::uint32_t sojourn_us = 0;      // 0: off
    bool ip_ecn = true;

    bool operator==(const MarkingConfig&) const = default;
};

inline constexpr std::uint16_t kMinMtu = 68;
inline constexpr std::uint16_t kMaxMtu = 9000;
inline constexpr std::uint32_t kFrameOverhead = 18;  // Ethernet header and one VLAN tag, no CRC

struct PortConfig {
    std::string name;                  // unique, used in logs, stats and static FDB entries
    std::string device;                // DPDK device: a vdev spec ("net_af_xdp0,iface=veth0") or a PCI address
    std::uint16_t rx_desc = 1024;
    std::uint16_t tx_desc = 1024;
    // Receive queues (RSS on the destination IPv4 address, so a cluster's gradients, all bound for
    // its learner, meet in one queue); each forwarding lcore polls whole queues.
    std::uint16_t rx_queues = 1;
    std::uint16_t mtu = 1500;          // IP MTU; frames up to mtu + 18 (Ethernet + one VLAN tag)
    ShaperConfig shaper;
    std::uint32_t queue_packets = 1024;
    std::uint64_t queue_bytes = 4u << 20;
    std::optional<Scheduling> scheduling;  // queue.scheduling; unset: aggregation.scheduling
    MarkingConfig marking;             // defaults from the top-level marking section

    bool operator==(const PortConfig&) const = default;
};

struct StaticFdbEntry {
    Mac mac{};
    std::string port;                  // a port name

    bool operator==(const StaticFdbEntry&) const = default;
};

// In-network MODEL replication for one cluster (docs/switch.md, "Model replication"): its learner
// sends each MODEL chunk once, to `group`; the switch delivers a copy to every member worker that
// joined (by a model request), rewriting each copy's destination.
struct ModelReplicationConfig {
    std::uint32_t group = 0;          // IPv4 multicast group (224.0.0.0/4), host byte order
    std::uint32_t learner = 0;        // the only source allowed to send to it (unicast IPv4)
    std::uint32_t max_members = 64;   // joined workers kept (1..4096): the most copies per frame
    // Names of ports that lead to another Shesha switch replicating this group (a multicast tree):
    // the members behind such a port get one copy of the group frame through it, not one each.
    std::vector<std::string> fabric_ports;

    bool operator==(const ModelReplicationConfig&) const = default;
};

struct ClusterConfig {
    std::uint16_t id = 0;
    bool aggregation = true;
    std::uint32_t version_tolerance = 0;
    std::vector<Mac> member_macs;
    std::vector<std::uint32_t> member_ips;  // host byte order
    std::vector<MacIp> member_bindings;     // "MAC@IP": both must match
    std::uint32_t weight = 1;               // share of a port's packets under DRR scheduling (1..1000)
    std::optional<ModelReplicationConfig> model_replication;

    bool operator==(const ClusterConfig&) const = default;
};

enum class MalformedAction : std::uint8_t { Forward, Drop };

struct SwitchConfig {
    std::vector<std::string> eal_args;   // extra EAL arguments (e.g. --no-huge, -m 512, --no-pci)
    // Forwarding lcores, each running to completion (docs/switch.md, "Several lcores"): it polls
    // its share of the ports' receive queues, runs its own pipeline and egress queues, and sends
    // on its own transmit queue of every port. At most the number of receive queues.
    std::uint32_t lcores = 1;
    std::uint32_t idle_backoff_us = 0;   // sleep this long after an empty poll round; 0 = busy poll
    std::uint32_t burst = 32;
    std::uint32_t mbufs = 16384;

    std::vector<PortConfig> ports;

    std::uint32_t fdb_capacity = 4096;
    std::uint32_t mac_aging_s = 300;
    std::vector<StaticFdbEntry> static_fdb;

    std::uint16_t udp_port = 17717;
    MalformedAction malformed = MalformedAction::Forward;

    bool aggregation = true;             // global switch: false makes every queue a plain FIFO
    NonMemberAction non_member = NonMemberAction::ForwardUnmerged;
    // fifo: one aggregating queue per port. drr: one per configured cluster plus one for the rest,
    // deficit round robin in packets, weighted by clusters[].weight: fair shares of the port's turns.
    // `auto` (YAML's default when the key is absent): drr when aggregation is on and two or more
    // clusters aggregate, since that is when shares matter (docs/queue.md), fifo otherwise (one
    // class, so the TX batch may merge: batch_merge.h). resolve_scheduling() applies it.
    Scheduling scheduling = Scheduling::Fifo;
    bool scheduling_auto = false;  // scheduling follows resolve_scheduling()
    // aggregation.fair_lag: 0 = deficit round robin (the default); L > 0 = bounded-lag round robin
    // under drr: one packet per class per turn, no class more than L contributions (per unit of
    // weight) ahead of the least-served backlogged one (docs/queue.md). 0..65535.
    std::uint32_t fair_lag = 0;
    // aggregation.chunk_follow: under drr, after a head that carries merged contributions, the
    // packets of its cluster and chunk waiting behind it (newer versions) leave next within the
    // cluster's class (docs/queue.md, "Chunk following"). Off by default.
    bool chunk_follow = false;
    // aggregation.drop_copies: a member's GRADIENT whose (cluster, worker, chunk, seq) the switch
    // has seen is a copy made on the way, dropped before it can merge (admission.h). On by default;
    // off only for synthetic traffic that replays one capture in a loop (shesha-bench forward).
    bool drop_copies = true;
    std::vector<ClusterConfig> clusters;

    bool feedback = false;               // send FEEDBACK to senders of marked packets
    std::uint32_t feedback_interval_us = 1000;  // per sender

    std::uint32_t stats_interval_s = 1;  // periodic log line; 0 = off
    std::string stats_json;              // final stats file; empty = none
    bool telemetry = true;               // /shesha/* DPDK telemetry commands

    bool operator==(const SwitchConfig&) const = default;
};

// Parses YAML text; source names the file in error messages.
// With scheduling_auto, sets scheduling to what `auto` means for this configuration (again after
// a command line changed aggregation): drr when aggregation is on and two or more clusters
// aggregate, fifo otherwise. Without it, leaves the configuration alone.
void resolve_scheduling(SwitchConfig& cfg) noexcept;

SwitchConfig parse_switch_config(const std::string& yaml_text, const std::string& source = "<config>");
// Reads and parses a file; a missing or unreadable file is a ConfigError naming the path.
SwitchConfig load_switch_config(const std::string& path);
// The effective configuration as YAML that parse_switch_config() reads back to an equal config
// (per-port marking written out in full). For logs and --print-config.
std::string to_yaml(const SwitchConfig& cfg);

// Helpers shared with the tools' option parsing.
std::uint64_t parse_rate_bps(const std::string& text);       // "10G", "250M", "1.5k", "1000"; throws ConfigError
// Byte sizes: "16384", "64K" (x1000), "4MiB" (x1024^2); K/M/G are decimal, Ki/Mi/Gi binary, a
// trailing "B" is optional. Throws ConfigError.
std::uint64_t parse_byte_size(const std::string& text);
std::optional<Mac> parse_mac(const std::string& text);       // "02:00:00:00:00:01"
std::optional<std::uint32_t> parse_ipv4(const std::string& text);  // dotted quad -> host order
std::string format_mac(const Mac& m);
std::string format_ipv4(std::uint32_t ip);

}  // namespace shesha::core

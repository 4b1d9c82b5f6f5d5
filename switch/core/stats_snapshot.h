// A point-in-time copy of every switch counter: taken by shesha-switch's Switch::snapshot() from
// any thread, and by shesha-replay from its pipeline. The stats log line, the final table, the JSON
// file, Prometheus and the telemetry commands all read this (stats_report.h); its counters are the
// pipeline's enum-indexed tables (counters.h).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "aggregating_queue.h"
#include "counters.h"
#include "fdb.h"
#include "protocol.h"

namespace shesha::core {

inline constexpr std::size_t kMaxReportedShares = 64;  // clusters per port in the stats (the first ones configured)

// One configured cluster's share of a port's egress (ClusterShare): contributions and packets
// sent, and those sent while at least two clusters had packets waiting there.
struct ClusterShareSnapshot {
    std::uint16_t cluster_id = 0;
    std::uint32_t weight = 1;
    std::uint64_t served = 0;
    std::uint64_t contended = 0;
    std::uint64_t served_packets = 0;
    std::uint64_t contended_packets = 0;
};

struct PortSnapshot {
    std::string name;
    std::string device;
    std::uint16_t port_id = 0;
    std::uint64_t shaper_rate_bps = 0;     // 0: unshaped

    PortCounters counters;                 // the pipeline's per-port table (RX and TX entries)
    std::uint64_t rx_missed = 0;           // rte_eth_stats.imissed: the NIC dropped, no descriptor
    std::uint64_t rx_nombuf = 0;           // rte_eth_stats.rx_nombuf
    std::uint64_t operator[](PortCounter c) const noexcept { return counters[c]; }

    // Egress queue.
    QueueStats queue;
    std::uint64_t queue_capacity = 0;
    std::uint64_t queue_depth = 0;
    std::uint64_t queue_depth_bytes = 0;
    std::uint64_t tx_pending = 0;          // left the queue, refused by the NIC, retried first
    std::vector<ClusterShareSnapshot> clusters;  // with two or more clusters configured (at most kMaxReportedShares)

    // Derived values (derive_queue_values()).
    double mean_depth = 0;                 // depth seen by arrivals
    double mean_sojourn_us = 0;
    double max_sojourn_us = 0;
    double merge_ratio = 0;                // merged / mergeable arrivals
};

struct SwitchSnapshot {
    std::uint64_t tsc_hz = 0;
    std::uint64_t taken_tsc = 0;
    double uptime_s = 0;
    std::string simd;                      // merge kernel in use
    std::uint32_t lcores = 1;
    std::vector<PortSnapshot> ports;

    SwitchCounters counters;               // every lcore's switch table, added up
    std::uint64_t malformed_total = 0;     // every malformed reason plus bad frames
    std::uint64_t operator[](SwitchCounter c) const noexcept { return counters[c]; }

    FdbStats fdb;
    std::uint64_t fdb_size = 0;
    std::uint64_t fdb_capacity = 0;
};

}  // namespace shesha::core

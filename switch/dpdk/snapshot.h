// A point-in-time copy of every switch counter, taken by Switch::snapshot() from any thread. The
// stats log line, the final table, the JSON file and the telemetry commands all read this.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "aggregating_queue.h"
#include "counters.h"
#include "fdb.h"
#include "protocol.h"

namespace shesha::sw {

using core::bump;
using core::EgressCounters;
using core::load_relaxed;
using core::PortRxCounters;
using core::PortTxCounters;
using core::Published;
using core::read_counters;
using core::RxLcoreCounters;
using core::store_relaxed;

struct PortSnapshot {
    std::string name;
    std::string device;
    std::uint16_t port_id = 0;
    std::uint64_t shaper_rate_bps = 0;     // 0: unshaped

    // RX side (our counters plus the NIC's).
    std::uint64_t rx_packets = 0;
    std::uint64_t rx_bytes = 0;
    std::uint64_t rx_missed = 0;           // rte_eth_stats.imissed: the NIC dropped, no descriptor
    std::uint64_t rx_nombuf = 0;           // rte_eth_stats.rx_nombuf
    std::uint64_t rx_multi_segment = 0;

    PortTxCounters tx;                     // packets/bytes sent, refused, flooded, ...

    // Egress queue.
    core::QueueStats queue;
    std::uint64_t queue_capacity = 0;
    std::uint64_t queue_depth = 0;
    std::uint64_t queue_depth_bytes = 0;
    std::uint64_t tx_pending = 0;          // left the queue, refused by the NIC, retried first

    // Derived values (computed by Switch::snapshot()).
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

    std::array<std::uint64_t, proto::kDecodeErrorCount> malformed{};  // by DecodeError; [0] unused
    std::uint64_t malformed_total = 0;     // sum of malformed[] plus bad_frames
    std::uint64_t bad_frames = 0;          // inconsistent IPv4/UDP headers
    std::uint64_t shesha_valid = 0;
    std::uint64_t non_ip = 0;              // frames by class
    std::uint64_t ip_other = 0;
    std::uint64_t gradient_f32 = 0;
    std::uint64_t multi_segment = 0;
    std::uint64_t handoff_drops = 0;
    EgressCounters egress;                 // non-member, feedback, clone failures, ...

    core::FdbStats fdb;
    std::uint64_t fdb_size = 0;
    std::uint64_t fdb_capacity = 0;
};

}  // namespace shesha::sw

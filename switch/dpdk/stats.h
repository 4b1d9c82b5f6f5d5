// shesha-switch's statistics: the reports are switch/core/stats_report.h (shared with
// shesha-replay); this adds the /shesha/* DPDK telemetry commands (telemetry.cpp).
#pragma once

#include "stats_report.h"

namespace shesha::sw {

class Switch;

using core::ClusterShareSnapshot;
using core::decode_error_key;
using core::format_rate_line;
using core::format_summary;
using core::kMaxReportedShares;
using core::kStatsSchema;
using core::load_relaxed;
using core::PortCounter;
using core::PortCounters;
using core::PortSnapshot;
using core::Published;
using core::stats_to_json;
using core::stats_to_prometheus;
using core::store_relaxed;
using core::SwitchCounter;
using core::SwitchCounters;
using core::SwitchSnapshot;
using core::write_stats_json;

// Registers /shesha/ports, /shesha/queues, /shesha/shares, /shesha/malformed, /shesha/fdb and
// /shesha/config (once per process) and points them at sw; they answer from Switch::snapshot() on
// the telemetry thread. Returns false if DPDK refused a registration.
bool register_telemetry(Switch* sw);
// Detaches the commands from the switch (they then answer with an empty dict); call before
// destroying the Switch.
void unregister_telemetry();

}  // namespace shesha::sw

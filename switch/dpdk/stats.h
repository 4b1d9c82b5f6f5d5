// Reporting of switch statistics: the periodic log line, the final summary table, the stats JSON
// file (schema "shesha-switch-stats/1", documented in docs/switch.md) and the /shesha/* DPDK
// telemetry commands.
#pragma once

#include <cstdio>
#include <string>

#include "snapshot.h"
#include "switch_config.h"

namespace shesha::sw {

class Switch;

inline constexpr const char* kStatsSchema = "shesha-switch-stats/1";

// Stable snake_case name of a DecodeError, used as a key in JSON and telemetry.
const char* decode_error_key(std::size_t index) noexcept;

// One line of rates since prev (packets/s, bits/s) and current queue state.
std::string format_rate_line(const SwitchSnapshot& now, const SwitchSnapshot& prev);
// Multi-line human summary (per port table, queues, malformed, feedback, FDB).
std::string format_summary(const SwitchSnapshot& s);
std::string stats_to_json(const SwitchSnapshot& s, const core::SwitchConfig& cfg);
// Writes the JSON atomically (temporary file + rename). Returns false and sets error on failure.
bool write_stats_json(const std::string& path, const SwitchSnapshot& s, const core::SwitchConfig& cfg,
                      std::string& error);
// The same counters in Prometheus text format (node_exporter textfile collector): every numeric
// field of the stats JSON, from the same tables, named shesha_<section>_<field> ("_total" for
// counters), labelled switch=switch_name and, per port, port=<name>. docs/deployment.md.
std::string stats_to_prometheus(const SwitchSnapshot& s, const core::SwitchConfig& cfg, const std::string& switch_name);

// Registers /shesha/ports, /shesha/queues, /shesha/malformed, /shesha/fdb and /shesha/config (once
// per process) and points them at sw; they answer from Switch::snapshot() on the telemetry thread.
// Returns false if DPDK refused a registration.
bool register_telemetry(Switch* sw);
// Detaches the commands from the switch (they then answer with an empty dict); call before
// destroying the Switch.
void unregister_telemetry();

}  // namespace shesha::sw

// The switch's statistics as people and programs read them: the periodic log line, the final
// summary table, the stats JSON file (schema "shesha-switch-stats/1", documented in
// docs/switch.md) and the Prometheus textfile. One writer for shesha-switch and shesha-replay, so
// their files compare key by key. Every value comes from a StatsSnapshot field table below; the
// DPDK telemetry commands (switch/dpdk/telemetry.cpp) read the same tables.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "stats_snapshot.h"
#include "switch_config.h"

namespace shesha::core {

inline constexpr const char* kStatsSchema = "shesha-switch-stats/1";

// Every report prints from the counter tables of counters.h (one name per counter) plus the few
// values that are not counters: NIC statistics, gauges and derived sums. kind only matters to
// Prometheus: a counter only grows, a gauge goes up and down, a label describes the port.
enum class Kind { Counter, Gauge, Label };
struct Field {
    std::string name;
    std::uint64_t value;
    Kind kind = Kind::Counter;
};
using Fields = std::vector<Field>;

// The field tables, each in report order.
Fields port_fields(const PortSnapshot& p);
Fields queue_fields(const PortSnapshot& p);
// Each port's per-cluster shares: "c<cluster>/served", "c<cluster>/contended" (contributions),
// "c<cluster>/served_packets", "c<cluster>/contended_packets".
Fields share_fields(const PortSnapshot& p);
// The switch table's entries of one section, in table order, after `first` (derived values).
Fields section_fields(const SwitchSnapshot& s, std::string_view section, Fields first = {});
Fields malformed_fields(const SwitchSnapshot& s);
Fields gradient_fields(const SwitchSnapshot& s);
Fields frame_fields(const SwitchSnapshot& s);
Fields feedback_fields(const SwitchSnapshot& s);
Fields internal_fields(const SwitchSnapshot& s);
Fields replication_fields(const SwitchSnapshot& s);
Fields fdb_fields(const SwitchSnapshot& s);
// Telemetry has no floating point values in DPDK 22.11: derived values as scaled integers.
Fields queue_derived_integer_fields(const PortSnapshot& p);

// Fills a port's derived values (mean depth, sojourn in us, merge ratio) from its queue counters.
void derive_queue_values(PortSnapshot& p, std::uint64_t ticks_per_second) noexcept;

// Stable snake_case name of a DecodeError, used as a key in JSON and telemetry.
const char* decode_error_key(std::size_t index) noexcept;

// One line of rates since prev (packets/s, bits/s) and current queue state.
std::string format_rate_line(const SwitchSnapshot& now, const SwitchSnapshot& prev);
// Multi-line human summary (per port table, queues, malformed, feedback, FDB).
std::string format_summary(const SwitchSnapshot& s);
std::string stats_to_json(const SwitchSnapshot& s, const SwitchConfig& cfg);
// Writes the JSON atomically (temporary file + rename). Returns false and sets error on failure.
bool write_stats_json(const std::string& path, const SwitchSnapshot& s, const SwitchConfig& cfg, std::string& error);
// The same counters in Prometheus text format (node_exporter textfile collector): every numeric
// field of the stats JSON, from the same tables, named shesha_<section>_<field> ("_total" for
// counters), labelled switch=switch_name and, per port, port=<name>. docs/deployment.md.
std::string stats_to_prometheus(const SwitchSnapshot& s, const SwitchConfig& cfg, const std::string& switch_name);

}  // namespace shesha::core

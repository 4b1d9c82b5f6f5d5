// The /shesha/* DPDK telemetry commands: the switch's snapshot, through the same field tables as
// the stats JSON and Prometheus (switch/core/stats_report.h).
#include "stats.h"

#include <cctype>
#include <mutex>
#include <string>

#include <rte_cycles.h>
#include <rte_telemetry.h>

#include "switch.h"

namespace shesha::sw {

using core::fdb_fields;
using core::feedback_fields;
using core::Field;
using core::Fields;
using core::frame_fields;
using core::gradient_fields;
using core::malformed_fields;
using core::port_fields;
using core::queue_derived_integer_fields;
using core::queue_fields;
using core::replication_fields;
using core::share_fields;

namespace {

std::mutex g_tel_mutex;
Switch* g_tel_switch = nullptr;  // guarded by g_tel_mutex

// Telemetry keys allow only alphanumerics, '_' and '/'.
std::string tel_key(std::string_view s) {
    std::string k(s);
    for (char& c : k)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '/')) c = '_';
    return k;
}

void add_fields(rte_tel_data* d, const Fields& fields, const std::string& prefix = {}) {
    for (const Field& f : fields) rte_tel_data_add_dict_u64(d, tel_key(prefix + f.name).c_str(), f.value);
}

// Without parameters: every port, keys "<port>/<field>". With a port name or index: that port only.
int per_port(const char* params, rte_tel_data* d, Fields (*fields)(const PortSnapshot&), bool derived) {
    std::lock_guard lock(g_tel_mutex);
    rte_tel_data_start_dict(d);
    if (g_tel_switch == nullptr) return 0;
    const SwitchSnapshot s = g_tel_switch->snapshot(rte_rdtsc());
    const std::string want = params ? params : "";
    for (std::size_t i = 0; i < s.ports.size(); ++i) {
        const auto& p = s.ports[i];
        const bool selected = want.empty() || want == p.name || want == std::to_string(i);
        if (!selected) continue;
        const std::string prefix = want.empty() ? p.name + "/" : std::string();
        add_fields(d, fields(p), prefix);
        if (derived) add_fields(d, queue_derived_integer_fields(p), prefix);
    }
    return 0;
}

int tel_ports(const char*, const char* params, rte_tel_data* d) { return per_port(params, d, port_fields, false); }
int tel_queues(const char*, const char* params, rte_tel_data* d) { return per_port(params, d, queue_fields, true); }

int tel_shares(const char*, const char* params, rte_tel_data* d) { return per_port(params, d, share_fields, false); }

int tel_malformed(const char*, const char*, rte_tel_data* d) {
    std::lock_guard lock(g_tel_mutex);
    rte_tel_data_start_dict(d);
    if (g_tel_switch == nullptr) return 0;
    const SwitchSnapshot s = g_tel_switch->snapshot(rte_rdtsc());
    add_fields(d, malformed_fields(s));
    add_fields(d, gradient_fields(s), "gradients/");
    add_fields(d, frame_fields(s), "frames/");
    return 0;
}

int tel_fdb(const char*, const char*, rte_tel_data* d) {
    std::lock_guard lock(g_tel_mutex);
    rte_tel_data_start_dict(d);
    if (g_tel_switch == nullptr) return 0;
    const SwitchSnapshot s = g_tel_switch->snapshot(rte_rdtsc());
    add_fields(d, fdb_fields(s));
    add_fields(d, feedback_fields(s), "feedback/");
    return 0;
}

int tel_replication(const char*, const char*, rte_tel_data* d) {
    std::lock_guard lock(g_tel_mutex);
    rte_tel_data_start_dict(d);
    if (g_tel_switch == nullptr) return 0;
    const SwitchSnapshot s = g_tel_switch->snapshot(rte_rdtsc());
    add_fields(d, replication_fields(s));
    return 0;
}

int tel_config(const char*, const char*, rte_tel_data* d) {
    std::lock_guard lock(g_tel_mutex);
    rte_tel_data_start_dict(d);
    if (g_tel_switch == nullptr) return 0;
    const core::SwitchConfig& c = g_tel_switch->config();
    rte_tel_data_add_dict_u64(d, "lcores", c.lcores);
    rte_tel_data_add_dict_u64(d, "burst", c.burst);
    rte_tel_data_add_dict_u64(d, "idle_backoff_us", c.idle_backoff_us);
    rte_tel_data_add_dict_u64(d, "udp_port", c.udp_port);
    rte_tel_data_add_dict_string(d, "aggregation", c.aggregation ? "on" : "off");
    rte_tel_data_add_dict_string(d, "feedback", c.feedback ? "on" : "off");
    rte_tel_data_add_dict_u64(d, "feedback_interval_us", c.feedback_interval_us);
    rte_tel_data_add_dict_string(d, "malformed", c.malformed == core::MalformedAction::Drop ? "drop" : "forward");
    rte_tel_data_add_dict_string(d, "non_member", c.non_member == core::NonMemberAction::Drop ? "drop" : "forward");
    rte_tel_data_add_dict_u64(d, "clusters", c.clusters.size());
    rte_tel_data_add_dict_u64(d, "fdb_capacity", c.fdb_capacity);
    rte_tel_data_add_dict_u64(d, "mac_aging_s", c.mac_aging_s);
    for (const auto& p : c.ports) {
        const std::string prefix = tel_key(p.name) + "/";
        rte_tel_data_add_dict_string(d, (prefix + "device").c_str(), p.device.substr(0, RTE_TEL_MAX_STRING_LEN - 1).c_str());
        rte_tel_data_add_dict_u64(d, (prefix + "shaper_rate_bps").c_str(), p.shaper.rate_bps);
        rte_tel_data_add_dict_u64(d, (prefix + "queue_packets").c_str(), p.queue_packets);
        rte_tel_data_add_dict_u64(d, (prefix + "queue_bytes").c_str(), p.queue_bytes);
        rte_tel_data_add_dict_u64(d, (prefix + "mark_depth_packets").c_str(), p.marking.depth_packets);
        rte_tel_data_add_dict_u64(d, (prefix + "mark_sojourn_us").c_str(), p.marking.sojourn_us);
    }
    return 0;
}

}  // namespace

bool register_telemetry(Switch* sw) {
    static bool registered = false;
    static bool ok = true;
    {
        std::lock_guard lock(g_tel_mutex);
        g_tel_switch = sw;
    }
    if (registered) return ok;
    registered = true;
    ok &= rte_telemetry_register_cmd("/shesha/ports", tel_ports,
                                     "Per-port RX/TX counters. Parameters: optional port name or index") == 0;
    ok &= rte_telemetry_register_cmd("/shesha/queues", tel_queues,
                                     "Per-port egress queue state and counters. Parameters: optional port name or index") == 0;
    ok &= rte_telemetry_register_cmd("/shesha/shares", tel_shares,
                                     "Per-cluster contributions and packets served and contended per port. Parameter: port name or index") == 0;
    ok &= rte_telemetry_register_cmd("/shesha/malformed", tel_malformed,
                                     "Malformed frames per reason and gradient policy counters. No parameters") == 0;
    ok &= rte_telemetry_register_cmd("/shesha/fdb", tel_fdb, "FDB size and counters, feedback counters. No parameters") == 0;
    ok &= rte_telemetry_register_cmd("/shesha/replication", tel_replication,
                                     "MODEL replication: frames replicated, copies, refusals, joins. No parameters") == 0;
    ok &= rte_telemetry_register_cmd("/shesha/config", tel_config, "Effective switch configuration. No parameters") == 0;
    return ok;
}

void unregister_telemetry() {
    std::lock_guard lock(g_tel_mutex);
    g_tel_switch = nullptr;
}

}  // namespace shesha::sw

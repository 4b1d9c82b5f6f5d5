#include "stats_report.h"

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "json_io.h"
#include "prometheus.h"

namespace shesha::core {

Fields port_fields(const PortSnapshot& p) {
    Fields f{{"port_id", p.port_id, Kind::Label}, {"shaper_rate_bps", p.shaper_rate_bps, Kind::Gauge}};
    for (std::size_t i = 0; i < PortCounters::kSize; ++i) f.push_back({std::string(kPortCounterNames[i].key), p.counters.values[i]});
    f.push_back({"rx_missed", p.rx_missed});
    f.push_back({"rx_nombuf", p.rx_nombuf});
    f.push_back({"tx_pending", p.tx_pending, Kind::Gauge});
    return f;
}

Fields queue_fields(const PortSnapshot& p) {
    const auto& q = p.queue;
    return {
        {"capacity", p.queue_capacity, Kind::Gauge},
        {"depth", p.queue_depth, Kind::Gauge},
        {"depth_bytes", p.queue_depth_bytes, Kind::Gauge},
        {"enqueued", q.enqueued},
        {"enqueued_bytes", q.enqueued_bytes},
        {"merged", q.merged},
        {"bytes_saved", q.bytes_saved},
        {"merge_refused", q.merge_refused},
        {"mergeable_arrivals", q.mergeable_arrivals},
        {"dropped", q.dropped},
        {"dropped_bytes", q.dropped_bytes},
        {"dequeued", q.dequeued},
        {"dequeued_bytes", q.dequeued_bytes},
        {"marked", q.marked},
        {"ecn_ce_set", q.ecn_ce_set},
        {"depth_max", q.depth_max, Kind::Gauge},
        {"depth_sum", q.depth_sum},
        {"depth_samples", q.depth_samples},
        {"sojourn_sum_ticks", q.sojourn_sum_ticks},
        {"sojourn_max_ticks", q.sojourn_max_ticks, Kind::Gauge},
        {"bypassed", q.bypassed},
        {"followed", q.followed},
    };
}

// The switch table's entries of one section, in table order, after `first` (derived values).
Fields section_fields(const SwitchSnapshot& s, std::string_view section, Fields first) {
    for (std::size_t i = 0; i < SwitchCounters::kSize; ++i)
        if (kSwitchCounterNames[i].section == section)
            first.push_back({std::string(kSwitchCounterNames[i].key), s.counters.values[i]});
    return first;
}

Fields malformed_fields(const SwitchSnapshot& s) { return section_fields(s, "malformed", {{"total", s.malformed_total}}); }
Fields gradient_fields(const SwitchSnapshot& s) {
    return section_fields(s, "gradients", {{"valid_shesha", s[SwitchCounter::Shesha]}});
}
Fields frame_fields(const SwitchSnapshot& s) {
    Fields f = section_fields(s, "frames");
    f.push_back({"malformed", s.malformed_total});
    return f;
}
Fields feedback_fields(const SwitchSnapshot& s) { return section_fields(s, "feedback"); }
Fields internal_fields(const SwitchSnapshot& s) { return section_fields(s, "internal"); }
Fields replication_fields(const SwitchSnapshot& s) { return section_fields(s, "replication"); }

Fields fdb_fields(const SwitchSnapshot& s) {
    return {{"size", s.fdb_size, Kind::Gauge}, {"capacity", s.fdb_capacity, Kind::Gauge}, {"learned", s.fdb.learned},
            {"moved", s.fdb.moved},       {"aged_out", s.fdb.aged_out}, {"table_full", s.fdb.table_full}};
}

// Telemetry has no floating point values in DPDK 22.11: derived values are scaled integers.
Fields queue_derived_integer_fields(const PortSnapshot& p) {
    return {
        {"mean_depth_milli", static_cast<std::uint64_t>(p.mean_depth * 1000.0), Kind::Gauge},
        {"mean_sojourn_ns", static_cast<std::uint64_t>(p.mean_sojourn_us * 1000.0), Kind::Gauge},
        {"max_sojourn_ns", static_cast<std::uint64_t>(p.max_sojourn_us * 1000.0), Kind::Gauge},
        {"merge_permille", static_cast<std::uint64_t>(p.merge_ratio * 1000.0), Kind::Gauge},
    };
}

// Each port's per-cluster shares, keys "c<cluster>/served" and "c<cluster>/contended" (contributions),
// "c<cluster>/served_packets" and "c<cluster>/contended_packets".
Fields share_fields(const PortSnapshot& p) {
    Fields f;
    for (const ClusterShareSnapshot& c : p.clusters) {
        f.push_back({fmt::format("c{}/served", c.cluster_id), c.served});
        f.push_back({fmt::format("c{}/contended", c.cluster_id), c.contended});
        f.push_back({fmt::format("c{}/served_packets", c.cluster_id), c.served_packets});
        f.push_back({fmt::format("c{}/contended_packets", c.cluster_id), c.contended_packets});
    }
    return f;
}


namespace {

// Adds each field as "name": value to obj, in the table's order.
void json_add_fields(json::Json& obj, const Fields& fields) {
    for (const Field& f : fields) obj[f.name] = f.value;
}

json::Json json_object(const Fields& fields) {
    json::Json obj = json::Json::object();
    json_add_fields(obj, fields);
    return obj;
}

std::string si(double v) {
    if (v >= 1e9) return fmt::format("{:.2f}G", v / 1e9);
    if (v >= 1e6) return fmt::format("{:.2f}M", v / 1e6);
    if (v >= 1e3) return fmt::format("{:.1f}k", v / 1e3);
    return fmt::format("{:.0f}", v);
}

}  // namespace

void derive_queue_values(PortSnapshot& p, std::uint64_t ticks_per_second) noexcept {
    const auto& q = p.queue;
    const double us_per_tick = 1e6 / static_cast<double>(ticks_per_second);
    p.mean_depth = q.depth_samples ? static_cast<double>(q.depth_sum) / static_cast<double>(q.depth_samples) : 0.0;
    p.mean_sojourn_us = q.dequeued ? static_cast<double>(q.sojourn_sum_ticks) / static_cast<double>(q.dequeued) * us_per_tick : 0.0;
    p.max_sojourn_us = static_cast<double>(q.sojourn_max_ticks) * us_per_tick;
    p.merge_ratio = q.mergeable_arrivals ? static_cast<double>(q.merged) / static_cast<double>(q.mergeable_arrivals) : 0.0;
}

const char* decode_error_key(std::size_t index) noexcept {
    if (index == 0 || index >= proto::kDecodeErrorCount) return "unknown";
    return name_of(malformed_counter(static_cast<proto::DecodeError>(index))).key.data();
}

std::string format_rate_line(const SwitchSnapshot& now, const SwitchSnapshot& prev) {
    const double dt = now.taken_tsc > prev.taken_tsc
                          ? static_cast<double>(now.taken_tsc - prev.taken_tsc) / static_cast<double>(now.tsc_hz)
                          : 0.0;
    auto rate = [&](std::uint64_t a, std::uint64_t b) { return dt > 0 ? static_cast<double>(a - b) / dt : 0.0; };
    std::uint64_t rxp = 0, rxb = 0, txp = 0, txb = 0, merged = 0, drops = 0, prxp = 0, prxb = 0, ptxp = 0, ptxb = 0,
                  pmerged = 0, pdrops = 0;
    std::string depths;
    for (std::size_t i = 0; i < now.ports.size(); ++i) {
        const auto& p = now.ports[i];
        rxp += p[PortCounter::RxPackets]; rxb += p[PortCounter::RxBytes]; txp += p[PortCounter::TxPackets]; txb += p[PortCounter::TxBytes];
        merged += p.queue.merged; drops += p.queue.dropped + p.rx_missed;
        if (i < prev.ports.size()) {
            const auto& q = prev.ports[i];
            prxp += q[PortCounter::RxPackets]; prxb += q[PortCounter::RxBytes]; ptxp += q[PortCounter::TxPackets]; ptxb += q[PortCounter::TxBytes];
            pmerged += q.queue.merged; pdrops += q.queue.dropped + q.rx_missed;
        }
        depths += fmt::format("{}{}={}", depths.empty() ? "" : " ", p.name, p.queue_depth);
    }
    return fmt::format("rx {}pps {}b/s | tx {}pps {}b/s | merged {}/s | drops {}/s | malformed {} | feedback {} | depth {}",
                       si(rate(rxp, prxp)), si(rate(rxb, prxb) * 8), si(rate(txp, ptxp)), si(rate(txb, ptxb) * 8),
                       si(rate(merged, pmerged)), si(rate(drops, pdrops)), now.malformed_total,
                       now[SwitchCounter::FeedbackSent], depths);
}

std::string format_summary(const SwitchSnapshot& s) {
    std::string out = fmt::format("shesha-switch final statistics ({:.3f} s, {} lcore(s), merge kernel {})\n",
                                  s.uptime_s, s.lcores, s.simd);
    out += fmt::format("{:<10} {:>12} {:>14} {:>12} {:>14} {:>9} {:>9} {:>9} {:>9}\n", "port", "rx_pkts", "rx_bytes",
                       "tx_pkts", "tx_bytes", "rx_miss", "tx_refus", "flooded", "filtered");
    for (const auto& p : s.ports)
        out += fmt::format("{:<10} {:>12} {:>14} {:>12} {:>14} {:>9} {:>9} {:>9} {:>9}\n", p.name, p[PortCounter::RxPackets],
                           p[PortCounter::RxBytes], p[PortCounter::TxPackets], p[PortCounter::TxBytes], p.rx_missed,
                           p[PortCounter::TxRefused], p[PortCounter::Flooded], p[PortCounter::Filtered]);
    out += fmt::format("{:<10} {:>10} {:>9} {:>9} {:>10} {:>12} {:>8} {:>8} {:>10} {:>10} {:>7}\n", "queue", "enqueued",
                       "merged", "dropped", "depth/max", "bytes_saved", "marked", "mean_dep", "sojourn_us", "max_us",
                       "merge%");
    for (const auto& p : s.ports)
        out += fmt::format("{:<10} {:>10} {:>9} {:>9} {:>10} {:>12} {:>8} {:>8.2f} {:>10.1f} {:>10.1f} {:>7.1f}\n", p.name,
                           p.queue.enqueued, p.queue.merged, p.queue.dropped,
                           fmt::format("{}/{}", p.queue_depth, p.queue.depth_max), p.queue.bytes_saved, p.queue.marked,
                           p.mean_depth, p.mean_sojourn_us, p.max_sojourn_us, p.merge_ratio * 100.0);
    // The switch table, section by section, in table order (zero entries left out).
    for (std::string_view section : {"malformed", "gradients", "feedback", "replication", "internal"}) {
        std::string line;
        for (std::size_t i = 0; i < SwitchCounters::kSize; ++i) {
            const auto& n = kSwitchCounterNames[i];
            if (n.section != section || (s.counters.values[i] == 0 && section != "feedback")) continue;
            line += fmt::format("{}{} {}", line.empty() ? "" : ", ", s.counters.values[i], n.key);
        }
        if (section == "malformed") line = fmt::format("{} total{}{}", s.malformed_total, line.empty() ? "" : ", ", line);
        if (section == "gradients") line = fmt::format("{} valid Shesha messages{}{}", s[SwitchCounter::Shesha], line.empty() ? "" : ", ", line);
        if (!line.empty()) out += fmt::format("{}: {}\n", section, line);
    }
    out += fmt::format("fdb: {}/{} entries, {} learned, {} moved, {} aged out, {} table full\n", s.fdb_size,
                       s.fdb_capacity, s.fdb.learned, s.fdb.moved, s.fdb.aged_out, s.fdb.table_full);
    return out;
}

std::string stats_to_json(const SwitchSnapshot& s, const SwitchConfig& cfg) {
    // Times and means keep 3 decimals, merge_ratio 6 (what the file always carried).
    json::Json j;
    j["schema"] = kStatsSchema;
    j["uptime_s"] = json::fixed(s.uptime_s, 3);
    j["tsc_hz"] = s.tsc_hz;
    j["simd"] = s.simd;
    j["lcores"] = s.lcores;
    j["aggregation"] = cfg.aggregation;
    j["feedback_enabled"] = cfg.feedback;
    json::Json ports = json::Json::array();
    for (const PortSnapshot& p : s.ports) {
        json::Json port;
        port["name"] = p.name;
        port["device"] = p.device;
        json_add_fields(port, port_fields(p));
        json::Json queue = json_object(queue_fields(p));
        queue["mean_depth"] = json::fixed(p.mean_depth, 3);
        queue["mean_sojourn_us"] = json::fixed(p.mean_sojourn_us, 3);
        queue["max_sojourn_us"] = json::fixed(p.max_sojourn_us, 3);
        queue["merge_ratio"] = json::fixed(p.merge_ratio, 6);
        port["queue"] = std::move(queue);
        if (!p.clusters.empty()) {
            json::Json clusters = json::Json::array();
            for (const ClusterShareSnapshot& c : p.clusters) {
                json::Json one;
                one["cluster"] = c.cluster_id;
                one["weight"] = c.weight;
                one["served_contributions"] = c.served;
                one["contended_contributions"] = c.contended;
                one["served_packets"] = c.served_packets;
                one["contended_packets"] = c.contended_packets;
                clusters.push_back(std::move(one));
            }
            port["clusters"] = std::move(clusters);
        }
        ports.push_back(std::move(port));
    }
    j["ports"] = std::move(ports);
    j["frames"] = json_object(frame_fields(s));
    j["malformed"] = json_object(malformed_fields(s));
    j["gradients"] = json_object(gradient_fields(s));
    j["feedback"] = json_object(feedback_fields(s));
    j["fdb"] = json_object(fdb_fields(s));
    j["replication"] = json_object(replication_fields(s));
    j["internal"] = json_object(internal_fields(s));
    // One line per port and per section, as before.
    return json::rows(j);
}

bool write_stats_json(const std::string& path, const SwitchSnapshot& s, const SwitchConfig& cfg,
                      std::string& error) {
    return prom::write_textfile(path, stats_to_json(s, cfg), error);  // temporary file + rename
}

// ---- Prometheus textfile ----------------------------------------------------------------------

namespace {

// shesha_<section>_<field>, "_total" appended to counters; a field named "total" is the section's
// own total (malformed.total -> shesha_malformed_total).
std::string prom_name(std::string_view section, const Field& f) {
    std::string n = fmt::format("shesha_{}", section);
    if (f.name != "total") n += "_" + f.name;
    if (f.kind == Kind::Counter && !n.ends_with("_total")) n += "_total";
    return n;
}

void prom_section(prom::TextWriter& w, std::string_view section, std::string_view json_path, const Fields& fields,
                  const prom::Labels& labels) {
    for (const Field& f : fields) {
        if (f.kind == Kind::Label) continue;
        const bool counter = f.kind == Kind::Counter;
        w.add(prom_name(section, f), counter ? prom::Type::Counter : prom::Type::Gauge,
              fmt::format("shesha-switch stats JSON {}.{} ({}; docs/switch.md)", json_path, f.name,
                          counter ? "total since start" : "current value"),
              labels, f.value);
    }
}

}  // namespace

std::string stats_to_prometheus(const SwitchSnapshot& s, const SwitchConfig& cfg, const std::string& switch_name) {
    using prom::Type;
    prom::TextWriter w;
    const prom::Labels sw_label{{"switch", switch_name}};
    w.add("shesha_switch_info", Type::Gauge, "Constant 1; labels: merge kernel (simd) and stats JSON schema",
          {{"switch", switch_name}, {"simd", s.simd}, {"schema", kStatsSchema}}, std::uint64_t{1});
    w.add("shesha_switch_uptime_seconds", Type::Gauge, "shesha-switch stats JSON uptime_s", sw_label, s.uptime_s);
    w.add("shesha_switch_tsc_hz", Type::Gauge, "shesha-switch stats JSON tsc_hz (ticks per second of *_ticks)", sw_label,
          s.tsc_hz);
    w.add("shesha_switch_lcores", Type::Gauge, "shesha-switch stats JSON lcores", sw_label, std::uint64_t{s.lcores});
    w.add("shesha_switch_aggregation_enabled", Type::Gauge, "shesha-switch stats JSON aggregation (1 = on)", sw_label,
          std::uint64_t{cfg.aggregation});
    w.add("shesha_switch_feedback_enabled", Type::Gauge, "shesha-switch stats JSON feedback_enabled (1 = on)", sw_label,
          std::uint64_t{cfg.feedback});
    for (const PortSnapshot& p : s.ports) {
        const prom::Labels labels{{"switch", switch_name}, {"port", p.name}};
        const Fields pf = port_fields(p);
        prom::Labels info = labels;
        info.emplace_back("device", p.device);
        for (const Field& f : pf)
            if (f.kind == Kind::Label) info.emplace_back(f.name, std::to_string(f.value));
        w.add("shesha_port_info", Type::Gauge, "Constant 1; labels: the port's DPDK device and ethdev port id", info,
              std::uint64_t{1});
        prom_section(w, "port", "ports[]", pf, labels);
        prom_section(w, "queue", "ports[].queue", queue_fields(p), labels);
        w.add("shesha_queue_mean_depth", Type::Gauge, "shesha-switch stats JSON ports[].queue.mean_depth (depth seen by arrivals)",
              labels, p.mean_depth);
        w.add("shesha_queue_mean_sojourn_us", Type::Gauge, "shesha-switch stats JSON ports[].queue.mean_sojourn_us", labels,
              p.mean_sojourn_us);
        w.add("shesha_queue_max_sojourn_us", Type::Gauge, "shesha-switch stats JSON ports[].queue.max_sojourn_us", labels,
              p.max_sojourn_us);
        w.add("shesha_queue_merge_ratio", Type::Gauge, "shesha-switch stats JSON ports[].queue.merge_ratio (merged / mergeable)",
              labels, p.merge_ratio);
        for (const ClusterShareSnapshot& c : p.clusters) {
            prom::Labels cl = labels;
            cl.emplace_back("cluster", std::to_string(c.cluster_id));
            w.add("shesha_port_cluster_served_contributions_total", Type::Counter,
                  "shesha-switch stats JSON ports[].clusters[].served_contributions (total since start; docs/switch.md)",
                  cl, c.served);
            w.add("shesha_port_cluster_contended_contributions_total", Type::Counter,
                  "shesha-switch stats JSON ports[].clusters[].contended_contributions: sent while two or more clusters "
                  "were backlogged (total since start; docs/switch.md)",
                  cl, c.contended);
            w.add("shesha_port_cluster_served_packets_total", Type::Counter,
                  "shesha-switch stats JSON ports[].clusters[].served_packets (total since start; docs/switch.md)", cl,
                  c.served_packets);
            w.add("shesha_port_cluster_contended_packets_total", Type::Counter,
                  "shesha-switch stats JSON ports[].clusters[].contended_packets: sent while two or more clusters were "
                  "backlogged, what scheduling: drr shares out (total since start; docs/switch.md)",
                  cl, c.contended_packets);
        }
    }
    prom_section(w, "frames", "frames", frame_fields(s), sw_label);
    prom_section(w, "malformed", "malformed", malformed_fields(s), sw_label);
    prom_section(w, "gradients", "gradients", gradient_fields(s), sw_label);
    prom_section(w, "feedback", "feedback", feedback_fields(s), sw_label);
    prom_section(w, "fdb", "fdb", fdb_fields(s), sw_label);
    prom_section(w, "replication", "replication", replication_fields(s), sw_label);
    prom_section(w, "internal", "internal", internal_fields(s), sw_label);
    return w.str();
}

}  // namespace shesha::core

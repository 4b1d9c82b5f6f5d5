// shesha-replay: runs a packet trace through the switch pipeline offline, exactly as shesha-switch
// does with one lcore on pcap ports: each round takes up to `burst` frames from every port's input
// capture in port order, forwards them, then transmits every port's batch. Writes what each port
// sent (forwarded frames and FEEDBACK) to an output capture and the counters to a JSON file whose
// keys are those of shesha-switch's stats JSON, so the two can be compared field by field
// (tests/sim/test_trace_equivalence.sh).
#include <cstdio>
#include <cstring>
#include <new>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <pcap/pcap.h>
#include <spdlog/spdlog.h>

#include "json_io.h"
#include "log_level.h"
#include "merge_kernel.h"
#include "memory_io.h"
#include "pipeline.h"
#include "stats_report.h"
#include "switch_config.h"

namespace {

using namespace shesha;

using core::MemoryFrame;
using ReplayIo = core::MemoryIo;

// Appends what each port sent this round to its output capture, in order, and frees it.
void write_sent(ReplayIo& io, const std::vector<pcap_dumper_t*>& outputs) {
    for (std::size_t port = 0; port < outputs.size(); ++port)
        for (MemoryFrame* f : io.take(port)) {
            if (outputs[port] != nullptr) {
                pcap_pkthdr h{};
                h.caplen = h.len = static_cast<bpf_u_int32>(f->bytes.size());
                pcap_dump(reinterpret_cast<u_char*>(outputs[port]), &h, f->bytes.data());
            }
            io.free(f);
        }
}

constexpr std::uint64_t kTicksPerSecond = 1'000'000;  // one tick per round (see main)

// The pipeline's counters as shesha-switch snapshots them (Switch::snapshot), so the one stats
// writer of switch/core writes the same file. No NIC here: rx_missed, rx_nombuf and tx_pending
// stay 0, and the clock is the round counter, so uptime and sojourn times count rounds.
core::SwitchSnapshot snapshot_of(const core::Pipeline<ReplayIo>& pipeline, const core::SwitchCounters& rx,
                                 std::uint64_t now, std::uint64_t ticks_per_second) {
    core::SwitchSnapshot s;
    s.tsc_hz = ticks_per_second;
    s.taken_tsc = now;
    s.uptime_s = static_cast<double>(now) / static_cast<double>(ticks_per_second);
    s.simd = std::string(core::to_string(core::active_simd()));
    s.lcores = 1;
    for (std::size_t i = 0; i < pipeline.port_count(); ++i) {
        const auto& port = pipeline.port(i);
        core::PortSnapshot ps;
        ps.name = port.name;
        ps.device = pipeline.config().ports[i].device;
        ps.port_id = static_cast<std::uint16_t>(i);
        ps.shaper_rate_bps = port.bucket.rate_bps();
        ps.counters = port.rx;
        ps.counters += port.tx;
        ps.queue = port.queue.stats();
        ps.queue_capacity = port.queue.capacity();
        ps.queue_depth = port.queue.depth();
        ps.queue_depth_bytes = port.queue.depth_bytes();
        const auto shares = port.queue.shares();
        for (std::size_t c = 0; c < shares.size() && c < core::kMaxReportedShares; ++c)
            ps.clusters.push_back({shares[c].cluster_id, shares[c].weight, shares[c].served, shares[c].contended,
                                   shares[c].served_packets, shares[c].contended_packets});
        core::derive_queue_values(ps, ticks_per_second);
        s.ports.push_back(std::move(ps));
    }
    s.counters = rx;
    s.counters += pipeline.egress();
    s.malformed_total = core::malformed_total(s.counters);
    s.fdb = pipeline.fdb().stats();
    s.fdb_size = pipeline.fdb().size();
    s.fdb_capacity = pipeline.config().fdb_capacity;
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"shesha-replay: a packet trace through the switch pipeline, offline (as shesha-switch on pcap ports)"};
    std::string config_path, stats_path;
    std::vector<std::string> inputs, outputs;
    app.add_option("-c,--config", config_path, "switch YAML (its port devices are ignored)")->required()->check(CLI::ExistingFile);
    app.add_option("--in", inputs, "PORT=FILE: the capture port PORT receives (repeatable; ports without one receive nothing)");
    app.add_option("--out", outputs, "PORT=FILE: write what port PORT sends to this capture (repeatable)");
    app.add_option("--stats-json", stats_path, "write the counters here (keys as in shesha-switch's stats JSON)");
    std::string log_level = "info";
    logging::add_log_level_option(app, log_level);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;  // --help exits 0; a bad flag is bad input, exit 2
    }
    logging::init("shesha-replay", log_level);

    core::SwitchConfig cfg;
    try {
        cfg = core::load_switch_config(config_path);
    } catch (const core::ConfigError& e) {
        std::fprintf(stderr, "shesha-replay: %s\n", e.what());
        return 2;
    }
    std::map<std::string, std::size_t> index;
    for (std::size_t i = 0; i < cfg.ports.size(); ++i) index[cfg.ports[i].name] = i;
    const auto split = [&](const std::string& spec, std::size_t& port, std::string& file) {
        const auto eq = spec.find('=');
        if (eq == std::string::npos || !index.contains(spec.substr(0, eq)) || eq + 1 == spec.size()) {
            std::fprintf(stderr, "shesha-replay: '%s' is not PORT=FILE with a port of %s\n", spec.c_str(), config_path.c_str());
            return false;
        }
        port = index[spec.substr(0, eq)];
        file = spec.substr(eq + 1);
        return true;
    };

    char err[PCAP_ERRBUF_SIZE];
    std::vector<pcap_t*> in(cfg.ports.size(), nullptr);
    ReplayIo io(cfg.ports.size());
    std::vector<pcap_dumper_t*> outputs_by_port(cfg.ports.size(), nullptr);
    pcap_t* dead = pcap_open_dead(DLT_EN10MB, 65535);
    int rc = 0;
    for (const auto& spec : inputs) {
        std::size_t port;
        std::string file;
        if (!split(spec, port, file)) return 2;
        in[port] = pcap_open_offline(file.c_str(), err);
        if (in[port] == nullptr) {
            std::fprintf(stderr, "shesha-replay: %s: %s\n", file.c_str(), err);
            return 2;
        }
    }
    for (const auto& spec : outputs) {
        std::size_t port;
        std::string file;
        if (!split(spec, port, file)) return 2;
        outputs_by_port[port] = pcap_dump_open(dead, file.c_str());
        if (outputs_by_port[port] == nullptr) {
            std::fprintf(stderr, "shesha-replay: %s: %s\n", file.c_str(), pcap_geterr(dead));
            return 2;
        }
    }

    try {
        // One tick per round: the clock only matters for aging, sojourn marking and the FEEDBACK
        // limiter, whose intervals (>= 1 us at 1 MHz) then pass between rounds as on the switch.
        core::Pipeline<ReplayIo> pipeline(cfg, kTicksPerSecond, io);
        core::SwitchCounters rx;
        std::uint64_t now = 1;
        std::vector<MemoryFrame*> burst(pipeline.burst());
        bool more = true;
        while (more) {
            more = false;
            for (std::size_t p = 0; p < in.size(); ++p) {
                std::uint32_t n = 0;
                while (in[p] != nullptr && n < pipeline.burst()) {
                    pcap_pkthdr* h;
                    const u_char* bytes;
                    const int r = pcap_next_ex(in[p], &h, &bytes);
                    if (r != 1) {
                        if (r == PCAP_ERROR) {
                            spdlog::error("reading port {}: {}", cfg.ports[p].name, pcap_geterr(in[p]));
                            rc = 1;
                        }
                        pcap_close(in[p]);
                        in[p] = nullptr;
                        break;
                    }
                    MemoryFrame* frame = io.make({bytes, bytes + h->caplen});
                    if (frame == nullptr) throw std::bad_alloc();
                    burst[n++] = frame;
                }
                if (n != 0) more = true;
                pipeline.receive_burst(rx, static_cast<std::uint16_t>(p), burst.data(), n, now);
            }
            const unsigned sent = pipeline.transmit_all(now);
            write_sent(io, outputs_by_port);
            if (sent != 0) more = true;
            for (std::size_t p = 0; p < pipeline.port_count(); ++p) more |= pipeline.port(p).queue.depth() != 0;
            pipeline.housekeeping(now);
            ++now;
        }
        write_sent(io, outputs_by_port);

        if (!stats_path.empty()) {
            const core::SwitchSnapshot snapshot = snapshot_of(pipeline, rx, now, kTicksPerSecond);
            std::string error;
            if (!core::write_stats_json(stats_path, snapshot, cfg, error)) {
                spdlog::error("{}", error);
                rc = 1;
            }
        }
    } catch (const core::ConfigError& e) {
        std::fprintf(stderr, "shesha-replay: %s: %s\n", config_path.c_str(), e.what());
        rc = 2;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "shesha-replay: out of memory\n");
        rc = 1;
    }
    for (auto* d : outputs_by_port)
        if (d != nullptr) pcap_dump_close(d);
    for (auto* p : in)
        if (p != nullptr) pcap_close(p);
    pcap_close(dead);
    return rc;
}

// shesha-replay: runs a packet trace through the switch pipeline offline, exactly as shesha-switch
// does with one lcore on pcap ports: each round takes up to `burst` frames from every port's input
// capture in port order, forwards them, then transmits every port's batch. Writes what each port
// sent (forwarded frames and FEEDBACK) to an output capture and the counters to a JSON file whose
// keys are those of shesha-switch's stats JSON, so the two can be compared field by field
// (tests/sim/test_trace_equivalence.sh).
#include <cstdio>
#include <cstring>
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
#include "pipeline.h"
#include "switch_config.h"

namespace {

using namespace shesha;

struct Frame {
    std::vector<std::uint8_t> bytes;
};

// Frames live in a deque-like store of owned buffers; a handle is a pointer to one.
struct ReplayIo {
    using Handle = Frame*;
    static std::uint8_t* data(Frame* f) noexcept { return f->bytes.data(); }
    static std::uint32_t pkt_len(Frame* f) noexcept { return static_cast<std::uint32_t>(f->bytes.size()); }
    static std::uint32_t data_len(Frame* f) noexcept { return static_cast<std::uint32_t>(f->bytes.size()); }
    static bool multi_segment(Frame*) noexcept { return false; }
    static void prefetch(Frame*) noexcept {}
    void free_bulk(Frame** f, std::uint32_t n) noexcept {
        for (std::uint32_t i = 0; i < n; ++i) free(f[i]);
    }
    void free(Frame* f) noexcept { delete f; }
    Frame* copy(Frame* f) noexcept { return new (std::nothrow) Frame{f->bytes}; }
    Frame* alloc(std::uint32_t len, std::uint8_t** bytes) noexcept {
        auto* f = new (std::nothrow) Frame;
        if (f == nullptr) return nullptr;
        f->bytes.assign(len, 0);
        *bytes = f->bytes.data();
        return f;
    }
    bool send_now(std::uint16_t port, Frame* f) noexcept {
        write(port, f);
        delete f;
        return true;
    }
    std::uint16_t tx_burst(std::uint16_t port, Frame** f, std::uint16_t n) noexcept {
        for (std::uint16_t i = 0; i < n; ++i) {
            write(port, f[i]);
            delete f[i];
        }
        return n;
    }
    void write(std::uint16_t port, const Frame* f) noexcept {
        if (outputs[port] == nullptr) return;
        pcap_pkthdr h{};
        h.caplen = h.len = static_cast<bpf_u_int32>(f->bytes.size());
        pcap_dump(reinterpret_cast<u_char*>(outputs[port]), &h, f->bytes.data());
    }
    std::vector<pcap_dumper_t*> outputs;
};

json::Json fields(std::initializer_list<std::pair<const char*, std::uint64_t>> list) {
    json::Json j = json::Json::object();
    for (const auto& [k, v] : list) j[k] = v;
    return j;
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
    ReplayIo io;
    io.outputs.assign(cfg.ports.size(), nullptr);
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
        io.outputs[port] = pcap_dump_open(dead, file.c_str());
        if (io.outputs[port] == nullptr) {
            std::fprintf(stderr, "shesha-replay: %s: %s\n", file.c_str(), pcap_geterr(dead));
            return 2;
        }
    }

    try {
        // One tick per round: the clock only matters for aging, sojourn marking and the FEEDBACK
        // limiter, whose intervals (>= 1 us at 1 MHz) then pass between rounds as on the switch.
        core::Pipeline<ReplayIo> pipeline(cfg, 1'000'000, io);
        core::SwitchCounters rx;
        std::uint64_t now = 1;
        std::vector<Frame*> burst(pipeline.burst());
        bool more = true;
        std::uint64_t rounds = 0;
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
                    burst[n++] = new Frame{{bytes, bytes + h->caplen}};
                }
                if (n != 0) more = true;
                pipeline.receive_burst(rx, static_cast<std::uint16_t>(p), burst.data(), n, now);
            }
            const unsigned sent = pipeline.transmit_all(now);
            if (sent != 0) more = true;
            for (std::size_t p = 0; p < pipeline.port_count(); ++p) more |= pipeline.port(p).queue.depth() != 0;
            pipeline.housekeeping(now);
            ++now;
            ++rounds;
        }

        if (!stats_path.empty()) {
            json::Json out;
            out["rounds"] = rounds;
            out["ports"] = json::Json::array();
            // Every counter of the pipeline's tables, under the names shesha-switch's stats use.
            for (std::size_t p = 0; p < pipeline.port_count(); ++p) {
                const auto& port = pipeline.port(p);
                core::PortCounters c = port.rx;
                c += port.tx;
                json::Json j;
                j["name"] = port.name;
                for (std::size_t i = 0; i < core::PortCounters::kSize; ++i) j[std::string(core::kPortCounterNames[i].key)] = c.values[i];
                const auto& q = port.queue.stats();
                j["queue"] = fields({{"enqueued", q.enqueued}, {"merged", q.merged}, {"bytes_saved", q.bytes_saved},
                                     {"merge_refused", q.merge_refused}, {"mergeable_arrivals", q.mergeable_arrivals},
                                     {"dropped", q.dropped}, {"dequeued", q.dequeued}, {"marked", q.marked},
                                     {"ecn_ce_set", q.ecn_ce_set}});
                out["ports"].push_back(std::move(j));
            }
            core::SwitchCounters sc = rx;
            sc += pipeline.egress();
            for (std::size_t i = 0; i < core::SwitchCounters::kSize; ++i) {
                const auto& n = core::kSwitchCounterNames[i];
                out[std::string(n.section)][std::string(n.key)] = sc.values[i];
            }
            out["malformed"]["total"] = core::malformed_total(sc);
            out["frames"]["malformed"] = core::malformed_total(sc);
            out["gradients"]["valid_shesha"] = sc[core::SwitchCounter::Shesha];
            out["fdb"] = fields({{"learned", pipeline.fdb().stats().learned}, {"moved", pipeline.fdb().stats().moved},
                                 {"size", pipeline.fdb().size()}});
            std::string error;
            if (!json::write_text_file(stats_path, json::rows(out), error)) {
                spdlog::error("{}", error);
                rc = 1;
            }
        }
    } catch (const core::ConfigError& e) {
        std::fprintf(stderr, "shesha-replay: %s: %s\n", config_path.c_str(), e.what());
        rc = 2;
    }
    for (auto* d : io.outputs)
        if (d != nullptr) pcap_dump_close(d);
    for (auto* p : in)
        if (p != nullptr) pcap_close(p);
    pcap_close(dead);
    return rc;
}

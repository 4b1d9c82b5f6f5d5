// `shesha-bench forward`: packet forwarding of the real shesha-switch binary against dpdk-testpmd
// io forwarding, both as separate DPDK processes on the same ports, one forwarding lcore each, run
// one after the other in the same invocation.
//
// Both are measured the same way, from outside: once the process forwards, the benchmark reads the
// ports' counters twice through DPDK telemetry (/ethdev/stats over the process's telemetry socket)
// with a fixed window in between, so EAL start-up and shut-down never count.
//
//   (a) 64 B frames, two net_null ports (RX makes all-zero frames as fast as asked, TX frees them):
//       shesha floods them (it never learns the all-zero MAC) to the other port, testpmd io-forwards
//       port pairs. Also 64 B UDP frames between two real unicast hosts from net_pcap replays.
//   (b) 1 KB fp32 GRADIENTs from two net_pcap ports replaying crafted pcaps (infinite_rx; TX drops):
//       consecutive frames come in pairs with the same (cluster, chunk, version) from two members,
//       so half of the arrivals can merge into the packet waiting in the egress queue.
#include <fmt/core.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <yaml-cpp/yaml.h>

#include "bench_frames.h"
#include "bench_main.h"
#include "bench_util.h"
#include "protocol.h"

namespace shesha::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr std::uint16_t kGradientElems = 256;  // 1 KB of fp32
constexpr int kPcapFrames = 256;               // a multiple of the burst (32): pairs stay in one burst
constexpr const char* kForwardLcore = "1";     // both programs forward on this CPU

// ---- child processes ---------------------------------------------------------------------------

class Child {
public:
    Child(const std::vector<std::string>& argv, const fs::path& log) : log_(log) {
        std::vector<char*> args;
        for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        pid_ = ::fork();
        if (pid_ < 0) throw std::runtime_error(fmt::format("fork: {}", std::strerror(errno)));
        if (pid_ == 0) {
            // stdin from /dev/null, stdout+stderr to the log. testpmd with --stats-period never reads stdin.
            if (std::freopen("/dev/null", "r", stdin) == nullptr ||
                std::freopen(log.c_str(), "w", stdout) == nullptr || ::dup2(STDOUT_FILENO, STDERR_FILENO) < 0) {
                ::_exit(126);
            }
            ::execvp(args[0], args.data());
            std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
            ::_exit(127);
        }
    }
    ~Child() { stop(); }
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;

    bool running() {
        if (pid_ <= 0) return false;
        int st = 0;
        const pid_t r = ::waitpid(pid_, &st, WNOHANG);
        if (r == 0) return true;
        pid_ = -1;
        exit_status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return false;
    }

    // SIGINT (both programs shut down cleanly on it), then SIGKILL if it lingers. Returns the exit status.
    int stop() {
        if (!running()) return exit_status_;
        ::kill(pid_, SIGINT);
        const auto deadline = Clock::now() + std::chrono::seconds(10);
        while (running() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (running()) {
            ::kill(pid_, SIGKILL);
            int st = 0;
            ::waitpid(pid_, &st, 0);
            pid_ = -1;
            exit_status_ = 137;
        }
        return exit_status_;
    }

    std::string log_tail(std::size_t max_lines = 12) const {
        std::ifstream in(log_);
        std::vector<std::string> lines;
        std::string line;
        while (std::getline(in, line)) lines.push_back(line);
        std::string out;
        for (std::size_t i = lines.size() > max_lines ? lines.size() - max_lines : 0; i < lines.size(); ++i) {
            out += "    " + lines[i] + "\n";
        }
        return out;
    }

private:
    pid_t pid_ = -1;
    int exit_status_ = -1;
    fs::path log_;
};

// ---- DPDK telemetry client ---------------------------------------------------------------------

fs::path telemetry_socket(const std::string& file_prefix) {
    // Same rule as EAL's runtime directory.
    fs::path base = "/var/run/dpdk";
    if (::geteuid() != 0) {
        const char* xdg = std::getenv("XDG_RUNTIME_DIR");
        base = fs::path(xdg ? xdg : "/tmp") / "dpdk";
    }
    return base / file_prefix / "dpdk_telemetry.v2";
}

class Telemetry {
public:
    ~Telemetry() {
        if (fd_ >= 0) ::close(fd_);
    }
    bool connect(const fs::path& path) {
        fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
        if (fd_ < 0) return false;
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
        if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
            ::close(fd_);
            fd_ = -1;
            return false;
        }
        return !receive().empty();  // the server greets with its version and limits
    }
    std::string query(const std::string& cmd) {
        if (::send(fd_, cmd.data(), cmd.size(), 0) != static_cast<ssize_t>(cmd.size())) return {};
        return receive();
    }

private:
    std::string receive() {
        std::string buf(64 * 1024, '\0');
        const ssize_t n = ::recv(fd_, buf.data(), buf.size(), 0);
        if (n <= 0) return {};
        buf.resize(static_cast<std::size_t>(n));
        return buf;
    }
    int fd_ = -1;
};

// The integer after "key": in a flat telemetry reply; 0 if absent.
std::uint64_t json_uint(const std::string& json, const std::string& key) {
    const std::string needle = "\"" + key + "\":";
    const auto pos = json.find(needle);
    if (pos == std::string::npos) return 0;
    return std::strtoull(json.c_str() + pos + needle.size(), nullptr, 10);
}

struct PortTotals {
    std::uint64_t rx_packets = 0, tx_packets = 0, rx_bytes = 0, tx_bytes = 0;
    Clock::time_point at;
};

bool read_totals(Telemetry& tel, int ports, PortTotals& out) {
    out = PortTotals{};
    for (int p = 0; p < ports; ++p) {
        const std::string r = tel.query(fmt::format("/ethdev/stats,{}", p));
        if (r.find("\"ipackets\"") == std::string::npos) return false;
        out.rx_packets += json_uint(r, "ipackets");
        out.tx_packets += json_uint(r, "opackets");
        out.rx_bytes += json_uint(r, "ibytes");
        out.tx_bytes += json_uint(r, "obytes");
    }
    out.at = Clock::now();
    return true;
}

struct Rates {
    bool ok = false;
    std::string error;
    double rx_mpps = 0, tx_mpps = 0;
};

// EAL leaves its runtime directory (config and fbarray files, several MB) behind after exit.
struct RuntimeDirCleanup {
    fs::path dir;
    ~RuntimeDirCleanup() {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
};

// Starts argv, waits until it forwards, measures rx/tx packet rates over `seconds`, stops it.
Rates measure_process(const std::vector<std::string>& argv, const std::string& file_prefix, int ports,
                      double seconds, const fs::path& log) {
    Rates rates;
    const RuntimeDirCleanup cleanup{telemetry_socket(file_prefix).parent_path()};  // runs after ~Child
    Child child(argv, log);
    Telemetry tel;
    const fs::path sock = telemetry_socket(file_prefix);
    const auto start_deadline = Clock::now() + std::chrono::seconds(30);
    bool connected = false;
    while (Clock::now() < start_deadline && child.running()) {
        if (fs::exists(sock) && tel.connect(sock)) {
            connected = true;
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!connected) {
        const bool died = !child.running();
        rates.error = fmt::format("{} {}; log {}:\n{}", argv[0],
                                  died ? "exited before its telemetry socket appeared" : "telemetry socket never appeared",
                                  log.string(), child.log_tail());
        return rates;
    }
    // Wait for traffic to flow, then a short warm-up so caches, FDB and queues are in steady state.
    PortTotals a, b;
    const auto flow_deadline = Clock::now() + std::chrono::seconds(15);
    while (Clock::now() < flow_deadline && child.running()) {
        // Ports are attached after EAL (and its telemetry) start: until then the query fails.
        if (read_totals(tel, ports, a) && a.rx_packets > 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (a.rx_packets == 0) {
        rates.error = fmt::format("{} received nothing; log {}:\n{}", argv[0], log.string(), child.log_tail());
        return rates;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    if (!read_totals(tel, ports, a)) {
        rates.error = "telemetry query failed";
        return rates;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    if (!read_totals(tel, ports, b)) {
        rates.error = "telemetry query failed";
        return rates;
    }
    const double dt = std::chrono::duration<double>(b.at - a.at).count();
    rates.rx_mpps = static_cast<double>(b.rx_packets - a.rx_packets) / dt / 1e6;
    rates.tx_mpps = static_cast<double>(b.tx_packets - a.tx_packets) / dt / 1e6;
    const int status = child.stop();
    rates.ok = true;
    if (status != 0) {
        rates.error = fmt::format("{} exited with status {} after the measurement; log {}:\n{}", argv[0], status,
                                  log.string(), child.log_tail());
    }
    return rates;
}

// ---- shesha-switch's final statistics -------------------------------------------------------------

struct SwitchTotals {
    bool ok = false;
    std::uint64_t rx = 0, tx = 0, filtered = 0, flooded = 0, merged = 0, mergeable = 0, queue_drops = 0;
};

// Whole-run totals from the stats JSON shesha-switch writes at exit (JSON is YAML flow syntax).
SwitchTotals read_switch_stats(const fs::path& path) {
    SwitchTotals t;
    try {
        const YAML::Node root = YAML::LoadFile(path.string());
        for (const YAML::Node& port : root["ports"]) {
            t.rx += port["rx_packets"].as<std::uint64_t>();
            t.tx += port["tx_packets"].as<std::uint64_t>();
            t.filtered += port["filtered"].as<std::uint64_t>();
            t.flooded += port["flooded"].as<std::uint64_t>();
            t.merged += port["queue"]["merged"].as<std::uint64_t>();
            t.mergeable += port["queue"]["mergeable_arrivals"].as<std::uint64_t>();
            t.queue_drops += port["queue"]["dropped"].as<std::uint64_t>();
        }
        t.ok = true;
    } catch (const std::exception&) {
        t.ok = false;  // missing or different schema: the caller reports telemetry numbers only
    }
    return t;
}

// ---- the two programs ----------------------------------------------------------------------------

std::vector<std::string> testpmd_argv(const ForwardOptions& fwd, const std::string& prefix,
                                      const std::vector<std::string>& vdevs) {
    std::vector<std::string> argv = {fwd.testpmd_binary, "-l", fmt::format("0,{}", kForwardLcore), "--no-huge", "-m",
                                     "512", "--no-pci", "--file-prefix", prefix};
    for (const auto& v : vdevs) argv.push_back("--vdev=" + v);
    // --stats-period keeps testpmd running without reading stdin; a long period keeps it quiet.
    for (const char* a : {"--", "--total-num-mbufs=32768", "--forward-mode=io", "--stats-period=3600",
                          "--no-lsc-interrupt"}) {
        argv.emplace_back(a);
    }
    return argv;
}

struct SwitchYaml {
    std::vector<std::string> devices;
    bool gradients = false;  // add the bench cluster and its members
};

std::string switch_config(const SwitchYaml& y, const std::string& prefix, const fs::path& stats_json) {
    std::string out = fmt::format(
        "# written by shesha-bench forward\n"
        "eal: [\"--no-huge\", \"-m\", \"512\", \"--no-pci\", \"-l\", \"{}\", \"--file-prefix\", \"{}\"]\n"
        "lcores: 1\nidle_backoff_us: 0\nburst: 32\nmbufs: 16384\nports:\n",
        kForwardLcore, prefix);
    for (std::size_t i = 0; i < y.devices.size(); ++i) {
        out += fmt::format("  - {{name: p{}, device: \"{}\"}}\n", i, y.devices[i]);
    }
    out += "aggregation:\n  enabled: true\n  non_member: forward\n";
    if (y.gradients) {
        out += "  clusters:\n    - {id: 1, members: [10.0.0.1, 10.0.0.2, 10.0.0.3, 10.0.0.4]}\n";
    } else {
        out += "  clusters: []\n";
    }
    out += fmt::format("stats: {{interval_s: 0, json: \"{}\"}}\ntelemetry: true\n", stats_json.string());
    return out;
}

// Pairs of same-key GRADIENTs from two members of cluster 1 (workers w0 and w0+1), toward one learner.
std::vector<std::vector<std::uint8_t>> gradient_pairs(std::uint32_t first_worker, std::uint8_t learner) {
    std::vector<std::vector<std::uint8_t>> frames;
    for (int i = 0; i < kPcapFrames; ++i) {
        GradientFrameSpec spec;
        spec.worker_id = first_worker + static_cast<std::uint32_t>(i % 2);
        spec.ep = bench_endpoints(spec.worker_id);
        spec.ep.dst_mac[5] = learner;
        spec.ep.dst_ip = kLearnerIp + learner;
        spec.cluster_id = 1;
        spec.chunk_count = kPcapFrames / 2;
        spec.chunk_index = static_cast<std::uint16_t>(i / 2);
        spec.seq = static_cast<std::uint32_t>(i / 2);
        spec.elem_count = kGradientElems;
        std::vector<std::uint8_t> buf(2048);
        buf.resize(build_gradient_frame(spec, buf));
        if (buf.empty()) throw std::runtime_error("cannot build a gradient frame");
        frames.push_back(std::move(buf));
    }
    return frames;
}

void write_text(const fs::path& path, const std::string& text) {
    std::ofstream out(path);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + path.string());
}

// 64 B UDP frames to a non-Shesha port between two hosts, one on each side: host `from` sends to
// host `to`, so once both are learned every frame is a known unicast forward.
std::vector<std::vector<std::uint8_t>> small_frames(std::uint8_t from, std::uint8_t to) {
    std::vector<std::vector<std::uint8_t>> frames;
    for (int i = 0; i < kPcapFrames; ++i) {
        frame::Endpoints ep;
        ep.src_mac = {0x02, 0x00, 0x00, 0x00, 0x03, from};
        ep.dst_mac = {0x02, 0x00, 0x00, 0x00, 0x03, to};
        ep.src_ip = 0x0A000100u + from;
        ep.dst_ip = 0x0A000100u + to;
        ep.src_port = static_cast<std::uint16_t>(5000 + i);
        ep.dst_port = 9;  // discard: not Shesha
        std::vector<std::uint8_t> buf(64, 0);
        constexpr std::size_t kPayload = 64 - frame::kUdpPayloadOffset;  // 64 B frames, as net_null makes
        if (frame::build_udp_frame(ep, kPayload, buf) != 64) throw std::runtime_error("cannot build a 64 B frame");
        frames.push_back(std::move(buf));
    }
    return frames;
}

// One workload run by both programs, alternately, `rounds` times. Rates are medians over rounds;
// ratios are medians of the per-round (paired) ratios, so a burst of load from another process
// during one window moves them less.
struct PairResult {
    Rates testpmd, shesha;
    double fwd_ratio = std::nan(""), rx_ratio = std::nan("");
    SwitchTotals totals;  // shesha-switch's counters from the last round
};

PairResult run_pair(const ForwardOptions& fwd, const fs::path& dir, const std::string& tag, const std::string& name,
                    const std::vector<std::string>& vdevs, bool gradients, double secs, int rounds) {
    PairResult r;
    const fs::path yaml = dir / ("switch-" + name + ".yaml"), stats = dir / ("stats-" + name + ".json");
    write_text(yaml, switch_config({vdevs, gradients}, tag + "-sw-" + name, stats));
    std::vector<double> tp_rx, tp_tx, sw_rx, sw_tx, fwd_ratio, rx_ratio;
    for (int round = 0; round < rounds; ++round) {
        const Rates tp = measure_process(testpmd_argv(fwd, tag + "-tp-" + name, vdevs), tag + "-tp-" + name, 2, secs,
                                         dir / ("testpmd-" + name + ".log"));
        const Rates sw = measure_process({fwd.switch_binary, "-c", yaml.string()}, tag + "-sw-" + name, 2, secs,
                                         dir / ("switch-" + name + ".log"));
        r.testpmd.error = tp.error;
        r.shesha.error = sw.error;
        if (tp.ok) {
            tp_rx.push_back(tp.rx_mpps);
            tp_tx.push_back(tp.tx_mpps);
        }
        if (sw.ok) {
            sw_rx.push_back(sw.rx_mpps);
            sw_tx.push_back(sw.tx_mpps);
            r.totals = read_switch_stats(stats);
        }
        if (tp.ok && sw.ok) {
            fwd_ratio.push_back(sw.tx_mpps / tp.tx_mpps);
            rx_ratio.push_back(sw.rx_mpps / tp.rx_mpps);
        }
        if (!tp.ok || !sw.ok || !tp.error.empty() || !sw.error.empty()) break;  // logs keep the first failure
    }
    r.testpmd.ok = !tp_rx.empty();
    r.testpmd.rx_mpps = median(tp_rx);
    r.testpmd.tx_mpps = median(tp_tx);
    r.shesha.ok = !sw_rx.empty();
    r.shesha.rx_mpps = median(sw_rx);
    r.shesha.tx_mpps = median(sw_tx);
    r.fwd_ratio = median(fwd_ratio);
    r.rx_ratio = median(rx_ratio);
    return r;
}

std::string pct(std::uint64_t part, std::uint64_t whole) {
    return whole ? fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole)) : "-";
}

}  // namespace

ForwardResult run_forward_bench(const RunOptions& opt, const ForwardOptions& fwd) {
    ForwardResult result;
    std::vector<Table>& tables = result.tables;
    if (!fs::exists(fwd.switch_binary)) {
        result.failed = true;
        result.reason = fmt::format("shesha-switch not found at {} (build it, or use --switch)", fwd.switch_binary);
        return result;
    }
    const bool own_dir = fwd.work_dir.empty();
    fs::path dir = fwd.work_dir;
    if (own_dir) {
        std::string tmpl = (fs::temp_directory_path() / "shesha-bench-XXXXXX").string();
        if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
        dir = tmpl;
    } else {
        fs::create_directories(dir);
    }
    const std::string tag = fmt::format("shesha-bench-{}", ::getpid());
    const double secs = opt.seconds;
    bool failed = false;
    auto note_failure = [&](Table& t, const char* who, const Rates& r) {
        if (r.ok && r.error.empty()) return;
        failed = true;
        t.add_note(fmt::format("{} failed: {}", who, r.error));
    };

    // (a) 64 B non-Shesha frames between two net_null ports.
    const int rounds = opt.forward_rounds;
    const PairResult a = run_pair(fwd, dir, tag, "null", {"net_null0", "net_null1"}, false, secs, rounds);
    if (!a.testpmd.ok) {
        // testpmd is plain DPDK: if it cannot run, DPDK cannot run here at all.
        result.skipped = true;
        result.reason = "dpdk-testpmd could not run (EAL cannot init here?): " + a.testpmd.error;
        if (own_dir) fs::remove_all(dir);
        return result;
    }
    // (a') the same frame size from pcap replays with real unicast addresses.
    const fs::path small0 = dir / "small0.pcap", small1 = dir / "small1.pcap";
    if (!write_pcap(small0, small_frames(1, 2)) || !write_pcap(small1, small_frames(2, 1))) {
        throw std::runtime_error("cannot write pcaps in " + dir.string());
    }
    const PairResult a2 = run_pair(fwd, dir, tag, "pcap64",
                                   {fmt::format("net_pcap0,rx_pcap={},infinite_rx=1", small0.string()),
                                    fmt::format("net_pcap1,rx_pcap={},infinite_rx=1", small1.string())},
                                   false, secs, rounds);

    Table ta("forward (a): 64 B non-Shesha frames, 2 ports, 1 forwarding lcore",
             {"ports", "program", "rx Mpps", "fwd Mpps", "fwd x testpmd"});
    for (const auto* pr : {&a, &a2}) {
        const std::string ports = pr == &a ? "net_null" : "net_pcap replay";
        if (pr->testpmd.ok) ta.add_row({ports, "dpdk-testpmd io", pr->testpmd.rx_mpps, pr->testpmd.tx_mpps, 1.0});
        if (pr->shesha.ok) {
            ta.add_row({ports, "shesha-switch", pr->shesha.rx_mpps, pr->shesha.tx_mpps, pr->fwd_ratio});
        }
        note_failure(ta, ("dpdk-testpmd on " + ports).c_str(), pr->testpmd);
        note_failure(ta, ("shesha-switch on " + ports).c_str(), pr->shesha);
        if (pr->totals.ok && pr->totals.filtered > 0) {
            ta.add_note(fmt::format("shesha-switch on {}: {} of received frames filtered (destination learned on the "
                                    "ingress port), {} flooded",
                                    ports, pct(pr->totals.filtered, pr->totals.rx), pct(pr->totals.flooded, pr->totals.rx)));
        }
    }
    ta.add_note(fmt::format("{} round(s) of {:.1f} s windows, testpmd and shesha alternating, read via /ethdev/stats "
                            "telemetry after a warm-up; medians; ratio = median of per-round ratios; fwd = packets "
                            "sent on both ports; target: shesha >= 0.7x testpmd",
                            rounds, secs));
    ta.print();
    tables.push_back(std::move(ta));

    // (b) 1 KB gradients from pcap replays, half of them mergeable.
    const fs::path pcap0 = dir / "gradients0.pcap", pcap1 = dir / "gradients1.pcap";
    const auto frames0 = gradient_pairs(0, 1), frames1 = gradient_pairs(2, 2);
    if (!write_pcap(pcap0, frames0) || !write_pcap(pcap1, frames1)) {
        throw std::runtime_error("cannot write pcaps in " + dir.string());
    }
    const double frame_bytes = static_cast<double>(frames0.front().size());
    const PairResult b = run_pair(fwd, dir, tag, "gradients",
                                  {fmt::format("net_pcap0,rx_pcap={},infinite_rx=1", pcap0.string()),
                                   fmt::format("net_pcap1,rx_pcap={},infinite_rx=1", pcap1.string())},
                                  true, secs, rounds);
    Table tb(fmt::format("forward (b): {} B GRADIENT frames (1 KB fp32), 2 net_pcap replay ports, pairs mergeable",
                         frames0.front().size()),
             {"program", "rx Mpps", "rx Gbps", "tx Mpps", "merged frac", "rx x testpmd"});
    const auto gbps = [&](double mpps) { return mpps * frame_bytes * 8 / 1e3; };
    if (b.testpmd.ok) tb.add_row({"dpdk-testpmd io", b.testpmd.rx_mpps, gbps(b.testpmd.rx_mpps), b.testpmd.tx_mpps, 0.0, 1.0});
    if (b.shesha.ok) {
        // Whole-run merge fraction from the switch's own counters when available, else 1 - tx/rx
        // over the window (every arrival either leaves or merges: unshaped queues never fill).
        const double frac = b.totals.ok && b.totals.mergeable
                                ? static_cast<double>(b.totals.merged) / static_cast<double>(b.totals.mergeable)
                                : 1.0 - b.shesha.tx_mpps / b.shesha.rx_mpps;
        tb.add_row({"shesha-switch", b.shesha.rx_mpps, gbps(b.shesha.rx_mpps), b.shesha.tx_mpps, frac,
                    b.rx_ratio});
        if (b.totals.ok && b.totals.queue_drops) {
            tb.add_note(fmt::format("shesha-switch queue drops: {}", b.totals.queue_drops));
        }
    }
    note_failure(tb, "dpdk-testpmd", b.testpmd);
    note_failure(tb, "shesha-switch", b.shesha);
    tb.add_note("rx Gbps = frame bytes (no preamble/FCS) x rx rate; merged frac = merged / mergeable arrivals (switch "
                "stats); pcap replay copies each frame into a fresh mbuf, for both programs");
    tb.print();
    tables.push_back(std::move(tb));

    if (own_dir && !failed) fs::remove_all(dir);
    if (failed) {
        result.failed = true;
        result.reason = "a forwarding run failed; logs kept in " + dir.string();
    }
    return result;
}

}  // namespace shesha::bench

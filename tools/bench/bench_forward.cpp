// `shesha-bench forward`: packet forwarding of the real shesha-switch binary against reference
// switches on the same DPDK ports, as separate processes, interleaved round by round in the same
// invocation:
//
//   testpmd-io    dpdk-testpmd --forward-mode=io (touches no packet data)
//   testpmd-mac   dpdk-testpmd --forward-mode=mac (rewrites both Ethernet addresses of every frame)
//   ovs           OVS-DPDK (Debian's openvswitch-switch-dpdk) with the NORMAL action (MAC learning),
//                 one PMD core, a private ovsdb and run directory, the same vdevs as type=dpdk ports
//   shesha        shesha-switch
//
// Every program is measured the same way, from outside: once it forwards, the benchmark reads the
// ports' counters twice through DPDK telemetry (/ethdev/stats over the process's telemetry socket,
// which ovs-vswitchd-dpdk has too) with a fixed window in between, so start-up and shut-down never
// count.
//
// Workloads (docs/benchmarks.md, "Forwarding against testpmd and OVS-DPDK"):
//   null64   64 B frames from two net_null ports; also the 1-vs-2 forwarding core scaling arms.
//   pcap64   64 B UDP frames between two real unicast hosts from net_pcap replays.
//   grad1k   1114 B frames carrying 1 KB fp32 GRADIENTs, half of the arrivals mergeable.
//   grad8k   8282 B frames carrying 8 KB fp32 GRADIENTs (2048 elements), half mergeable, on ports
//            and mbufs sized for 9000-byte MTU frames.
//   model16, model64  1114 B MODEL chunks from a learner to its cluster's group, replicated by the
//            switch to 16 or 64 members behind the other port (they join once, by model request):
//            MODEL frames sent per second against testpmd io forwarding the same frames 1:1.
#include <fmt/core.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>

#include <spdlog/spdlog.h>

#include "bench_frames.h"
#include "bench_main.h"
#include "bench_util.h"
#include "protocol.h"

namespace shesha::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kPcapFrames = 256;            // a multiple of the burst (32): pairs stay in one burst
constexpr int kForwardCpu = 1;              // every program forwards on this CPU (1-core arms)
constexpr std::uint16_t kJumboMtu = 9000;   // grad8k ports
constexpr unsigned kJumboMbufSize = 9344;   // data room incl. 128 B headroom: holds a 9018-byte frame

// ---- interruption: clean up children, runtime dirs and OVS state on SIGINT/SIGTERM/SIGHUP ------

volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_signal(int) { g_interrupted = 1; }

struct Interrupted : std::runtime_error {
    Interrupted() : std::runtime_error("interrupted by a signal; children stopped and cleaned up") {}
};

void check_interrupt() {
    if (g_interrupted) throw Interrupted();
}

// Sleeps in short slices so a signal stops the benchmark within ~20 ms (and RAII cleans up).
void nap(std::chrono::duration<double> d) {
    const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(d);
    while (Clock::now() < until) {
        check_interrupt();
        std::this_thread::sleep_for(std::min<Clock::duration>(until - Clock::now(), std::chrono::milliseconds(20)));
    }
    check_interrupt();
}

class SignalGuard {
public:
    SignalGuard() {
        g_interrupted = 0;
        struct sigaction sa {};
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &sa, &old_[i]);
    }
    ~SignalGuard() {
        for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
    }
    SignalGuard(const SignalGuard&) = delete;
    SignalGuard& operator=(const SignalGuard&) = delete;

private:
    static constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction old_[3] {};
};

// ---- child processes ---------------------------------------------------------------------------

class Child {
public:
    // env: extra NAME=VALUE entries for the child; append: add to the log instead of truncating it.
    Child(const std::vector<std::string>& argv, const fs::path& log, const std::vector<std::string>& env = {},
          bool append = false)
        : log_(log), name_(argv.empty() ? "" : argv[0]) {
        std::vector<char*> args;
        for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        // The child's environment, built before fork: ours, with `env`'s names replaced.
        std::vector<char*> envp;
        for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
            const std::string_view var(*e);
            const bool replaced = std::any_of(env.begin(), env.end(), [&](const std::string& x) {
                const auto eq = x.find('=');
                return var.size() > eq && var.substr(0, eq + 1) == std::string_view(x).substr(0, eq + 1);
            });
            if (!replaced) envp.push_back(*e);
        }
        for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
        envp.push_back(nullptr);
        pid_ = ::fork();
        if (pid_ < 0) throw std::runtime_error(fmt::format("fork: {}", std::strerror(errno)));
        if (pid_ == 0) {
            // stdin from /dev/null, stdout+stderr to the log. testpmd with --stats-period never reads stdin.
            if (std::freopen("/dev/null", "r", stdin) == nullptr ||
                std::freopen(log.c_str(), append ? "a" : "w", stdout) == nullptr ||
                ::dup2(STDOUT_FILENO, STDERR_FILENO) < 0) {
                ::_exit(126);
            }
            ::execvpe(args[0], args.data(), envp.data());
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

    // `sig` (SIGINT: testpmd and shesha-switch shut down cleanly on it), then SIGKILL if it
    // lingers. Returns the exit status.
    int stop(int sig = SIGINT) {
        if (!running()) return exit_status_;
        ::kill(pid_, sig);
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

    // Waits up to `timeout` for the child to exit by itself; kills it after that. Exit status.
    int wait(std::chrono::duration<double> timeout) {
        const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(timeout);
        while (running() && Clock::now() < deadline) {
            if (g_interrupted) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        if (running()) return stop(SIGKILL) == 137 ? 124 : exit_status_;
        return exit_status_;
    }

    std::string log_tail(std::size_t max_lines = 12) const { return tail_of(log_, max_lines); }
    const std::string& name() const { return name_; }

    static std::string tail_of(const fs::path& path, std::size_t max_lines) {
        std::ifstream in(path);
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
    std::string name_;
};

// Runs a short command to completion (output appended to `log`). Exit status; 124 on timeout.
int run_command(const std::vector<std::string>& argv, const fs::path& log, const std::vector<std::string>& env,
                double timeout_s = 60) {
    {
        std::ofstream l(log, std::ios::app);
        std::string line = "$";
        for (const auto& a : argv) line += " " + a;
        l << line << "\n";
    }
    Child c(argv, log, env, /*append=*/true);
    const int st = c.wait(std::chrono::duration<double>(timeout_s));
    check_interrupt();
    return st;
}

std::optional<fs::path> find_in_path(const std::string& name) {
    if (name.find('/') != std::string::npos) return fs::exists(name) ? std::optional<fs::path>(name) : std::nullopt;
    const char* path = std::getenv("PATH");
    std::stringstream ss(path ? path : "/usr/sbin:/usr/bin:/sbin:/bin");
    std::string dir;
    while (std::getline(ss, dir, ':')) {
        const fs::path p = fs::path(dir.empty() ? "." : dir) / name;
        if (::access(p.c_str(), X_OK) == 0) return p;
    }
    return std::nullopt;
}

// ---- DPDK telemetry client ---------------------------------------------------------------------

fs::path runtime_dir(const std::string& file_prefix) {
    // Same rule as EAL's runtime directory.
    fs::path base = "/var/run/dpdk";
    if (::geteuid() != 0) {
        const char* xdg = std::getenv("XDG_RUNTIME_DIR");
        base = fs::path(xdg ? xdg : "/tmp") / "dpdk";
    }
    return base / file_prefix;
}
fs::path telemetry_socket(const std::string& file_prefix) { return runtime_dir(file_prefix) / "dpdk_telemetry.v2"; }

class Telemetry {
public:
    ~Telemetry() {
        if (fd_ >= 0) ::close(fd_);
    }
    bool connect(const fs::path& path) {
        if (fd_ >= 0) ::close(fd_);
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

// A telemetry reply {"/ethdev/stats": {"ipackets": N, ...}}: the inner object; nullopt if the reply
// is not that shape (the process is gone, or not yet answering).
std::optional<json::Json> telemetry_dict(const std::string& reply) {
    const json::Json j = json::Json::parse(reply, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || j.size() != 1 || !j.begin()->is_object()) return std::nullopt;
    return *j.begin();
}

struct PortTotals {
    std::uint64_t rx_packets = 0, tx_packets = 0, rx_bytes = 0, tx_bytes = 0;
    Clock::time_point at;
};

bool read_totals(Telemetry& tel, int ports, PortTotals& out) {
    out = PortTotals{};
    for (int p = 0; p < ports; ++p) {
        const auto d = telemetry_dict(tel.query(fmt::format("/ethdev/stats,{}", p)));
        if (!d || !d->contains("ipackets")) return false;
        const auto u64 = [&](const char* key) { return json::optional<std::uint64_t>(*d, key).value_or(0); };
        out.rx_packets += u64("ipackets");
        out.tx_packets += u64("opackets");
        out.rx_bytes += u64("ibytes");
        out.tx_bytes += u64("obytes");
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

// Waits until `child` (a DPDK process with `file_prefix`) forwards, then measures rx/tx packet
// rates over `seconds`. Does not stop it.
Rates measure_running(Child& child, const std::string& file_prefix, int ports, double seconds, const fs::path& log) {
    Rates rates;
    Telemetry tel;
    const fs::path sock = telemetry_socket(file_prefix);
    const auto start_deadline = Clock::now() + std::chrono::seconds(30);
    bool connected = false;
    while (Clock::now() < start_deadline && child.running()) {
        if (fs::exists(sock) && tel.connect(sock)) {
            connected = true;
            break;
        }
        nap(std::chrono::milliseconds(50));
    }
    if (!connected) {
        const bool died = !child.running();
        rates.error = fmt::format("{} {}; log {}:\n{}", child.name(),
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
        nap(std::chrono::milliseconds(50));
    }
    if (a.rx_packets == 0) {
        rates.error = fmt::format("{} received nothing; log {}:\n{}", child.name(), log.string(), child.log_tail());
        return rates;
    }
    nap(std::chrono::milliseconds(300));
    if (!read_totals(tel, ports, a)) {
        rates.error = "telemetry query failed";
        return rates;
    }
    nap(std::chrono::duration<double>(seconds));
    if (!read_totals(tel, ports, b)) {
        rates.error = "telemetry query failed";
        return rates;
    }
    const double dt = std::chrono::duration<double>(b.at - a.at).count();
    rates.rx_mpps = static_cast<double>(b.rx_packets - a.rx_packets) / dt / 1e6;
    rates.tx_mpps = static_cast<double>(b.tx_packets - a.tx_packets) / dt / 1e6;
    rates.ok = true;
    return rates;
}

// Starts argv (testpmd or shesha-switch), measures, stops it (SIGINT) and removes its runtime dir.
Rates measure_process(const std::vector<std::string>& argv, const std::string& file_prefix, int ports,
                      double seconds, const fs::path& log) {
    const RuntimeDirCleanup cleanup{runtime_dir(file_prefix)};  // runs after ~Child
    Child child(argv, log);
    Rates rates = measure_running(child, file_prefix, ports, seconds, log);
    if (!rates.ok) return rates;
    const int status = child.stop();
    if (status != 0) {
        rates.error = fmt::format("{} exited with status {} after the measurement; log {}:\n{}", argv[0], status,
                                  log.string(), child.log_tail());
    }
    return rates;
}

// ---- OVS-DPDK ------------------------------------------------------------------------------------

// A private OVS-DPDK instance: its own ovsdb (created in a fresh temporary directory that also holds
// every socket, pid and log file: OVS_RUNDIR/OVS_DBDIR/OVS_LOGDIR/OVS_SYSCONFDIR), ovs-vswitchd-dpdk
// in a private network namespace (unshare --net: the bridge's internal tap port never appears in
// the host's namespace and vanishes with the process), one bridge with the workload's vdevs as
// type=dpdk ports, and one PMD thread on the forwarding CPU. The system's OVS is never touched.
// The destructor stops both daemons by pid, removes the temporary directory and EAL's runtime
// directory, whatever happened before.
class OvsInstance {
public:
    OvsInstance(const ForwardOptions& fwd, std::string prefix, const fs::path& keep_logs_as)
        : fwd_(fwd), prefix_(std::move(prefix)), keep_logs_as_(keep_logs_as) {}
    ~OvsInstance() {
        if (vswitchd_) vswitchd_->stop(SIGTERM);
        if (ovsdb_) ovsdb_->stop(SIGTERM);
        vswitchd_.reset();
        ovsdb_.reset();
        std::error_code ec;
        if (!dir_.empty()) {
            // Keep the logs next to the other programs' logs (the temp dir itself goes away).
            for (const char* f : {"ovs-vswitchd.log", "ovs-vswitchd.out", "commands.log"}) {
                if (fs::exists(dir_ / f)) fs::copy_file(dir_ / f, keep_logs_as_.string() + "-" + f,
                                                        fs::copy_options::overwrite_existing, ec);
            }
            fs::remove_all(dir_, ec);
        }
        fs::remove_all(runtime_dir(prefix_), ec);
    }
    OvsInstance(const OvsInstance&) = delete;
    OvsInstance& operator=(const OvsInstance&) = delete;

    // Empty string when the bridge is up with every port attached; else why not.
    // pmds: PMD threads, on CPUs kForwardCpu, then 0 (one per CPU of this 2-CPU machine).
    std::string start(const std::vector<std::string>& vdevs, std::uint16_t mtu, int pmds = 1) {
        std::string tmpl = (fs::temp_directory_path() / "shesha-bench-ovs-XXXXXX").string();
        if (::mkdtemp(tmpl.data()) == nullptr) return fmt::format("mkdtemp: {}", std::strerror(errno));
        dir_ = tmpl;
        const std::string d = dir_.string();
        env_ = {"OVS_RUNDIR=" + d, "OVS_DBDIR=" + d, "OVS_LOGDIR=" + d, "OVS_SYSCONFDIR=" + d};
        const fs::path cmdlog = dir_ / "commands.log";
        const std::string db = "unix:" + d + "/db.sock";
        if (run_command({"ovsdb-tool", "create", d + "/conf.db", fwd_.ovs_schema}, cmdlog, env_) != 0)
            return "ovsdb-tool create failed:\n" + Child::tail_of(cmdlog, 6);
        ovsdb_ = std::make_unique<Child>(
            std::vector<std::string>{"ovsdb-server", d + "/conf.db", "--remote=punix:" + d + "/db.sock",
                                     "--pidfile=" + d + "/ovsdb-server.pid", "--unixctl=" + d + "/ovsdb-server.ctl",
                                     "--log-file=" + d + "/ovsdb-server.log"},
            dir_ / "ovsdb-server.out", env_);
        for (int i = 0; i < 200 && !fs::exists(dir_ / "db.sock"); ++i) {
            if (!ovsdb_->running()) return "ovsdb-server exited:\n" + ovsdb_->log_tail(6);
            nap(std::chrono::milliseconds(10));
        }
        const std::vector<std::string> vsctl = {"ovs-vsctl", "--db=" + db, "--timeout=60"};
        auto cmd = [&](std::vector<std::string> extra, bool wait_flag) {
            std::vector<std::string> argv = vsctl;
            if (!wait_flag) argv.push_back("--no-wait");
            argv.insert(argv.end(), extra.begin(), extra.end());
            return run_command(argv, cmdlog, env_, 70);
        };
        if (cmd({"init"}, false) != 0 ||
            cmd({"set", "Open_vSwitch", ".", "other_config:dpdk-init=true",
                 fmt::format("other_config:dpdk-extra={} -m 1024 --no-pci --file-prefix={}",
                             fwd_.hugepages ? "--in-memory" : "--no-huge --legacy-mem", prefix_),
                 fmt::format("other_config:pmd-cpu-mask={:#x}", pmds == 1 ? 1u << kForwardCpu : (1u << pmds) - 1)},
                false) != 0) {
            return "ovs-vsctl could not configure the private ovsdb:\n" + Child::tail_of(cmdlog, 6);
        }
        std::vector<std::string> vswitchd = {"unshare", "--net", "--", fwd_.ovs_vswitchd, db,
                                             "--pidfile=" + d + "/ovs-vswitchd.pid",
                                             "--unixctl=" + d + "/ovs-vswitchd.ctl",
                                             "--log-file=" + d + "/ovs-vswitchd.log"};
        vswitchd_log_ = dir_ / "ovs-vswitchd.out";  // stdout/stderr; OVS logs to --log-file
        vswitchd_ = std::make_unique<Child>(vswitchd, vswitchd_log_, env_);
        // One transaction: the bridge (userspace datapath) and every port; ovs-vsctl waits until
        // ovs-vswitchd has applied it (EAL init included, a few seconds).
        std::vector<std::string> add = {"add-br", bridge(), "--", "set", "bridge", bridge(), "datapath_type=netdev"};
        for (std::size_t i = 0; i < vdevs.size(); ++i) {
            const std::string p = fmt::format("p{}", i);
            for (std::string a : {std::string("--"), std::string("add-port"), bridge(), p, std::string("--"),
                                  std::string("set"), std::string("Interface"), p, std::string("type=dpdk"),
                                  "options:dpdk-devargs=" + vdevs[i]}) {
                add.push_back(a);
            }
            if (mtu) add.push_back(fmt::format("mtu_request={}", mtu));
        }
        // Run it while watching ovs-vswitchd: if the daemon dies, stop waiting for it.
        int add_status = -1;
        {
            std::vector<std::string> argv = vsctl;
            argv.insert(argv.end(), add.begin(), add.end());
            {
                std::ofstream l(cmdlog, std::ios::app);
                l << "$ ovs-vsctl ... add-br " << bridge() << " (" << vdevs.size() << " dpdk ports)\n";
            }
            Child c(argv, cmdlog, env_, /*append=*/true);
            while (c.running() && vswitchd_->running()) nap(std::chrono::milliseconds(20));
            add_status = c.running() ? c.stop(SIGKILL) : c.wait(std::chrono::seconds(1));
        }
        if (add_status != 0) {
            return fmt::format("ovs-vswitchd did not bring up the bridge{}:\n{}{}",
                               vswitchd_->running() ? "" : " (it exited)", Child::tail_of(cmdlog, 4),
                               Child::tail_of(dir_ / "ovs-vswitchd.log", 8));
        }
        // A port that failed to attach has an error and no OpenFlow port number.
        for (std::size_t i = 0; i < vdevs.size(); ++i) {
            const fs::path out = dir_ / "ofport.txt";
            std::error_code ec;
            fs::remove(out, ec);
            if (run_command({"ovs-vsctl", "--db=" + db, "get", "Interface", fmt::format("p{}", i), "ofport"}, out,
                            env_) != 0) {
                return "ovs-vsctl get ofport failed";
            }
            std::ifstream in(out);
            std::string line, last;
            while (std::getline(in, line)) last = line;
            if (last.empty() || last[0] == '-' || last == "[]") {
                return fmt::format("port p{} ({}) did not attach (ofport {}):\n{}", i, vdevs[i], last,
                                   Child::tail_of(dir_ / "ovs-vswitchd.log", 8));
            }
        }
        // Fairness: the bridge's own internal port (a tap) would receive a copy of every flooded
        // frame (the gradient workloads flood: their learners never send); shesha-switch and
        // testpmd have no such port. NORMAL still learns and floods among p0, p1.
        if (fwd_.ovs_flood_local) return {};
        if (run_command({"ovs-ofctl", "mod-port", bridge(), bridge(), "no-flood"}, cmdlog, env_) != 0)
            return "ovs-ofctl mod-port no-flood failed:\n" + Child::tail_of(cmdlog, 4);
        return {};
    }

    Child& vswitchd() { return *vswitchd_; }
    fs::path vswitchd_log() const { return dir_ / "ovs-vswitchd.log"; }
    // Where the destructor copies the logs.
    fs::path kept_log() const { return keep_logs_as_.string() + "-ovs-vswitchd.log"; }

private:
    std::string bridge() const { return "shbench"; }

    const ForwardOptions& fwd_;
    std::string prefix_;
    fs::path keep_logs_as_;
    fs::path dir_;
    fs::path vswitchd_log_;
    std::vector<std::string> env_;
    std::unique_ptr<Child> ovsdb_, vswitchd_;
};

// ---- shesha-switch's final statistics -------------------------------------------------------------

struct SwitchTotals {
    bool ok = false;
    std::uint64_t rx = 0, tx = 0, filtered = 0, flooded = 0, merged = 0, mergeable = 0, queue_drops = 0;
    std::uint64_t too_big = 0, multi_segment = 0, tx_contributions = 0;
    std::uint64_t peer_sync_dropped = 0, egress_rounds = 0, egress_idle_rounds = 0;
};

// Whole-run totals from the stats JSON shesha-switch writes at exit.
SwitchTotals read_switch_stats(const fs::path& path) {
    SwitchTotals t;
    using json::required;
    auto or_zero = [](const json::Json& obj, const char* key, const std::string& at) {
        return json::optional<std::uint64_t>(obj, key, at).value_or(0);
    };
    try {
        const json::Json root = json::parse_file(path.string());
        if (root.contains("internal")) {
            const json::Json& in = root["internal"];
            t.peer_sync_dropped = or_zero(in, "peer_sync_dropped", "internal.");
            t.egress_rounds = or_zero(in, "egress_rounds", "internal.");
            t.egress_idle_rounds = or_zero(in, "egress_idle_rounds", "internal.");
        }
        const auto& ports = root.at("ports");
        for (std::size_t i = 0; i < ports.size(); ++i) {
            const json::Json& port = ports[i];
            const std::string at = fmt::format("ports[{}].", i), q = at + "queue.";
            t.rx += required<std::uint64_t>(port, "rx_packets", at);
            t.tx += required<std::uint64_t>(port, "tx_packets", at);
            t.tx_contributions += or_zero(port, "tx_contributions", at);
            t.filtered += required<std::uint64_t>(port, "filtered", at);
            t.flooded += required<std::uint64_t>(port, "flooded", at);
            t.too_big += or_zero(port, "tx_too_big", at);
            t.multi_segment += or_zero(port, "rx_multi_segment", at);
            const json::Json& queue = port.at("queue");
            t.merged += required<std::uint64_t>(queue, "merged", q);
            t.mergeable += required<std::uint64_t>(queue, "mergeable_arrivals", q);
            t.queue_drops += required<std::uint64_t>(queue, "dropped", q);
        }
        t.ok = true;
    } catch (const std::exception& e) {
        // Missing or a different schema: the caller reports telemetry numbers only.
        spdlog::warn("{}: switch statistics not used: {}", path.string(), e.what());
        t.ok = false;
    }
    return t;
}

// ---- programs and workloads ------------------------------------------------------------------------

enum class Program { TestpmdIo, TestpmdMac, Shesha, Ovs };

// What a shesha-switch arm is configured to do with GRADIENTs: the three settings split its cost
// into forwarding, Shesha's per-gradient work (decode, policy, the aggregating queue) and merging.
enum class GradientHandling {
    Merge,     // the switch as shipped: aggregation on
    NoMerge,   // aggregation off: GRADIENTs are decoded and admitted, and queued as they are
    PlainUdp,  // Shesha's UDP port set to another one: the same frames are plain UDP to the switch
    MergeDropCopies,  // aggregation on and the admission stage's copy check on (the switch's default)
};

struct Arm {
    std::string id;     // stable id in the JSON: testpmd-io, testpmd-mac, ovs, shesha, testpmd-io-2c, shesha-2c,
                        // shesha-nomerge, shesha-udp
    std::string label;  // printed
    Program program;
    int cores = 1;      // forwarding cores (CPUs that forward)
    GradientHandling gradients = GradientHandling::Merge;
};

struct Workload {
    std::string id, title, ports;
    std::vector<std::string> vdevs;
    bool gradients = false;
    std::uint16_t mtu = 0;        // 0: the programs' defaults (1500)
    double frame_bytes = 64;      // Ethernet frame without FCS
    double payload_bytes = 0;     // gradient payload (fp32 elements) per frame
    bool rx_basis = false;        // ratios on received packets (gradients: merging halves tx) or on forwarded
    std::uint32_t model_members = 0;  // > 0: cluster 1 replicates MODEL to this many members (model16/64)
    std::string forwarding;           // a switch config `forwarding:` section, if any (static FDB entries)
    std::vector<Arm> arms;
    std::vector<std::string> notes;
};

// The references every arm is compared with (same round, paired), when they ran.
const std::vector<std::pair<std::string, std::string>> kReferences = {
    {"testpmd-io", "x testpmd-io"}, {"testpmd-mac", "x testpmd-mac"}, {"ovs", "x OVS"}};

std::vector<std::string> testpmd_argv(const ForwardOptions& fwd, const std::string& prefix, const Workload& w,
                                      const Arm& arm) {
    std::vector<std::string> argv = {fwd.testpmd_binary};
    if (arm.cores == 1) {
        // main lcore 0 only sleeps in its stats loop; lcore 1 forwards on CPU 1.
        argv.insert(argv.end(), {"-l", fmt::format("0,{}", kForwardCpu)});
    } else {
        // main lcore 0 (sleeping) shares CPU 0 with forwarding lcore 1; forwarding lcore 2 on CPU 1.
        argv.push_back("--lcores=0@0,1@0,2@1");
    }
    argv.insert(argv.end(), {fwd.hugepages ? "--in-memory" : "--no-huge", "-m", "512", "--no-pci", "--file-prefix", prefix});
    for (const auto& v : w.vdevs) argv.push_back("--vdev=" + v);
    argv.push_back("--");
    if (w.mtu) {
        argv.push_back("--total-num-mbufs=16384");
        argv.push_back(fmt::format("--mbuf-size={}", kJumboMbufSize));
        argv.push_back(fmt::format("--max-pkt-len={}", w.mtu + 18));
    } else {
        argv.push_back("--total-num-mbufs=32768");
    }
    argv.push_back(arm.program == Program::TestpmdMac ? "--forward-mode=mac" : "--forward-mode=io");
    argv.push_back(fmt::format("--nb-cores={}", arm.cores));
    // --stats-period keeps testpmd running without reading stdin; a long period keeps it quiet.
    argv.insert(argv.end(), {"--stats-period=3600", "--no-lsc-interrupt"});
    return argv;
}

// Each forwarding lcore of shesha-switch transmits on a TX queue of its own. A replaying net_pcap
// port has as many (dropping) TX queues as RX pcaps, so with several lcores it replays its file
// once per lcore; the switch polls only the first RX queue (rx_queues: 1), so the traffic offered
// is the same as with one lcore.
std::string vdev_for_lcores(const std::string& vdev, int lcores) {
    const auto at = vdev.find("rx_pcap=");
    if (lcores <= 1 || !vdev.starts_with("net_pcap") || at == std::string::npos ||
        vdev.find("tx_") != std::string::npos)
        return vdev;
    const std::string file = vdev.substr(at + 8, vdev.find(',', at) - (at + 8));
    std::string out = vdev;
    for (int i = 1; i < lcores; ++i) out += ",rx_pcap=" + file;
    return out;
}

std::string switch_config(const Workload& w, int lcores, GradientHandling handling, const std::string& prefix,
                          const fs::path& stats_json, bool hugepages) {
    // 1 lcore: the main lcore forwards on CPU 1. 2 lcores: forwarding lcore 0 (the main lcore) on
    // CPU 0, forwarding lcore 1 on CPU 1, each with whole ports.
    const std::string cpus = lcores == 1 ? std::to_string(kForwardCpu) : "0,1";
    std::string out = fmt::format(
        "# written by shesha-bench forward\n"
        "eal: [\"{}\", \"-m\", \"512\", \"--no-pci\", \"-l\", \"{}\", \"--file-prefix\", \"{}\"]\n"
        "lcores: {}\nidle_backoff_us: 0\nburst: 32\nmbufs: 16384\nports:\n",
        hugepages ? "--in-memory" : "--no-huge", cpus, prefix, lcores);
    for (std::size_t i = 0; i < w.vdevs.size(); ++i) {
        out += fmt::format("  - {{name: p{}, device: \"{}\"{}}}\n", i, vdev_for_lcores(w.vdevs[i], lcores),
                           w.mtu ? fmt::format(", mtu: {}", w.mtu) : std::string());
    }
    // The pcaps loop, so most workloads' gradients repeat their (worker, chunk, seq): copies to a
    // switch that drops them. The benchmark measures merging, so it keeps them, except in the arm
    // that measures the copy check on grad1k-fresh, whose seqs never repeat within the check's window.
    out += fmt::format("aggregation:\n  enabled: {}\n  non_member: forward\n  drop_copies: {}\n",
                       handling == GradientHandling::NoMerge ? "false" : "true",
                       handling == GradientHandling::MergeDropCopies ? "true" : "false");
    if (w.model_members > 0) {
        std::string members;
        for (std::uint32_t m = 1; m <= w.model_members; ++m) members += fmt::format("{}10.0.4.{}", m > 1 ? ", " : "", m);
        out += fmt::format("  clusters:\n    - {{id: 1, members: [{}], model_replication: {{group: 239.77.0.1, "
                           "learner: 10.0.0.100, max_members: {}}}}}\n", members, w.model_members);
    } else if (w.gradients) {
        out += "  clusters:\n    - {id: 1, members: [10.0.0.1, 10.0.0.2, 10.0.0.3, 10.0.0.4]}\n";
    } else {
        out += "  clusters: []\n";
    }
    if (!w.forwarding.empty()) out += w.forwarding;
    // A port no frame of the benchmark uses: the frames are then UDP datagrams like any other.
    if (handling == GradientHandling::PlainUdp) out += "protocol: {udp_port: 9}\n";
    out += fmt::format("stats: {{interval_s: 0, json: \"{}\"}}\ntelemetry: true\n", stats_json.string());
    return out;
}

// One GRADIENT of cluster 1 from `worker` toward learner `learner` (its MAC's last byte and IP offset).
std::vector<std::uint8_t> bench_gradient(std::uint32_t worker, std::uint8_t learner, std::uint16_t chunk,
                                         std::uint16_t chunk_count, std::uint32_t seq, std::uint32_t version,
                                         std::uint16_t elems) {
    GradientFrameSpec spec;
    spec.worker_id = worker;
    spec.ep = bench_endpoints(worker);
    spec.ep.dst_mac[5] = learner;
    spec.ep.dst_ip = kLearnerIp + learner;
    spec.cluster_id = 1;
    spec.chunk_count = chunk_count;
    spec.chunk_index = chunk;
    spec.seq = seq;
    spec.model_version = version;
    spec.elem_count = elems;
    std::vector<std::uint8_t> buf(std::size_t{elems} * 4 + 256);
    buf.resize(build_gradient_frame(spec, buf));
    if (buf.empty()) throw std::runtime_error("cannot build a gradient frame");
    return buf;
}

// Pairs of same-key GRADIENTs from two members of cluster 1 (workers w0 and w0+1), toward one learner.
std::vector<std::vector<std::uint8_t>> gradient_pairs(std::uint32_t first_worker, std::uint8_t learner,
                                                      std::uint16_t elems) {
    std::vector<std::vector<std::uint8_t>> frames;
    for (int i = 0; i < kPcapFrames; ++i) {
        const auto pair = static_cast<std::uint16_t>(i / 2);
        frames.push_back(bench_gradient(first_worker + static_cast<std::uint32_t>(i % 2), learner, pair,
                                        kPcapFrames / 2, pair, 0, elems));
    }
    return frames;
}

// Pairs of same-key GRADIENTs from workers w0 and w0+1 toward one learner, for `chunks` chunks
// and seqs 0..kFreshSeqs-1: every (worker, chunk) key's seq grows by one per pass over its
// chunks, and the wrap at the end of the file jumps back 1,024 or more, which the switch's copy
// check takes for a restarted sender. So no frame is ever a copy, however long the pcap loops.
// Each pass is a new model version, so only a pair's two frames merge, as in grad1k.
constexpr std::uint32_t kFreshSeqs = 1025;
std::vector<std::vector<std::uint8_t>> fresh_gradient_pairs(std::uint32_t first_worker, std::uint8_t learner,
                                                            std::uint16_t chunks) {
    std::vector<std::vector<std::uint8_t>> frames;
    for (std::uint32_t seq = 0; seq < kFreshSeqs; ++seq)
        for (std::uint16_t c = 0; c < chunks; ++c)
            for (std::uint32_t w = 0; w < 2; ++w) frames.push_back(bench_gradient(first_worker + w, learner, c, chunks, seq, seq, 256));
    return frames;
}

// One worker's GRADIENTs for chunks 0..kPcapFrames-1 of cluster 1, toward one learner.
std::vector<std::vector<std::uint8_t>> gradient_stream(std::uint32_t worker, std::uint8_t learner, std::uint16_t elems) {
    std::vector<std::vector<std::uint8_t>> frames;
    for (int i = 0; i < kPcapFrames; ++i) {
        const auto chunk = static_cast<std::uint16_t>(i);
        frames.push_back(bench_gradient(worker, learner, chunk, kPcapFrames, chunk, 0, elems));
    }
    return frames;
}

// A workload of 1 KB GRADIENTs (256 fp32) replayed in a loop from two pcaps, ratios on received frames.
Workload gradient_replay_workload(std::string id, std::string title, std::size_t frame_bytes, const fs::path& p0,
                                  const fs::path& p1) {
    Workload w;
    w.id = std::move(id);
    w.title = std::move(title);
    w.gradients = true;
    w.rx_basis = true;
    w.frame_bytes = static_cast<double>(frame_bytes);
    w.payload_bytes = 256 * 4.0;
    w.ports = "net_pcap replay";
    w.vdevs = {fmt::format("net_pcap0,rx_pcap={},infinite_rx=1", p0.string()),
               fmt::format("net_pcap1,rx_pcap={},infinite_rx=1", p1.string())};
    return w;
}

// A Shesha message in one UDP frame (the switch's Shesha port).
std::vector<std::uint8_t> shesha_udp_frame(const frame::Endpoints& ep, const proto::Header& h,
                                           std::span<const std::uint8_t> body) {
    std::vector<std::uint8_t> buf(frame::kUdpPayloadOffset + proto::kHeaderSize + body.size());
    const std::size_t len = proto::encode(h, body, std::span(buf).subspan(frame::kUdpPayloadOffset));
    if (len == 0 || frame::build_udp_frame(ep, len, buf) != buf.size()) throw std::runtime_error("cannot build a frame");
    return buf;
}

// model16/64: the learner's MODEL chunks (256 fp32) to its cluster's group 239.77.0.1, ...
std::vector<std::vector<std::uint8_t>> group_model_frames() {
    std::vector<std::vector<std::uint8_t>> frames;
    const std::vector<std::uint8_t> body(256 * 4, 0x3F);
    for (int i = 0; i < kPcapFrames; ++i) {
        frame::Endpoints ep;
        ep.src_mac = {0x02, 0x00, 0x00, 0x00, 0x00, 0x64};
        ep.dst_mac = {0x01, 0x00, 0x5e, 0x4d, 0x00, 0x01};
        ep.src_ip = kLearnerIp;
        ep.dst_ip = 0xEF4D0001;  // 239.77.0.1
        ep.src_port = ep.dst_port = proto::kDefaultUdpPort;
        proto::Header h;
        h.type = proto::MsgType::Model;
        h.cluster_id = 1;
        h.worker_id = 0xFFFFFFFFu;
        h.model_version = static_cast<std::uint32_t>(1 + i / 8);
        h.chunk_index = static_cast<std::uint16_t>(i % 8);
        h.chunk_count = 8;
        h.elem_count = 256;
        frames.push_back(shesha_udp_frame(ep, h, body));
    }
    return frames;
}

// ... and the members' model requests (10.0.4.1..n, behind the other port), replayed once: they join.
std::vector<std::vector<std::uint8_t>> model_request_frames(std::uint32_t members) {
    std::vector<std::vector<std::uint8_t>> frames;
    for (std::uint32_t m = 1; m <= members; ++m) {
        frame::Endpoints ep;
        ep.src_mac = {0x02, 0x00, 0x00, 0x00, 0x04, static_cast<std::uint8_t>(m)};
        ep.dst_mac = {0x02, 0x00, 0x00, 0x00, 0x00, 0x64};
        ep.src_ip = 0x0A000400u + m;
        ep.dst_ip = kLearnerIp;
        ep.src_port = static_cast<std::uint16_t>(40000 + m);
        ep.dst_port = proto::kDefaultUdpPort;
        proto::Header h;
        h.type = proto::MsgType::Model;
        h.cluster_id = 1;
        h.worker_id = m;
        frames.push_back(shesha_udp_frame(ep, h, {}));
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

// ---- running a workload: every arm once per round, rounds interleaved ------------------------------

struct ArmResult {
    bool not_run = false;          // never attempted (reason says why)
    std::string reason;            // not run, or the last failure (log named)
    std::string short_reason;      // for the table cell
    std::vector<double> rx, tx;    // per round; NaN when that round failed
    SwitchTotals totals;           // shesha-switch: counters of the last successful round
    bool failed() const { return !not_run && !reason.empty(); }
    int ok_rounds() const {
        return static_cast<int>(std::count_if(rx.begin(), rx.end(), [](double v) { return std::isfinite(v); }));
    }
};

struct Spread {
    double median = std::nan(""), min = std::nan(""), max = std::nan("");
};
Spread spread(const std::vector<double>& v) {
    std::vector<double> f;
    for (double x : v)
        if (std::isfinite(x)) f.push_back(x);
    Spread s;
    if (f.empty()) return s;
    s.median = median(f);
    s.min = *std::min_element(f.begin(), f.end());
    s.max = *std::max_element(f.begin(), f.end());
    return s;
}

struct WorkloadResult {
    Workload w;
    std::vector<ArmResult> arms;
    // Per-round ratio of arm i to reference id, on the workload's basis (rx or fwd), and on rx and tx.
    std::vector<double> ratios(std::size_t i, const std::string& ref, bool rx) const {
        std::vector<double> out;
        for (std::size_t j = 0; j < w.arms.size(); ++j) {
            if (w.arms[j].id != ref) continue;
            const auto& a = rx ? arms[i].rx : arms[i].tx;
            const auto& b = rx ? arms[j].rx : arms[j].tx;
            for (std::size_t r = 0; r < std::min(a.size(), b.size()); ++r) {
                if (std::isfinite(a[r]) && std::isfinite(b[r]) && b[r] > 0) out.push_back(a[r] / b[r]);
            }
        }
        return out;
    }
};

Rates run_arm(const ForwardOptions& fwd, const fs::path& dir, const std::string& tag, const Workload& w,
              const Arm& arm, double secs, int round, ArmResult& res) {
    const std::string name = w.id + "-" + arm.id;
    const std::string prefix = fmt::format("{}-{}", tag, name);
    const fs::path log = dir / (name + ".log");
    switch (arm.program) {
    case Program::TestpmdIo:
    case Program::TestpmdMac:
        return measure_process(testpmd_argv(fwd, prefix, w, arm), prefix, static_cast<int>(w.vdevs.size()), secs, log);
    case Program::Shesha: {
        const fs::path yaml = dir / ("switch-" + name + ".yaml"), stats = dir / ("stats-" + name + ".json");
        write_text(yaml, switch_config(w, arm.cores, arm.gradients, prefix, stats, fwd.hugepages));
        std::error_code ec;
        fs::remove(stats, ec);
        Rates r = measure_process({fwd.switch_binary, "-c", yaml.string()}, prefix, static_cast<int>(w.vdevs.size()),
                                  secs, log);
        if (r.ok) res.totals = read_switch_stats(stats);
        return r;
    }
    case Program::Ovs: {
        Rates r;
        OvsInstance ovs(fwd, prefix, dir / fmt::format("{}-r{}", name, round));
        if (std::string err = ovs.start(w.vdevs, w.mtu, arm.cores); !err.empty()) {
            r.error = fmt::format("OVS-DPDK did not start (logs: {}-*.log): {}", (dir / fmt::format("{}-r{}", name, round)).string(), err);
            return r;
        }
        r = measure_running(ovs.vswitchd(), prefix, static_cast<int>(w.vdevs.size()), secs, ovs.vswitchd_log());
        if (!r.ok) r.error += "  ovs-vswitchd.log:\n" + Child::tail_of(ovs.vswitchd_log(), 8);
        return r;  // ~OvsInstance stops both daemons and removes every file (logs copied to the work dir)
    }
    }
    return {};
}

WorkloadResult run_workload(const ForwardOptions& fwd, const fs::path& dir, const std::string& tag,
                            const Workload& w, const std::map<std::string, std::string>& not_run, double secs,
                            int rounds) {
    WorkloadResult res{w, std::vector<ArmResult>(w.arms.size())};
    for (std::size_t i = 0; i < w.arms.size(); ++i) {
        if (auto it = not_run.find(w.arms[i].id); it != not_run.end()) {
            res.arms[i].not_run = true;
            res.arms[i].reason = it->second;
            res.arms[i].short_reason = it->second.substr(0, it->second.find(':'));
        }
    }
    for (int round = 0; round < rounds; ++round) {
        for (std::size_t i = 0; i < w.arms.size(); ++i) {
            ArmResult& ar = res.arms[i];
            if (ar.not_run) continue;
            const Rates r = run_arm(fwd, dir, tag, w, w.arms[i], secs, round, ar);
            ar.rx.push_back(r.ok ? r.rx_mpps : std::nan(""));
            ar.tx.push_back(r.ok ? r.tx_mpps : std::nan(""));
            if (!r.error.empty()) {
                ar.reason = r.error;
                ar.short_reason = r.ok ? "exit status" : "failed";
            }
            spdlog::info("  forward {} round {}/{}: {:<16} {}", w.id, round + 1, rounds, w.arms[i].id,
                       r.ok ? fmt::format("rx {:.2f} Mpps, fwd {:.2f} Mpps", r.rx_mpps, r.tx_mpps) : "FAILED");
        }
    }
    return res;
}

std::string pct(std::uint64_t part, std::uint64_t whole) {
    return whole ? fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole)) : "-";
}

double merged_fraction(const ArmResult& a) {
    if (!a.totals.ok || a.totals.mergeable == 0) return std::nan("");
    return static_cast<double>(a.totals.merged) / static_cast<double>(a.totals.mergeable);
}

// The one-core arm a two-core arm scales from ("shesha-2c" -> "shesha"), or "".
std::string one_core_id(const Arm& arm) {
    return arm.cores > 1 && arm.id.ends_with("-2c") ? arm.id.substr(0, arm.id.size() - 3) : std::string();
}

// Per-round 2-core / 1-core ratios of each program (paired in the round), and shesha's scaling
// relative to testpmd mac's (issue 28's goal: at least 0.9).
std::string scaling_note(const WorkloadResult& res) {
    const Workload& w = res.w;
    std::map<std::string, double> scale;
    std::string parts;
    for (std::size_t i = 0; i < w.arms.size(); ++i) {
        const std::string base = one_core_id(w.arms[i]);
        if (base.empty()) continue;
        const auto r = res.ratios(i, base, w.rx_basis);
        if (r.empty()) continue;
        const Spread sp = spread(r);
        scale[base] = sp.median;
        parts += fmt::format("{}{} {:.2f} ({:.2f}-{:.2f})", parts.empty() ? "" : ", ", base, sp.median, sp.min, sp.max);
    }
    if (parts.empty()) return {};
    std::string out = fmt::format("2 cores / 1 core ({}, median and range of per-round ratios): {}",
                                  w.rx_basis ? "received" : "forwarded", parts);
    if (scale.count("shesha") && scale.count("testpmd-mac") && scale["testpmd-mac"] > 0)
        out += fmt::format("; shesha's scaling / testpmd mac's = {:.2f}", scale["shesha"] / scale["testpmd-mac"]);
    return out;
}

Table make_table(const WorkloadResult& res, int rounds, double secs, bool& failed, bool& keep_logs) {
    const Workload& w = res.w;
    std::vector<std::string> cols = {"program", "cores", "rx Mpps", "fwd Mpps"};
    if (w.gradients) {
        cols.insert(cols.end(), {"rx Gbps", "payload Gbps", "merged frac"});
    }
    const std::string basis = w.rx_basis ? "rx" : "fwd";
    cols.push_back(basis + " min");
    cols.push_back(basis + " max");
    for (const auto& [id, col] : kReferences) cols.push_back(col);
    Table t(fmt::format("forward {}: {}", w.id, w.title), cols);
    for (std::size_t i = 0; i < w.arms.size(); ++i) {
        const Arm& arm = w.arms[i];
        const ArmResult& a = res.arms[i];
        std::vector<Cell> row = {arm.label, static_cast<double>(arm.cores)};
        if (a.ok_rounds() == 0) {
            row.push_back(a.not_run ? "not run: " + a.short_reason : "FAILED");
            t.add_row(std::move(row));
            t.add_note(fmt::format("{} {}: {}", arm.label, a.not_run ? "not run" : "failed", a.reason));
            if (!a.not_run && arm.program != Program::Ovs) failed = true;
            if (!a.not_run) keep_logs = true;
            continue;
        }
        const Spread rx = spread(a.rx), tx = spread(a.tx), b = w.rx_basis ? rx : tx;
        row.push_back(rx.median);
        row.push_back(tx.median);
        if (w.gradients) {
            row.push_back(rx.median * w.frame_bytes * 8 / 1e3);
            row.push_back(rx.median * w.payload_bytes * 8 / 1e3);
            if (arm.program == Program::Shesha && a.totals.ok && a.totals.mergeable != 0) {
                row.push_back(merged_fraction(a));
            } else if (arm.program == Program::Shesha && a.totals.ok) {
                row.push_back(Cell{"none mergeable"});
            } else {
                row.push_back(arm.program == Program::Shesha ? Cell{"-"} : Cell{0.0});
            }
        }
        row.push_back(b.min);
        row.push_back(b.max);
        for (const auto& [id, col] : kReferences) {
            const auto r = res.ratios(i, id, w.rx_basis);
            row.push_back(r.empty() ? Cell{"-"} : Cell{median(r)});
        }
        t.add_row(std::move(row));
        if (a.failed()) {
            t.add_note(fmt::format("{} failed in {} of {} round(s): {}", arm.label, rounds - a.ok_rounds(), rounds,
                                   a.reason));
            if (arm.program != Program::Ovs) failed = true;
            keep_logs = true;
        }
        if (arm.program == Program::Shesha && a.totals.ok) {
            if (!w.gradients && a.totals.filtered > 0) {
                t.add_note(fmt::format("{}: {} of received frames filtered (destination learned on the ingress port), "
                                       "{} flooded",
                                       arm.label, pct(a.totals.filtered, a.totals.rx), pct(a.totals.flooded, a.totals.rx)));
            }
            if (a.totals.queue_drops) t.add_note(fmt::format("{}: queue drops {}", arm.label, a.totals.queue_drops));
            if (w.gradients && arm.gradients != GradientHandling::PlainUdp && a.totals.tx > 0)  // all GRADIENTs
                t.add_note(fmt::format("{}: merge ratio {:.3f} contributions per sent gradient (last round)", arm.label,
                                       static_cast<double>(a.totals.tx_contributions) / static_cast<double>(a.totals.tx)));
            if (a.totals.peer_sync_dropped)
                t.add_note(fmt::format("{}: {} FDB/group updates between lcores lost (rings full; resent within a second)",
                                       arm.label, a.totals.peer_sync_dropped));
            if (a.totals.too_big || a.totals.multi_segment) {
                t.add_note(fmt::format("{}: tx_too_big {}, rx_multi_segment {}", arm.label, a.totals.too_big,
                                       a.totals.multi_segment));
            }
        }
    }
    if (std::string scaling = scaling_note(res); !scaling.empty()) t.add_note(scaling);
    for (std::size_t i = 0; i < w.arms.size(); ++i)
        if (w.arms[i].gradients == GradientHandling::MergeDropCopies) {
            const auto r = res.ratios(i, "shesha", w.rx_basis);
            if (r.empty()) continue;
            const Spread sp = spread(r);
            t.add_note(fmt::format("copy check on / off ({}, median and range of per-round ratios): {:.3f} ({:.3f}-{:.3f})",
                                   w.rx_basis ? "received" : "forwarded", sp.median, sp.min, sp.max));
        }
    for (const auto& n : w.notes) t.add_note(n);
    t.add_note(fmt::format("{} round(s) of {:.1f} s windows, all programs in turn each round, read via /ethdev/stats "
                           "telemetry after a warm-up; rates are medians (summed over both ports), min/max over rounds; "
                           "x REF = median of per-round {} ratios",
                           rounds, secs, basis));
    return t;
}

// ---- JSON (schema "shesha-bench-forward", documented in docs/benchmarks.md) ------------------------

json::Json jnum(double v) { return json::significant(v, 6); }  // non-finite: null

json::Json jspread(const Spread& s) {
    return {{"median", jnum(s.median)}, {"min", jnum(s.min)}, {"max", jnum(s.max)}};
}

json::Json jsamples(const std::vector<double>& v) {
    json::Json out = json::Json::array();
    for (double x : v) out.push_back(jnum(x));
    return out;
}

const char* program_kind(Program p) {
    switch (p) {
    case Program::TestpmdIo: return "testpmd-io";
    case Program::TestpmdMac: return "testpmd-mac";
    case Program::Shesha: return "shesha-switch";
    case Program::Ovs: return "ovs-dpdk-normal";
    }
    return "?";
}

// MB of free 2 MB hugepages (HugePages_Free when the default size is 2 MB), 0 if none or unknown.
std::uint64_t free_hugepage_mb() {
    std::ifstream in("/proc/meminfo");
    std::string key;
    std::uint64_t free_pages = 0, page_kb = 0, value = 0;
    while (in >> key >> value) {
        if (key == "HugePages_Free:") free_pages = value;
        if (key == "Hugepagesize:") page_kb = value;
        in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
    }
    return page_kb == 2048 ? free_pages * 2 : 0;
}

json::Json forward_json(const std::vector<WorkloadResult>& results, const RunOptions& opt, bool hugepages) {
    json::Json workloads = json::Json::array();
    for (const WorkloadResult& res : results) {
        const Workload& w = res.w;
        json::Json programs = json::Json::array();
        for (std::size_t i = 0; i < w.arms.size(); ++i) {
            const Arm& arm = w.arms[i];
            const ArmResult& a = res.arms[i];
            const std::string status = a.not_run ? "not_run" : a.ok_rounds() == 0 ? "failed" : a.failed() ? "partial" : "ok";
            const Spread rx = spread(a.rx), tx = spread(a.tx);
            json::Json ratios = json::Json::object();
            for (const auto& [id, col] : kReferences) {
                const auto rr = res.ratios(i, id, true), rt = res.ratios(i, id, false);
                if (rr.empty() && rt.empty()) continue;
                ratios[id] = {{"rx", jspread(spread(rr))}, {"tx", jspread(spread(rt))}};
            }
            programs.push_back({
                {"id", arm.id},
                {"program", program_kind(arm.program)},
                {"label", arm.label},
                {"forwarding_cores", arm.cores},
                {"status", status},
                {"reason", a.reason},
                {"rounds_ok", a.ok_rounds()},
                {"rx_mpps", jspread(rx)},
                {"tx_mpps", jspread(tx)},
                {"rx_mpps_rounds", jsamples(a.rx)},
                {"tx_mpps_rounds", jsamples(a.tx)},
                {"rx_gbps", jnum(rx.median * w.frame_bytes * 8 / 1e3)},
                {"payload_gbps", jnum(rx.median * w.payload_bytes * 8 / 1e3)},
                {"payload_gbps_per_core", jnum(rx.median * w.payload_bytes * 8 / 1e3 / arm.cores)},
                {"contributions_per_sent", arm.program == Program::Shesha && w.gradients &&
                                                       arm.gradients != GradientHandling::PlainUdp && a.totals.tx > 0
                                               ? jnum(static_cast<double>(a.totals.tx_contributions) /
                                                      static_cast<double>(a.totals.tx))
                                               : json::Json(nullptr)},
                {"merged_fraction", arm.program == Program::Shesha           ? jnum(merged_fraction(a))
                                    : w.gradients && a.ok_rounds() > 0 ? json::Json(0)
                                                                       : json::Json(nullptr)},
                {"ratios", std::move(ratios)},
                {"vs_one_core", one_core_id(arm).empty()
                                    ? json::Json(nullptr)
                                    : json::Json{{"rx", jspread(spread(res.ratios(i, one_core_id(arm), true)))},
                                                 {"tx", jspread(spread(res.ratios(i, one_core_id(arm), false)))}}},
            });
        }
        workloads.push_back({
            {"id", w.id},
            {"title", w.title},
            {"ports", w.ports},
            {"frame_bytes", jnum(w.frame_bytes)},
            {"gradient_payload_bytes", jnum(w.payload_bytes)},
            {"mtu", w.mtu ? w.mtu : 1500},
            {"ratio_basis", w.rx_basis ? "rx" : "tx"},
            {"programs", std::move(programs)},
        });
    }
    return {{"schema", "shesha-bench-forward"},
            {"schema_version", 1},
            {"quick", opt.quick},
            {"window_s", jnum(opt.seconds)},
            {"rounds", opt.forward_rounds},
            {"cpu", cpu_model()},
            {"cpus", online_cpus()},
            {"forward_cpu", kForwardCpu},
            {"hugepages", hugepages},
            {"workloads", std::move(workloads)}};
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
    const bool want_ovs = fwd.ovs == "on" || (fwd.ovs == "auto" && !opt.quick);
    if (fwd.hugepages) {
        // testpmd and shesha-switch ask EAL for 512 MB, OVS for 1024 MB, one program at a time.
        const std::uint64_t need_mb = want_ovs ? 1024 : 512;
        const std::uint64_t free_mb = free_hugepage_mb();
        if (free_mb < need_mb) {
            result.failed = true;
            result.reason = fmt::format(
                "--hugepages needs {} MB of free 2 MB hugepages, {} MB are free (HugePages_Free in /proc/meminfo); "
                "as root: echo {} > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
                need_mb, free_mb, need_mb / 2);
            return result;
        }
    }
    const SignalGuard signals;
    const bool own_dir = fwd.work_dir.empty();
    fs::path dir = fwd.work_dir;
    if (own_dir) {
        std::string tmpl = (fs::temp_directory_path() / "shesha-bench-XXXXXX").string();
        if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
        dir = tmpl;
    } else {
        fs::create_directories(dir);
    }
    // Removes our own scratch directory unless a failure's logs must be kept (also on exceptions).
    struct DirGuard {
        fs::path dir;
        bool keep = false;
        ~DirGuard() {
            std::error_code ec;
            if (!dir.empty() && !keep) fs::remove_all(dir, ec);
        }
    } dir_guard{own_dir ? dir : fs::path{}};
    const std::string tag = fmt::format("shesha-bench-{}", ::getpid());
    const double secs = opt.seconds;
    const int rounds = opt.forward_rounds;

    // Can OVS-DPDK run? Decided once; every OVS row says why not.
    std::map<std::string, std::string> not_run;
    if (!want_ovs) {
        not_run["ovs"] = fwd.ovs == "off" ? "--ovs off: OVS-DPDK disabled on the command line"
                                          : "--quick: OVS-DPDK skipped (about 5 s of start-up per run; add --ovs on)";
    } else {
        for (const std::string& b : {fwd.ovs_vswitchd, std::string("ovsdb-server"), std::string("ovsdb-tool"),
                                     std::string("ovs-vsctl"), std::string("ovs-ofctl"), std::string("unshare")}) {
            if (!find_in_path(b)) {
                not_run["ovs"] = fmt::format("not installed: {} not found (apt-get install openvswitch-switch-dpdk, "
                                             "or tools/install-deps.sh)",
                                             b);
                break;
            }
        }
        if (!not_run.count("ovs") && !fs::exists(fwd.ovs_schema))
            not_run["ovs"] = "not installed: no OVS schema at " + fwd.ovs_schema;
        if (!not_run.count("ovs") && ::geteuid() != 0) not_run["ovs"] = "not root: unshare --net needs root";
    }
    if (not_run.count("ovs")) not_run["ovs-2c"] = not_run["ovs"];
    if (online_cpus() < 2) {
        for (const char* id : {"testpmd-io-2c", "testpmd-mac-2c", "ovs-2c", "shesha-2c"})
            not_run[id] = "one CPU: 2-core arms need 2 CPUs";
    }

    const Arm tp_io{"testpmd-io", "dpdk-testpmd io", Program::TestpmdIo, 1};
    const Arm tp_mac{"testpmd-mac", "dpdk-testpmd mac", Program::TestpmdMac, 1};
    const Arm ovs{"ovs", "OVS-DPDK NORMAL", Program::Ovs, 1};
    const Arm sw{"shesha", "shesha-switch", Program::Shesha, 1};
    const Arm tp_io2{"testpmd-io-2c", "dpdk-testpmd io, 2 cores", Program::TestpmdIo, 2};
    const Arm tp_mac2{"testpmd-mac-2c", "dpdk-testpmd mac, 2 cores", Program::TestpmdMac, 2};
    const Arm ovs2{"ovs-2c", "OVS-DPDK NORMAL, 2 PMD threads", Program::Ovs, 2};
    const Arm sw2{"shesha-2c", "shesha-switch, 2 lcores", Program::Shesha, 2};
    const Arm sw_nomerge{"shesha-nomerge", "shesha-switch, aggregation off", Program::Shesha, 1,
                         GradientHandling::NoMerge};
    const Arm sw_udp{"shesha-udp", "shesha-switch, frames as plain UDP", Program::Shesha, 1,
                     GradientHandling::PlainUdp};
    const Arm sw_copies{"shesha-copycheck", "shesha-switch, copy check on (drop_copies)", Program::Shesha, 1,
                        GradientHandling::MergeDropCopies};

    std::vector<Workload> workloads;
    {
        Workload w;
        w.id = "null64";
        w.title = "64 B frames, 2 net_null ports; 1 and 2 forwarding cores";
        w.ports = "net_null";
        w.vdevs = {"net_null0", "net_null1"};
        w.arms = {tp_io, tp_mac, sw, tp_io2, tp_mac2, sw2};
        w.notes = {"net_null frames are all zeros: shesha floods them (it never learns the all-zero MAC) to the other "
                   "port; testpmd io-forwards port pairs",
                   fmt::format("2-core arms on a {}-CPU machine: testpmd runs one forwarding lcore per CPU (its "
                               "sleeping main lcore shares CPU 0); shesha-switch runs forwarding lcore 0 (its main lcore) on CPU 0 and lcore 1 on CPU 1, each "
                               "polling one port and sending on its own TX queue; the benchmark itself, telemetry and "
                               "other processes share these CPUs too",
                               online_cpus())};
        workloads.push_back(std::move(w));
    }
    const fs::path small0 = dir / "small0.pcap", small1 = dir / "small1.pcap";
    if (!write_pcap(small0, small_frames(1, 2)) || !write_pcap(small1, small_frames(2, 1))) {
        throw std::runtime_error("cannot write pcaps in " + dir.string());
    }
    {
        Workload w;
        w.id = "pcap64";
        w.title = "64 B unicast UDP frames (not Shesha), 2 net_pcap replay ports";
        w.ports = "net_pcap replay";
        w.vdevs = {fmt::format("net_pcap0,rx_pcap={},infinite_rx=1", small0.string()),
                   fmt::format("net_pcap1,rx_pcap={},infinite_rx=1", small1.string())};
        w.arms = {tp_io, tp_mac, ovs, sw, tp_mac2, ovs2, sw2};
        w.notes = {"one host per side sends to the other: after learning every frame is a known-unicast forward "
                   "(shesha, OVS NORMAL)"};
        workloads.push_back(std::move(w));
    }
    for (const std::uint16_t elems : {std::uint16_t{256}, std::uint16_t{2048}}) {
        const std::string base = elems == 256 ? "gradients" : "gradients8k";
        const fs::path p0 = dir / (base + "0.pcap"), p1 = dir / (base + "1.pcap");
        const auto f0 = gradient_pairs(0, 1, elems), f1 = gradient_pairs(2, 2, elems);
        if (!write_pcap(p0, f0) || !write_pcap(p1, f1)) throw std::runtime_error("cannot write pcaps in " + dir.string());
        Workload w;
        w.id = elems == 256 ? "grad1k" : "grad8k";
        w.gradients = true;
        w.rx_basis = true;
        w.frame_bytes = static_cast<double>(f0.front().size());
        w.payload_bytes = elems * 4.0;
        w.ports = "net_pcap replay";
        w.vdevs = {fmt::format("net_pcap0,rx_pcap={},infinite_rx=1", p0.string()),
                   fmt::format("net_pcap1,rx_pcap={},infinite_rx=1", p1.string())};
        if (elems == 256) {
            w.title = fmt::format("{} B GRADIENT frames (256 fp32), 2 net_pcap replay ports, half mergeable",
                                  f0.front().size());
            w.arms = {tp_io, tp_mac, ovs, sw, sw_nomerge, sw_udp, tp_mac2, ovs2, sw2};
            w.notes.push_back("where shesha's time goes: 'frames as plain UDP' is its L2 forwarding of the same "
                              "frames (Shesha's UDP port moved), 'aggregation off' adds decoding, cluster policy and "
                              "the aggregating queue per GRADIENT, 'shesha-switch' adds merging");
        } else {
            w.mtu = kJumboMtu;
            w.title = fmt::format("{} B GRADIENT frames (2048 fp32, 8 KB), 2 net_pcap replay ports, mtu {}, half "
                                  "mergeable",
                                  f0.front().size(), kJumboMtu);
            w.arms = {tp_io, tp_mac, sw};
            w.notes = {fmt::format("mbufs of {} B data room (testpmd --mbuf-size={} --max-pkt-len={}; shesha-switch "
                                   "ports mtu: {}), one segment per frame",
                                   kJumboMbufSize, kJumboMbufSize, kJumboMtu + 18, kJumboMtu),
                       "goal (issue 12): >= 100 Gbps of gradient payload received per forwarding core"};
        }
        w.notes.push_back("rx Gbps = frame bytes (no preamble/FCS) x rx rate; payload Gbps = fp32 gradient bytes x rx "
                          "rate; merged frac = merged / mergeable arrivals (switch stats, last round); pcap replay "
                          "copies each frame into a fresh mbuf, for every program; learners never send, so every "
                          "program floods (to the one other port)");
        if (elems == 256) {
            w.notes.push_back(fwd.ovs_flood_local
                                  ? "--ovs-flood-local: OVS also floods every frame to its bridge's internal port"
                                  : "OVS: the bridge's internal port is set no-flood (shesha and testpmd have no such "
                                    "port); --ovs-flood-local keeps OVS's default");
        }
        workloads.push_back(std::move(w));
    }

    {
        // Two workers of one cluster on two ports, their learner behind a third: with one lcore
        // the two streams meet in the learner port's queue and merge; with two lcores each port
        // has its own lcore (p0 and p2 on lcore 0, p1 on lcore 1), and nothing merges. The cost
        // of whole-port lcores in merges (docs/switch.md, "Several lcores").
        const fs::path p0 = dir / "split0.pcap", p1 = dir / "split1.pcap", p2 = dir / "split-learner.pcap";
        const auto f0 = gradient_stream(1, 3, 256), f1 = gradient_stream(2, 3, 256);
        frame::Endpoints hello = bench_endpoints(0);
        hello.src_mac = {0x02, 0x00, 0x00, 0x00, 0x02, 0x03};  // the learner says hello once
        hello.dst_mac = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
        hello.dst_port = 9;
        std::vector<std::uint8_t> hello_frame(64, 0);
        if (frame::build_udp_frame(hello, 64 - frame::kUdpPayloadOffset, hello_frame) != 64 || !write_pcap(p0, f0) ||
            !write_pcap(p1, f1) || !write_pcap(p2, {hello_frame}))
            throw std::runtime_error("cannot write pcaps in " + dir.string());
        Workload w = gradient_replay_workload(
            "grad1k-split",
            fmt::format("{} B GRADIENTs of one cluster's two workers on two ports, their learner behind a third",
                        f0.front().size()),
            f0.front().size(), p0, p1);
        w.vdevs.push_back(fmt::format("net_pcap2,rx_pcap={}", p2.string()));
        w.forwarding = "forwarding:\n  static: [{mac: \"02:00:00:00:02:03\", port: p2}]\n";
        w.arms = {sw, sw2};
        w.notes = {"the learner port p2 replays one frame; with 2 lcores, lcore 0 polls p0 and p2, lcore 1 polls p1: "
                   "gradients merge only within an lcore, so the two workers' chunks leave unmerged"};
        workloads.push_back(std::move(w));
    }

    {
        // grad1k's frames, but no (worker, chunk, seq) ever repeats within the copy check's window:
        // what the check, on by default, costs per GRADIENT. 2 chunks x 1,025 seqs x 2 workers per
        // port (4,100 frames: the pcap PMD holds the whole file in the switch's mbufs).
        const fs::path p0 = dir / "fresh0.pcap", p1 = dir / "fresh1.pcap";
        const auto f0 = fresh_gradient_pairs(0, 1, 2), f1 = fresh_gradient_pairs(2, 2, 2);
        if (!write_pcap(p0, f0) || !write_pcap(p1, f1)) throw std::runtime_error("cannot write pcaps in " + dir.string());
        Workload w = gradient_replay_workload(
            "grad1k-fresh",
            fmt::format("{} B GRADIENTs as grad1k, half mergeable, no seq repeated within the copy check's window",
                        f0.front().size()),
            f0.front().size(), p0, p1);
        w.arms = {sw, sw_copies};
        w.notes = {"shesha-switch: drop_copies off (as in every other workload); copy check on: the switch's default, "
                   "each GRADIENT looked up and recorded in the admission stage's (cluster, worker, chunk, addresses) "
                   "seq table; x shesha = paired per-round ratio"};
        workloads.push_back(std::move(w));
    }

    for (const std::uint32_t members : {16u, 64u}) {
        const fs::path p0 = dir / "model-group.pcap", p1 = dir / fmt::format("model-requests{}.pcap", members);
        const auto f0 = group_model_frames();
        if (!write_pcap(p0, f0) || !write_pcap(p1, model_request_frames(members)))
            throw std::runtime_error("cannot write pcaps in " + dir.string());
        Workload w;
        w.id = fmt::format("model{}", members);
        w.title = fmt::format("{} B MODEL chunks to a group, replicated to {} members behind the other port",
                              f0.front().size(), members);
        w.model_members = members;
        w.frame_bytes = static_cast<double>(f0.front().size());
        w.ports = "net_pcap replay";
        // The requests are read once (no infinite_rx): the members join, then only MODEL arrives.
        w.vdevs = {fmt::format("net_pcap0,rx_pcap={},infinite_rx=1", p0.string()),
                   fmt::format("net_pcap1,rx_pcap={}", p1.string())};
        w.arms = {tp_io, sw};
        w.notes = {fmt::format("fwd = frames sent: shesha-switch sends {} copies of each received chunk (a private "
                               "header mbuf chained to an indirect mbuf on the chunk), testpmd io forwards each "
                               "chunk once; x testpmd-io compares frames sent per second",
                               members)};
        workloads.push_back(std::move(w));
    }

    if (fwd.hugepages)
        for (Workload& w : workloads)
            w.notes.push_back("--hugepages: every program's DPDK memory from 2 MB hugepages (EAL --in-memory); without "
                              "the flag all run with --no-huge, and pay page walks on this kind of VM");
    if (!fwd.workloads.empty())
        std::erase_if(workloads, [&](const Workload& w) {
            return std::find(fwd.workloads.begin(), fwd.workloads.end(), w.id) == fwd.workloads.end();
        });

    bool failed = false, keep_logs = false;
    std::vector<WorkloadResult> results;
    for (const Workload& w : workloads) {
        WorkloadResult res = run_workload(fwd, dir, tag, w, not_run, secs, rounds);
        if (&w == &workloads.front() && res.arms[0].ok_rounds() == 0) {
            // testpmd is plain DPDK: if it cannot run, DPDK cannot run here at all.
            result.skipped = true;
            result.reason = "dpdk-testpmd could not run (EAL cannot init here?): " + res.arms[0].reason;
            return result;
        }
        Table t = make_table(res, rounds, secs, failed, keep_logs);
        t.print();
        tables.push_back(std::move(t));
        results.push_back(std::move(res));
    }
    result.json = forward_json(results, opt, fwd.hugepages);

    if (keep_logs) {
        // An OVS failure does not fail the benchmark (it is an external reference), but its logs stay.
        dir_guard.keep = true;
        fmt::print("forward: logs of the failed runs kept in {}\n", dir.string());
    }
    if (failed) {
        result.failed = true;
        result.reason = "a forwarding run failed; logs kept in " + dir.string();
    }
    return result;
}

}  // namespace shesha::bench

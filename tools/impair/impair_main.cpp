// shesha-impair: loss, delay, jitter, reordering and duplication on one network interface of this
// machine, for tests and the lab (the kernel here has no netem). iptables-legacy rules in the
// interface's namespace send its IPv4 packets to an NFQUEUE; this program holds each verdict as
// long as the packet's delay, drops some, lets later packets overtake a few, and sends copies of
// others through a raw socket. Nothing is impaired unless this program runs: the rules are removed
// on exit (also on SIGINT/SIGTERM), `--cleanup` removes any that a killed run left, and while they
// are left without a listener the queue passes packets (--queue-bypass). See docs/tools.md.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <fmt/core.h>
// glibc's <netinet/in.h> before the kernel's headers, which would otherwise define in_addr first.
#include <netinet/in.h>
#include <netinet/ip.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <linux/netlink.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "clock.h"
#include "impair_stream.h"
#include "json_io.h"
#include "log_level.h"
#include "stop_signal.h"

extern char** environ;

namespace shesha::tools::impair {
namespace {

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;
// Copies this program sends carry this mark, and the rules let marked packets pass unqueued.
constexpr std::uint32_t kCopyMark = 0x5e5e0001;
constexpr std::uint32_t kQueueMaxLen = 65536;
constexpr std::size_t kRecvBufferSize = 256 * 1024;
constexpr std::size_t kVerdictBatchBytes = 16 * 1024;  // about 500 verdicts
constexpr int kSocketBufferBytes = 16 << 20;
constexpr std::int64_t kStopPollNs = 100'000'000;     // how often a wait checks for a signal
constexpr std::int64_t kStatsIntervalNs = 1'000'000'000;
constexpr const char* kIptables = "iptables-legacy";

enum Direction : int { kEgress = 0, kIngress = 1 };
constexpr std::array<const char*, 2> kDirectionNames{"egress", "ingress"};

struct Options {
    std::string netns;
    std::string dev;
    std::string direction = "both";
    std::string loss = "0";
    std::string duplicate = "0";
    std::string reorder = "0";
    std::string delay = "0";
    std::string jitter = "0";
    std::string reorder_max_hold = "50ms";
    std::uint32_t reorder_gap = 3;
    std::uint64_t seed = 1;
    double seconds = 0;
    std::string json = "-";
    std::string ready_file;
    int queue_num = -1;
    bool cleanup = false;
};

// "1%", "1" or "0.5%": a percentage in [0, 100].
std::optional<double> parse_percent(std::string text) {
    if (!text.empty() && text.back() == '%') text.pop_back();
    try {
        std::size_t used = 0;
        const double v = std::stod(text, &used);
        if (used != text.size() || !(v >= 0.0 && v <= 100.0)) return std::nullopt;
        return v;
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

// "5ms", "500us", "2s" or a bare number of milliseconds; >= 0 and at most a minute.
std::optional<std::int64_t> parse_duration_ns(const std::string& text) {
    struct Unit { const char* suffix; double ns; };
    static constexpr std::array<Unit, 4> units{{{"us", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"", 1e6}}};
    for (const Unit& u : units) {
        const std::size_t n = std::strlen(u.suffix);
        if (text.size() < n || text.compare(text.size() - n, n, u.suffix) != 0) continue;
        const std::string number = text.substr(0, text.size() - n);
        try {
            std::size_t used = 0;
            const double v = std::stod(number, &used);
            if (used != number.size() || !(v >= 0.0) || v * u.ns > 60e9) return std::nullopt;
            return static_cast<std::int64_t>(v * u.ns);
        } catch (const std::exception&) {
            return std::nullopt;
        }
    }
    return std::nullopt;
}

// Runs iptables-legacy with the arguments; returns its exit status (127 when it cannot start).
int run_iptables(const std::vector<std::string>& args, bool quiet, std::string* error_text) {
    std::vector<std::string> full{kIptables, "-w"};
    full.insert(full.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : full) argv.push_back(a.data());
    argv.push_back(nullptr);
    char err_template[] = "/tmp/shesha-impair-err-XXXXXX";
    const int err_fd = mkstemp(err_template);
    if (err_fd >= 0) unlink(err_template);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    if (err_fd >= 0) {
        posix_spawn_file_actions_adddup2(&actions, err_fd, 2);
    } else {
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    }
    pid_t pid = 0;
    const int rc = posix_spawnp(&pid, kIptables, &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
        if (err_fd >= 0) close(err_fd);
        if (error_text) *error_text = fmt::format("cannot run {}: {} (Debian package iptables)", kIptables, std::strerror(rc));
        return 127;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    if (err_fd >= 0) {
        if (code != 0 && !quiet && error_text) {
            std::string text(4096, '\0');
            const ssize_t n = pread(err_fd, text.data(), text.size(), 0);
            text.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
            while (!text.empty() && text.back() == '\n') text.pop_back();
            *error_text = text;
        }
        close(err_fd);
    }
    return code;
}

std::string chain_name(const std::string& dev) { return "shesha-imp-" + dev; }

// Removes this program's rules for the device: the jumps from PREROUTING/POSTROUTING and the
// chain. Safe to repeat; rules that are not there are not an error.
void remove_rules(const std::string& dev) {
    const std::string chain = chain_name(dev);
    for (int i = 0; i < 64 && run_iptables({"-t", "mangle", "-D", "POSTROUTING", "-o", dev, "-j", chain}, true, nullptr) == 0; ++i) {
    }
    for (int i = 0; i < 64 && run_iptables({"-t", "mangle", "-D", "PREROUTING", "-i", dev, "-j", chain}, true, nullptr) == 0; ++i) {
    }
    run_iptables({"-t", "mangle", "-F", chain}, true, nullptr);
    run_iptables({"-t", "mangle", "-X", chain}, true, nullptr);
}

bool install_rules(const std::string& dev, int queue_num, bool egress, bool ingress, std::string& error) {
    const std::string chain = chain_name(dev);
    const std::string mark = fmt::format("0x{:x}", kCopyMark);
    const std::vector<std::vector<std::string>> rules = [&] {
        std::vector<std::vector<std::string>> r{
            {"-t", "mangle", "-N", chain},
            {"-t", "mangle", "-A", chain, "-m", "mark", "--mark", mark, "-j", "RETURN"},
            // --queue-bypass: without a listener (this program killed) packets pass unimpaired.
            {"-t", "mangle", "-A", chain, "-j", "NFQUEUE", "--queue-num", std::to_string(queue_num), "--queue-bypass"},
        };
        if (egress) r.push_back({"-t", "mangle", "-A", "POSTROUTING", "-o", dev, "-j", chain});
        if (ingress) r.push_back({"-t", "mangle", "-A", "PREROUTING", "-i", dev, "-j", chain});
        return r;
    }();
    for (const auto& rule : rules) {
        std::string text;
        if (run_iptables(rule, false, &text) != 0) {
            std::string joined;
            for (const auto& a : rule) joined += " " + a;
            error = fmt::format("{}{} failed: {}", kIptables, joined, text);
            return false;
        }
    }
    return true;
}

bool enter_netns(const std::string& name, std::string& error) {
    const std::string path = "/run/netns/" + name;
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        error = fmt::format("--netns {}: cannot open {}: {}", name, path, std::strerror(errno));
        return false;
    }
    const int rc = setns(fd, CLONE_NEWNET);
    const int saved = errno;
    close(fd);
    if (rc != 0) {
        error = fmt::format("--netns {}: setns failed: {}", name, std::strerror(saved));
        return false;
    }
    return true;
}

// nfnetlink messages to the queue subsystem, built attribute by attribute.
class NetlinkMessage {
public:
    NetlinkMessage(std::uint16_t type, std::uint16_t flags, std::uint16_t queue_num, std::uint8_t family) {
        buf_.resize(NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(nfgenmsg)));
        auto* nlh = reinterpret_cast<nlmsghdr*>(buf_.data());
        nlh->nlmsg_type = static_cast<std::uint16_t>((NFNL_SUBSYS_QUEUE << 8) | type);
        nlh->nlmsg_flags = static_cast<std::uint16_t>(NLM_F_REQUEST | flags);
        auto* nfg = reinterpret_cast<nfgenmsg*>(buf_.data() + NLMSG_HDRLEN);
        nfg->nfgen_family = family;
        nfg->version = NFNETLINK_V0;
        nfg->res_id = htons(queue_num);
    }
    void add(std::uint16_t type, const void* data, std::size_t len) {
        const std::size_t at = buf_.size();
        buf_.resize(at + NLA_ALIGN(NLA_HDRLEN + len), 0);
        auto* nla = reinterpret_cast<nlattr*>(buf_.data() + at);
        nla->nla_type = type;
        nla->nla_len = static_cast<std::uint16_t>(NLA_HDRLEN + len);
        std::memcpy(buf_.data() + at + NLA_HDRLEN, data, len);
    }
    const std::vector<char>& finish(std::uint32_t seq) {
        auto* nlh = reinterpret_cast<nlmsghdr*>(buf_.data());
        nlh->nlmsg_len = static_cast<std::uint32_t>(buf_.size());
        nlh->nlmsg_seq = seq;
        return buf_;
    }

private:
    std::vector<char> buf_;
};

struct Packet {
    std::uint32_t id = 0;
    int hook = -1;
    const char* payload = nullptr;
    std::size_t payload_len = 0;
};

class Impairer {
public:
    Impairer(const Options& opts, const ImpairSpec& spec, bool egress, bool ingress)
        : opts_(opts), spec_(spec), egress_(egress), ingress_(ingress),
          streams_{ImpairStream(spec, opts.seed), ImpairStream(spec, opts.seed ^ 0x9e3779b97f4a7c15ULL)} {}
    ~Impairer() {
        if (nl_fd_ >= 0) close(nl_fd_);
        if (raw_fd_ >= 0) close(raw_fd_);
    }

    bool open_queue(int queue_num, std::string& error);
    int run();
    // After the rules are gone: the packets queued before that, then everything held, leave now;
    // the final counters are written.
    void finish(double elapsed_s);

private:
    bool config(std::uint8_t family, const void* attr_data, std::size_t attr_len, std::uint16_t attr_type, std::string& error);
    bool wait_ack(std::uint32_t seq, std::string& error);
    void receive_all();
    void on_packet(const Packet& p);
    void apply(const std::vector<Verdict>& verdicts, Direction d);
    void send_verdict(std::uint32_t id, bool accept);
    void flush_verdicts();
    void send_copy(std::uint32_t id);
    void release_due();
    std::optional<std::int64_t> next_due() const;
    void read_kernel_counters();
    std::string summary_json(double elapsed_s, bool final) const;
    void write_stats(double elapsed_s, bool final);

    const Options& opts_;
    ImpairSpec spec_;
    bool egress_;
    bool ingress_;
    std::array<ImpairStream, 2> streams_;
    int nl_fd_ = -1;
    int raw_fd_ = -1;
    int queue_num_ = 0;
    std::uint32_t seq_ = 1;
    std::vector<char> rx_;
    std::vector<Verdict> verdicts_;
    std::vector<char> tx_;  // verdicts not sent yet
    std::size_t tx_verdicts_ = 0;
    // Payload copies of held packets that are to be duplicated, by packet id.
    // Each one is dropped when its packet gets its verdict (sent first if the packet is duplicated).
    std::unordered_map<std::uint32_t, std::vector<char>> copies_;
    std::uint64_t duplicate_send_failed_ = 0;
    std::uint64_t verdict_send_failed_ = 0;
    std::uint64_t unknown_hook_ = 0;
    std::uint64_t flushed_at_exit_ = 0;
    std::uint64_t kernel_queue_dropped_ = 0;
    std::uint64_t kernel_user_dropped_ = 0;
    std::uint64_t netlink_overruns_ = 0;
};

bool Impairer::wait_ack(std::uint32_t seq, std::string& error) {
    std::vector<char> buf(8192);
    for (;;) {
        const ssize_t n = recv(nl_fd_, buf.data(), buf.size(), 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            error = fmt::format("netlink: {}", std::strerror(errno));
            return false;
        }
        int left = static_cast<int>(n);
        for (auto* nlh = reinterpret_cast<nlmsghdr*>(buf.data()); NLMSG_OK(nlh, static_cast<unsigned>(left));
             nlh = NLMSG_NEXT(nlh, left)) {
            if (nlh->nlmsg_type == NLMSG_ERROR && nlh->nlmsg_seq == seq) {
                const auto* err = static_cast<const nlmsgerr*>(NLMSG_DATA(nlh));
                if (err->error == 0) return true;
                error = fmt::format("netlink queue config: {}", std::strerror(-err->error));
                return false;
            }
        }
    }
}

bool Impairer::config(std::uint8_t family, const void* attr_data, std::size_t attr_len, std::uint16_t attr_type,
                      std::string& error) {
    NetlinkMessage msg(NFQNL_MSG_CONFIG, NLM_F_ACK, static_cast<std::uint16_t>(queue_num_), family);
    msg.add(attr_type, attr_data, attr_len);
    const std::uint32_t seq = seq_++;
    const auto& buf = msg.finish(seq);
    if (send(nl_fd_, buf.data(), buf.size(), 0) < 0) {
        error = fmt::format("netlink send: {}", std::strerror(errno));
        return false;
    }
    return wait_ack(seq, error);
}

bool Impairer::open_queue(int queue_num, std::string& error) {
    queue_num_ = queue_num;
    nl_fd_ = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
    if (nl_fd_ < 0) {
        error = fmt::format("netlink socket: {}", std::strerror(errno));
        return false;
    }
    sockaddr_nl local{};
    local.nl_family = AF_NETLINK;
    if (bind(nl_fd_, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) {
        error = fmt::format("netlink bind: {}", std::strerror(errno));
        return false;
    }
    int size = kSocketBufferBytes;
    setsockopt(nl_fd_, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size);
    setsockopt(nl_fd_, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size);

    nfqnl_msg_config_cmd bind_cmd{};
    bind_cmd.command = NFQNL_CFG_CMD_BIND;
    bind_cmd.pf = htons(AF_INET);
    if (!config(AF_UNSPEC, &bind_cmd, sizeof bind_cmd, NFQA_CFG_CMD, error)) {
        error = fmt::format("queue {}: {} (another shesha-impair on this namespace? pick --queue-num)", queue_num, error);
        return false;
    }
    // The whole packet only when copies are to be sent; otherwise the metadata is enough.
    nfqnl_msg_config_params params{};
    params.copy_range = htonl(spec_.duplicate_pct > 0 ? 0xffff : 0);
    params.copy_mode = spec_.duplicate_pct > 0 ? NFQNL_COPY_PACKET : NFQNL_COPY_META;
    if (!config(AF_UNSPEC, &params, sizeof params, NFQA_CFG_PARAMS, error)) return false;
    const std::uint32_t maxlen = htonl(kQueueMaxLen);
    if (!config(AF_UNSPEC, &maxlen, sizeof maxlen, NFQA_CFG_QUEUE_MAXLEN, error)) return false;
    int one = 1;
    setsockopt(nl_fd_, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof one);
    const int flags = fcntl(nl_fd_, F_GETFL);
    fcntl(nl_fd_, F_SETFL, flags | O_NONBLOCK);

    if (spec_.duplicate_pct > 0) {
        raw_fd_ = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
        if (raw_fd_ < 0) {
            error = fmt::format("raw socket for copies: {}", std::strerror(errno));
            return false;
        }
        const std::uint32_t mark = kCopyMark;
        if (setsockopt(raw_fd_, SOL_SOCKET, SO_MARK, &mark, sizeof mark) != 0) {
            error = fmt::format("SO_MARK on the raw socket: {}", std::strerror(errno));
            return false;
        }
        setsockopt(raw_fd_, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size);
    }
    rx_.resize(kRecvBufferSize);
    return true;
}

// Verdicts are queued and sent together (one netlink datagram holds many messages): one system
// call per batch of packets rather than per packet.
void Impairer::send_verdict(std::uint32_t id, bool accept) {
    NetlinkMessage msg(NFQNL_MSG_VERDICT, 0, static_cast<std::uint16_t>(queue_num_), AF_UNSPEC);
    nfqnl_msg_verdict_hdr hdr{};
    hdr.verdict = htonl(accept ? NF_ACCEPT : NF_DROP);
    hdr.id = htonl(id);
    msg.add(NFQA_VERDICT_HDR, &hdr, sizeof hdr);
    const auto& buf = msg.finish(seq_++);
    tx_.insert(tx_.end(), buf.begin(), buf.end());
    ++tx_verdicts_;
    if (tx_.size() >= kVerdictBatchBytes) flush_verdicts();
}

void Impairer::flush_verdicts() {
    if (tx_.empty()) return;
    while (send(nl_fd_, tx_.data(), tx_.size(), 0) < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) {
            pollfd pfd{nl_fd_, POLLOUT, 0};
            poll(&pfd, 1, 10);
            continue;
        }
        verdict_send_failed_ += tx_verdicts_;
        spdlog::warn("{} verdicts: {}", tx_verdicts_, std::strerror(errno));
        break;
    }
    tx_.clear();
    tx_verdicts_ = 0;
}

// The copy leaves through a raw socket with the copy mark, which the rules let pass: on egress it
// goes out of the device after the original; on ingress it is addressed to this host, so the
// stack delivers it locally (through lo) as a second arrival of the same datagram.
void Impairer::send_copy(std::uint32_t id) {
    auto it = copies_.find(id);
    if (it == copies_.end()) {
        ++duplicate_send_failed_;
        return;
    }
    const std::vector<char>& pkt = it->second;
    bool sent = false;
    if (pkt.size() >= sizeof(iphdr)) {
        const auto* ip = reinterpret_cast<const iphdr*>(pkt.data());
        sockaddr_in dst{};
        dst.sin_family = AF_INET;
        dst.sin_addr.s_addr = ip->daddr;
        sent = sendto(raw_fd_, pkt.data(), pkt.size(), 0, reinterpret_cast<sockaddr*>(&dst), sizeof dst) ==
               static_cast<ssize_t>(pkt.size());
    }
    if (!sent) ++duplicate_send_failed_;
    copies_.erase(it);
}

void Impairer::apply(const std::vector<Verdict>& verdicts, Direction) {
    for (const Verdict& v : verdicts) {
        send_verdict(v.id, v.accept);
        if (v.accept && v.duplicate) {
            flush_verdicts();  // the original leaves before its copy
            send_copy(v.id);
        } else if (!copies_.empty()) {
            copies_.erase(v.id);
        }
    }
}

void Impairer::on_packet(const Packet& p) {
    Direction d;
    if (p.hook == NF_INET_POST_ROUTING) {
        d = kEgress;
    } else if (p.hook == NF_INET_PRE_ROUTING) {
        d = kIngress;
    } else {
        ++unknown_hook_;
        send_verdict(p.id, true);
        return;
    }
    if (spec_.duplicate_pct > 0 && p.payload != nullptr) {
        copies_.insert_or_assign(p.id, std::vector<char>(p.payload, p.payload + p.payload_len));
    }
    verdicts_.clear();
    streams_[d].on_packet(p.id, static_cast<std::int64_t>(clock::monotonic_ns()), verdicts_);
    apply(verdicts_, d);
}

void Impairer::receive_all() {
    for (;;) {
        const ssize_t n = recv(nl_fd_, rx_.data(), rx_.size(), MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == ENOBUFS) {
                ++netlink_overruns_;
                continue;
            }
            return;  // EAGAIN: nothing more now
        }
        int left = static_cast<int>(n);
        for (auto* nlh = reinterpret_cast<nlmsghdr*>(rx_.data()); NLMSG_OK(nlh, static_cast<unsigned>(left));
             nlh = NLMSG_NEXT(nlh, left)) {
            if ((nlh->nlmsg_type & 0xff) != NFQNL_MSG_PACKET || (nlh->nlmsg_type >> 8) != NFNL_SUBSYS_QUEUE) continue;
            Packet p;
            const std::size_t attrs_at = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(nfgenmsg));
            const char* base = reinterpret_cast<const char*>(nlh);
            std::size_t at = attrs_at;
            bool have_id = false;
            while (at + NLA_HDRLEN <= nlh->nlmsg_len) {
                const auto* nla = reinterpret_cast<const nlattr*>(base + at);
                if (nla->nla_len < NLA_HDRLEN || at + nla->nla_len > nlh->nlmsg_len) break;
                const char* data = base + at + NLA_HDRLEN;
                const std::size_t len = nla->nla_len - NLA_HDRLEN;
                switch (nla->nla_type & NLA_TYPE_MASK) {
                    case NFQA_PACKET_HDR:
                        if (len >= sizeof(nfqnl_msg_packet_hdr)) {
                            const auto* hdr = reinterpret_cast<const nfqnl_msg_packet_hdr*>(data);
                            p.id = ntohl(hdr->packet_id);
                            p.hook = hdr->hook;
                            have_id = true;
                        }
                        break;
                    case NFQA_PAYLOAD:
                        p.payload = data;
                        p.payload_len = len;
                        break;
                    default:
                        break;
                }
                at += NLA_ALIGN(nla->nla_len);
            }
            if (have_id) on_packet(p);
        }
    }
}

std::optional<std::int64_t> Impairer::next_due() const {
    std::optional<std::int64_t> due;
    for (const auto& s : streams_) {
        if (const auto d = s.next_due(); d && (!due || *d < *due)) due = d;
    }
    return due;
}

void Impairer::release_due() {
    const auto now = static_cast<std::int64_t>(clock::monotonic_ns());
    for (int d = 0; d < 2; ++d) {
        verdicts_.clear();
        streams_[d].release_due(now, verdicts_);
        apply(verdicts_, static_cast<Direction>(d));
    }
}

// /proc/net/netfilter/nfnetlink_queue: queue portid waiting copy_mode copy_range queue_dropped
// user_dropped last_id 1. Packets the kernel dropped before this program saw them.
void Impairer::read_kernel_counters() {
    std::ifstream in("/proc/net/netfilter/nfnetlink_queue");
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::uint64_t queue = 0, portid = 0, waiting = 0, mode = 0, range = 0, queue_dropped = 0, user_dropped = 0;
        if (fields >> queue >> portid >> waiting >> mode >> range >> queue_dropped >> user_dropped &&
            queue == static_cast<std::uint64_t>(queue_num_)) {
            kernel_queue_dropped_ = queue_dropped;
            kernel_user_dropped_ = user_dropped;
        }
    }
}

std::string Impairer::summary_json(double elapsed_s, bool final) const {
    using json::Json;
    Json j = Json::object();
    j["dev"] = opts_.dev;
    j["netns"] = opts_.netns;
    j["direction"] = opts_.direction;
    j["seed"] = opts_.seed;
    j["queue_num"] = queue_num_;
    j["final"] = final;
    j["seconds"] = json::fixed(elapsed_s, 3);
    j["config"] = Json::object();
    j["config"]["loss_pct"] = spec_.loss_pct;
    j["config"]["duplicate_pct"] = spec_.duplicate_pct;
    j["config"]["reorder_pct"] = spec_.reorder_pct;
    j["config"]["reorder_gap"] = spec_.reorder_gap;
    j["config"]["reorder_max_hold_ms"] = static_cast<double>(spec_.reorder_max_hold_ns) / 1e6;
    j["config"]["delay_ms"] = static_cast<double>(spec_.delay_ns) / 1e6;
    j["config"]["jitter_ms"] = static_cast<double>(spec_.jitter_ns) / 1e6;
    StreamCounters total;
    Json per = Json::object();
    for (int d = 0; d < 2; ++d) {
        const StreamCounters& c = streams_[d].counters();
        Json& s = per[kDirectionNames[d]] = Json::object();
        s["received"] = c.received;
        s["passed"] = c.passed;
        s["dropped"] = c.dropped;
        s["delayed"] = c.delayed;
        s["reorder_held"] = c.reorder_held;
        s["reordered"] = c.reordered;
        s["duplicated"] = c.duplicated;
        s["held_now"] = streams_[d].held();
        total.received += c.received;
        total.passed += c.passed;
        total.dropped += c.dropped;
        total.delayed += c.delayed;
        total.reorder_held += c.reorder_held;
        total.reordered += c.reordered;
        total.duplicated += c.duplicated;
    }
    j["received"] = total.received;
    j["passed"] = total.passed;
    j["dropped"] = total.dropped;
    j["delayed"] = total.delayed;
    j["reorder_held"] = total.reorder_held;
    j["reordered"] = total.reordered;
    j["duplicated"] = total.duplicated - duplicate_send_failed_;
    j["duplicate_send_failed"] = duplicate_send_failed_;
    j["verdict_send_failed"] = verdict_send_failed_;
    j["flushed_at_exit"] = flushed_at_exit_;
    j["copies_held"] = copies_.size();  // packets held with a copy in memory (0 once all are released)
    j["kernel_queue_dropped"] = kernel_queue_dropped_;
    j["kernel_user_dropped"] = kernel_user_dropped_;
    j["netlink_overruns"] = netlink_overruns_;
    j["other_hook"] = unknown_hook_;
    j["directions"] = per;
    return json::pretty(j);
}

void Impairer::write_stats(double elapsed_s, bool final) {
    if (opts_.json.empty() || (opts_.json == "-" && !final)) return;
    std::string err;
    if (opts_.json == "-") {
        std::fputs(summary_json(elapsed_s, final).c_str(), stdout);
        std::fflush(stdout);
        return;
    }
    // Written to a temporary file and renamed, so a reader never sees half a file.
    const std::string tmp = opts_.json + ".tmp";
    if (!json::write_text_file(tmp, summary_json(elapsed_s, final), err) || std::rename(tmp.c_str(), opts_.json.c_str()) != 0) {
        spdlog::warn("cannot write {}: {}", opts_.json, err.empty() ? std::strerror(errno) : err);
    }
}

int Impairer::run() {
    const auto start = static_cast<std::int64_t>(clock::monotonic_ns());
    const std::int64_t end = opts_.seconds > 0 ? start + static_cast<std::int64_t>(opts_.seconds * 1e9) : 0;
    std::int64_t next_stats = start + kStatsIntervalNs;
    while (!stop_signal::requested()) {
        const auto now = static_cast<std::int64_t>(clock::monotonic_ns());
        if (end != 0 && now >= end) break;
        if (now >= next_stats) {
            read_kernel_counters();
            write_stats(static_cast<double>(now - start) / 1e9, false);
            next_stats = now + kStatsIntervalNs;
        }
        std::int64_t wake = std::min(now + kStopPollNs, next_stats);
        if (end != 0) wake = std::min(wake, end);
        if (const auto due = next_due()) wake = std::min(wake, *due);
        const std::int64_t wait = std::max<std::int64_t>(0, wake - now);
        timespec ts{static_cast<time_t>(wait / 1'000'000'000), static_cast<long>(wait % 1'000'000'000)};
        pollfd pfd{nl_fd_, POLLIN, 0};
        ppoll(&pfd, 1, &ts, nullptr);
        if (pfd.revents & POLLIN) receive_all();
        release_due();
        flush_verdicts();
    }
    return 0;
}

void Impairer::finish(double elapsed_s) {
    receive_all();
    for (int d = 0; d < 2; ++d) {
        verdicts_.clear();
        streams_[d].release_all(verdicts_);
        flushed_at_exit_ += verdicts_.size();
        apply(verdicts_, static_cast<Direction>(d));
    }
    flush_verdicts();
    read_kernel_counters();
    write_stats(elapsed_s, true);
}

int main_impl(int argc, char** argv) {
    Options o;
    std::string log_level = "info";
    CLI::App app{"shesha-impair: loss, delay, jitter, reordering and duplication of IPv4 packets on one interface "
                 "(NFQUEUE through iptables-legacy; rules removed on exit)"};
    app.add_option("--netns", o.netns, "network namespace (a name under /run/netns); default: the current one");
    app.add_option("--dev", o.dev, "interface to impair")->required();
    app.add_option("--direction", o.direction, "egress (leaving the interface), ingress (arriving) or both")
        ->check(CLI::IsMember({"egress", "ingress", "both"}))->capture_default_str();
    app.add_option("--loss", o.loss, "percentage of packets dropped, e.g. 1% (each direction)")->capture_default_str();
    app.add_option("--duplicate", o.duplicate, "percentage of passed packets sent twice")->capture_default_str();
    app.add_option("--reorder", o.reorder, "percentage of passed packets held until --reorder-gap later ones passed")
        ->capture_default_str();
    app.add_option("--reorder-gap", o.reorder_gap, "later packets that overtake a reordered one (>= 1)")
        ->check(CLI::Range(1u, 1000u))->capture_default_str();
    app.add_option("--reorder-max-hold", o.reorder_max_hold, "a reordered packet leaves by then even without later traffic")
        ->capture_default_str();
    app.add_option("--delay", o.delay, "added to every passed packet: 5ms, 500us, 1s, or a number of ms")->capture_default_str();
    app.add_option("--jitter", o.jitter, "uniform +-jitter on the delay; never reorders by itself")->capture_default_str();
    app.add_option("--seed", o.seed, "seed of the decisions (same seed and arrival order: same decisions)")->capture_default_str();
    app.add_option("--seconds", o.seconds, "stop after S seconds (default: at SIGINT/SIGTERM)")->check(CLI::NonNegativeNumber);
    app.add_option("--json", o.json, "counters JSON at exit (- = stdout; a file is also rewritten every second)")
        ->capture_default_str();
    app.add_option("--ready-file", o.ready_file, "written once the rules are in place and packets are being impaired");
    app.add_option("--queue-num", o.queue_num, "NFQUEUE number (default 24064 + the interface's index)")
        ->check(CLI::Range(0, 65535));
    app.add_flag("--cleanup", o.cleanup, "only remove this program's rules for --dev (safe to repeat) and exit");
    logging::add_log_level_option(app, log_level);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : kExitUsage;
    }
    logging::init("shesha-impair", log_level);

    ImpairSpec spec;
    const auto bad = [](const std::string& option, const std::string& value, const char* what) {
        std::fprintf(stderr, "%s: %s: %s\n", option.c_str(), value.c_str(), what);
        return kExitUsage;
    };
    // A parsed value, if it parsed, into its field.
    const auto take = [](const auto& parsed, auto& into) {
        if (!parsed) return false;
        into = *parsed;
        return true;
    };
    const auto percent = [&](const std::string& value, double& into) { return take(parse_percent(value), into); };
    if (!percent(o.loss, spec.loss_pct)) return bad("--loss", o.loss, "expected a percentage in 0..100, e.g. 1%");
    if (!percent(o.duplicate, spec.duplicate_pct)) return bad("--duplicate", o.duplicate, "expected a percentage in 0..100");
    if (!percent(o.reorder, spec.reorder_pct)) return bad("--reorder", o.reorder, "expected a percentage in 0..100");
    const auto duration = [&](const std::string& value, std::int64_t& into) { return take(parse_duration_ns(value), into); };
    if (!duration(o.delay, spec.delay_ns)) return bad("--delay", o.delay, "expected a duration such as 5ms, 500us or 1s (0..60 s)");
    if (!duration(o.jitter, spec.jitter_ns)) return bad("--jitter", o.jitter, "expected a duration such as 2ms (0..60 s)");
    if (!duration(o.reorder_max_hold, spec.reorder_max_hold_ns)) {
        return bad("--reorder-max-hold", o.reorder_max_hold, "expected a duration such as 50ms");
    }
    spec.reorder_gap = o.reorder_gap;
    if (o.dev.empty() || o.dev.size() >= IFNAMSIZ || o.dev.find_first_of("/ \t") != std::string::npos) {
        return bad("--dev", o.dev, "not an interface name");
    }

    std::string error;
    if (!o.netns.empty() && !enter_netns(o.netns, error)) {
        spdlog::error("{}", error);
        return kExitRuntime;
    }
    if (o.cleanup) {
        remove_rules(o.dev);
        return 0;
    }
    const unsigned ifindex = if_nametoindex(o.dev.c_str());
    if (ifindex == 0) {
        spdlog::error("--dev {}: no such interface{}", o.dev, o.netns.empty() ? "" : " in namespace " + o.netns);
        return kExitRuntime;
    }
    const int queue_num = o.queue_num >= 0 ? o.queue_num : static_cast<int>((24064 + ifindex) % 65536);
    const bool egress = o.direction != "ingress";
    const bool ingress = o.direction != "egress";

    stop_signal::install();
    Impairer impairer(o, spec, egress, ingress);
    if (!impairer.open_queue(queue_num, error)) {
        spdlog::error("{}", error);
        return kExitRuntime;
    }
    remove_rules(o.dev);  // leftovers of a killed run
    if (!install_rules(o.dev, queue_num, egress, ingress, error)) {
        remove_rules(o.dev);
        spdlog::error("{}", error);
        return kExitRuntime;
    }
    if (!o.ready_file.empty()) {
        std::string werr;
        if (!json::write_text_file(o.ready_file, fmt::format("{}\n", getpid()), werr)) {
            remove_rules(o.dev);
            spdlog::error("--ready-file: {}", werr);
            return kExitRuntime;
        }
    }
    spdlog::info("impairing {}{} ({}): loss {}%, delay {} ms, jitter {} ms, reorder {}%, duplicate {}%, seed {}",
                 o.dev, o.netns.empty() ? "" : " in " + o.netns, o.direction, spec.loss_pct,
                 static_cast<double>(spec.delay_ns) / 1e6, static_cast<double>(spec.jitter_ns) / 1e6, spec.reorder_pct,
                 spec.duplicate_pct, o.seed);
    const auto start = clock::monotonic_ns();
    impairer.run();
    remove_rules(o.dev);
    impairer.finish(static_cast<double>(clock::monotonic_ns() - start) / 1e9);
    return 0;
}

}  // namespace
}  // namespace shesha::tools::impair

int main(int argc, char** argv) { return shesha::tools::impair::main_impl(argc, argv); }

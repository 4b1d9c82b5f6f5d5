// shesha-sink: receives Shesha datagrams on a kernel UDP socket, validates every one with the
// common codec, verifies gradient sums exactly (common/gradient_pattern.h), optionally returns
// CREDITs (closed loop for shesha-gen), and reports per-cluster statistics (ages, chunk-level
// Age-of-Model, merge ratio, throughput). See docs/tools.md for the CLI and the JSON summary.
#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "aom_tracker.h"
#include "clock.h"
#include "gradient_pattern.h"
#include "json_io.h"
#include "log_level.h"
#include "latency_histogram.h"
#include "protocol.h"
#include "stop_signal.h"
#include "udp.h"


namespace shesha::tools::sink {
namespace {

constexpr int kExitUsage = 2;
constexpr int kExitRuntime = 1;
constexpr int kExitBadSums = 3;
constexpr std::size_t kBatch = 32;                  // datagrams per recvmmsg
constexpr std::size_t kRxBufferSize = 9216;         // a jumbo frame's payload fits
constexpr std::size_t kMaxTrackedClusters = 256;    // per-cluster detail beyond this goes to totals only
constexpr int kMaxLoggedBadSums = 5;
constexpr int kPatternCheckCount = 5;               // pattern::Check values

struct Options {
    std::string bind;
    std::uint16_t port = proto::kDefaultUdpPort;
    double duration_s = 0;
    double until_idle_s = 0;
    std::string json;
    bool progress = false;
    bool credit = false;
    std::uint32_t expect_elems = 0;
    int rcvbuf_bytes = 8 << 20;
};

struct ClusterStats {
    std::uint16_t cluster_id = 0;
    std::uint64_t chunks = 0;
    std::uint64_t contributions = 0;
    std::uint64_t merged_chunks = 0;
    std::uint32_t max_contrib = 0;
    std::uint64_t ce_marked = 0;      // header flag set by a switch queue
    std::uint64_t ip_ce_marked = 0;   // IP ECN field == CE
    std::uint64_t exact = 0;
    std::uint64_t bad = 0;
    std::uint64_t bytes = 0;
    std::uint64_t first_rx_ns = 0;
    std::uint64_t last_rx_ns = 0;
    std::uint64_t negative_ages = 0;  // generation stamped after receipt: clocks disagree
    metrics::LatencyHistogram age_latest;      // now - ts_latest
    metrics::LatencyHistogram age_earliest;    // now - ts_earliest
    metrics::AomTracker aom;         // AoM sampled over the whole receive loop
    metrics::AomTracker aom_active;  // the same, only up to this cluster's last arrival (filled at exit)
};

struct Counters {
    std::uint64_t datagrams = 0;
    std::uint64_t bytes = 0;
    std::array<std::uint64_t, proto::kDecodeErrorCount> malformed{};
    std::uint64_t malformed_total = 0;
    std::uint64_t oversize = 0;  // larger than the receive buffer (also counted as malformed)
    std::array<std::uint64_t, 5> by_type{};  // index = MsgType value (1..4)
    // Gradient totals, all clusters (including untracked ones).
    std::uint64_t chunks = 0;
    std::uint64_t contributions = 0;
    std::uint64_t merged_chunks = 0;
    std::uint64_t exact = 0;
    std::uint64_t bad = 0;
    std::uint64_t bad_merged = 0;  // wrong sums in chunks holding more than one contribution
    std::array<std::uint64_t, kPatternCheckCount> bad_by_check{};
    std::uint64_t bf16_unverified = 0;
    std::uint64_t elem_count_mismatch = 0;  // --expect-elems violations (also verified as usual)
    std::uint64_t ce_marked = 0;
    std::uint64_t ip_ce_marked = 0;
    std::uint64_t gradient_bytes = 0;
    std::uint64_t untracked_cluster_chunks = 0;
    std::uint64_t first_gradient_ns = 0;
    std::uint64_t last_gradient_ns = 0;
    std::uint64_t credits_sent = 0;
    std::uint64_t credit_send_errors = 0;
    std::uint64_t kernel_drops = 0;  // SO_RXQ_OVFL: datagrams the socket dropped (buffer full)
};

const char* check_name(pattern::Check c) {
    switch (c) {
    case pattern::Check::Ok: return "ok";
    case pattern::Check::TooShort: return "too_short";
    case pattern::Check::CountMismatch: return "count_mismatch";
    case pattern::Check::WeightInvalid: return "weight_invalid";
    case pattern::Check::ElementMismatch: return "element_mismatch";
    }
    return "unknown";
}

double ns_to_ms(double ns) { return ns / 1e6; }

class Sink {
public:
    Sink(const Options& opts, int fd) : opts_(opts), fd_(fd) {}
    int run();

private:
    void handle(std::span<const std::uint8_t> bytes, const sockaddr_in& from, std::uint8_t ip_tos, std::uint64_t now_ns);
    void handle_gradient(const proto::Message& msg, const sockaddr_in& from, bool ip_ce, std::uint64_t now_ns,
                         std::size_t wire_bytes);
    void send_credit(const proto::Header& g, bool ce, const sockaddr_in& to);
    ClusterStats* cluster(std::uint16_t id);
    int receive_batch();
    void progress_line(std::uint64_t now_mono);
    std::string summary_json(double elapsed_s);
    void print_table(double elapsed_s);

    const Options& opts_;
    int fd_;
    Counters c_;
    std::map<std::uint16_t, std::unique_ptr<ClusterStats>> clusters_;
    std::array<float, proto::kMaxElements> elems_{};
    std::array<std::uint8_t, proto::kHeaderSize + proto::kCreditBodySize> credit_buf_{};
    int logged_bad_ = 0;
    std::uint64_t start_mono_ = 0;
};

ClusterStats* Sink::cluster(std::uint16_t id) {
    const auto it = clusters_.find(id);
    if (it != clusters_.end()) return it->second.get();
    if (clusters_.size() >= kMaxTrackedClusters) return nullptr;
    auto cs = std::make_unique<ClusterStats>();
    cs->cluster_id = id;
    return clusters_.emplace(id, std::move(cs)).first->second.get();
}

void Sink::send_credit(const proto::Header& g, bool ce, const sockaddr_in& to) {
    proto::Header h;
    h.type = proto::MsgType::Credit;
    h.elem_type = proto::ElemType::None;
    h.flags = ce ? proto::flag::kCongestionEcho : 0;
    h.cluster_id = g.cluster_id;
    h.worker_id = g.worker_id;
    h.model_version = g.model_version;
    h.seq = g.seq;
    h.chunk_index = g.chunk_index;
    h.chunk_count = g.chunk_count;
    h.elem_count = 0;
    h.contrib_count = 1;
    h.ts_earliest_ns = g.ts_earliest_ns;
    h.ts_latest_ns = g.ts_latest_ns;
    proto::CreditBody body;
    body.credits = g.contrib_count;
    body.acked_seq = g.seq;
    body.learner_version = g.model_version;
    body.ce_count = ce ? 1 : 0;
    std::array<std::uint8_t, proto::kCreditBodySize> body_bytes{};
    proto::encode_credit(body, body_bytes);
    const std::size_t len = proto::encode(h, body_bytes, credit_buf_);
    if (len == 0 ||
        sendto(fd_, credit_buf_.data(), len, MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&to), sizeof to) !=
            static_cast<ssize_t>(len)) {
        ++c_.credit_send_errors;
        return;
    }
    ++c_.credits_sent;
}

void Sink::handle_gradient(const proto::Message& msg, const sockaddr_in& from, bool ip_ce, std::uint64_t now_ns,
                           std::size_t wire_bytes) {
    const proto::Header& h = msg.hdr;
    ++c_.chunks;
    c_.contributions += h.contrib_count;
    c_.gradient_bytes += wire_bytes;
    if (c_.first_gradient_ns == 0) c_.first_gradient_ns = now_ns;
    c_.last_gradient_ns = now_ns;
    const bool merged = h.contrib_count > 1;
    const bool ce = (h.flags & proto::flag::kCongestionExperienced) != 0;
    if (merged) ++c_.merged_chunks;
    if (ce) ++c_.ce_marked;
    if (ip_ce) ++c_.ip_ce_marked;
    if (opts_.expect_elems != 0 && h.elem_count != opts_.expect_elems) ++c_.elem_count_mismatch;

    // Verify the exact sum (fp32 only: the pattern is defined on binary32 elements).
    bool verified = false, exact = false;
    if (h.elem_type == proto::ElemType::F32) {
        verified = true;
        const std::size_t n = h.elem_count;
        std::memcpy(elems_.data(), msg.payload.data(), n * sizeof(float));  // payload may be unaligned
        std::size_t bad_index = 0;
        const pattern::Check check = pattern::verify(elems_.data(), n, h.cluster_id, h.chunk_index, h.contrib_count, &bad_index);
        exact = check == pattern::Check::Ok;
        if (exact) {
            ++c_.exact;
        } else {
            ++c_.bad;
            if (h.contrib_count > 1) ++c_.bad_merged;
            ++c_.bad_by_check[static_cast<std::size_t>(check)];
            if (logged_bad_++ < kMaxLoggedBadSums) {
                const float found = bad_index < n ? elems_[bad_index] : 0.0f;
                const float expected = bad_index == 0 ? static_cast<float>(h.contrib_count)
                                     : bad_index >= 2 && n >= 2 ? elems_[1] * pattern::g(h.cluster_id, h.chunk_index, bad_index)
                                                                : 0.0f;
                spdlog::warn("BAD SUM ({}) from {}: cluster {} worker {} seq {} version {} chunk {}/{} "
                             "contrib {} flags 0x{:02x}: element {} = {} (expected {}{})",
                             check_name(check), net::format_endpoint(from), h.cluster_id, h.worker_id, h.seq,
                             h.model_version, h.chunk_index, h.chunk_count, h.contrib_count, h.flags, bad_index, found,
                             expected, bad_index == 1 ? ", weight sum out of range" : "");
            }
        }
    } else {
        ++c_.bf16_unverified;
    }

    if (ClusterStats* cs = cluster(h.cluster_id)) {
        ++cs->chunks;
        cs->contributions += h.contrib_count;
        if (merged) ++cs->merged_chunks;
        cs->max_contrib = std::max<std::uint32_t>(cs->max_contrib, h.contrib_count);
        if (ce) ++cs->ce_marked;
        if (ip_ce) ++cs->ip_ce_marked;
        if (verified) ++(exact ? cs->exact : cs->bad);
        cs->bytes += wire_bytes;
        if (cs->first_rx_ns == 0) cs->first_rx_ns = now_ns;
        cs->last_rx_ns = now_ns;
        const auto age = [&](metrics::LatencyHistogram& hist, std::uint64_t ts) {
            if (ts > now_ns) {
                ++cs->negative_ages;
                hist.add(0);
            } else {
                hist.add(now_ns - ts);
            }
        };
        age(cs->age_latest, h.ts_latest_ns);
        age(cs->age_earliest, h.ts_earliest_ns);
        cs->aom.on_receive(now_ns, h.ts_latest_ns);
    } else {
        ++c_.untracked_cluster_chunks;
    }

    if (opts_.credit) send_credit(h, ce, from);
}

void Sink::handle(std::span<const std::uint8_t> bytes, const sockaddr_in& from, std::uint8_t ip_tos,
                  std::uint64_t now_ns) {
    ++c_.datagrams;
    c_.bytes += bytes.size();
    proto::Message msg;
    const proto::DecodeError err = proto::decode(bytes, msg);
    if (err != proto::DecodeError::Ok) {
        ++c_.malformed_total;
        const auto idx = static_cast<std::size_t>(err);
        if (idx < c_.malformed.size()) ++c_.malformed[idx];
        return;
    }
    const auto type = static_cast<std::size_t>(msg.hdr.type);
    if (type < c_.by_type.size()) ++c_.by_type[type];
    if (msg.hdr.type == proto::MsgType::Gradient)
        handle_gradient(msg, from, (ip_tos & 0x03) == 0x03, now_ns, bytes.size());
}

// Receives up to one batch without blocking. Returns datagrams received, 0 if none, -1 on error.
int Sink::receive_batch() {
    static std::array<std::array<std::uint8_t, kRxBufferSize>, kBatch> bufs;
    std::array<std::array<std::uint8_t, CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(std::uint32_t)) + 64>, kBatch> ctrl{};
    std::array<mmsghdr, kBatch> msgs{};
    std::array<iovec, kBatch> iov{};
    std::array<sockaddr_in, kBatch> from{};
    for (std::size_t i = 0; i < kBatch; ++i) {
        iov[i] = {bufs[i].data(), bufs[i].size()};
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_name = &from[i];
        msgs[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
        msgs[i].msg_hdr.msg_control = ctrl[i].data();
        msgs[i].msg_hdr.msg_controllen = ctrl[i].size();
    }
    const int n = recvmmsg(fd_, msgs.data(), kBatch, MSG_DONTWAIT, nullptr);
    if (n < 0) return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -1;
    for (int i = 0; i < n; ++i) {
        const std::uint64_t now_ns = clock::realtime_ns();
        msghdr& mh = msgs[static_cast<std::size_t>(i)].msg_hdr;
        std::uint8_t tos = 0;
        for (cmsghdr* cm = CMSG_FIRSTHDR(&mh); cm != nullptr; cm = CMSG_NXTHDR(&mh, cm)) {
            if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_TOS) {
                std::memcpy(&tos, CMSG_DATA(cm), 1);
            } else if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SO_RXQ_OVFL) {
                std::uint32_t drops = 0;
                std::memcpy(&drops, CMSG_DATA(cm), sizeof drops);
                c_.kernel_drops = drops;
            }
        }
        const std::size_t len = msgs[static_cast<std::size_t>(i)].msg_len;
        if (mh.msg_flags & MSG_TRUNC) {
            ++c_.datagrams;
            ++c_.oversize;
            ++c_.malformed_total;
            continue;
        }
        handle(std::span<const std::uint8_t>(bufs[static_cast<std::size_t>(i)].data(), len),
               from[static_cast<std::size_t>(i)], tos, now_ns);
    }
    return n;
}

void Sink::progress_line(std::uint64_t now_mono) {
    spdlog::info("t={:.1f}s datagrams={} chunks={} contributions={} merged={} exact={} bad={} "
                 "malformed={} credits_sent={} kernel_drops={}",
               static_cast<double>(now_mono - start_mono_) / 1e9, c_.datagrams, c_.chunks, c_.contributions,
               c_.merged_chunks, c_.exact, c_.bad, c_.malformed_total, c_.credits_sent, c_.kernel_drops);
}

int Sink::run() {
    start_mono_ = clock::monotonic_ns();
    const auto seconds = [](double s) { return static_cast<std::uint64_t>(s * 1e9); };
    const std::uint64_t end = opts_.duration_s > 0 ? start_mono_ + seconds(opts_.duration_s)
                                                   : std::numeric_limits<std::uint64_t>::max();
    const std::uint64_t idle_limit = opts_.until_idle_s > 0 ? seconds(opts_.until_idle_s)
                                                            : std::numeric_limits<std::uint64_t>::max();
    std::uint64_t last_activity = start_mono_;
    std::uint64_t next_progress = start_mono_ + 1'000'000'000ull;
    bool failed = false;
    while (!stop_signal::requested()) {
        // Drain what is queued, a bounded number of batches between clock checks.
        int got = 0;
        for (int b = 0; b < 64; ++b) {
            const int n = receive_batch();
            if (n < 0) {
                spdlog::error("recvmmsg: {}", std::strerror(errno));
                failed = true;
                break;
            }
            got += n;
            if (n < static_cast<int>(kBatch)) break;
        }
        if (failed) break;
        const std::uint64_t now = clock::monotonic_ns();
        if (got > 0) last_activity = now;
        if (opts_.progress && now >= next_progress) {
            progress_line(now);
            next_progress = now + 1'000'000'000ull;
        }
        if (now >= end || now - last_activity >= idle_limit) break;
        if (got == 0) {
            std::uint64_t wait = std::min<std::uint64_t>(end - now, 100'000'000ull);
            if (idle_limit != std::numeric_limits<std::uint64_t>::max())
                wait = std::min(wait, last_activity + idle_limit - now);
            if (opts_.progress) wait = std::min(wait, next_progress > now ? next_progress - now : 0);
            pollfd pfd{fd_, POLLIN, 0};
            timespec ts{static_cast<time_t>(wait / 1'000'000'000ull), static_cast<long>(wait % 1'000'000'000ull)};
            ppoll(&pfd, 1, &ts, nullptr);  // EINTR on SIGINT/SIGTERM: the loop condition sees it
        }
    }
    // AoM samples run until the end of the receive loop; a copy taken before that keeps the
    // samples up to the cluster's last arrival (the idle tail of a run is not the network's doing).
    const std::uint64_t end_rt = clock::realtime_ns();
    for (auto& [id, cs] : clusters_) {
        cs->aom_active = cs->aom;
        cs->aom.advance(end_rt);
    }
    const double elapsed_s = static_cast<double>(clock::monotonic_ns() - start_mono_) / 1e9;
    if (opts_.progress) progress_line(clock::monotonic_ns());

    print_table(elapsed_s);
    if (!opts_.json.empty()) {
        std::string err;
        if (!json::write_text_file(opts_.json, summary_json(elapsed_s), err)) {
            spdlog::error("{}", err);
            return kExitRuntime;
        }
    }
    if (failed) return kExitRuntime;
    return c_.bad > 0 ? kExitBadSums : 0;
}

json::Json age_json(const metrics::LatencyHistogram& h) {
    return {{"count", h.count()},
            {"mean", ns_to_ms(h.mean())},
            {"p50", ns_to_ms(static_cast<double>(h.percentile(0.50)))},
            {"p99", ns_to_ms(static_cast<double>(h.percentile(0.99)))},
            {"max", ns_to_ms(static_cast<double>(h.max()))}};
}

double active_seconds(std::uint64_t first_ns, std::uint64_t last_ns) {
    return last_ns > first_ns ? static_cast<double>(last_ns - first_ns) / 1e9 : 0.0;
}

double per_second(double amount, double seconds) { return seconds > 0 ? amount / seconds : 0.0; }

std::string Sink::summary_json(double elapsed_s) {
    json::Json j = json::Json::object();
    j["tool"] = "shesha-sink";
    j["duration_s"] = elapsed_s;
    j["datagrams"] = c_.datagrams;
    j["bytes"] = c_.bytes;
    j["kernel_drops"] = c_.kernel_drops;
    j["malformed"] = json::Json::object();
    j["malformed"]["total"] = c_.malformed_total;
    j["malformed"]["oversize"] = c_.oversize;
    for (int i = 1; i < proto::kDecodeErrorCount; ++i)
        j["malformed"][json::snake_key(proto::to_string(static_cast<proto::DecodeError>(i)))] = c_.malformed[static_cast<std::size_t>(i)];
    j["by_type"] = json::Json::object();
    j["by_type"]["gradient"] = c_.by_type[1];
    j["by_type"]["model"] = c_.by_type[2];
    j["by_type"]["credit"] = c_.by_type[3];
    j["by_type"]["feedback"] = c_.by_type[4];
    j["verify"] = json::Json::object();
    j["verify"]["exact"] = c_.exact;
    j["verify"]["bad"] = c_.bad;
    j["verify"]["bad_merged"] = c_.bad_merged;
    for (int i = 1; i < kPatternCheckCount; ++i)
        j["verify"][check_name(static_cast<pattern::Check>(i))] = c_.bad_by_check[static_cast<std::size_t>(i)];
    j["verify"]["bf16_unverified"] = c_.bf16_unverified;
    j["verify"]["elem_count_mismatch"] = c_.elem_count_mismatch;
    j["credits_sent"] = c_.credits_sent;
    j["credit_send_errors"] = c_.credit_send_errors;

    j["clusters"] = json::Json::array();
    for (const auto& [id, cs] : clusters_) {
        json::Json& item = j["clusters"].emplace_back(json::Json::object());
        item["cluster_id"] = std::uint32_t{id};
        item["chunks"] = cs->chunks;
        item["contributions"] = cs->contributions;
        item["merged_chunks"] = cs->merged_chunks;
        item["merge_ratio"] = cs->chunks ? static_cast<double>(cs->contributions) / static_cast<double>(cs->chunks) : 0.0;
        item["max_contrib"] = cs->max_contrib;
        item["ce_marked"] = cs->ce_marked;
        item["ip_ce_marked"] = cs->ip_ce_marked;
        item["exact"] = cs->exact;
        item["bad"] = cs->bad;
        item["bytes"] = cs->bytes;
        item["negative_ages"] = cs->negative_ages;
        item["age_latest_ms"] = age_json(cs->age_latest);
        item["age_earliest_ms"] = age_json(cs->age_earliest);
        item["aom_ms"] = json::Json::object();
        item["aom_ms"]["mean"] = ns_to_ms(cs->aom.mean_ns());
        item["aom_ms"]["peak"] = ns_to_ms(static_cast<double>(cs->aom.peak_ns()));
        item["aom_ms"]["samples"] = cs->aom.samples();
        item["aom_active_ms"] = json::Json::object();
        item["aom_active_ms"]["mean"] = ns_to_ms(cs->aom_active.mean_ns());
        item["aom_active_ms"]["peak"] = ns_to_ms(static_cast<double>(cs->aom_active.peak_ns()));
        item["aom_active_ms"]["samples"] = cs->aom_active.samples();
        const double active = active_seconds(cs->first_rx_ns, cs->last_rx_ns);
        item["active_s"] = active;
        item["chunks_per_s"] = per_second(static_cast<double>(cs->chunks), active);
        item["mbit_per_s"] = per_second(static_cast<double>(cs->bytes) * 8.0 / 1e6, active);
    }

    const double active = active_seconds(c_.first_gradient_ns, c_.last_gradient_ns);
    j["totals"] = json::Json::object();
    j["totals"]["chunks"] = c_.chunks;
    j["totals"]["contributions"] = c_.contributions;
    j["totals"]["merged_chunks"] = c_.merged_chunks;
    j["totals"]["merge_ratio"] = c_.chunks ? static_cast<double>(c_.contributions) / static_cast<double>(c_.chunks) : 0.0;
    j["totals"]["ce_marked"] = c_.ce_marked;
    j["totals"]["ip_ce_marked"] = c_.ip_ce_marked;
    j["totals"]["exact"] = c_.exact;
    j["totals"]["bad"] = c_.bad;
    j["totals"]["gradient_bytes"] = c_.gradient_bytes;
    j["totals"]["untracked_cluster_chunks"] = c_.untracked_cluster_chunks;
    j["totals"]["active_s"] = active;
    j["totals"]["chunks_per_s"] = per_second(static_cast<double>(c_.chunks), active);
    j["totals"]["mbit_per_s"] = per_second(static_cast<double>(c_.gradient_bytes) * 8.0 / 1e6, active);
    return json::pretty(j);
}

void Sink::print_table(double elapsed_s) {
    // The table goes to stdout unless the JSON does (then stderr, so "--json -" stays parseable).
    std::FILE* out = opts_.json == "-" ? stderr : stdout;
    fmt::print(out, "shesha-sink: {:.3f} s, {} datagrams, {} malformed, {} non-gradient, kernel drops {}, credits sent {}\n",
               elapsed_s, c_.datagrams, c_.malformed_total, c_.by_type[2] + c_.by_type[3] + c_.by_type[4],
               c_.kernel_drops, c_.credits_sent);
    fmt::print(out, "{:>7} {:>9} {:>9} {:>7} {:>6} {:>4} {:>7} {:>7} {:>4} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9}\n",
               "cluster", "chunks", "contribs", "merged", "ratio", "max", "exact", "bad", "ce", "age_p50",
               "age_p99", "age_max", "aom_avg", "aom_peak", "Mb/s");
    for (const auto& [id, cs] : clusters_) {
        const double active = active_seconds(cs->first_rx_ns, cs->last_rx_ns);
        fmt::print(out, "{:>7} {:>9} {:>9} {:>7} {:>6.3f} {:>4} {:>7} {:>7} {:>4} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f} {:>9.2f}\n",
                   id, cs->chunks, cs->contributions, cs->merged_chunks,
                   cs->chunks ? static_cast<double>(cs->contributions) / static_cast<double>(cs->chunks) : 0.0,
                   cs->max_contrib, cs->exact, cs->bad, cs->ce_marked,
                   ns_to_ms(static_cast<double>(cs->age_latest.percentile(0.5))),
                   ns_to_ms(static_cast<double>(cs->age_latest.percentile(0.99))),
                   ns_to_ms(static_cast<double>(cs->age_latest.max())), ns_to_ms(cs->aom.mean_ns()),
                   ns_to_ms(static_cast<double>(cs->aom.peak_ns())),
                   per_second(static_cast<double>(cs->bytes) * 8.0 / 1e6, active));
    }
    fmt::print(out, "{:>7} {:>9} {:>9} {:>7} {:>6.3f} {:>4} {:>7} {:>7} {:>4}\n", "total", c_.chunks, c_.contributions,
               c_.merged_chunks,
               c_.chunks ? static_cast<double>(c_.contributions) / static_cast<double>(c_.chunks) : 0.0, "", c_.exact,
               c_.bad, c_.ce_marked);
    if (c_.malformed_total > 0) {
        fmt::print(out, "malformed:");
        for (int i = 1; i < proto::kDecodeErrorCount; ++i)
            if (c_.malformed[static_cast<std::size_t>(i)] > 0)
                fmt::print(out, " {}={}", json::snake_key(proto::to_string(static_cast<proto::DecodeError>(i))),
                           c_.malformed[static_cast<std::size_t>(i)]);
        if (c_.oversize > 0) fmt::print(out, " oversize={}", c_.oversize);
        fmt::print(out, "\n");
    }
    std::fflush(out);
}

int run_main(int argc, char** argv) {
    Options opts;
    CLI::App app{"shesha-sink: receives, validates and verifies Shesha gradient traffic (see docs/tools.md)"};
    app.add_option("--bind", opts.bind, "IPv4 address to listen on (default: any)");
    app.add_option("--port", opts.port, "UDP port")->capture_default_str()->check(CLI::Range(1, 65535));
    auto* duration = app.add_option("--duration", opts.duration_s, "stop after S seconds")->check(CLI::PositiveNumber);
    auto* idle = app.add_option("--until-idle", opts.until_idle_s, "stop after S seconds without any datagram")
                     ->check(CLI::PositiveNumber);
    app.add_option("--json", opts.json, "write the summary JSON to FILE (- for stdout)");
    app.add_flag("--progress", opts.progress, "one status line per second on stderr");
    app.add_flag("--credit", opts.credit, "answer every GRADIENT with a CREDIT to its source address");
    app.add_option("--expect-elems", opts.expect_elems, "count chunks whose element count differs from E")
        ->check(CLI::Range(1u, std::uint32_t{proto::kMaxElements}));
    app.add_option("--rcvbuf", opts.rcvbuf_bytes, "socket receive buffer bytes")->capture_default_str()
        ->check(CLI::Range(65536, 1 << 30));
    std::string log_level = "info";
    logging::add_log_level_option(app, log_level);
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        app.exit(e);
        return kExitUsage;
    }
    logging::init("shesha-sink", log_level);
    if (duration->count() == 0 && idle->count() == 0) {
        fmt::print(stderr, "shesha-sink: one of --duration or --until-idle is required (the run must be bounded)\n");
        return kExitUsage;
    }
    net::UdpSocketOptions sock_opts;
    if (!opts.bind.empty()) {
        sock_opts.bind_addr = net::parse_ipv4(opts.bind);
        if (!sock_opts.bind_addr) {
            fmt::print(stderr, "shesha-sink: --bind is not an IPv4 address: {}\n", opts.bind);
            return kExitUsage;
        }
    }
    sock_opts.bind_port = opts.port;
    sock_opts.rcvbuf_bytes = opts.rcvbuf_bytes;
    sock_opts.receive_tos = true;
    sock_opts.receive_drop_count = true;
    std::string err;
    const int fd = net::open_udp_socket(sock_opts, err);
    if (fd < 0) {
        spdlog::error("{}", err);
        return kExitRuntime;
    }
    stop_signal::install();
    Sink sink(opts, fd);
    const int rc = sink.run();
    close(fd);
    return rc;
}

}  // namespace
}  // namespace shesha::tools::sink

int main(int argc, char** argv) { return shesha::tools::sink::run_main(argc, argv); }

// shesha-gen: synthetic gradient traffic from M clusters x N virtual workers over one kernel UDP
// socket. Paced (--rate, updates/s per worker, sleeping until the next send time) or closed loop
// (--window, chunks in flight per worker, replenished by CREDIT messages). Payloads follow
// common/gradient_pattern.h so receivers can verify in-network sums exactly. See docs/tools.md.
#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <queue>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "clock.h"
#include "gradient_pattern.h"
#include "json_io.h"
#include "log_level.h"
#include "protocol.h"
#include "stop_signal.h"
#include "udp.h"
#include "version_pattern.h"

namespace shesha::tools::gen {
namespace {

constexpr int kExitUsage = 2;
constexpr int kExitRuntime = 1;
constexpr std::uint32_t kMaxVirtualWorkers = 1u << 16;  // bounds memory and the per-send scan
constexpr int kMaxSendBurst = 256;                       // chunks sent before looking at the socket again
constexpr int kMaxReceiveBurst = 256;                    // datagrams handled per receive pass
constexpr int kMaxConsecutiveSendErrors = 1000;

struct Options {
    std::string dst;
    std::uint16_t port = proto::kDefaultUdpPort;
    std::string bind;
    std::uint32_t clusters = 1;
    std::uint32_t workers = 1;
    std::uint32_t worker_base = 0;
    std::uint32_t cluster_base = 1;
    std::uint32_t chunks = 1;
    std::uint32_t elems = 256;
    double rate = 0;
    std::uint32_t window = 0;
    double duration_s = 0;
    std::uint64_t updates = 0;
    std::string version_pattern_text = "lockstep";
    std::uint32_t version_period_ms = 100;
    std::uint64_t seed = 1;
    bool ecn = false;
    bool poison = false;  // payloads that are not the exact-sum pattern (a rogue sender, for tests)
    std::string json;
    bool progress = false;
    std::uint32_t credit_timeout_ms = 1000;
    std::uint32_t drain_ms = 500;
};

struct Worker {
    std::uint16_t cluster_id = 0;
    std::uint32_t worker_id = 0;
    std::size_t cluster_index = 0;
    std::uint32_t seq = 0;          // seq of the update being sent (or next to start)
    std::uint16_t next_chunk = 0;   // 0: the next chunk starts a new update
    std::uint64_t update_ts_ns = 0;
    std::uint32_t update_version = 0;
    std::uint64_t updates_done = 0;
    std::uint32_t in_flight = 0;    // window mode
    std::uint64_t last_progress_mono_ns = 0;  // last credit or window opening, for the timeout
    bool finished = false;
};

struct ClusterStats {
    std::uint16_t cluster_id = 0;
    std::uint64_t updates_sent = 0;
    std::uint64_t chunks_sent = 0;  // == contributions sent: every chunk carries contrib_count 1
    std::uint64_t bytes_sent = 0;   // UDP payload bytes (Shesha header + elements)
    std::uint64_t feedback_received = 0;
    std::uint64_t credit_messages = 0;
    std::uint64_t credits_received = 0;  // sum of CreditBody::credits
    std::uint64_t ce_echoed = 0;         // sum of CreditBody::ce_count
    std::uint16_t last_queue_depth = 0;
    std::uint16_t max_queue_depth = 0;
    std::vector<std::size_t> worker_indices;
    std::size_t credit_cursor = 0;  // round robin for credits that exceed the named worker's in-flight
};

struct RxStats {
    std::uint64_t datagrams = 0;
    std::array<std::uint64_t, proto::kDecodeErrorCount> malformed{};
    std::uint64_t malformed_total = 0;
    std::uint64_t unexpected_type = 0;      // GRADIENT/MODEL sent to a generator
    std::uint64_t foreign_cluster = 0;      // CREDIT/FEEDBACK for a cluster this process does not run
    std::uint64_t unknown_worker_credit = 0;
    std::uint64_t excess_credits = 0;       // credit units beyond all in-flight chunks of the cluster
    std::uint64_t feedback_other = 0;       // FEEDBACK naming no cluster of ours
    std::uint64_t last_queue_depth = 0;
};

class Generator {
public:
    Generator(const Options& opts, pattern::VersionPattern pattern, int fd, sockaddr_in dst)
        : opts_(opts), pattern_(pattern), fd_(fd), dst_(dst), rng_(opts.seed) {
        for (std::uint32_t c = 0; c < opts.clusters; ++c) {
            ClusterStats cs;
            cs.cluster_id = static_cast<std::uint16_t>(opts.cluster_base + c);
            clusters_.push_back(cs);
            cluster_index_[cs.cluster_id] = c;
            for (std::uint32_t w = 0; w < opts.workers; ++w) {
                Worker wk;
                wk.cluster_id = cs.cluster_id;
                wk.worker_id = opts.worker_base + w;
                wk.cluster_index = c;
                clusters_[c].worker_indices.push_back(workers_.size());
                worker_index_[key(wk.cluster_id, wk.worker_id)] = workers_.size();
                workers_.push_back(wk);
            }
        }
        tx_.resize(proto::kHeaderSize + opts.elems * sizeof(float));
        elements_.resize(opts.elems);
    }

    int run();

private:
    static std::uint64_t key(std::uint16_t cluster, std::uint32_t worker) {
        return (std::uint64_t{cluster} << 32) | worker;
    }
    bool closed_loop() const { return opts_.window > 0; }
    bool paced() const { return opts_.rate > 0; }
    bool all_finished() const { return finished_workers_ == workers_.size(); }

    bool send_next_chunk(Worker& w);
    void finish_worker(Worker& w);
    void receive_pending();
    void handle_datagram(std::span<const std::uint8_t> bytes);
    void apply_credit(std::uint16_t cluster_id, std::uint32_t worker_id, const proto::CreditBody& credit);
    void expire_stalled_windows(std::uint64_t now);
    void wait_readable(std::uint64_t timeout_ns);
    void maybe_progress(std::uint64_t now, bool force = false);
    std::uint64_t total_in_flight() const;
    std::string summary_json(double elapsed_s) const;

    const Options& opts_;
    pattern::VersionPattern pattern_;
    int fd_;
    sockaddr_in dst_;
    std::mt19937_64 rng_;
    std::vector<Worker> workers_;
    std::vector<ClusterStats> clusters_;
    std::unordered_map<std::uint64_t, std::size_t> worker_index_;
    std::unordered_map<std::uint16_t, std::size_t> cluster_index_;
    std::vector<std::uint8_t> tx_;
    std::vector<float> elements_;
    RxStats rx_;
    std::size_t finished_workers_ = 0;
    std::uint64_t send_errors_ = 0;
    int consecutive_send_errors_ = 0;
    std::uint64_t window_timeouts_ = 0;
    std::uint64_t window_stalls_ = 0;  // paced and windowed: a due update found its window full
    std::uint64_t start_mono_ns_ = 0;
    std::uint64_t next_progress_ns_ = 0;
    bool fatal_ = false;
};

void Generator::finish_worker(Worker& w) {
    if (w.finished) return;
    w.finished = true;
    ++finished_workers_;
}

// Sends the next chunk of w's current update (starting a new update if needed). Returns false if
// the kernel refused the datagram; the chunk is then retried later and not counted.
bool Generator::send_next_chunk(Worker& w) {
    if (w.next_chunk == 0) {
        w.update_ts_ns = clock::realtime_ns();
        std::uint32_t version = pattern::VersionPattern::base_version(w.update_ts_ns, opts_.version_period_ms);
        if (pattern_.kind == pattern::VersionPattern::Kind::Skew && pattern_.max_lag > 0)
            version -= static_cast<std::uint32_t>(std::uniform_int_distribution<std::uint32_t>(0, pattern_.max_lag)(rng_));
        w.update_version = version;
    }
    proto::Header h;
    h.type = proto::MsgType::Gradient;
    h.elem_type = proto::ElemType::F32;
    h.flags = 0;
    h.cluster_id = w.cluster_id;
    h.worker_id = w.worker_id;
    h.model_version = w.update_version;
    h.seq = w.seq;
    h.chunk_index = w.next_chunk;
    h.chunk_count = static_cast<std::uint16_t>(opts_.chunks);
    h.elem_count = static_cast<std::uint16_t>(opts_.elems);
    h.contrib_count = 1;
    h.packet_count = 1;
    h.ts_earliest_ns = w.update_ts_ns;
    h.ts_latest_ns = w.update_ts_ns;
    pattern::fill(elements_.data(), elements_.size(), w.cluster_id, w.next_chunk, w.worker_id);
    // A poisoned update follows another cluster's pattern: alone it fails verification at the
    // sink, and merged into anyone's update it would break that sum too, so tests can prove a
    // non-member's gradients never join a merge.
    if (opts_.poison)
        pattern::fill(elements_.data(), elements_.size(), static_cast<std::uint16_t>(w.cluster_id ^ 0x5a5a),
                      w.next_chunk, w.worker_id);
    const auto body = std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(elements_.data()),
                                                    elements_.size() * sizeof(float));
    const std::size_t len = proto::encode(h, body, tx_);
    if (len == 0) {
        spdlog::error("internal error: encode failed");
        fatal_ = true;
        return false;
    }
    const ssize_t sent = sendto(fd_, tx_.data(), len, 0, reinterpret_cast<const sockaddr*>(&dst_), sizeof dst_);
    if (sent != static_cast<ssize_t>(len)) {
        ++send_errors_;
        if (++consecutive_send_errors_ == 1 || consecutive_send_errors_ == kMaxConsecutiveSendErrors)
            spdlog::warn("sendto {}: {}", net::format_endpoint(dst_), std::strerror(errno));
        if (consecutive_send_errors_ >= kMaxConsecutiveSendErrors) fatal_ = true;
        return false;
    }
    consecutive_send_errors_ = 0;
    ClusterStats& cs = clusters_[w.cluster_index];
    ++cs.chunks_sent;
    cs.bytes_sent += len;
    if (closed_loop()) ++w.in_flight;
    if (++w.next_chunk == opts_.chunks) {
        w.next_chunk = 0;
        ++w.seq;
        ++w.updates_done;
        ++cs.updates_sent;
        if (opts_.updates != 0 && w.updates_done >= opts_.updates) finish_worker(w);
    }
    return true;
}

void Generator::apply_credit(std::uint16_t cluster_id, std::uint32_t worker_id, const proto::CreditBody& credit) {
    const auto cit = cluster_index_.find(cluster_id);
    if (cit == cluster_index_.end()) {
        ++rx_.foreign_cluster;
        return;
    }
    ClusterStats& cs = clusters_[cit->second];
    ++cs.credit_messages;
    cs.credits_received += credit.credits;
    cs.ce_echoed += credit.ce_count;
    const auto wit = worker_index_.find(key(cluster_id, worker_id));
    if (wit == worker_index_.end()) ++rx_.unknown_worker_credit;
    std::uint64_t remaining = credit.credits;
    const std::uint64_t now = clock::monotonic_ns();
    auto take = [&](Worker& w) {
        const auto n = static_cast<std::uint32_t>(std::min<std::uint64_t>(remaining, w.in_flight));
        if (n == 0) return;
        w.in_flight -= n;
        w.last_progress_mono_ns = now;
        remaining -= n;
    };
    if (wit != worker_index_.end()) take(workers_[wit->second]);
    // A merged chunk's credit names one contributor but covers all of them: hand the rest to the
    // cluster's other workers so merging does not starve them.
    for (std::size_t i = 0; i < cs.worker_indices.size() && remaining > 0; ++i) {
        cs.credit_cursor = (cs.credit_cursor + 1) % cs.worker_indices.size();
        take(workers_[cs.worker_indices[cs.credit_cursor]]);
    }
    rx_.excess_credits += remaining;
}

void Generator::handle_datagram(std::span<const std::uint8_t> bytes) {
    ++rx_.datagrams;
    proto::Message msg;
    const proto::DecodeError err = proto::decode(bytes, msg);
    if (err != proto::DecodeError::Ok) {
        ++rx_.malformed_total;
        const auto idx = static_cast<std::size_t>(err);
        if (idx < rx_.malformed.size()) ++rx_.malformed[idx];
        return;
    }
    switch (msg.hdr.type) {
    case proto::MsgType::Credit: {
        proto::CreditBody credit;
        if (!proto::decode_credit(msg.payload, credit)) {
            ++rx_.malformed_total;
            ++rx_.malformed[static_cast<std::size_t>(proto::DecodeError::LengthMismatch)];
            return;
        }
        apply_credit(msg.hdr.cluster_id, msg.hdr.worker_id, credit);
        return;
    }
    case proto::MsgType::Feedback: {
        proto::FeedbackBody fb;
        if (!proto::decode_feedback(msg.payload, fb)) {
            ++rx_.malformed_total;
            ++rx_.malformed[static_cast<std::size_t>(proto::DecodeError::LengthMismatch)];
            return;
        }
        rx_.last_queue_depth = fb.queue_depth;
        const auto cit = cluster_index_.find(msg.hdr.cluster_id);
        if (cit == cluster_index_.end()) {
            ++rx_.feedback_other;
            return;
        }
        ClusterStats& cs = clusters_[cit->second];
        ++cs.feedback_received;
        cs.last_queue_depth = fb.queue_depth;
        cs.max_queue_depth = std::max(cs.max_queue_depth, fb.queue_depth);
        return;
    }
    default:
        ++rx_.unexpected_type;
        return;
    }
}

void Generator::receive_pending() {
    std::array<std::uint8_t, 9216> buf;
    for (int i = 0; i < kMaxReceiveBurst; ++i) {
        const ssize_t n = recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT);
        if (n < 0) return;  // EAGAIN (nothing left) or a transient error such as ECONNREFUSED
        handle_datagram(std::span<const std::uint8_t>(buf.data(), static_cast<std::size_t>(n)));
    }
}

void Generator::wait_readable(std::uint64_t timeout_ns) {
    pollfd pfd{fd_, POLLIN, 0};
    timespec ts{static_cast<time_t>(timeout_ns / 1'000'000'000ull), static_cast<long>(timeout_ns % 1'000'000'000ull)};
    ppoll(&pfd, 1, &ts, nullptr);  // EINTR on a stop signal: the caller checks the flag
}

// If the credits for a full window never come (lost chunks, or merged with another process's
// chunks and credited there), the worker would stall forever: after --credit-timeout-ms without
// credit it forgets its in-flight chunks and counts a window timeout.
void Generator::expire_stalled_windows(std::uint64_t now) {
    const std::uint64_t timeout = std::uint64_t{opts_.credit_timeout_ms} * 1'000'000ull;
    for (Worker& w : workers_) {
        if (w.in_flight >= opts_.window && now > w.last_progress_mono_ns &&
            now - w.last_progress_mono_ns >= timeout) {  // credits may be stamped after now
            w.in_flight = 0;
            w.last_progress_mono_ns = now;
            ++window_timeouts_;
        }
    }
}

std::uint64_t Generator::total_in_flight() const {
    std::uint64_t n = 0;
    for (const Worker& w : workers_) n += w.in_flight;
    return n;
}

void Generator::maybe_progress(std::uint64_t now, bool force) {
    if (!opts_.progress || (!force && now < next_progress_ns_)) return;
    next_progress_ns_ = now + 1'000'000'000ull;
    std::uint64_t chunks = 0, updates = 0, credits = 0, feedback = 0;
    for (const ClusterStats& cs : clusters_) {
        chunks += cs.chunks_sent;
        updates += cs.updates_sent;
        credits += cs.credits_received;
        feedback += cs.feedback_received;
    }
    spdlog::info("t={:.1f}s updates={} chunks={} credits={} feedback={} queue_depth={} in_flight={}",
               static_cast<double>(now - start_mono_ns_) / 1e9, updates, chunks, credits, feedback,
               rx_.last_queue_depth, total_in_flight());
}

int Generator::run() {
    start_mono_ns_ = clock::monotonic_ns();
    next_progress_ns_ = start_mono_ns_ + 1'000'000'000ull;
    const std::uint64_t end_ns = opts_.duration_s > 0
        ? start_mono_ns_ + static_cast<std::uint64_t>(opts_.duration_s * 1e9)
        : std::numeric_limits<std::uint64_t>::max();
    for (Worker& w : workers_) w.last_progress_mono_ns = start_mono_ns_;

    // Paced mode: a min-heap of (due time, worker). Workers start evenly spread over one period so
    // the process does not send all updates in one burst.
    using Due = std::pair<std::uint64_t, std::size_t>;
    std::priority_queue<Due, std::vector<Due>, std::greater<>> due;
    const double period_ns = paced() ? 1e9 / opts_.rate : 0.0;
    if (paced()) {
        for (std::size_t i = 0; i < workers_.size(); ++i)
            due.emplace(start_mono_ns_ + static_cast<std::uint64_t>(period_ns * static_cast<double>(i) /
                                                                    static_cast<double>(workers_.size())), i);
    }
    std::vector<std::uint64_t> updates_scheduled(workers_.size(), 0);
    std::size_t rr_cursor = 0;

    while (!stop_signal::requested() && !fatal_ && !all_finished()) {
        std::uint64_t now = clock::monotonic_ns();
        if (now >= end_ns) break;
        receive_pending();
        maybe_progress(now);
        if (paced()) {
            int burst = 0;
            while (!due.empty() && due.top().first <= now && burst < kMaxSendBurst && !fatal_) {
                const auto [when, idx] = due.top();
                Worker& w = workers_[idx];
                // A whole update (K chunks) goes out at its due time; a refused chunk is retried
                // right away on the next pass without moving the schedule.
                // With --window as well, a chunk also needs window room: a blocked worker retries
                // 1 ms later (the schedule then catches up) and the stall is counted.
                bool refused = false, blocked = false;
                do {
                    if (closed_loop() && w.in_flight >= opts_.window) {
                        blocked = true;
                        break;
                    }
                    if (closed_loop() && w.in_flight == 0) w.last_progress_mono_ns = now;
                    if (!send_next_chunk(w)) {
                        refused = true;
                        break;
                    }
                    ++burst;
                } while (w.next_chunk != 0);
                if (refused) {
                    wait_readable(100'000);  // give the kernel 100 us to drain
                    break;
                }
                if (blocked) {
                    due.pop();
                    due.emplace(now + 1'000'000, idx);
                    ++window_stalls_;
                    expire_stalled_windows(now);
                    continue;
                }
                due.pop();
                ++updates_scheduled[idx];
                if (!w.finished)
                    due.emplace(start_mono_ns_ + static_cast<std::uint64_t>(
                                                     period_ns * (static_cast<double>(updates_scheduled[idx]) +
                                                                  static_cast<double>(idx) / static_cast<double>(workers_.size()))),
                                idx);
            }
            if (due.empty()) break;
            now = clock::monotonic_ns();
            if (due.top().first > now) {
                const std::uint64_t wake = std::min({due.top().first, end_ns, next_progress_ns_});
                if (wake > now) wait_readable(wake - now);
            }
        } else {
            int burst = 0;
            bool sent_any = true;
            // Round robin: one chunk per worker with window room, repeated, up to the burst bound.
            while (sent_any && burst < kMaxSendBurst && !fatal_) {
                sent_any = false;
                for (std::size_t n = 0; n < workers_.size() && burst < kMaxSendBurst; ++n) {
                    rr_cursor = (rr_cursor + 1) % workers_.size();
                    Worker& w = workers_[rr_cursor];
                    if (w.finished || w.in_flight >= opts_.window) continue;
                    if (w.in_flight == 0) w.last_progress_mono_ns = now;
                    if (!send_next_chunk(w)) break;
                    sent_any = true;
                    ++burst;
                }
            }
            if (burst == 0) {
                expire_stalled_windows(now);
                const std::uint64_t wake = std::min<std::uint64_t>({now + 10'000'000, end_ns, next_progress_ns_});
                if (wake > now) wait_readable(wake - now);
            }
        }
    }

    // Drain: collect credits still on their way (closed loop: until nothing is in flight) and
    // late feedback, for at most --drain-ms.
    const std::uint64_t drain_end = clock::monotonic_ns() + std::uint64_t{opts_.drain_ms} * 1'000'000ull;
    while (!stop_signal::requested() && !fatal_) {
        receive_pending();
        const std::uint64_t now = clock::monotonic_ns();
        if (now >= drain_end || (closed_loop() && total_in_flight() == 0)) break;
        wait_readable(std::min<std::uint64_t>(drain_end - now, 10'000'000ull));
    }
    receive_pending();
    const double elapsed_s = static_cast<double>(clock::monotonic_ns() - start_mono_ns_) / 1e9;
    maybe_progress(clock::monotonic_ns(), true);

    const std::string json = summary_json(elapsed_s);
    if (!opts_.json.empty()) {
        std::string err;
        if (!json::write_text_file(opts_.json, json, err)) {
            spdlog::error("{}", err);
            return kExitRuntime;
        }
    }
    std::uint64_t chunks = 0, updates = 0, credits = 0;
    for (const ClusterStats& cs : clusters_) {
        chunks += cs.chunks_sent;
        updates += cs.updates_sent;
        credits += cs.credits_received;
    }
    spdlog::info("sent {} updates, {} chunks (contributions) in {:.3f} s; credits {}; "
                 "send errors {}; malformed rx {}; window timeouts {}",
               updates, chunks, elapsed_s, credits, send_errors_, rx_.malformed_total, window_timeouts_);
    return fatal_ ? kExitRuntime : 0;
}

std::string Generator::summary_json(double elapsed_s) const {
    json::Json j = json::Json::object();
    j["tool"] = "shesha-gen";
    j["mode"] = paced() ? (closed_loop() ? "rate+window" : "rate") : "window";
    j["config"] = json::Json::object();
    j["config"]["dst"] = net::format_endpoint(dst_);
    j["config"]["clusters"] = opts_.clusters;
    j["config"]["workers_per_cluster"] = opts_.workers;
    j["config"]["worker_base"] = opts_.worker_base;
    j["config"]["cluster_base"] = opts_.cluster_base;
    j["config"]["chunks_per_update"] = opts_.chunks;
    j["config"]["elems_per_chunk"] = opts_.elems;
    j["config"]["rate_updates_per_s"] = opts_.rate;
    j["config"]["window_chunks"] = opts_.window;
    j["config"]["duration_s"] = opts_.duration_s;
    j["config"]["updates_per_worker"] = opts_.updates;
    j["config"]["version_pattern"] = opts_.version_pattern_text;
    j["config"]["version_period_ms"] = opts_.version_period_ms;
    j["config"]["seed"] = opts_.seed;
    j["config"]["ecn"] = opts_.ecn;
    j["config"]["poison"] = opts_.poison;
    j["duration_s"] = elapsed_s;

    ClusterStats total;
    j["clusters"] = json::Json::array();
    for (const ClusterStats& cs : clusters_) {
        json::Json& item = j["clusters"].emplace_back(json::Json::object());
        item["cluster_id"] = std::uint32_t{cs.cluster_id};
        item["updates_sent"] = cs.updates_sent;
        item["chunks_sent"] = cs.chunks_sent;
        item["contributions_sent"] = cs.chunks_sent;
        item["bytes_sent"] = cs.bytes_sent;
        item["feedback_received"] = cs.feedback_received;
        item["last_queue_depth"] = std::uint32_t{cs.last_queue_depth};
        item["max_queue_depth"] = std::uint32_t{cs.max_queue_depth};
        item["credit_messages"] = cs.credit_messages;
        item["credits_received"] = cs.credits_received;
        item["ce_echoed"] = cs.ce_echoed;
        total.updates_sent += cs.updates_sent;
        total.chunks_sent += cs.chunks_sent;
        total.bytes_sent += cs.bytes_sent;
        total.feedback_received += cs.feedback_received;
        total.credit_messages += cs.credit_messages;
        total.credits_received += cs.credits_received;
        total.ce_echoed += cs.ce_echoed;
    }
    j["totals"] = json::Json::object();
    j["totals"]["updates_sent"] = total.updates_sent;
    j["totals"]["chunks_sent"] = total.chunks_sent;
    j["totals"]["contributions_sent"] = total.chunks_sent;
    j["totals"]["bytes_sent"] = total.bytes_sent;
    j["totals"]["feedback_received"] = total.feedback_received + rx_.feedback_other;
    j["totals"]["credit_messages"] = total.credit_messages;
    j["totals"]["credits_received"] = total.credits_received;
    j["totals"]["ce_echoed"] = total.ce_echoed;
    j["totals"]["chunks_per_s"] = elapsed_s > 0 ? static_cast<double>(total.chunks_sent) / elapsed_s : 0.0;
    j["totals"]["mbit_per_s"] = elapsed_s > 0 ? static_cast<double>(total.bytes_sent) * 8.0 / elapsed_s / 1e6 : 0.0;
    j["send_errors"] = send_errors_;
    j["window_timeouts"] = window_timeouts_;
    j["window_stalls"] = window_stalls_;
    j["in_flight_at_exit"] = total_in_flight();
    j["rx"] = json::Json::object();
    j["rx"]["datagrams"] = rx_.datagrams;
    j["rx"]["malformed"] = rx_.malformed_total;
    j["rx"]["malformed_by_reason"] = json::Json::object();
    for (int i = 1; i < proto::kDecodeErrorCount; ++i)
        j["rx"]["malformed_by_reason"][json::snake_key(proto::to_string(static_cast<proto::DecodeError>(i)))] = rx_.malformed[static_cast<std::size_t>(i)];
    j["rx"]["unexpected_type"] = rx_.unexpected_type;
    j["rx"]["foreign_cluster"] = rx_.foreign_cluster;
    j["rx"]["unknown_worker_credit"] = rx_.unknown_worker_credit;
    j["rx"]["excess_credits"] = rx_.excess_credits;
    j["rx"]["feedback_other_cluster"] = rx_.feedback_other;
    return json::pretty(j);
}

int run_main(int argc, char** argv) {
    Options opts;
    CLI::App app{"shesha-gen: synthetic RL gradient traffic over UDP (see docs/tools.md)"};
    app.add_option("--dst", opts.dst, "destination (learner or sink) IPv4 address")->required();
    app.add_option("--port", opts.port, "destination UDP port")->capture_default_str();
    app.add_option("--bind", opts.bind, "source IPv4 address to bind (default: any)");
    app.add_option("--clusters", opts.clusters, "clusters M")->capture_default_str()->check(CLI::Range(1u, 65535u));
    app.add_option("--workers", opts.workers, "virtual workers per cluster N")->capture_default_str()->check(CLI::Range(1u, kMaxVirtualWorkers));
    app.add_option("--worker-base", opts.worker_base, "first worker id B (ids B..B+N-1 in every cluster)")->capture_default_str();
    app.add_option("--cluster-base", opts.cluster_base, "first cluster id C")->capture_default_str()->check(CLI::Range(0u, 65535u));
    app.add_option("--chunks", opts.chunks, "chunks per update K")->capture_default_str()->check(CLI::Range(1u, 65535u));
    app.add_option("--elems", opts.elems, "fp32 elements per chunk E")->capture_default_str()
        ->check(CLI::Range(2u, std::uint32_t{proto::kMaxElements}));
    auto* rate_opt = app.add_option("--rate", opts.rate, "paced: updates/s per worker (with --window too: paced and window-limited)")->check(CLI::PositiveNumber);
    auto* window_opt = app.add_option("--window", opts.window, "closed loop: max chunks in flight per worker")
                           ->check(CLI::Range(1u, 1u << 20));
    app.add_option("--duration", opts.duration_s, "stop after S seconds")->check(CLI::PositiveNumber);
    app.add_option("--updates", opts.updates, "stop after U updates per worker")->check(CLI::Range(std::uint64_t{1}, std::numeric_limits<std::uint64_t>::max()));
    app.add_option("--version-pattern", opts.version_pattern_text, "lockstep | skew:D")->capture_default_str();
    app.add_option("--version-period-ms", opts.version_period_ms, "model version period")->capture_default_str()->check(CLI::Range(1u, 86'400'000u));
    app.add_option("--seed", opts.seed, "random seed (skew lags)")->capture_default_str();
    app.add_flag("--ecn", opts.ecn, "send with ECT(0) in the IP header");
    app.add_flag("--poison", opts.poison, "send payloads that fail the exact-sum check (rogue-sender tests)");
    app.add_option("--json", opts.json, "write the summary JSON to FILE (- for stdout)");
    app.add_flag("--progress", opts.progress, "one status line per second on stderr");
    app.add_option("--credit-timeout-ms", opts.credit_timeout_ms, "closed loop: forget a full window after this long without credit")
        ->capture_default_str()->check(CLI::Range(1u, 3'600'000u));
    app.add_option("--drain-ms", opts.drain_ms, "after sending, wait this long for outstanding credits/feedback")
        ->capture_default_str()->check(CLI::Range(0u, 60'000u));

    std::string log_level = "info";
    logging::add_log_level_option(app, log_level);
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        app.exit(e);  // prints the message
        return kExitUsage;
    }
    logging::init("shesha-gen", log_level);
    auto usage_error = [](const std::string& msg) {
        fmt::print(stderr, "shesha-gen: {}\n", msg);
        return kExitUsage;
    };
    if (rate_opt->count() == 0 && window_opt->count() == 0) return usage_error("one of --rate or --window is required");
    if (opts.duration_s <= 0 && opts.updates == 0) return usage_error("at least one of --duration or --updates is required");
    if (std::uint64_t{opts.cluster_base} + opts.clusters - 1 > 65535)
        return usage_error("--cluster-base + --clusters exceeds cluster id 65535");
    if (std::uint64_t{opts.worker_base} + opts.workers - 1 > std::numeric_limits<std::uint32_t>::max())
        return usage_error("--worker-base + --workers exceeds worker id 2^32-1");
    if (std::uint64_t{opts.clusters} * opts.workers > kMaxVirtualWorkers)
        return usage_error(fmt::format("--clusters x --workers exceeds {} virtual workers", kMaxVirtualWorkers));
    const auto pattern = pattern::VersionPattern::parse(opts.version_pattern_text);
    if (!pattern) return usage_error("--version-pattern must be 'lockstep' or 'skew:D' (D a non-negative integer)");
    const auto dst_addr = net::parse_ipv4(opts.dst);
    if (!dst_addr) return usage_error("--dst is not an IPv4 address: " + opts.dst);
    if (opts.port == 0) return usage_error("--port must be 1..65535");
    net::UdpSocketOptions sock_opts;
    if (!opts.bind.empty()) {
        sock_opts.bind_addr = net::parse_ipv4(opts.bind);
        if (!sock_opts.bind_addr) return usage_error("--bind is not an IPv4 address: " + opts.bind);
    }
    if (opts.ecn) sock_opts.tos = 0x02;  // ECT(0)
    sock_opts.rcvbuf_bytes = 4 << 20;      // credits and feedback arrive in bursts
    std::string err;
    const int fd = net::open_udp_socket(sock_opts, err);
    if (fd < 0) {
        spdlog::error("{}", err);
        return kExitRuntime;
    }
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_port = htons(opts.port);
    dst.sin_addr = *dst_addr;
    stop_signal::install();
    Generator gen(opts, *pattern, fd, dst);
    const int rc = gen.run();
    close(fd);
    return rc;
}

}  // namespace
}  // namespace shesha::tools::gen

int main(int argc, char** argv) { return shesha::tools::gen::run_main(argc, argv); }

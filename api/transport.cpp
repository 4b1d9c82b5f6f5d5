// The public API (include/shesha/transport.h) over the project's own pieces: CreditSender and
// ModelReceiver for workers, LearnerCore for learners, UDP sockets for both. The bundled
// shesha-worker and shesha-learner run on exactly this code.
#include "shesha/transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "cluster_config.h"
#include "drl_wire.h"
#include "envs/registry.h"
#include "learner/learner_core.h"
#include "model_receiver.h"
#include "clock.h"
#include "udp.h"
#include "transport/credit_sender.h"

namespace shesha {
namespace {

constexpr int kReceiveBurst = 256;

drl::ClusterConfig load_config(const std::string& path) {
    try {
        return drl::load_cluster_config(path);
    } catch (const drl::ConfigError& e) {
        throw Error(e.what());
    }
}

in_addr parse_address(const std::string& text, const char* what) {
    const auto a = net::parse_ipv4(text);
    if (!a) throw Error(fmt::format("{}: not an IPv4 address: '{}'", what, text));
    return *a;
}

// multicast_sender: the learner's socket with learner.model_delivery: replicated. Its group
// datagrams leave by the interface of the bound address (no multicast route needed; bound to
// 0.0.0.0, the routing table decides), one hop only, and never loop back to local listeners.
int open_socket(in_addr bind, std::uint16_t port, int buffer_bytes, std::optional<std::uint8_t> tos,
                bool multicast_sender = false) {
    net::UdpSocketOptions so;
    if (multicast_sender) {
        if (bind.s_addr != htonl(INADDR_ANY)) so.multicast_if = bind;
        so.multicast_ttl = 1;
        so.multicast_loop = false;
    }
    so.bind_addr = bind;
    so.bind_port = port;
    so.rcvbuf_bytes = buffer_bytes;
    so.sndbuf_bytes = buffer_bytes;
    so.tos = tos;
    std::string error;
    const int fd = net::open_udp_socket(so, error);
    if (fd < 0) throw Error(error);
    return fd;
}

void wait_ready(int fd, int timeout_ms, bool or_writable = false) {
    if (timeout_ms <= 0) return;
    pollfd pfd{fd, static_cast<short>(POLLIN | (or_writable ? POLLOUT : 0)), 0};
    ::poll(&pfd, 1, timeout_ms);
}

// A MODEL chunk addressed to one worker (not to a group).
bool is_unicast_model(std::span<const std::uint8_t> msg) noexcept {
    return msg.size() >= proto::kHeaderSize && msg[proto::off::kType] == static_cast<std::uint8_t>(proto::MsgType::Model) &&
           be::load32(msg.data() + proto::off::kWorkerId) != drl::kEveryWorker;
}

}  // namespace

// ---- WorkerTransport -----------------------------------------------------------------------

struct WorkerTransport::Impl {
    WorkerOptions options;
    drl::ClusterConfig config;
    transport::CreditSender sender;
    drl::ModelReceiver receiver;
    int fd = -1;
    sockaddr_in learner{};
    std::vector<std::uint8_t> tx = std::vector<std::uint8_t>(proto::kHeaderSize + std::size_t{proto::kMaxElements} * sizeof(float));
    std::array<std::uint8_t, 65536> rx{};
    std::vector<float> staging;  // a multi-part update, concatenated
    std::uint32_t env_steps = 0;
    std::uint32_t taken_version = 0;
    std::uint32_t taken_incarnation = 0;
    bool taken_any = false;
    std::uint64_t last_request = 0;
    std::uint64_t last_heard = 0;
    bool any_credit = false;
    std::uint32_t credit_incarnation = 0;
    WorkerCounters c;

    static transport::SenderConfig sender_config_of(const WorkerOptions& o, const drl::ClusterConfig& cfg) {
        if (o.model_elems == 0) throw Error("model_elems: expected the length of the flat parameter vector, got 0");
        transport::SenderConfig sc = drl::sender_config(cfg, o.cluster_id, o.worker_id, o.model_elems);
        sc.first_seq = drl::first_gradient_seq(clock::realtime_ns());
        if (!o.congestion_control) {
            // The FIFO baseline's sender: the window pinned open, and none of the credit loop's
            // leak repairs (they belong to congestion control; docs/transport.md, "Banked credit").
            sc.w_init = sc.w_max;
            transport::turn_off_leak_repairs(sc);
        }
        if (const std::string bad = transport::validate(sc); !bad.empty())
            throw Error(fmt::format("{}: transport: {}", o.config_path, bad));
        return sc;
    }

    Impl(const WorkerOptions& o, drl::ClusterConfig cfg)
        : options(o),
          config(std::move(cfg)),
          sender(sender_config_of(o, config)),
          receiver(sender.layout(), o.cluster_id) {
        const in_addr learner_ip = parse_address(o.learner_address, "learner address");
        const in_addr bind_ip = parse_address(o.bind_address, "bind address");
        learner.sin_family = AF_INET;
        learner.sin_addr = learner_ip;
        learner.sin_port = htons(o.learner_port != 0 ? o.learner_port : config.udp_port);
        check_path_mtu(bind_ip);
        fd = open_socket(bind_ip, 0, 4 << 20, std::uint8_t{0x02});  // ECT(0): a marking switch may set CE
        last_heard = clock::monotonic_ns();
    }
    ~Impl() {
        if (fd >= 0) ::close(fd);
    }

    // A chunk must travel in one IP datagram: fragments are never merged (and af_packet switch
    // ports reassemble or lose them). The kernel knows the MTU of the route to the learner (the
    // interface's, or a learned path MTU): refuse a chunk size whose datagram exceeds it.
    void check_path_mtu(in_addr bind_ip) const {
        const std::size_t elems = sender.layout().elems_in(0);
        const std::size_t datagram = 20 + 8 + proto::kHeaderSize + elems * sizeof(float);
        const int probe = ::socket(AF_INET, SOCK_DGRAM, 0);
        if (probe < 0) return;
        sockaddr_in local{};
        local.sin_family = AF_INET;
        local.sin_addr = bind_ip;
        int mtu = 0;
        socklen_t len = sizeof mtu;
        const bool known = ::bind(probe, reinterpret_cast<const sockaddr*>(&local), sizeof local) == 0 &&
                           ::connect(probe, reinterpret_cast<const sockaddr*>(&learner), sizeof learner) == 0 &&
                           ::getsockopt(probe, IPPROTO_IP, IP_MTU, &mtu, &len) == 0;
        ::close(probe);
        if (known && datagram > static_cast<std::size_t>(mtu))
            throw Error(fmt::format("{}: transport: chunk_elems {} makes {}-byte IP datagrams (20 IPv4 + 8 UDP + {} "
                                    "Shesha header + 4 per element), more than the {}-byte MTU of the route to {}: use "
                                    "chunk_elems <= {}, or raise the MTU on every hop (hosts' interfaces, switch ports' mtu)",
                                    options.config_path, elems, datagram, proto::kHeaderSize, mtu,
                                    options.learner_address, (mtu - 28 - static_cast<int>(proto::kHeaderSize)) / 4));
    }

    void send_datagram(std::size_t len) {
        const ssize_t n = sendto(fd, tx.data(), len, MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&learner), sizeof learner);
        if (n != static_cast<ssize_t>(len)) ++c.send_errors;
    }

    void flush(std::uint64_t now) {
        while (auto chunk = sender.next_to_send(now)) {
            const std::span<const std::uint8_t> body(reinterpret_cast<const std::uint8_t*>(chunk->elements.data()),
                                                     chunk->elements.size_bytes());
            const std::size_t len = proto::encode(chunk->header, body, tx);
            if (len == 0) break;
            drl::set_gradient_env_steps({tx.data(), len}, env_steps);
            send_datagram(len);
        }
    }

    void receive() {
        for (int i = 0; i < kReceiveBurst; ++i) {
            const ssize_t n = recv(fd, rx.data(), rx.size(), MSG_DONTWAIT);
            if (n < 0) break;
            ++c.datagrams;
            proto::Message m;
            if (proto::decode({rx.data(), static_cast<std::size_t>(n)}, m) != proto::DecodeError::Ok) {
                ++c.decode_errors;
                continue;
            }
            const std::uint64_t now = clock::monotonic_ns();
            switch (m.hdr.type) {
                case proto::MsgType::Model:
                    if (drl::is_model_request(m.hdr)) {
                        ++c.unexpected;
                        break;
                    }
                    last_heard = now;
                    receiver.on_chunk(m.hdr, m.payload);
                    break;
                case proto::MsgType::Credit: {
                    proto::CreditBody body;
                    if (m.hdr.cluster_id != options.cluster_id || m.hdr.worker_id != options.worker_id ||
                        !proto::decode_credit(m.payload, body)) {
                        ++c.foreign;
                        break;
                    }
                    last_heard = now;
                    if (any_credit && m.hdr.seq != credit_incarnation) ++c.learner_restarts_seen;
                    any_credit = true;
                    credit_incarnation = m.hdr.seq;
                    c.learner_version = body.learner_version;
                    if (!options.congestion_control) {
                        // Credits still clock the window; the marks they echo are not acted on.
                        c.marks_ignored += body.ce_count;
                        body.ce_count = 0;
                        m.hdr.flags = static_cast<std::uint8_t>(m.hdr.flags & ~proto::flag::kCongestionEcho);
                    }
                    sender.on_credit(body, m.hdr.flags, now);
                    break;
                }
                case proto::MsgType::Feedback: {
                    proto::FeedbackBody body;
                    if (m.hdr.cluster_id != options.cluster_id || !proto::decode_feedback(m.payload, body)) {
                        ++c.foreign;
                        break;
                    }
                    if (options.congestion_control)
                        sender.on_feedback(body, now);
                    else
                        ++c.feedback_ignored;
                    break;
                }
                default:
                    ++c.unexpected;
            }
        }
    }

    void poll(int timeout_ms) {
        pollfd pfd{fd, POLLIN, 0};
        if (timeout_ms > 0 && ::poll(&pfd, 1, 0) == 0) wait_ready(fd, timeout_ms);
        receive();
        const std::uint64_t now = clock::monotonic_ns();
        sender.on_timeout(now);
        flush(now);
        // Ask for the model while without one, and when the learner fell silent (it may have
        // restarted and forgotten us; a request also registers us with it).
        const std::uint64_t period = std::uint64_t{config.worker.model_request_ms} * 1'000'000;
        const std::uint64_t silence = std::uint64_t{config.worker.learner_silence_ms} * 1'000'000;
        if ((!receiver.has_model() || now - last_heard > silence) && now - last_request >= period) {
            last_request = now;
            const proto::Header h = drl::model_request_header(options.cluster_id, options.worker_id, receiver.version(),
                                                              clock::realtime_ns());
            const std::size_t len = proto::encode(h, {}, tx);
            if (len != 0) send_datagram(len);
            ++c.model_requests;
        }
    }

    void offer(std::uint32_t version, std::span<const float> gradient, std::uint32_t steps) {
        if (gradient.size() != sender.config().model_elems)
            throw Error(fmt::format("send: the gradient has {} elements, the model has {}", gradient.size(),
                                    sender.config().model_elems));
        env_steps = steps;
        switch (sender.offer_update(version, clock::realtime_ns(), gradient)) {
            case transport::OfferResult::Ok: break;
            case transport::OfferResult::WrongSize:
                throw Error(fmt::format("send: the gradient has {} elements, the model has {}", gradient.size(),
                                        sender.config().model_elems));
            case transport::OfferResult::NonFinite:
                throw Error("send: the gradient holds a NaN or an infinity; the update is refused");
        }
        flush(clock::monotonic_ns());
    }

    bool newer_model_available() const {
        if (!receiver.has_model()) return false;
        if (!taken_any) return true;
        return receiver.incarnation() != taken_incarnation || receiver.version() != taken_version;
    }
};

WorkerTransport::WorkerTransport(const WorkerOptions& options)
    : impl_(std::make_unique<Impl>(options, load_config(options.config_path))) {}
WorkerTransport::~WorkerTransport() = default;

void WorkerTransport::send(std::uint32_t version, std::span<const float> gradient, std::uint32_t env_steps) {
    impl_->offer(version, gradient, env_steps);
}

void WorkerTransport::send(std::uint32_t version, std::span<const std::span<const float>> parts,
                           std::uint32_t env_steps) {
    if (parts.size() == 1) return impl_->offer(version, parts[0], env_steps);
    std::size_t total = 0;
    for (const auto& p : parts) total += p.size();
    if (total != impl_->sender.config().model_elems)
        throw Error(fmt::format("send: the parts hold {} elements in all, the model has {}", total,
                                impl_->sender.config().model_elems));
    impl_->staging.resize(total);
    std::size_t at = 0;
    for (const auto& p : parts) {
        std::copy(p.begin(), p.end(), impl_->staging.begin() + static_cast<std::ptrdiff_t>(at));
        at += p.size();
    }
    impl_->offer(version, impl_->staging, env_steps);
}

void WorkerTransport::poll(int timeout_ms) { impl_->poll(timeout_ms); }

bool WorkerTransport::take_model(Model& out) {
    if (!impl_->newer_model_available()) return false;
    const auto params = impl_->receiver.parameters();
    out.version = impl_->receiver.version();
    out.parameters.assign(params.begin(), params.end());
    impl_->taken_any = true;
    impl_->taken_version = impl_->receiver.version();
    impl_->taken_incarnation = impl_->receiver.incarnation();
    return true;
}

bool WorkerTransport::wait_model(Model& out, int timeout_ms) {
    const std::uint64_t deadline = clock::monotonic_ns() + std::uint64_t(std::max(timeout_ms, 0)) * 1'000'000;
    for (;;) {
        impl_->poll(0);
        if (take_model(out)) return true;
        const std::uint64_t now = clock::monotonic_ns();
        if (now >= deadline) return false;
        impl_->poll(static_cast<int>(std::min<std::uint64_t>((deadline - now) / 1'000'000 + 1, 10)));
        if (take_model(out)) return true;
    }
}

bool WorkerTransport::has_model() const noexcept { return impl_->receiver.has_model(); }
std::uint32_t WorkerTransport::learner_version() const noexcept { return impl_->c.learner_version; }
std::uint32_t WorkerTransport::model_version() const noexcept { return impl_->receiver.version(); }
std::uint32_t WorkerTransport::model_elems() const noexcept { return impl_->sender.config().model_elems; }
std::uint16_t WorkerTransport::local_port() const noexcept { return net::local_port(impl_->fd); }

WorkerCounters WorkerTransport::counters() const {
    WorkerCounters w = impl_->c;
    const transport::SenderCounters& s = impl_->sender.counters();
    w.updates_offered = s.updates_offered;
    w.updates_rejected = s.updates_rejected;
    w.chunks_queued = s.chunks_queued;
    w.chunks_sent = s.chunks_sent;
    w.contributions_sent = s.contributions_sent;
    w.sender_merges = s.chunks_merged;
    w.chunks_dropped_overflow = s.chunks_dropped_overflow;
    w.chunks_replaced_stale = s.chunks_replaced_stale;
    w.credit_messages = s.credit_messages;
    w.credits_received = s.credits_received;
    w.credits_excess = s.credits_excess;
    w.credits_banked = s.credits_banked;
    w.chunks_prepaid = s.chunks_prepaid;
    w.banked = impl_->sender.banked();
    w.ce_echoes = s.marks_echoed;
    w.feedback_received = s.feedback_received;
    w.feedback_reductions = s.feedback_reductions;
    w.round_reductions = s.round_reductions;
    w.round_increases = s.round_increases;
    w.slow_start_increases = s.slow_start_increases;
    w.credit_timeouts = s.credit_timeouts;
    w.chunks_presumed_lost = s.chunks_presumed_lost;
    w.chunks_expired = s.chunks_expired;
    w.ack_rtt_ns = impl_->sender.ack_rtt_ns();
    w.flight_expiry_ns = impl_->sender.flight_expiry_ns();
    w.window = impl_->sender.window();
    w.alpha = impl_->sender.alpha();
    w.in_flight = impl_->sender.in_flight();
    w.pending_chunks = impl_->sender.pending_chunks();
    const drl::ModelReceiverStats& m = impl_->receiver.stats();
    w.models_adopted = m.versions_adopted;
    w.model_chunks_staged = m.chunks_staged;
    w.model_chunks_stale = m.chunks_stale;
    w.model_chunks_duplicate = m.chunks_duplicate;
    w.model_chunks_rejected = impl_->receiver.reassembler_stats().rejected_total();
    w.model_assemblies_abandoned = m.assemblies_abandoned;
    w.learner_restarts = m.learner_restarts;
    w.model_resends = m.adopted_resent;
    w.model_version = impl_->receiver.version();
    w.incarnation = impl_->receiver.incarnation();
    return w;
}

// ---- LearnerEndpoint -----------------------------------------------------------------------

struct LearnerEndpoint::Impl {
    drl::ClusterConfig config;
    int fd = -1;
    std::uint64_t send_errors = 0;
    std::uint64_t receive_errors = 0;
    std::unique_ptr<learner::LearnerCore> core;
    std::array<std::uint8_t, 65536> rx{};

    Impl(const LearnerOptions& o, drl::ClusterConfig cfg) : config(std::move(cfg)) {
        if (o.initial_parameters.empty()) throw Error("initial_parameters: expected the model's parameters, got none");
        const in_addr bind_ip = parse_address(o.bind_address, "bind address");
        if (o.port < -1 || o.port > 65535) throw Error(fmt::format("port: expected -1 (the YAML's), 0 (any) or 1..65535, got {}", o.port));
        fd = open_socket(bind_ip, static_cast<std::uint16_t>(o.port < 0 ? config.udp_port : o.port), 8 << 20, std::nullopt,
                         config.learner.model_delivery == drl::ModelDelivery::Replicated);
        const auto incarnation = static_cast<std::uint32_t>(clock::realtime_ns() / 1'000'000);
        const bool replicated = config.learner.model_delivery == drl::ModelDelivery::Replicated;
        try {
            core = std::make_unique<learner::LearnerCore>(
                config, o.cluster_id, o.initial_parameters, incarnation,
                [this, replicated](const sockaddr_in& to, std::span<const std::uint8_t> msg) -> learner::SendResult {
                    // CREDIT with IP TOS 0x10 (learner.credit_priority), so that the host's
                    // qdisc serves it ahead of MODEL; everything else with the socket's TOS, 0.
                    const std::uint8_t tos = learner::datagram_tos(config.learner, msg);
                    // With unicast delivery, MODEL uses at most half the socket's buffer (POLLOUT's
                    // measure): the other half stays for CREDIT, which is never deferred. (With
                    // replicated delivery only answers are unicast, sent at once as before.)
                    const bool unicast_model = !replicated && is_unicast_model(msg);
                    if (unicast_model && !net::writable(fd)) return learner::SendStatus::WouldBlock;
                    if (net::send_datagram(fd, to, msg, tos != 0 ? std::optional<std::uint8_t>(tos) : std::nullopt))
                        return learner::SendStatus::Sent;
                    if (errno != EAGAIN && errno != EWOULDBLOCK) {
                        ++send_errors;
                        return learner::SendStatus::Failed;
                    }
                    // The socket's buffer is full. With unicast delivery a MODEL chunk waits in the
                    // core for room (not lost); anything else is lost, as before.
                    if (!unicast_model) ++send_errors;
                    return learner::SendStatus::WouldBlock;
                });
        } catch (const std::invalid_argument& e) {
            ::close(fd);
            throw Error(fmt::format("{}: {}", o.config_path, e.what()));
        }
    }
    ~Impl() {
        if (fd >= 0) ::close(fd);
    }
};

LearnerEndpoint::LearnerEndpoint(const LearnerOptions& options)
    : impl_(std::make_unique<Impl>(options, load_config(options.config_path))) {}
LearnerEndpoint::~LearnerEndpoint() = default;

void LearnerEndpoint::set_update_handler(UpdateHandler handler) {
    if (!handler) {
        impl_->core->set_chunk_handler({});
        return;
    }
    impl_->core->set_chunk_handler([h = std::move(handler), averaged = std::vector<float>()](
                                       const learner::ExternalChunk& x) mutable {
        // The clipped average of the chunk's contributions (what the built-in optimizer steps on).
        averaged.resize(x.elements.size());
        for (std::size_t i = 0; i < averaged.size(); ++i) averaged[i] = x.elements[i] * x.average_scale;
        ChunkUpdate u;
        u.offset = x.offset;
        u.gradient = averaged;
        u.scale = x.staleness_scale;
        u.chunk_index = x.chunk_index;
        u.contributions = x.contributions;
        u.staleness = x.staleness;
        u.base_version = x.base_version;
        u.worker_id = x.worker_id;
        u.merged = x.merged;
        h(u);
    });
}

void LearnerEndpoint::poll(int timeout_ms) {
    Impl& m = *impl_;
    // With MODEL copies waiting for the socket's buffer, room in it wakes the learner too.
    const bool writable_wanted = m.core->wants_writable();
    pollfd pfd{m.fd, static_cast<short>(POLLIN | (writable_wanted ? POLLOUT : 0)), 0};
    if (timeout_ms > 0 && ::poll(&pfd, 1, 0) == 0) wait_ready(m.fd, timeout_ms, writable_wanted);
    for (int i = 0; i < kReceiveBurst; ++i) {
        sockaddr_in from{};
        socklen_t from_len = sizeof from;
        const ssize_t n = recvfrom(m.fd, m.rx.data(), m.rx.size(), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &from_len);
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) ++m.receive_errors;
            break;
        }
        m.core->on_datagram({m.rx.data(), static_cast<std::size_t>(n)}, from, clock::realtime_ns(), clock::monotonic_ns());
    }
    m.core->on_tick(clock::realtime_ns(), clock::monotonic_ns());
}

std::span<const float> LearnerEndpoint::parameters() const noexcept { return impl_->core->parameters(); }
std::span<float> LearnerEndpoint::mutable_parameters() noexcept {
    impl_->core->note_parameters_written();  // whatever the caller writes is published next
    return impl_->core->mutable_parameters();
}
bool LearnerEndpoint::publish() { return impl_->core->publish_now(clock::realtime_ns(), clock::monotonic_ns()); }
std::uint32_t LearnerEndpoint::version() const noexcept { return impl_->core->version(); }
std::uint32_t LearnerEndpoint::model_elems() const noexcept {
    return static_cast<std::uint32_t>(impl_->core->parameters().size());
}
std::uint16_t LearnerEndpoint::local_port() const noexcept { return net::local_port(impl_->fd); }
void* LearnerEndpoint::native_core() noexcept { return impl_->core.get(); }

LearnerCounters LearnerEndpoint::counters() const {
    const learner::LearnerCore& core = *impl_->core;
    const learner::LearnerCounters& c = core.counters();
    LearnerCounters out;
    out.datagrams = c.datagrams;
    out.decode_errors = c.decode_errors_total;
    out.not_admitted = c.not_admitted;
    out.chunks_received = c.gradient_chunks;
    out.chunks_applied = c.chunks_applied;
    out.contributions_applied = c.contributions_applied;
    out.chunks_rejected = core.reassembler_stats().rejected_total() + c.rejected_total();
    out.versions_published = c.versions_published;
    out.model_chunks_sent = c.model_chunks_sent;
    out.model_group_chunks_sent = c.model_group_chunks_sent;
    out.credit_messages = c.credit_messages;
    out.credit_batches = c.credit_batches;
    out.send_errors = impl_->send_errors;
    out.receive_errors = impl_->receive_errors;
    out.version = core.version();
    out.active_workers = core.active_workers();
    learner::LearnerCore& mutable_core = *impl_->core;
    mutable_core.aom().advance(clock::realtime_ns());
    out.aom_mean_ms = mutable_core.aom().mean_ns() / 1e6;
    out.aom_peak_ms = static_cast<double>(mutable_core.aom().peak_ns()) / 1e6;
    out.staleness_mean = core.staleness().mean();
    out.staleness_max = core.staleness().max;
    return out;
}

// ---- Environment ---------------------------------------------------------------------------

struct Environment::Impl {
    std::unique_ptr<worker::envs::Environment> env;
    worker::envs::Rng rng{0};
    std::string name;
};

namespace {
std::vector<float> to_vector(const worker::envs::Observation& o) {
    const auto v = o.view();
    return {v.begin(), v.end()};
}
StepResult to_result(const worker::envs::StepResult& r) {
    return {to_vector(r.observation), r.reward, r.terminated, r.truncated};
}
}  // namespace

Environment::Environment(const std::string& name) : impl_(std::make_unique<Impl>()) {
    impl_->env = worker::envs::make_environment(name);
    if (!impl_->env) {
        std::string known;
        for (std::string_view n : worker::envs::environment_names()) known += (known.empty() ? "" : ", ") + std::string(n);
        throw Error(fmt::format("unknown environment '{}' (known: {})", name, known));
    }
    impl_->name = name;
}
Environment::~Environment() = default;

std::vector<float> Environment::reset(std::uint64_t seed) {
    impl_->rng = worker::envs::Rng(seed);
    return reset();
}
std::vector<float> Environment::reset() { return to_vector(impl_->env->reset(impl_->rng)); }

StepResult Environment::step_discrete(std::int64_t action) {
    const auto& space = impl_->env->action_space();
    if (!space.is_discrete()) throw Error(fmt::format("{} has a continuous action space: pass a list of floats", impl_->name));
    const auto a = worker::envs::Action::discrete(action);
    if (!space.contains(a))
        throw Error(fmt::format("action {} is out of range: {} takes 0..{}", action, impl_->name, space.discrete_count - 1));
    return to_result(impl_->env->step(a));
}

StepResult Environment::step_continuous(std::span<const float> action) {
    const auto& space = impl_->env->action_space();
    if (space.is_discrete()) throw Error(fmt::format("{} has a discrete action space: pass an integer", impl_->name));
    if (action.size() != space.box_size)
        throw Error(fmt::format("{} takes {} action value(s), got {}", impl_->name, space.box_size, action.size()));
    worker::envs::Action a = worker::envs::Action::continuous(action[0]);
    for (std::size_t i = 0; i < action.size(); ++i) a.values[i] = action[i];
    if (!space.accepts(a)) throw Error("action values must be finite");
    return to_result(impl_->env->step(a));
}

bool Environment::discrete() const noexcept { return impl_->env->action_space().is_discrete(); }
std::uint32_t Environment::action_count() const noexcept {
    const auto& s = impl_->env->action_space();
    return static_cast<std::uint32_t>(s.is_discrete() ? s.discrete_count : s.box_size);
}
std::uint32_t Environment::observation_size() const noexcept {
    return static_cast<std::uint32_t>(impl_->env->observation_size());
}
float Environment::action_low() const noexcept { return impl_->env->action_space().box_low; }
float Environment::action_high() const noexcept { return impl_->env->action_space().box_high; }
const std::string& Environment::name() const noexcept { return impl_->name; }
std::vector<float> Environment::set_state(std::span<const double> state) {
    if (!impl_->env->set_state(state))
        throw Error(fmt::format("{} has a state of {} values, got {}", impl_->name, impl_->env->state_size(), state.size()));
    return to_vector(impl_->env->observation());
}

std::vector<double> Environment::state() const {
    const auto s = impl_->env->state();
    return {s.begin(), s.end()};
}

std::vector<std::string> Environment::names() {
    std::vector<std::string> out;
    for (std::string_view n : worker::envs::environment_names()) out.emplace_back(n);
    return out;
}

std::string version_string() { return SHESHA_VERSION; }

}  // namespace shesha

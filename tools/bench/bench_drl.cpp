// DRL benchmarks: the learner's GRADIENT chunk apply path and the worker's gradient send path.
//
//   learner  parameters applied per second by rl::Optimizer (SGD, shared RMSProp, Adam) on one
//            chunk-sized slice, and by LearnerCore::on_datagram (decode, validation, optimizer,
//            credit planning; the send function only counts), against memcpy and a plain axpy
//            (p -= lr * g) over the same slice, interleaved in the same run.
//   sender   chunks per second through the worker's send path over loopback UDP (CreditSender:
//            offer_update, next_to_send, encode, env-step stamp, sendto on the worker's socket
//            options), against a plain sendto loop of one pre-encoded datagram and against the
//            shesha-gen binary (unpaced: --rate 1e7), all received by one in-process draining
//            thread so "received" counts what the kernel delivered.
// No libtorch headers: the optimizers and the learner core work on flat fp32 vectors.
#include <fmt/core.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <thread>

#include "bench_main.h"
#include "bench_util.h"
#include "cluster_config.h"
#include "drl_wire.h"
#include "learner/learner_core.h"
#include "model/optimizer.h"
#include "big_endian.h"
#include "protocol.h"
#include "clock.h"
#include "udp.h"
#include "model/optimizer_kernels.h"
#include "transport/credit_sender.h"

namespace shesha::bench {

namespace {

using Clock = std::chrono::steady_clock;

// The size of the lab's Acrobot-v1 model (64x64 tanh MLP), in the lab's 256-element chunks.
constexpr std::size_t kModelElems = 4868;
constexpr std::uint16_t kCluster = 1;
constexpr std::uint32_t kWorker = 1;

std::vector<float> small_gradient(std::size_t n, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1e-2F, 1e-2F);
    std::vector<float> g(n);
    for (float& x : g) x = u(rng);
    return g;
}

// Runs `body` (which processes `elems_per_call` parameters) for about `seconds`; parameters/s.
template <typename Body>
double params_per_second(double seconds, std::size_t elems_per_call, Body&& body) {
    std::uint64_t calls = 0;
    const auto t0 = Clock::now();
    double elapsed = 0.0;
    do {
        for (int i = 0; i < 64; ++i) body();
        calls += 64;
        elapsed = seconds_since(t0);
    } while (elapsed < seconds);
    return static_cast<double>(calls) * static_cast<double>(elems_per_call) / elapsed;
}

__attribute__((noinline)) void axpy_reference(float* __restrict p, const float* __restrict g, std::size_t n, float lr) {
    for (std::size_t i = 0; i < n; ++i) p[i] -= lr * g[i];
}

}  // namespace

Table run_learner_bench(const RunOptions& opt) {
    const int reps = opt.quick ? 1 : 7;
    const double window = opt.quick ? 0.02 : 0.15;
    Table t("learner: GRADIENT chunk apply, parameters/s (median of " + std::to_string(reps) + " interleaved reps)",
            {"chunk elems", "path", "Mparams/s", "ns/chunk", "vs memcpy"}, 3);

    for (const std::uint32_t chunk : {256U, 1024U}) {
        const std::vector<float> grad = small_gradient(chunk, 7);
        std::vector<float> params(chunk, 0.5F);
        std::vector<float> copy_dst(chunk);
        rl::OptimizerConfig oc;
        auto sgd = (oc.kind = rl::OptimizerKind::Sgd, rl::Optimizer::create(oc, chunk));
        auto rms = (oc.kind = rl::OptimizerKind::SharedRmsProp, rl::Optimizer::create(oc, chunk));
        auto adam = (oc.kind = rl::OptimizerKind::Adam, rl::Optimizer::create(oc, chunk));

        // Whole learner cores (one per optimizer kind) fed pre-encoded GRADIENT datagrams of
        // every chunk of a kModelElems model, staleness 0 (no publish runs in between).
        struct CorePath {
            std::string name;
            std::unique_ptr<learner::LearnerCore> core;
            std::vector<std::vector<std::uint8_t>> datagrams;
            std::size_t next = 0;
            std::uint32_t seq = 1;  // every datagram fed is a new update (the learner refuses copies)
        };
        std::uint64_t credit_bytes = 0;
        std::vector<CorePath> cores;
        for (const auto& [name, kind] : {std::pair{"LearnerCore rmsprop", rl::OptimizerKind::SharedRmsProp},
                                         std::pair{"LearnerCore adam", rl::OptimizerKind::Adam}}) {
            drl::ClusterConfig cc;
            cc.transport.chunk_elems = chunk;
            cc.optimizer.kind = kind;
            CorePath cp;
            cp.name = name;
            cp.core = std::make_unique<learner::LearnerCore>(
                cc, kCluster, std::vector<float>(kModelElems, 0.5F), 1,
                [&credit_bytes](const sockaddr_in&, std::span<const std::uint8_t> m) {
                    credit_bytes += m.size();
                    return true;
                });
            const auto& layout = cp.core->layout();
            const std::vector<float> full = small_gradient(kModelElems, 11);
            for (std::uint16_t k = 0; k < layout.chunk_count; ++k) {
                proto::Header h;
                h.type = proto::MsgType::Gradient;
                h.cluster_id = kCluster;
                h.worker_id = kWorker;
                h.model_version = cp.core->version();
                h.seq = 1;
                h.chunk_index = k;
                h.chunk_count = layout.chunk_count;
                h.elem_count = static_cast<std::uint16_t>(layout.elems_in(k));
                h.ts_earliest_ns = h.ts_latest_ns = clock::realtime_ns();
                const std::span<const float> slice(full.data() + layout.offset(k), layout.elems_in(k));
                std::vector<std::uint8_t> d(proto::kHeaderSize + slice.size_bytes());
                proto::encode(h, {reinterpret_cast<const std::uint8_t*>(slice.data()), slice.size_bytes()}, d);
                cp.datagrams.push_back(std::move(d));
            }
            cores.push_back(std::move(cp));
        }
        sockaddr_in from{};
        from.sin_family = AF_INET;
        from.sin_port = htons(40000);
        from.sin_addr.s_addr = htonl(0x7f000001);

        // The optimizers at every SIMD level the CPU has (drl/model/optimizer_kernels.h), interleaved.
        std::vector<rl::kernels::Level> levels{rl::kernels::Level::Scalar};
        if (rl::kernels::best_level() >= rl::kernels::Level::Avx2) levels.push_back(rl::kernels::Level::Avx2);
        if (rl::kernels::best_level() >= rl::kernels::Level::Avx512) levels.push_back(rl::kernels::Level::Avx512);
        const rl::kernels::Level active = rl::kernels::active_level();
        std::vector<std::vector<double>> level_samples(3 * levels.size());
        std::vector<std::vector<double>> samples(5 + cores.size());
        std::vector<std::uint64_t> core_elems(cores.size(), 0);
        for (int r = 0; r < reps; ++r) {
            samples[0].push_back(params_per_second(window, chunk, [&] {
                std::memcpy(copy_dst.data(), grad.data(), chunk * sizeof(float));
                clobber_memory(copy_dst.data());
            }));
            samples[1].push_back(params_per_second(window, chunk, [&] {
                axpy_reference(params.data(), grad.data(), chunk, 7e-4F);
                clobber_memory(params.data());
            }));
            samples[2].push_back(params_per_second(window, chunk, [&] { sgd->apply(params, grad, 1.0F); }));
            samples[3].push_back(params_per_second(window, chunk, [&] { rms->apply(params, grad, 1.0F); }));
            samples[4].push_back(params_per_second(window, chunk, [&] { adam->apply(params, grad, 1.0F); }));
            for (std::size_t l = 0; l < levels.size(); ++l) {
                rl::kernels::set_level(levels[l]);
                level_samples[3 * l].push_back(params_per_second(window, chunk, [&] { sgd->apply(params, grad, 1.0F); }));
                level_samples[3 * l + 1].push_back(params_per_second(window, chunk, [&] { rms->apply(params, grad, 1.0F); }));
                level_samples[3 * l + 2].push_back(params_per_second(window, chunk, [&] { adam->apply(params, grad, 1.0F); }));
            }
            rl::kernels::set_level(active);
            for (std::size_t c = 0; c < cores.size(); ++c) {
                CorePath& cp = cores[c];
                // Elements per call vary (the last chunk is short): count them exactly.
                std::uint64_t elems = 0;
                std::uint64_t calls = 0;
                const std::uint64_t now_mono = clock::monotonic_ns();
                const std::uint64_t now_real = clock::realtime_ns();
                const auto t0 = Clock::now();
                double elapsed = 0.0;
                do {
                    for (int i = 0; i < 64; ++i) {
                        auto& d = cp.datagrams[cp.next];
                        be::store32(d.data() + proto::off::kSeq, cp.seq++);
                        cp.core->on_datagram(d, from, now_real, now_mono);
                        elems += (d.size() - proto::kHeaderSize) / sizeof(float);
                        cp.next = (cp.next + 1) % cp.datagrams.size();
                    }
                    calls += 64;
                    elapsed = seconds_since(t0);
                } while (elapsed < window);
                core_elems[c] += calls;
                samples[5 + c].push_back(static_cast<double>(elems) / elapsed);
            }
        }
        const char* names[] = {"memcpy (reference)", "axpy p -= lr*g (reference)", "Optimizer sgd",
                               "Optimizer rmsprop", "Optimizer adam"};
        const double memcpy_rate = median(samples[0]);
        for (std::size_t i = 0; i < samples.size(); ++i) {
            const double rate = median(samples[i]);
            const std::string name = i < 5 ? names[i] : cores[i - 5].name;
            t.add_row({std::to_string(chunk), name, rate / 1e6, 1e9 * chunk / rate, rate / memcpy_rate});
        }
        for (std::size_t l = 0; l < levels.size(); ++l) {
            const std::string level(rl::kernels::to_string(levels[l]));
            for (int k = 0; k < 3; ++k) {
                const double rate = median(level_samples[3 * l + k]);
                const char* kind = k == 0 ? "sgd" : k == 1 ? "rmsprop" : "adam";
                t.add_row({std::to_string(chunk), std::string("Optimizer ") + kind + " at " + level, rate / 1e6,
                           1e9 * chunk / rate, rate / memcpy_rate});
            }
        }
        for (std::size_t c = 0; c < cores.size(); ++c) {
            const auto& k = cores[c].core->counters();
            if (k.chunks_applied != core_elems[c] || k.decode_errors_total != 0)
                t.add_row({std::to_string(chunk), cores[c].name + " FAILED: applied != fed",
                           std::nan(""), std::nan(""), std::nan("")});
        }
        clobber_memory(params.data());
    }
    t.add_note("model of " + std::to_string(kModelElems) + " parameters (Acrobot-v1 64x64) for the LearnerCore rows; "
               "ns/chunk is for a full chunk");
    t.add_note("LearnerCore rows: on_datagram per chunk = decode + validation (finite) + optimizer + CREDIT planning/encode");
    return t;
}

namespace {

// Drains a UDP socket on its own thread and counts datagrams.
class Drain {
public:
    explicit Drain(int fd) : fd_(fd), thread_([this] { run(); }) {}
    ~Drain() {
        stop_ = true;
        thread_.join();
    }
    std::uint64_t received() const { return received_.load(); }

private:
    void run() {
        std::vector<std::uint8_t> buf(65536);
        while (!stop_.load(std::memory_order_relaxed)) {
            pollfd pfd{fd_, POLLIN, 0};
            if (::poll(&pfd, 1, 10) <= 0) continue;
            while (recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT) > 0) received_.fetch_add(1, std::memory_order_relaxed);
        }
    }
    int fd_;
    std::atomic<bool> stop_{false};
    std::atomic<std::uint64_t> received_{0};
    std::thread thread_;
};

// A number field from shesha-gen's summary JSON (top level fields come last; take the last match).
double json_number(const std::string& text, const std::string& key) {
    const std::string needle = "\"" + key + "\":";
    const auto at = text.rfind(needle);
    if (at == std::string::npos) return std::nan("");
    return std::strtod(text.c_str() + at + needle.size(), nullptr);
}

}  // namespace

Table run_sender_bench(const RunOptions& opt, const std::string& gen_binary) {
    const double seconds = opt.quick ? 0.3 : 1.5;
    const int rounds = opt.quick ? 1 : 3;
    Table t("sender: GRADIENT chunks/s over loopback UDP (256 fp32 per chunk, 1072 B datagrams; " +
                std::to_string(rounds) + " rounds, median)",
            {"path", "sent chunks/s", "received chunks/s", "Mbit/s sent", "vs plain sendto"}, 2);

    std::string err;
    net::UdpSocketOptions rx_opts;
    rx_opts.bind_addr = net::parse_ipv4("127.0.0.1");
    rx_opts.rcvbuf_bytes = 8 << 20;
    const int rx_fd = net::open_udp_socket(rx_opts, err);
    net::UdpSocketOptions tx_opts;  // what shesha-worker sets
    tx_opts.bind_addr = net::parse_ipv4("127.0.0.1");
    tx_opts.rcvbuf_bytes = 4 << 20;
    tx_opts.sndbuf_bytes = 4 << 20;
    tx_opts.tos = 0x02;
    const int tx_fd = rx_fd < 0 ? -1 : net::open_udp_socket(tx_opts, err);
    if (rx_fd < 0 || tx_fd < 0) {
        t.add_row({"FAILED: " + err, std::nan(""), std::nan(""), std::nan(""), std::nan("")});
        return t;
    }
    const std::uint16_t port = net::local_port(rx_fd);
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_port = htons(port);
    dst.sin_addr.s_addr = htonl(0x7f000001);
    auto drain_owner = std::make_unique<Drain>(rx_fd);
    Drain& drain = *drain_owner;

    transport::SenderConfig sc;
    sc.cluster_id = kCluster;
    sc.worker_id = kWorker;
    sc.model_elems = kModelElems;
    sc.chunk_elems = 256;
    sc.w_init = sc.w_max = 256;  // congestion control off, as the lab's no-feedback arms
    sc.credit_timeout_ns = 0;
    transport::CreditSender sender(sc);
    const std::vector<float> gradient = small_gradient(kModelElems, 3);
    std::vector<std::uint8_t> tx(proto::kHeaderSize + std::size_t{proto::kMaxElements} * sizeof(float));
    constexpr std::size_t kDatagram = proto::kHeaderSize + 256 * sizeof(float);

    struct Sample {
        double sent = 0, received = 0, mbit = 0;
    };
    std::uint64_t bytes = 0;  // sent by the running measurement
    std::vector<Sample> worker_path, plain, gen;

    const auto measure = [&](auto&& loop) {
        const std::uint64_t r0 = drain.received();
        bytes = 0;
        const auto t0 = Clock::now();
        const std::uint64_t sent = loop(t0);
        const double el = seconds_since(t0);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the drain catch up
        return Sample{static_cast<double>(sent) / el, static_cast<double>(drain.received() - r0) / el,
                      static_cast<double>(bytes) * 8 / el / 1e6};
    };

    for (int r = 0; r < rounds; ++r) {
        // 1. The worker's path: a whole update offered, its chunks sent, then credited as the
        //    learner would (one CREDIT for the update), so the window never limits the rate.
        worker_path.push_back(measure([&](Clock::time_point t0) {
            std::uint64_t sent = 0;
            std::uint32_t version = 1;
            while (seconds_since(t0) < seconds) {
                sender.offer_update(version++, clock::realtime_ns(), gradient);
                std::uint32_t n = 0;
                const std::uint64_t now = clock::monotonic_ns();
                while (auto chunk = sender.next_to_send(now)) {
                    const std::span<const std::uint8_t> body(
                        reinterpret_cast<const std::uint8_t*>(chunk->elements.data()), chunk->elements.size_bytes());
                    const std::size_t len = proto::encode(chunk->header, body, tx);
                    if (len == 0) break;
                    drl::set_gradient_env_steps({tx.data(), len}, static_cast<std::uint32_t>(sent));
                    if (sendto(tx_fd, tx.data(), len, MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&dst),
                               sizeof dst) == static_cast<ssize_t>(len)) {
                        ++sent;
                        bytes += len;
                    }
                    ++n;
                }
                proto::CreditBody credit;
                credit.credits = n;
                credit.acked_seq = sender.next_seq() - 1;
                credit.learner_version = version;
                sender.on_credit(credit, 0, clock::monotonic_ns());
            }
            return sent;
        }));
        // 2. Plain sendto of one pre-encoded datagram of the same size: the syscall floor.
        std::vector<std::uint8_t> plain_dgram(kDatagram);
        {
            proto::Header h;
            h.cluster_id = kCluster;
            h.worker_id = kWorker;
            h.chunk_count = 20;
            h.elem_count = 256;
            proto::encode(h, {reinterpret_cast<const std::uint8_t*>(gradient.data()), 256 * sizeof(float)}, plain_dgram);
        }
        plain.push_back(measure([&](Clock::time_point t0) {
            std::uint64_t sent = 0;
            while (seconds_since(t0) < seconds)
                for (int i = 0; i < 64; ++i)
                    if (sendto(tx_fd, plain_dgram.data(), kDatagram, MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&dst),
                               sizeof dst) == static_cast<ssize_t>(kDatagram)) {
                        ++sent;
                        bytes += kDatagram;
                    }
            return sent;
        }));
        // 3. shesha-gen, one worker, 20 chunks of 256 per update, unpaced.
        char json_path[] = "/tmp/shesha-bench-gen-XXXXXX";
        const int jfd = mkstemp(json_path);
        if (jfd >= 0) ::close(jfd);
        const std::string cmd = fmt::format(
            "'{}' --dst 127.0.0.1 --port {} --workers 1 --chunks 20 --elems 256 --rate 10000000 --duration {} "
            "--json {} >/dev/null 2>&1",
            gen_binary, port, seconds, json_path);
        const std::uint64_t r0 = drain.received();
        const auto t0 = Clock::now();
        const int rc = std::system(cmd.c_str());
        const double el = seconds_since(t0);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        std::ifstream in(json_path);
        std::stringstream text;
        text << in.rdbuf();
        ::unlink(json_path);
        const double gen_rate = json_number(text.str(), "chunks_per_s");
        const double gen_dur = json_number(text.str(), "duration_s");
        if (rc != 0 || !std::isfinite(gen_rate)) {
            gen.push_back({std::nan(""), std::nan(""), std::nan("")});
        } else {
            // Received over shesha-gen's own sending time (process start-up excluded).
            gen.push_back({gen_rate, static_cast<double>(drain.received() - r0) / std::min(el, gen_dur),
                           json_number(text.str(), "mbit_per_s")});
        }
    }
    ::close(tx_fd);

    const auto med = [](const std::vector<Sample>& v, double Sample::*field) {
        std::vector<double> x;
        for (const Sample& s : v) x.push_back(s.*field);
        return median(x);
    };
    const double plain_rate = med(plain, &Sample::sent);
    const auto row = [&](const std::string& name, const std::vector<Sample>& v) {
        const double s = med(v, &Sample::sent);
        t.add_row({name, s, med(v, &Sample::received), med(v, &Sample::mbit), s / plain_rate});
    };
    row("worker path (CreditSender + encode + sendto)", worker_path);
    row("plain sendto, pre-encoded (reference)", plain);
    row("shesha-gen (reference, separate process)", gen);
    t.add_note("one sending thread; the receiving thread shares the machine's cores; received < sent = kernel drops");
    t.add_note("worker path: update of " + std::to_string(kModelElems) +
               " elements = 20 chunks (the last of 4 elements), credited in one CREDIT per update (window never limits)");
    drain_owner.reset();  // stop the draining thread before its socket goes
    ::close(rx_fd);
    return t;
}

}  // namespace shesha::bench

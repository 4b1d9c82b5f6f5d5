// The public API (api/include/shesha/transport.h) end to end over loopback UDP, in one process:
// a LearnerEndpoint with an update handler and one with the built-in optimizer, WorkerTransports
// sending exact values, the published model coming back bit for bit, and bad arguments refused
// with messages that name them. Waits are bounded loops on observable state, never sleeps.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>

#include "shesha/transport.h"

namespace {

// 10 parameters in chunks of 4 (4, 4, 2); SGD lr 0.5; no clip, so arithmetic is exact.
std::string write_config(const std::string& name, const std::string& window = "w_init: 64, w_max: 64") {
    const auto path = (std::filesystem::temp_directory_path() / name).string();
    std::ofstream(path) << "env: CartPole-v1\n"
                           "optimizer: {kind: sgd, lr: 0.5}\n"
                           "transport: {chunk_elems: 4, " + window + "}\n"
                           "learner: {publish_interval_ms: 1, max_grad_norm: 0}\n"
                           "worker: {model_request_ms: 5}\n";
    return path;
}

shesha::LearnerOptions learner_options(const std::string& config) {
    shesha::LearnerOptions o;
    o.config_path = config;
    o.cluster_id = 9;
    o.bind_address = "127.0.0.1";
    o.port = 0;  // any free port
    o.initial_parameters = std::vector<float>(10, 1.0F);
    return o;
}

shesha::WorkerOptions worker_options(const std::string& config, std::uint16_t port, std::uint32_t id) {
    shesha::WorkerOptions o;
    o.config_path = config;
    o.cluster_id = 9;
    o.worker_id = id;
    o.learner_address = "127.0.0.1";
    o.learner_port = port;
    o.bind_address = "127.0.0.1";
    o.model_elems = 10;
    return o;
}

// Polls both ends until done() or 5 s.
template <typename Done>
bool run_until(shesha::LearnerEndpoint& l, std::vector<shesha::WorkerTransport*> workers, Done done) {
    for (int i = 0; i < 5000; ++i) {
        l.poll(1);
        for (auto* w : workers) w->poll(0);
        if (done()) return true;
    }
    return false;
}

// A bare UDP socket on a free loopback port, standing in for a learner; addr gets its address.
int bound_loopback_socket(sockaddr_in& addr) {
    const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
    REQUIRE(fd >= 0);
    addr = sockaddr_in{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    return fd;
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const shesha::Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("api: a worker's gradient reaches the learner's handler exactly, with its chunk layout") {
    const std::string config = write_config("shesha-test-api-a.yaml");
    shesha::LearnerEndpoint learner(learner_options(config));
    std::vector<shesha::ChunkUpdate> seen;
    std::vector<std::vector<float>> values;
    learner.set_update_handler([&](const shesha::ChunkUpdate& u) {
        seen.push_back(u);
        values.emplace_back(u.gradient.begin(), u.gradient.end());
    });
    shesha::WorkerTransport worker(worker_options(config, learner.local_port(), 3));
    shesha::Model model;
    REQUIRE(run_until(learner, {&worker}, [&] { return worker.take_model(model); }));
    CHECK(model.version == 1);
    CHECK(model.parameters == std::vector<float>(10, 1.0F));

    const std::vector<float> g{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    worker.send(model.version, g, 123);
    REQUIRE(run_until(learner, {&worker}, [&] { return seen.size() == 3; }));
    std::vector<float> joined(10, -1.0F);
    for (std::size_t i = 0; i < seen.size(); ++i) {
        CHECK(seen[i].worker_id == 3);
        CHECK(seen[i].contributions == 1);
        CHECK(seen[i].scale == 1.0F);
        CHECK(seen[i].base_version == 1);
        CHECK(seen[i].offset == 4u * seen[i].chunk_index);
        std::copy(values[i].begin(), values[i].end(), joined.begin() + seen[i].offset);
    }
    CHECK(joined == g);
    const shesha::LearnerCounters c = learner.counters();
    CHECK(c.chunks_applied == 3);
    CHECK(c.contributions_applied == 3);
    CHECK(c.chunks_rejected == 0);
    // The handler applied nothing: the parameters are still version 1's.
    CHECK(std::vector<float>(learner.parameters().begin(), learner.parameters().end()) == std::vector<float>(10, 1.0F));
    REQUIRE(run_until(learner, {&worker}, [&] { return worker.counters().credits_received == 3; }));
    CHECK(worker.counters().chunks_sent == 3);
    std::filesystem::remove(config);
}

TEST_CASE("api: the handler gets the average of a sender-merged chunk, with its contribution count") {
    // A window of one chunk: of update A (all 2), chunk 0 leaves and chunks 1 and 2 wait; update
    // B (all 4) is summed into them at the sender and queues its own chunk 0 behind A's.
    const std::string config = write_config("shesha-test-api-m.yaml", "w_init: 1, w_min: 1, w_max: 1");
    shesha::LearnerEndpoint learner(learner_options(config));
    std::vector<std::pair<shesha::ChunkUpdate, std::vector<float>>> seen;
    learner.set_update_handler([&](const shesha::ChunkUpdate& u) {
        seen.emplace_back(u, std::vector<float>(u.gradient.begin(), u.gradient.end()));
    });
    shesha::WorkerTransport worker(worker_options(config, learner.local_port(), 5));
    shesha::Model model;
    REQUIRE(run_until(learner, {&worker}, [&] { return worker.take_model(model); }));
    worker.send(model.version, std::vector<float>(10, 2.0F));
    worker.send(model.version, std::vector<float>(10, 4.0F));
    CHECK(worker.counters().sender_merges == 2);
    REQUIRE(run_until(learner, {&worker}, [&] { return seen.size() == 4; }));
    std::map<std::pair<std::uint16_t, std::uint16_t>, std::vector<float>> by_chunk;  // (chunk, contributions)
    for (const auto& [u, g] : seen) {
        CHECK(u.scale == 1.0F);
        by_chunk[{u.chunk_index, u.contributions}] = g;
    }
    CHECK(by_chunk.at({1, 2}) == std::vector<float>(4, 3.0F));  // (2 + 4) / 2
    CHECK(by_chunk.at({2, 2}) == std::vector<float>(2, 3.0F));
    CHECK(by_chunk.count({0, 1}) == 1);
    CHECK(learner.counters().contributions_applied == 6);
    std::filesystem::remove(config);
}

TEST_CASE("api: the built-in optimizer applies, the new version comes back bit for bit, parts are concatenated") {
    const std::string config = write_config("shesha-test-api-b.yaml");
    shesha::LearnerEndpoint learner(learner_options(config));
    shesha::WorkerTransport worker(worker_options(config, learner.local_port(), 1));
    shesha::Model model;
    REQUIRE(run_until(learner, {&worker}, [&] { return worker.take_model(model); }));
    CHECK_FALSE(worker.take_model(model));  // nothing newer yet
    // Three parts (4 + 4 + 2) of 2.0: SGD lr 0.5 moves every parameter from 1 to 0.
    const std::vector<float> a(4, 2.0F), b(4, 2.0F), c(2, 2.0F);
    const std::vector<std::span<const float>> parts{a, b, c};
    worker.send(model.version, parts);
    REQUIRE(run_until(learner, {&worker}, [&] { return learner.counters().chunks_applied == 3; }));
    CHECK(std::vector<float>(learner.parameters().begin(), learner.parameters().end()) == std::vector<float>(10, 0.0F));
    REQUIRE(run_until(learner, {&worker}, [&] { return worker.take_model(model); }));
    CHECK(model.version >= 2);
    CHECK(model.parameters == std::vector<float>(10, 0.0F));
    CHECK(worker.counters().models_adopted >= 2);
    std::filesystem::remove(config);
}

TEST_CASE("api: bad arguments are refused with messages naming them") {
    const std::string config = write_config("shesha-test-api-c.yaml");
    shesha::LearnerEndpoint learner(learner_options(config));
    shesha::WorkerTransport worker(worker_options(config, learner.local_port(), 1));
    const std::vector<float> short_gradient(9, 0.0F);
    CHECK(error_of([&] { worker.send(1, short_gradient); }) == "send: the gradient has 9 elements, the model has 10");
    std::vector<float> nan_gradient(10, 0.0F);
    nan_gradient[4] = std::numeric_limits<float>::quiet_NaN();
    CHECK(error_of([&] { worker.send(1, nan_gradient); }) == "send: the gradient holds a NaN or an infinity; the update is refused");
    const std::vector<float> a(4), b(4);
    const std::vector<std::span<const float>> parts{a, b};
    CHECK(error_of([&] { worker.send(1, parts); }) == "send: the parts hold 8 elements in all, the model has 10");
    CHECK(worker.counters().updates_rejected == 1);

    auto o = worker_options(config, 1, 1);
    o.learner_address = "10.0.0.300";
    CHECK(error_of([&] { shesha::WorkerTransport w(o); }) == "learner address: not an IPv4 address: '10.0.0.300'");
    o = worker_options(config, 1, 1);
    o.model_elems = 0;
    CHECK(error_of([&] { shesha::WorkerTransport w(o); }) == "model_elems: expected the length of the flat parameter vector, got 0");
    o = worker_options("/nonexistent/cluster.yaml", 1, 1);
    CHECK(error_of([&] { shesha::WorkerTransport w(o); }) == "/nonexistent/cluster.yaml: cannot read the file");
    auto lo = learner_options(config);
    lo.initial_parameters.clear();
    CHECK(error_of([&] { shesha::LearnerEndpoint l(lo); }) == "initial_parameters: expected the model's parameters, got none");
    lo = learner_options(config);
    lo.port = 70000;
    CHECK(error_of([&] { shesha::LearnerEndpoint l(lo); }).find("port: expected -1") == 0);

    CHECK(error_of([] { shesha::Environment e("CartPole-v9"); }).find("unknown environment 'CartPole-v9'") == 0);
    shesha::Environment env("CartPole-v1");
    env.reset(1);
    CHECK(error_of([&] { env.step_discrete(2); }) == "action 2 is out of range: CartPole-v1 takes 0..1");
    const std::vector<double> state{0.01, 0.02, -0.03, 0.04};
    const auto obs = env.set_state(state);
    CHECK(obs == std::vector<float>{0.01F, 0.02F, -0.03F, 0.04F});
    // The first row of tests/envs/test_shesha_env_cli.sh's CartPole trajectory (Gymnasium's numbers).
    const shesha::StepResult r = env.step_discrete(0);
    CHECK(r.observation == std::vector<float>{0.0104F, -0.17467919F, -0.0292000007F, 0.323068708F});
    CHECK(r.reward == 1.0);
    std::filesystem::remove(config);
}

TEST_CASE("api: with model_delivery replicated the learner sends publishes once to the group, requests by unicast") {
    const auto config = (std::filesystem::temp_directory_path() / "shesha-test-api-replicated.yaml").string();
    std::ofstream(config) << "env: CartPole-v1\n"
                             "optimizer: {kind: sgd, lr: 0.5}\n"
                             "transport: {chunk_elems: 4, w_init: 64, w_max: 64}\n"
                             "learner: {publish_interval_ms: 1, max_grad_norm: 0, model_delivery: replicated,\n"
                             "          model_group: 239.77.0.9}\n"
                             "worker: {model_request_ms: 5}\n";
    shesha::LearnerEndpoint learner(learner_options(config));
    shesha::WorkerTransport worker(worker_options(config, learner.local_port(), 1));
    // The worker's model request is answered by unicast: 3 chunks to it.
    shesha::Model model;
    REQUIRE(run_until(learner, {&worker}, [&] { return worker.take_model(model); }));
    CHECK(model.version == 1);
    CHECK(learner.counters().model_chunks_sent == 3);
    // A publish goes to 239.77.0.9 once (3 chunks), from a socket bound to 127.0.0.1: no
    // multicast route needed. Without a Shesha switch nobody receives it.
    const std::vector<float> g(10, 2.0F);
    worker.send(model.version, g);
    REQUIRE(run_until(learner, {&worker}, [&] { return learner.counters().model_group_chunks_sent >= 3; }));
    const shesha::LearnerCounters c = learner.counters();
    CHECK(c.version == 2);
    CHECK(c.model_group_chunks_sent % 3 == 0);  // whole copies (a rebroadcast may have followed)
    CHECK(c.model_chunks_sent == 3);            // still only the answer to the request
    // The gradient's CREDIT went to the group too, as a CREDIT_BATCH of one (credit_batching: auto).
    CHECK(c.credit_batches == 3);               // one per chunk of the gradient
    CHECK(c.credit_messages == 3);
    CHECK(c.send_errors == 0);
    std::filesystem::remove(config);
}

TEST_CASE("api: a worker's first GRADIENT seq is its start time in microseconds, so a restart continues ahead") {
    // A bare UDP socket stands in for the learner: it reads the seq (header bytes 16..19).
    sockaddr_in addr{};
    const int fd = bound_loopback_socket(addr);
    const std::string config = write_config("shesha-test-api-seq.yaml");
    const auto now_us = [] {
        return static_cast<std::uint32_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                              std::chrono::system_clock::now().time_since_epoch())
                                              .count());
    };
    const auto first_seq_of_a_new_worker = [&] {
        shesha::WorkerTransport worker(worker_options(config, ntohs(addr.sin_port), 3));
        worker.send(1, std::vector<float>(10, 0.5F));
        std::uint8_t buf[2048];
        for (;;) {  // the first GRADIENT (a model request may come first)
            pollfd pfd{fd, POLLIN, 0};
            REQUIRE(::poll(&pfd, 1, 5000) == 1);
            const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
            REQUIRE(n >= 48);
            if (buf[3] == 1) break;  // type GRADIENT
        }
        return (std::uint32_t{buf[16]} << 24) | (std::uint32_t{buf[17]} << 16) | (std::uint32_t{buf[18]} << 8) | buf[19];
    };
    const std::uint32_t before = now_us();
    const std::uint32_t first = first_seq_of_a_new_worker();
    const std::uint32_t after = now_us();
    CHECK(static_cast<std::int32_t>(first - before) >= 0);
    CHECK(static_cast<std::int32_t>(after - first) >= 0);
    // The rest of the first worker's update (its other chunks, already sent over loopback).
    std::uint8_t rest[2048];
    while (::recv(fd, rest, sizeof rest, MSG_DONTWAIT) > 0) {
    }
    // The same worker id started again: its seqs continue ahead of the first one's.
    const std::uint32_t second = first_seq_of_a_new_worker();
    CHECK(static_cast<std::int32_t>(second - first) > 0);
    ::close(fd);
    std::filesystem::remove(config);
}

TEST_CASE("api: transport.flight_expiry_ms retires the chunks of a silent learner; a worker without congestion control keeps them") {
    // A learner that never answers: a bound UDP socket nobody reads.
    sockaddr_in addr{};
    const int fd = bound_loopback_socket(addr);
    // Chunks expire after 1 ms; the credit timeout (10 s) never fires within the test.
    const std::string config = write_config("shesha-test-api-expiry.yaml",
                                            "w_init: 64, w_max: 64, credit_timeout_ms: 10000, flight_expiry_ms: 1");
    const auto poll_for = [](shesha::WorkerTransport& w, const std::function<bool()>& done, int ms) {
        const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
        while (std::chrono::steady_clock::now() < end) {
            w.poll(1);
            if (done()) return true;
        }
        return false;
    };
    shesha::WorkerTransport on(worker_options(config, ntohs(addr.sin_port), 3));
    on.send(1, std::vector<float>(10, 0.5F));
    CHECK(on.counters().in_flight == 3);
    REQUIRE(poll_for(on, [&] { return on.counters().chunks_expired == 3; }, 5000));
    CHECK(on.counters().in_flight == 0);
    CHECK(on.counters().chunks_presumed_lost == 3);
    CHECK(on.counters().credit_timeouts == 0);

    shesha::WorkerOptions fifo_options = worker_options(config, ntohs(addr.sin_port), 4);
    fifo_options.congestion_control = false;  // the FIFO baseline: no leak repairs
    shesha::WorkerTransport off(fifo_options);
    off.send(1, std::vector<float>(10, 0.5F));
    CHECK_FALSE(poll_for(off, [&] { return off.counters().chunks_expired != 0; }, 50));  // 50x the expiry
    CHECK(off.counters().in_flight == 3);
    ::close(fd);
    std::filesystem::remove(config);
}

TEST_CASE("api: a CREDIT_BATCH that reaches a worker (no Shesha switch to expand it) is counted as unexpected, not applied") {
    sockaddr_in addr{};
    const int fd = bound_loopback_socket(addr);
    const std::string config = write_config("shesha-test-api-batch.yaml");
    shesha::WorkerTransport worker(worker_options(config, ntohs(addr.sin_port), 3));
    // The wire bytes by hand (docs/protocol.md): a valid CREDIT_BATCH of one entry for worker 3.
    std::vector<std::uint8_t> msg(48 + 24, 0);
    msg[0] = 0x53, msg[1] = 0x48, msg[2] = 2, msg[3] = 5;  // magic, version, type CREDIT_BATCH
    msg[23] = 1;                                            // chunk_count 1
    msg[25] = 1;                                            // elem_count: one entry
    msg[27] = 1;                                            // contrib_count 1
    msg[48 + 3] = 3;                                        // entry: worker 3
    msg[48 + 8 + 3] = 5;                                    // its CREDIT body: 5 credits
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(worker.local_port());
    REQUIRE(::sendto(fd, msg.data(), msg.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to) ==
            static_cast<ssize_t>(msg.size()));
    for (int i = 0; i < 200 && worker.counters().unexpected == 0; ++i) worker.poll(10);
    const shesha::WorkerCounters c = worker.counters();
    CHECK(c.unexpected == 1);
    CHECK(c.credits_received == 0);
    CHECK(c.decode_errors == 0);
    ::close(fd);
    std::filesystem::remove(config);
}

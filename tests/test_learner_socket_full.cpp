// The learner's unicast MODEL copies through a send buffer that really fills (docs/transport.md,
// "Copies owed"). In a network namespace of its own, loopback sits behind a token bucket (tc tbf,
// 400 Mbit/s) that holds datagrams while they wait, so they stay charged to the learner's 16 MB
// send buffer: 8 workers x a 4 MB model is 32 MB per version. The learner must send MODEL only
// while its socket is writable, resume on POLLOUT, lose nothing and bring every worker each
// version bit for bit, with no send error. Checks the counters that show the path ran.
//
// Needs root (a network namespace and tc): exits 77 elsewhere. Exit 0: passed, 1: failed. Waits
// are bounded loops on observable state, never sleeps.
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "learner/learner_core.h"
#include "shesha/transport.h"

namespace {

constexpr std::uint16_t kCluster = 4;
constexpr std::uint32_t kElems = 1u << 20;  // 4 MB of fp32: 512 chunks of 2048
constexpr int kWorkers = 8;

int failures = 0;
void check(bool ok, const std::string& what) {
    std::printf("%s %s\n", ok ? "ok:  " : "FAIL:", what.c_str());
    if (!ok) ++failures;
}

// Polls the learner and the workers until done() or `seconds` of wall time.
template <typename Done>
bool run_until(shesha::LearnerEndpoint& learner, std::vector<std::unique_ptr<shesha::WorkerTransport>>& workers,
               double seconds, Done done) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
        learner.poll(1);
        for (auto& w : workers) w->poll(0);
        if (done()) return true;
    }
    return false;
}

// True when every worker has adopted `version` and holds exactly `want`.
bool all_hold(std::vector<std::unique_ptr<shesha::WorkerTransport>>& workers, std::vector<shesha::Model>& models,
              std::uint32_t version, const std::vector<float>& want) {
    bool all = true;
    for (std::size_t i = 0; i < workers.size(); ++i) {
        shesha::Model m;
        if (workers[i]->take_model(m)) models[i] = std::move(m);
        all = all && models[i].version == version && models[i].parameters == want;
    }
    return all;
}

}  // namespace

int main() {
    if (geteuid() != 0) {
        std::puts("skip: needs root (a network namespace and tc)");
        return 77;
    }
    if (unshare(CLONE_NEWNET) != 0) {
        std::printf("skip: unshare(CLONE_NEWNET): %s\n", std::strerror(errno));
        return 77;
    }
    if (std::system("ip link set lo up") != 0 ||
        std::system("tc qdisc add dev lo root tbf rate 400mbit burst 256kb limit 64mb") != 0) {
        std::puts("FAIL: cannot bring up loopback behind tc tbf in the new namespace");
        return 1;
    }
    const auto config = (std::filesystem::temp_directory_path() / "shesha-socket-full.yaml").string();
    std::ofstream(config) << "env: CartPole-v1\n"
                             "optimizer: {kind: sgd, lr: 0.5}\n"
                             "transport: {chunk_elems: 2048}\n"
                             "learner: {publish_interval_ms: 100000, max_grad_norm: 0}\n"
                             "worker: {model_request_ms: 1000}\n";
    try {
        shesha::LearnerOptions lo;
        lo.config_path = config;
        lo.cluster_id = kCluster;
        lo.bind_address = "127.0.0.1";
        lo.port = 0;
        lo.initial_parameters.assign(kElems, 1.0F);
        shesha::LearnerEndpoint learner(lo);
        std::vector<std::unique_ptr<shesha::WorkerTransport>> workers;
        for (int i = 0; i < kWorkers; ++i) {
            shesha::WorkerOptions wo;
            wo.config_path = config;
            wo.cluster_id = kCluster;
            wo.worker_id = static_cast<std::uint32_t>(i + 1);
            wo.learner_address = "127.0.0.1";
            wo.learner_port = learner.local_port();
            wo.bind_address = "127.0.0.1";
            wo.model_elems = kElems;
            workers.push_back(std::make_unique<shesha::WorkerTransport>(wo));
        }
        std::vector<shesha::Model> models(kWorkers);
        const std::vector<float> v1(learner.parameters().begin(), learner.parameters().end());
        check(run_until(learner, workers, 60, [&] { return all_hold(workers, models, 1, v1); }),
              "every worker holds version 1 bit for bit (asked for by model request)");

        // A new version for everyone at once: 32 MB for a 16 MB send buffer.
        const std::span<float> p = learner.mutable_parameters();
        for (std::size_t i = 0; i < p.size(); ++i) p[i] = 2.0F + static_cast<float>(i % 7);
        check(learner.publish(), "version 2 published");
        const std::vector<float> v2(p.begin(), p.end());
        check(run_until(learner, workers, 60, [&] { return all_hold(workers, models, 2, v2); }),
              "every worker holds version 2 bit for bit");

        const auto& c = static_cast<shesha::learner::LearnerCore*>(learner.native_core())->counters();
        const shesha::LearnerCounters lc = learner.counters();
        std::printf("learner: copies owed %llu, sent %llu, renewed %llu, sends deferred %llu, chunks %llu, send errors %llu\n",
                    static_cast<unsigned long long>(c.model_copies_owed),
                    static_cast<unsigned long long>(c.model_copies_sent),
                    static_cast<unsigned long long>(c.model_copies_renewed),
                    static_cast<unsigned long long>(c.model_sends_deferred),
                    static_cast<unsigned long long>(c.model_chunks_sent), static_cast<unsigned long long>(lc.send_errors));
        check(c.model_sends_deferred > 0, "the send buffer filled: MODEL waited for POLLOUT");
        check(lc.send_errors == 0, "no send error (a full buffer is not one)");
        check(c.model_copies_sent >= 2 * kWorkers, "at least one whole copy per worker per version went out");
        const std::uint64_t needed = 2ull * kWorkers * (kElems / 2048);
        check(c.model_chunks_sent >= needed, "at least every chunk of both versions to every worker");
        // A refused chunk is not lost and sent again: well under 1.5x the chunks needed (a copy
        // that a second model request asks for while the first is still on its way is allowed).
        check(c.model_chunks_sent * 2 < needed * 3, "fewer than 1.5x the chunks needed");
        std::uint64_t rejected = 0;
        for (auto& w : workers) rejected += w->counters().model_chunks_rejected;
        check(rejected == 0, "no worker rejected a MODEL chunk");
    } catch (const std::exception& e) {
        std::printf("FAIL: %s\n", e.what());
        return 1;
    }
    std::filesystem::remove(config);
    std::puts(failures == 0 ? "learner socket full: ok" : "learner socket full: FAILED");
    return failures == 0 ? 0 : 1;
}

// shesha-api-send: the C++ arm of tools/bench/bench_python_send.py. Sends one fixed gradient as
// fast as WorkerTransport takes it (send + poll) for --seconds against a running learner, then
// prints {"updates": N, "chunks": C, "seconds": S} on stdout. The Python arm runs the same loop
// through the `shesha` module.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "shesha/transport.h"

int main(int argc, char** argv) {
    CLI::App app{"shesha-api-send: the C++ send-path arm of bench_python_send.py"};
    shesha::WorkerOptions o;
    double seconds = 2;
    int cluster = 1;
    app.add_option("--config", o.config_path)->required();
    app.add_option("--cluster", cluster)->check(CLI::Range(0, 65535));
    app.add_option("--worker-id", o.worker_id);
    app.add_option("--port", o.learner_port)->required();
    app.add_option("--elems", o.model_elems)->required();
    app.add_option("--seconds", seconds)->check(CLI::Range(0.1, 600.0));
    CLI11_PARSE(app, argc, argv);
    o.cluster_id = static_cast<std::uint16_t>(cluster);
    o.learner_address = "127.0.0.1";
    o.bind_address = "127.0.0.1";
    try {
        shesha::WorkerTransport t(o);
        const std::vector<float> gradient(o.model_elems, 1e-3F);
        shesha::Model model;
        t.wait_model(model, 5000);
        std::uint64_t updates = 0;
        const auto start = std::chrono::steady_clock::now();
        double elapsed = 0;
        while (elapsed < seconds) {
            t.send(model.version, gradient);
            t.poll(0);
            ++updates;
            if ((updates & 63) == 0)
                elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        }
        elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::printf("{\"updates\": %llu, \"chunks\": %llu, \"seconds\": %.6f}\n", static_cast<unsigned long long>(updates),
                    static_cast<unsigned long long>(t.counters().chunks_sent), elapsed);
    } catch (const shesha::Error& e) {
        std::fprintf(stderr, "shesha-api-send: %s\n", e.what());
        return 2;
    }
    return 0;
}

// A libtorch program that trains a model of its own through Shesha (docs/api.md): a learner and
// two workers over real UDP sockets on loopback, in one process for the example's sake (on a rack
// each runs on its own host with the same calls). The model is a small torch::nn MLP fitting
// y = sin(x) on [-pi, pi]; nothing here is Shesha's bundled A3C.
//
//   torch_regression CONFIG [--target-mse M] [--seconds S] [--workers N]
//
// Exit 0 when the learner's parameters reach the target MSE on a fixed grid, 1 when time runs
// out, 2 for bad arguments.
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numbers>
#include <string>
#include <thread>
#include <vector>

#include <shesha/transport.h>

namespace {

struct Net : torch::nn::Module {
    torch::nn::Linear l1{nullptr}, l2{nullptr}, l3{nullptr};
    Net() {
        l1 = register_module("l1", torch::nn::Linear(1, 32));
        l2 = register_module("l2", torch::nn::Linear(32, 32));
        l3 = register_module("l3", torch::nn::Linear(32, 1));
    }
    torch::Tensor forward(torch::Tensor x) { return l3(torch::tanh(l2(torch::tanh(l1(x))))); }
};

// The flat layout on the wire: every parameter tensor in registration order, row-major.
std::vector<float> flatten(Net& net) {
    std::vector<float> out;
    for (const auto& p : net.parameters()) {
        const torch::Tensor c = p.detach().contiguous();
        out.insert(out.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
    }
    return out;
}

void load(Net& net, const std::vector<float>& flat) {
    torch::NoGradGuard no_grad;
    std::size_t at = 0;
    for (auto& p : net.parameters()) {
        p.copy_(torch::from_blob(const_cast<float*>(flat.data() + at), p.sizes(), torch::kFloat32));
        at += static_cast<std::size_t>(p.numel());
    }
}

double grid_mse(Net& net) {
    torch::NoGradGuard no_grad;
    const torch::Tensor x = torch::linspace(-std::numbers::pi, std::numbers::pi, 200).unsqueeze(1);
    return torch::mse_loss(net.forward(x), torch::sin(x)).item<double>();
}

void run_worker(const std::string& config, std::uint16_t port, std::uint32_t id, std::atomic<bool>& stop) {
    torch::manual_seed(id);
    Net net;
    shesha::WorkerOptions o;
    o.config_path = config;
    o.cluster_id = 1;
    o.worker_id = id;
    o.learner_address = "127.0.0.1";
    o.learner_port = port;
    o.bind_address = "127.0.0.1";
    o.model_elems = static_cast<std::uint32_t>(flatten(net).size());
    shesha::WorkerTransport transport(o);
    shesha::Model model;
    while (!stop && !transport.wait_model(model, 100)) {}  // the first model
    load(net, model.parameters);
    while (!stop) {
        const torch::Tensor x = torch::rand({64, 1}) * (2 * std::numbers::pi) - std::numbers::pi;
        net.zero_grad();
        torch::mse_loss(net.forward(x), torch::sin(x)).backward();
        // One span per parameter tensor's gradient: the transport concatenates them in order.
        std::vector<torch::Tensor> grads;
        std::vector<std::span<const float>> parts;
        for (const auto& p : net.parameters()) {
            grads.push_back(p.grad().contiguous());
            parts.emplace_back(grads.back().data_ptr<float>(), static_cast<std::size_t>(grads.back().numel()));
        }
        transport.send(model.version, parts);
        // One gradient per model version: wait (polling, so credits and the model keep flowing)
        // for the version that includes it. take_model() instead would never block.
        if (transport.wait_model(model, 200)) load(net, model.parameters);
    }
    const shesha::WorkerCounters c = transport.counters();
    std::printf("worker %u: %llu updates, %llu chunks sent (%llu merged at the sender), %llu models adopted\n", id,
                static_cast<unsigned long long>(c.updates_offered), static_cast<unsigned long long>(c.chunks_sent),
                static_cast<unsigned long long>(c.sender_merges), static_cast<unsigned long long>(c.models_adopted));
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: torch_regression CONFIG [--target-mse M] [--seconds S] [--workers N]\n");
        return 2;
    }
    const std::string config = argv[1];
    double target = 0.001, seconds = 120;
    int workers = 2;
    for (int i = 2; i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        char* end = nullptr;
        const double v = std::strtod(argv[i + 1], &end);
        if (*end != '\0' || !(v > 0)) {
            std::fprintf(stderr, "torch_regression: %s: expected a positive number, got '%s'\n", flag.c_str(), argv[i + 1]);
            return 2;
        }
        if (flag == "--target-mse") target = v;
        else if (flag == "--seconds") seconds = v;
        else if (flag == "--workers") workers = static_cast<int>(v);
        else {
            std::fprintf(stderr, "torch_regression: unknown flag %s\n", flag.c_str());
            return 2;
        }
    }
    torch::set_num_threads(1);
    torch::manual_seed(0);
    Net reference;  // the learner's initial parameters, and its evaluation model

    shesha::LearnerOptions lo;
    lo.config_path = config;
    lo.cluster_id = 1;
    lo.bind_address = "127.0.0.1";
    lo.port = 0;  // any free port: the workers are told which
    lo.initial_parameters = flatten(reference);
    std::unique_ptr<shesha::LearnerEndpoint> learner;
    try {
        learner = std::make_unique<shesha::LearnerEndpoint>(lo);  // applies with the YAML's optimizer (Adam)
    } catch (const shesha::Error& e) {
        std::fprintf(stderr, "torch_regression: %s\n", e.what());
        return 2;
    }
    std::printf("learner on 127.0.0.1:%u, %u parameters, initial MSE %.4f\n", learner->local_port(),
                learner->model_elems(), grid_mse(reference));
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int w = 1; w <= workers; ++w)
        threads.emplace_back(run_worker, config, learner->local_port(), static_cast<std::uint32_t>(w), std::ref(stop));

    const auto start = std::chrono::steady_clock::now();
    const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    double next_report = 0.5, mse = 1e9;
    bool reached = false;
    while (elapsed() < seconds && !reached) {
        learner->poll(1);
        if (elapsed() >= next_report) {
            next_report += 0.5;
            const auto p = learner->parameters();
            load(reference, std::vector<float>(p.begin(), p.end()));
            mse = grid_mse(reference);
            const shesha::LearnerCounters c = learner->counters();
            std::printf("t %5.1f s  version %6u  chunks applied %8llu  MSE %.5f\n", elapsed(), c.version,
                        static_cast<unsigned long long>(c.chunks_applied), mse);
            std::fflush(stdout);
            reached = mse <= target;
        }
    }
    stop = true;
    for (auto& t : threads) t.join();
    std::printf("%s: MSE %.5f (target %.5f) after %.1f s\n", reached ? "reached" : "NOT reached", mse, target, elapsed());
    return reached ? 0 : 1;
}

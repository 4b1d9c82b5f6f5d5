// The simulator's libtorch backend (training_backend.h). Built only where libtorch is found, into
// the programs that run a model; it includes no torch header (rl/model.h is torch-free).
#include "training_backend.h"

namespace shesha::sim {

const TrainingBackend& torch_training_backend() {
    static const TrainingBackend backend{
        [](const rl::ModelConfig& c, std::uint64_t seed, std::string* error) { return rl::ActorCritic::create(c, seed, error); },
        [](rl::ActorCritic& m, std::size_t episodes, std::uint64_t seed) { return rl::evaluate_policy(m, episodes, seed); },
    };
    return backend;
}

}  // namespace shesha::sim

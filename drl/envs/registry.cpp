#include "envs/registry.h"

#include <array>

#include "envs/classic_control.h"

namespace shesha::worker::envs {

namespace {
constexpr std::array<std::string_view, 5> kNames{"CartPole-v1", "Acrobot-v1", "MountainCar-v0",
                                                 "MountainCarContinuous-v0", "Pendulum-v1"};
}

std::span<const std::string_view> environment_names() { return kNames; }

std::unique_ptr<Environment> make_environment(std::string_view name) {
    if (name == "CartPole-v1") {
        return std::make_unique<CartPole>();
    }
    if (name == "Acrobot-v1") {
        return std::make_unique<Acrobot>();
    }
    if (name == "MountainCar-v0") {
        return std::make_unique<MountainCar>();
    }
    if (name == "MountainCarContinuous-v0") {
        return std::make_unique<MountainCarContinuous>();
    }
    if (name == "Pendulum-v1") {
        return std::make_unique<Pendulum>();
    }
    return nullptr;
}

}  // namespace shesha::worker::envs

#include "model/model_types.h"

#include "envs/registry.h"

namespace shesha::rl {

bool environment_shape(const std::string& env_name, EnvironmentShape& shape) {
    const auto env = worker::envs::make_environment(env_name);
    if (!env) {
        return false;
    }
    const auto& space = env->action_space();
    shape.observation_size = env->observation_size();
    shape.discrete = space.is_discrete();
    shape.action_count =
        shape.discrete ? static_cast<std::size_t>(space.discrete_count) : space.box_size;
    shape.action_low = space.box_low;
    shape.action_high = space.box_high;
    return true;
}

}  // namespace shesha::rl

// Creates the classic-control environments by their Gymnasium id.
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "envs/environment.h"

namespace shesha::worker::envs {

// The Gymnasium ids make_environment() knows, in a fixed order.
std::span<const std::string_view> environment_names();

// nullptr for an unknown id.
std::unique_ptr<Environment> make_environment(std::string_view name);

}  // namespace shesha::worker::envs

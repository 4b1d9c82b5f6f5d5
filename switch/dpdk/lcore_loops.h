// The per-lcore loops of shesha-switch: every forwarding lcore runs Switch::poll_round() to
// completion in its own loop. The main lcore is forwarding lcore 0 and also runs the control hook
// (stats lines, --duration, signals). Every loop ends when Switch::request_stop() is called or the
// control hook says so.
#pragma once

#include <cstdint>
#include <functional>

#include "switch.h"

namespace shesha::sw {

// Called on the main lcore about every control_interval_ticks with the current TSC; returning
// false stops the switch.
using ControlHook = std::function<bool(std::uint64_t now)>;

// Launches forwarding lcores 1.. on the EAL's worker lcores, runs lcore 0 and the control hook on
// the calling (main) lcore until stopped, waits for the others, and publishes the final state.
// Throws std::runtime_error if fewer EAL lcores are available than the configuration needs.
void run_switch(Switch& sw, const ControlHook& control, std::uint64_t control_interval_ticks);

}  // namespace shesha::sw

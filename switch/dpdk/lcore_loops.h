// The per-lcore loops of shesha-switch. The main lcore is the egress owner and also runs the
// control hook (stats lines, --duration, signals); with config.lcores > 1 the next lcores run the
// RX loops. Every loop ends when Switch::request_stop() is called or the control hook says so.
#pragma once

#include <cstdint>
#include <functional>

#include "switch.h"

namespace shesha::sw {

// Called on the main lcore about every control_interval_ticks with the current TSC; returning
// false stops the switch.
using ControlHook = std::function<bool(std::uint64_t now)>;

// Launches the RX lcores (multi-lcore mode), runs the egress/control loop on the calling (main)
// lcore until stopped, waits for the RX lcores, and publishes the final state. Throws
// std::runtime_error if fewer EAL lcores are available than the configuration needs.
void run_switch(Switch& sw, const ControlHook& control, std::uint64_t control_interval_ticks);

}  // namespace shesha::sw

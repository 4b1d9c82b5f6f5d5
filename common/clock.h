// The two clocks every program reads: CLOCK_REALTIME stamps headers (workers and learners on
// different hosts compare them), CLOCK_MONOTONIC paces and measures durations.
#pragma once

#include <cstdint>

namespace shesha::clock {

std::uint64_t realtime_ns() noexcept;   // CLOCK_REALTIME: the clock of header timestamps
std::uint64_t monotonic_ns() noexcept;  // CLOCK_MONOTONIC: pacing, durations

}  // namespace shesha::clock

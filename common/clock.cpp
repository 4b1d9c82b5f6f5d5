#include "clock.h"

#include <ctime>

namespace shesha::clock {

namespace {
std::uint64_t clock_ns(clockid_t id) noexcept {
    timespec ts{};
    clock_gettime(id, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}
}  // namespace

std::uint64_t realtime_ns() noexcept { return clock_ns(CLOCK_REALTIME); }
std::uint64_t monotonic_ns() noexcept { return clock_ns(CLOCK_MONOTONIC); }

}  // namespace shesha::clock

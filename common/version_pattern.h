// Version pattern of synthetic updates (shesha-gen), as the lab and the benchmarks name them.
//   lockstep: version = floor(wall-clock ms / period_ms) modulo 2^32. The wall clock is shared, so
//             every worker (in every gen process) sends the same base version at the same time,
//             and their updates are mergeable.
//   skew:D    each update lags that base by a uniformly drawn 0..D versions (drawn per update).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace shesha::pattern {

struct VersionPattern {
    enum class Kind : std::uint8_t { Lockstep, Skew };
    Kind kind = Kind::Lockstep;
    std::uint32_t max_lag = 0;

    static std::optional<VersionPattern> parse(std::string_view text);
    static std::uint32_t base_version(std::uint64_t realtime_ns, std::uint32_t period_ms) noexcept;
};

}  // namespace shesha::pattern

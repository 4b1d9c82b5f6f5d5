#include "version_pattern.h"

#include <charconv>

namespace shesha::pattern {

std::optional<VersionPattern> VersionPattern::parse(std::string_view text) {
    if (text == "lockstep") return VersionPattern{Kind::Lockstep, 0};
    constexpr std::string_view kSkew = "skew:";
    if (text.substr(0, kSkew.size()) != kSkew) return std::nullopt;
    const std::string_view digits = text.substr(kSkew.size());
    std::uint32_t lag = 0;
    const auto res = std::from_chars(digits.data(), digits.data() + digits.size(), lag);
    if (digits.empty() || res.ec != std::errc{} || res.ptr != digits.data() + digits.size()) return std::nullopt;
    return VersionPattern{Kind::Skew, lag};
}

std::uint32_t VersionPattern::base_version(std::uint64_t now_realtime_ns, std::uint32_t period_ms) noexcept {
    const std::uint64_t period_ns = std::uint64_t{period_ms == 0 ? 1u : period_ms} * 1'000'000ull;
    return static_cast<std::uint32_t>(now_realtime_ns / period_ns);  // modulo 2^32 by truncation
}

}  // namespace shesha::pattern

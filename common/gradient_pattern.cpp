// Exact-sum synthetic gradients. See common/gradient_pattern.h for why every merge is exact.
#include "gradient_pattern.h"

#include <bit>
#include <cmath>

namespace shesha::pattern {

namespace {

// splitmix64 finaliser: a cheap, well-mixed, fully deterministic hash (same on every machine).
std::uint64_t mix64(std::uint64_t x) noexcept {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

bool same_bits(float a, float b) noexcept {
    return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

// Largest weight a single contribution can have (1 + w % 4).
constexpr float kMaxWeight = 4.0f;

}  // namespace

float weight(std::uint32_t worker_id) noexcept { return static_cast<float>(1 + worker_id % 4); }

float g(std::uint16_t cluster_id, std::uint16_t chunk_index, std::size_t i) noexcept {
    const std::uint64_t key = (std::uint64_t{cluster_id} << 48) ^ (std::uint64_t{chunk_index} << 32) ^
                              static_cast<std::uint64_t>(i);
    const auto steps = static_cast<int>(mix64(key) >> 58);  // 0..63 quarter steps
    return static_cast<float>(steps - 32) * 0.25f;          // -8.0 .. +7.75
}

void fill(float* out, std::size_t n, std::uint16_t cluster_id, std::uint16_t chunk_index,
          std::uint32_t worker_id) noexcept {
    const float q = weight(worker_id);
    if (n > 0) out[0] = 1.0f;
    if (n > 1) out[1] = q;
    for (std::size_t i = 2; i < n; ++i) out[i] = q * g(cluster_id, chunk_index, i);
}

Check verify(const float* p, std::size_t n, std::uint16_t cluster_id, std::uint16_t chunk_index,
             std::uint16_t contrib_count, std::size_t* bad_index) noexcept {
    auto fail = [&](Check c, std::size_t i) {
        if (bad_index) *bad_index = i;
        return c;
    };
    if (n < 2) return fail(Check::TooShort, n);
    if (!same_bits(p[0], static_cast<float>(contrib_count))) return fail(Check::CountMismatch, 0);
    // Q is a sum of contrib_count weights, each an integer in [1, 4].
    const float q = p[1];
    const float count = static_cast<float>(contrib_count);
    if (!(q >= count && q <= kMaxWeight * count) || q != std::floor(q)) return fail(Check::WeightInvalid, 1);
    for (std::size_t i = 2; i < n; ++i) {
        if (!same_bits(p[i], q * g(cluster_id, chunk_index, i))) return fail(Check::ElementMismatch, i);
    }
    return Check::Ok;
}

}  // namespace shesha::pattern

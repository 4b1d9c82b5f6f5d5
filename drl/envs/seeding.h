// Explicit, reproducible seeding for the workers' environments.
//
// Every worker derives its own seed from one base seed and its worker id, then owns a Rng seeded
// with it. The reset distributions have Gymnasium's bounds and shape (uniform low + (high - low) * u,
// as NumPy's Generator.uniform computes it), but the random stream is std::mt19937_64, not NumPy's
// PCG64: reset states cannot match Gymnasium's for the same seed. Only the dynamics given a state
// are bit-comparable with Gymnasium.
#pragma once

#include <cstdint>
#include <random>

namespace shesha::worker::envs {

// One step of Steele, Lea and Flood's SplitMix64 finaliser (a bijection on 64-bit values).
constexpr std::uint64_t splitmix64_mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// The seed of worker `worker_id` under `base_seed`: the (worker_id + 1)-th output of a SplitMix64
// stream started at base_seed. For one base seed, distinct worker ids always give distinct seeds
// (the stream position is a bijection of the id and the finaliser is a bijection).
constexpr std::uint64_t derive_worker_seed(std::uint64_t base_seed, std::uint64_t worker_id) {
    constexpr std::uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ULL;
    return splitmix64_mix(base_seed + (worker_id + 1) * kGoldenGamma);
}

class Rng {
public:
    explicit Rng(std::uint64_t seed) : engine_(seed) {}

    // A double in [0, 1) with 53 random bits, as NumPy's random_standard_uniform makes it.
    double next_unit() { return static_cast<double>(engine_() >> 11) * (1.0 / 9007199254740992.0); }
    // NumPy's Generator.uniform(low, high): low + (high - low) * u, in [low, high).
    double uniform(double low, double high) { return low + (high - low) * next_unit(); }
    std::uint64_t next_u64() { return engine_(); }
    // Uniform integer in [0, n) for n > 0 (multiply-shift; bias at most n / 2^64).
    std::uint64_t below(std::uint64_t n) {
        return static_cast<std::uint64_t>((static_cast<unsigned __int128>(engine_()) * n) >> 64);
    }

private:
    std::mt19937_64 engine_;
};

}  // namespace shesha::worker::envs

// The optimizers' SIMD kernels (drl/model/optimizer_kernels.h): every level the CPU has gives results
// bit-identical to the scalar loop, for every length (tails included) and over many steps of
// evolving state; the Optimizer classes give identical trajectories at every level.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "model/optimizer.h"
#include "model/optimizer_kernels.h"

using namespace shesha::rl;
using kernels::Level;

namespace {

std::vector<float> random_values(std::size_t n, std::uint32_t seed, float lo, float hi) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<Level> levels_here() {
    std::vector<Level> out{Level::Scalar};
    if (kernels::best_level() >= Level::Avx2) out.push_back(Level::Avx2);
    if (kernels::best_level() >= Level::Avx512) out.push_back(Level::Avx512);
    return out;
}

}  // namespace

TEST_CASE("optimizer kernels: every SIMD level is bit-identical to scalar, every length, many steps") {
    WARN("best level on this CPU: " << kernels::to_string(kernels::best_level()));
    std::vector<std::size_t> lengths;
    for (std::size_t n = 0; n <= 70; ++n) lengths.push_back(n);
    for (std::size_t n : {255, 256, 257, 1023, 1024, 2048}) lengths.push_back(n);
    for (const Level level : levels_here()) {
        for (const std::size_t n : lengths) {
            INFO("level " << kernels::to_string(level) << ", n " << n);
            // Parameters and states as the reference runs them, and as the level runs them.
            auto p_ref = random_values(n, 1, -2, 2), p = p_ref;
            auto sq_ref = std::vector<float>(n, 0.0F), sq = sq_ref;
            auto m_ref = std::vector<float>(n, 0.0F), m = m_ref, v_ref = m_ref, v = m_ref;
            auto q_ref = random_values(n, 2, -1, 1), q = q_ref;  // SGD's parameters
            for (int step = 0; step < 25; ++step) {
                // Gradients over many magnitudes (tiny, ordinary, large), varying per step.
                auto g = random_values(n, 100 + step, -1, 1);
                for (std::size_t i = 0; i < n; i += 3) g[i] *= (i % 2 ? 1e-20F : 3e4F);
                const float scale = step % 2 ? 0.25F : 1.0F / 3.0F;
                kernels::rmsprop_at(Level::Scalar, p_ref.data(), sq_ref.data(), g.data(), n, scale, 7e-4F, 0.99F, 1e-5F);
                kernels::rmsprop_at(level, p.data(), sq.data(), g.data(), n, scale, 7e-4F, 0.99F, 1e-5F);
                kernels::adam_at(Level::Scalar, p_ref.data(), m_ref.data(), v_ref.data(), g.data(), n, scale, 1e-3F, 0.9F,
                                 0.999F, 0.7F, 1e-8F);
                kernels::adam_at(level, p.data(), m.data(), v.data(), g.data(), n, scale, 1e-3F, 0.9F, 0.999F, 0.7F, 1e-8F);
                kernels::sgd_at(Level::Scalar, q_ref.data(), g.data(), n, 0.01F * scale);
                kernels::sgd_at(level, q.data(), g.data(), n, 0.01F * scale);
            }
            CHECK(same_bits(p, p_ref));
            CHECK(same_bits(sq, sq_ref));
            CHECK(same_bits(m, m_ref));
            CHECK(same_bits(v, v_ref));
            CHECK(same_bits(q, q_ref));
        }
    }
}

TEST_CASE("optimizer kernels: the scalar path is the documented formula, operation by operation") {
    // One element by hand: RMSProp with g = 2 * 0.5 = 1, sq = 0.9 * 0.5 + (0.1 * 1) * 1.
    float p = 1.0F, sq = 0.5F;
    const float g = 2.0F;
    kernels::rmsprop_at(Level::Scalar, &p, &sq, &g, 1, 0.5F, 0.01F, 0.9F, 1e-5F);
    const float s = 0.9F * 0.5F + 0.1F * 1.0F * 1.0F;
    CHECK(sq == s);
    CHECK(p == 1.0F - 0.01F * 1.0F / std::sqrt(s + 1e-5F));
}

TEST_CASE("optimizers: identical trajectories at every SIMD level") {
    for (const OptimizerKind kind : {OptimizerKind::Sgd, OptimizerKind::SharedRmsProp, OptimizerKind::Adam}) {
        std::vector<std::vector<float>> results;
        for (const Level level : levels_here()) {
            kernels::set_level(level);
            REQUIRE(kernels::active_level() == level);
            OptimizerConfig oc;
            oc.kind = kind;
            auto opt = Optimizer::create(oc, 1000);
            std::vector<float> params = random_values(1000, 7, -1, 1);
            for (int step = 0; step < 10; ++step) {
                const auto g = random_values(1000, 50 + step, -0.5F, 0.5F);
                REQUIRE(opt->apply(params, g, 0.5F));
            }
            results.push_back(params);
        }
        kernels::set_level(kernels::best_level());
        for (const auto& r : results) CHECK(same_bits(r, results.front()));
    }
}

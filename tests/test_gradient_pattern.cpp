// Exact-sum gradient pattern: any merge of any subset in any order verifies bit for bit; any
// one-ulp corruption and any wrong contribution count is detected.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "gradient_pattern.h"

using namespace shesha::pattern;

namespace {

constexpr std::size_t kElems = 2048;  // largest chunk (proto::kMaxElements)

std::vector<float> contribution(std::uint16_t cluster, std::uint16_t chunk, std::uint32_t worker,
                                std::size_t n = kElems) {
    std::vector<float> v(n);
    fill(v.data(), n, cluster, chunk, worker);
    return v;
}

void add_into(std::vector<float>& acc, const std::vector<float>& x) {
    for (std::size_t i = 0; i < acc.size(); ++i) acc[i] += x[i];
}

// Sums the contributions in the given order, one at a time (as a switch queue merges arrivals).
std::vector<float> sequential_sum(const std::vector<std::vector<float>>& parts, const std::vector<std::size_t>& order) {
    std::vector<float> acc = parts[order[0]];
    for (std::size_t k = 1; k < order.size(); ++k) add_into(acc, parts[order[k]]);
    return acc;
}

// Pairwise tree reduction (as when already-merged packets merge again at a later hop).
std::vector<float> tree_sum(std::vector<std::vector<float>> parts) {
    while (parts.size() > 1) {
        std::vector<std::vector<float>> next;
        for (std::size_t k = 0; k + 1 < parts.size(); k += 2) {
            add_into(parts[k], parts[k + 1]);
            next.push_back(std::move(parts[k]));
        }
        if (parts.size() % 2) next.push_back(std::move(parts.back()));
        parts = std::move(next);
    }
    return parts[0];
}

}  // namespace

TEST_CASE("weights and g take the documented values", "[pattern]") {
    CHECK(weight(0) == 1.0f);
    CHECK(weight(1) == 2.0f);
    CHECK(weight(2) == 3.0f);
    CHECK(weight(3) == 4.0f);
    CHECK(weight(4) == 1.0f);
    CHECK(weight(0xFFFFFFFF) == 4.0f);

    std::set<float> values;
    for (std::size_t i = 0; i < 20000; ++i) {
        const float v = g(7, 3, i);
        REQUIRE(v >= -8.0f);
        REQUIRE(v < 8.0f);
        REQUIRE(v * 4.0f == std::floor(v * 4.0f));  // quarter steps
        REQUIRE(g(7, 3, i) == v);                    // deterministic
        values.insert(v);
    }
    CHECK(values.size() == 64);  // every quarter step in [-8, 8) occurs
    CHECK(*values.begin() == -8.0f);
    CHECK(*values.rbegin() == 7.75f);

    // Depends on cluster and chunk.
    int differ_cluster = 0, differ_chunk = 0;
    for (std::size_t i = 2; i < 200; ++i) {
        differ_cluster += g(1, 0, i) != g(2, 0, i);
        differ_chunk += g(1, 0, i) != g(1, 1, i);
    }
    CHECK(differ_cluster > 150);
    CHECK(differ_chunk > 150);
}

TEST_CASE("fill writes count, weight and weighted pattern", "[pattern]") {
    const auto v = contribution(5, 9, 6, 100);  // weight 3
    CHECK(v[0] == 1.0f);
    CHECK(v[1] == 3.0f);
    for (std::size_t i = 2; i < v.size(); ++i) REQUIRE(v[i] == 3.0f * g(5, 9, i));
    CHECK(verify(v.data(), v.size(), 5, 9, 1) == Check::Ok);

    float two[2] = {0, 0};
    fill(two, 1, 5, 9, 6);  // n below 2 writes only what fits
    CHECK(two[0] == 1.0f);
    CHECK(two[1] == 0.0f);
}

TEST_CASE("merged sums of random subsets verify exactly in any order", "[pattern]") {
    std::mt19937 rng(2024);
    const std::uint16_t cluster = 11, chunk = 4;
    std::vector<std::vector<float>> all;
    for (std::uint32_t w = 0; w < 48; ++w) all.push_back(contribution(cluster, chunk, w * 7 + 3));

    for (int trial = 0; trial < 40; ++trial) {
        std::vector<std::size_t> ids(all.size());
        std::iota(ids.begin(), ids.end(), 0);
        std::shuffle(ids.begin(), ids.end(), rng);
        ids.resize(1 + rng() % all.size());
        std::vector<std::vector<float>> subset;
        for (auto id : ids) subset.push_back(all[id]);
        const auto count = static_cast<std::uint16_t>(ids.size());

        std::vector<std::size_t> order(subset.size());
        std::iota(order.begin(), order.end(), 0);
        const auto forward = sequential_sum(subset, order);
        std::shuffle(order.begin(), order.end(), rng);
        const auto shuffled = sequential_sum(subset, order);
        const auto tree = tree_sum(subset);

        std::size_t bad = 999;
        REQUIRE(verify(forward.data(), kElems, cluster, chunk, count, &bad) == Check::Ok);
        REQUIRE(verify(shuffled.data(), kElems, cluster, chunk, count, &bad) == Check::Ok);
        REQUIRE(verify(tree.data(), kElems, cluster, chunk, count, &bad) == Check::Ok);
        REQUIRE(bad == 999);  // untouched on success
        REQUIRE(std::equal(forward.begin(), forward.end(), shuffled.begin()));
        REQUIRE(std::equal(forward.begin(), forward.end(), tree.begin()));
    }
}

TEST_CASE("the largest contribution count still sums exactly", "[pattern]") {
    // 65535 contributions of weight 4: |partial sums| stay below 2^21, multiples of 1/4.
    const std::size_t n = 64;
    const auto heavy = contribution(1, 1, 3, n);
    REQUIRE(heavy[1] == 4.0f);
    std::vector<float> acc = heavy;
    for (int k = 1; k < 0xFFFF; ++k) add_into(acc, heavy);
    CHECK(verify(acc.data(), n, 1, 1, 0xFFFF) == Check::Ok);
    CHECK(acc[1] == 4.0f * 0xFFFF);
}

TEST_CASE("a one-ulp corruption of any element is detected", "[pattern]") {
    const std::uint16_t cluster = 2, chunk = 0;
    std::vector<std::vector<float>> parts;
    for (std::uint32_t w : {0u, 1u, 2u, 3u, 9u}) parts.push_back(contribution(cluster, chunk, w));
    const auto merged = tree_sum(parts);
    REQUIRE(verify(merged.data(), kElems, cluster, chunk, 5) == Check::Ok);

    for (std::size_t i = 0; i < kElems; ++i) {
        for (float dir : {INFINITY, -INFINITY}) {
            auto bad = merged;
            bad[i] = std::nextafter(bad[i], dir);
            std::size_t where = 999999;
            const Check c = verify(bad.data(), kElems, cluster, chunk, 5, &where);
            REQUIRE(c != Check::Ok);
            REQUIRE(where == i);
            if (i == 0) REQUIRE(c == Check::CountMismatch);
            else if (i == 1) REQUIRE(c == Check::WeightInvalid);
            else REQUIRE(c == Check::ElementMismatch);
        }
    }
}

TEST_CASE("wrong contribution counts and wrong keys are detected", "[pattern]") {
    std::vector<std::vector<float>> parts;
    for (std::uint32_t w = 0; w < 3; ++w) parts.push_back(contribution(6, 2, w));
    const auto merged = tree_sum(parts);
    std::size_t where = 77;
    CHECK(verify(merged.data(), kElems, 6, 2, 2, &where) == Check::CountMismatch);
    CHECK(where == 0);
    CHECK(verify(merged.data(), kElems, 6, 2, 4) == Check::CountMismatch);
    CHECK(verify(merged.data(), kElems, 6, 2, 0) == Check::CountMismatch);
    CHECK(verify(merged.data(), kElems, 6, 2, 3) == Check::Ok);
    // Same count but a different chunk or cluster: elements disagree.
    CHECK(verify(merged.data(), kElems, 6, 3, 3) == Check::ElementMismatch);
    CHECK(verify(merged.data(), kElems, 7, 2, 3) == Check::ElementMismatch);
}

TEST_CASE("implausible weights and short payloads are rejected", "[pattern]") {
    auto v = contribution(1, 1, 0, 16);
    std::size_t where = 0;
    v[1] = 0.0f;  // below one per contribution
    CHECK(verify(v.data(), 16, 1, 1, 1, &where) == Check::WeightInvalid);
    CHECK(where == 1);
    v[1] = 5.0f;  // above four per contribution
    CHECK(verify(v.data(), 16, 1, 1, 1) == Check::WeightInvalid);
    v[1] = 2.5f;
    CHECK(verify(v.data(), 16, 1, 1, 1) == Check::WeightInvalid);
    v[1] = NAN;
    CHECK(verify(v.data(), 16, 1, 1, 1) == Check::WeightInvalid);
    v = contribution(1, 1, 0, 16);
    v[0] = -0.0f;
    CHECK(verify(v.data(), 16, 1, 1, 0) == Check::CountMismatch);  // bitwise, not ==
    CHECK(verify(v.data(), 1, 1, 1, 1, &where) == Check::TooShort);
    CHECK(verify(v.data(), 0, 1, 1, 1) == Check::TooShort);
}

// Merge kernels: every SIMD variant must give the scalar loop's result bit for bit, on every length,
// at every misalignment, with special values, and never touch bytes outside [dst, dst + n).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "merge_kernel.h"

using namespace shesha::core;

namespace {

std::uint32_t bits_of(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

float float_of(std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

// Random binary32 bit patterns biased towards the interesting classes.
std::uint32_t random_float_bits(std::mt19937_64& rng) {
    const std::uint32_t r = static_cast<std::uint32_t>(rng());
    const std::uint32_t sign = r & 0x80000000u;
    const std::uint32_t mantissa = static_cast<std::uint32_t>(rng()) & 0x007FFFFFu;
    switch (rng() % 10) {
    case 0: return sign;                                          // +0 / -0
    case 1: return sign | mantissa;                               // denormal (or zero)
    case 2: return sign | 0x7F800000u;                            // +inf / -inf
    case 3: return sign | 0x7F800000u | (mantissa | 1u);          // NaN, quiet or signalling, any payload
    case 4: return sign | 0x00800000u | mantissa;                 // smallest normals (sums go denormal)
    case 5: return sign | (0x7Fu << 23) | mantissa;               // around 1.0: cancellations
    default: return static_cast<std::uint32_t>(rng());            // anything
    }
}

bool is_nan_bits(std::uint32_t u) { return (u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) != 0; }

// The result the documented definition gives for one element, computed independently of the
// library: a NaN operand propagates quieted, dst's NaN winning when both are NaN; otherwise one
// IEEE addition.
std::uint32_t reference_sum_bits(std::uint32_t a, std::uint32_t b) {
    constexpr std::uint32_t kQuietBit = 0x00400000u;
    if (is_nan_bits(a)) return a | kQuietBit;
    if (is_nan_bits(b)) return b | kQuietBit;
    volatile float x = float_of(a);
    volatile float y = float_of(b);
    return bits_of(x + y);
}

// Runs kernel on copies of dst/src placed at the given byte offsets and returns the result bits;
// checks that the guard bytes around dst are untouched.
std::vector<std::uint32_t> run_at(AddF32Fn kernel, const std::vector<std::uint32_t>& dst,
                                  const std::vector<std::uint32_t>& src, std::size_t dst_off,
                                  std::size_t src_off, bool& guards_ok) {
    const std::size_t n = dst.size();
    constexpr std::size_t kGuard = 64;
    std::vector<std::uint8_t> dbuf(kGuard + dst_off + n * 4 + kGuard, 0xA5);
    std::vector<std::uint8_t> sbuf(src_off + n * 4 + kGuard, 0x5A);
    std::uint8_t* d = dbuf.data() + kGuard + dst_off;
    std::uint8_t* s = sbuf.data() + src_off;
    if (n != 0) {
        std::memcpy(d, dst.data(), n * 4);
        std::memcpy(s, src.data(), n * 4);
    }
    kernel(reinterpret_cast<float*>(d), reinterpret_cast<const float*>(s), n);
    guards_ok = true;
    for (std::size_t i = 0; i < kGuard + dst_off; ++i) guards_ok = guards_ok && dbuf[i] == 0xA5;
    for (std::size_t i = kGuard + dst_off + n * 4; i < dbuf.size(); ++i) guards_ok = guards_ok && dbuf[i] == 0xA5;
    std::vector<std::uint32_t> out(n);
    if (n != 0) std::memcpy(out.data(), d, n * 4);
    return out;
}

}  // namespace

// Must stay the first test case: the process-wide choice is made on first use, so the environment
// override is checked in forked children that have not used it yet.
TEST_CASE("SHESHA_SIMD selects the kernel once and warns once on an unusable request", "[merge_kernel]") {
    auto run_child = [](const char* value, std::string& err) -> int {
        char path[] = "/tmp/shesha_simd_stderrXXXXXX";
        const int fd = mkstemp(path);
        REQUIRE(fd >= 0);
        const pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            dup2(fd, 2);
            setenv("SHESHA_SIMD", value, 1);
            const SimdLevel first = active_simd();
            float a[3] = {1.0f, 2.0f, 3.0f};
            const float b[3] = {0.5f, 0.25f, 0.125f};
            add_f32(a, b, 3);
            const bool sum_ok = a[0] == 1.5f && a[1] == 2.25f && a[2] == 3.125f;
            const bool stable = active_simd() == first;
            _exit(sum_ok && stable ? static_cast<int>(first) : 100);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        close(fd);
        std::ifstream in(path);
        std::stringstream ss;
        ss << in.rdbuf();
        err = ss.str();
        unlink(path);
        REQUIRE(WIFEXITED(status));
        return WEXITSTATUS(status);
    };
    std::string err;
    CHECK(run_child("scalar", err) == static_cast<int>(SimdLevel::Scalar));
    CHECK(err.empty());

    const bool has_avx2 = __builtin_cpu_supports("avx2");
    const bool has_avx512 = __builtin_cpu_supports("avx512f");
    CHECK(run_child("avx2", err) == static_cast<int>(has_avx2 ? SimdLevel::Avx2 : detect_simd()));
    CHECK(err.empty() == has_avx2);

    CHECK(run_child("avx512", err) == static_cast<int>(has_avx512 ? SimdLevel::Avx512 : detect_simd()));
    CHECK(err.empty() == has_avx512);

    CHECK(run_child("sse9", err) == static_cast<int>(detect_simd()));
    // Exactly one warning line, naming the bad value.
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);
    CHECK(err.find("sse9") != std::string::npos);
}

TEST_CASE("detection matches the CPU flags", "[merge_kernel]") {
    const SimdLevel best = detect_simd();
    if (__builtin_cpu_supports("avx512f")) {
        CHECK(best == SimdLevel::Avx512);
    } else if (__builtin_cpu_supports("avx2")) {
        CHECK(best == SimdLevel::Avx2);
    } else {
        CHECK(best == SimdLevel::Scalar);
    }
    CHECK(to_string(SimdLevel::Scalar) == "scalar");
    CHECK(to_string(SimdLevel::Avx2) == "avx2");
    CHECK(to_string(SimdLevel::Avx512) == "avx512");
    WARN("SIMD level on this machine: " << to_string(best));
}

TEST_CASE("set_simd_level switches the process-wide kernel", "[merge_kernel]") {
    const SimdLevel before = active_simd();
    set_simd_level(SimdLevel::Scalar);
    CHECK(active_simd() == SimdLevel::Scalar);
    set_simd_level(SimdLevel::Avx512);
    CHECK(active_simd() == (__builtin_cpu_supports("avx512f") ? SimdLevel::Avx512 : detect_simd()));
    set_simd_level(before);
    CHECK(active_simd() == before);
}

TEST_CASE("scalar kernel adds exactly once per element", "[merge_kernel]") {
    const AddF32Fn scalar = add_f32_kernel(SimdLevel::Scalar);
    float d[5] = {1.0f, -0.0f, 1e-45f, 3.0e38f, 0.1f};
    const float s[5] = {2.0f, -0.0f, 1e-45f, 3.0e38f, 0.2f};
    scalar(d, s, 5);
    CHECK(d[0] == 3.0f);
    CHECK(bits_of(d[1]) == 0x80000000u);  // -0 + -0 = -0
    CHECK(bits_of(d[2]) == 2u);           // two smallest denormals
    CHECK(std::isinf(d[3]));
    CHECK(bits_of(d[4]) == bits_of(0.1f + 0.2f));
    CHECK(bits_of(d[4]) == 0x3E99999Au);
}

TEST_CASE("SIMD kernels are bit-identical to scalar at every length 0..4099 and misalignment",
          "[merge_kernel]") {
    const AddF32Fn scalar = add_f32_kernel(SimdLevel::Scalar);
    const AddF32Fn kernels[2] = {add_f32_kernel(SimdLevel::Avx2), add_f32_kernel(SimdLevel::Avx512)};
    const char* names[2] = {"avx2", "avx512"};
    std::mt19937_64 rng(0x5E5A);

    constexpr std::size_t kMaxLen = 4099;
    std::vector<std::uint32_t> all_dst(kMaxLen), all_src(kMaxLen);
    for (auto& x : all_dst) x = random_float_bits(rng);
    for (auto& x : all_src) x = random_float_bits(rng);

    std::size_t reference_mismatches = 0, guard_failures = 0, nan_results = 0;
    std::size_t mismatches[2] = {0, 0};
    for (std::size_t n = 0; n <= kMaxLen; ++n) {
        // A different window of the random data for each length, so lanes see different values.
        const std::size_t start = (n * 7919) % (kMaxLen - n + 1);
        const std::vector<std::uint32_t> dst(all_dst.begin() + start, all_dst.begin() + start + n);
        const std::vector<std::uint32_t> src(all_src.begin() + start, all_src.begin() + start + n);
        const std::size_t dst_off = n % 4;        // 0..3 bytes: every misalignment
        const std::size_t src_off = (n / 4) % 4;
        bool guards = false;
        const auto want = run_at(scalar, dst, src, dst_off, src_off, guards);
        guard_failures += !guards;
        for (std::size_t i = 0; i < n; ++i) {
            reference_mismatches += want[i] != reference_sum_bits(dst[i], src[i]);
            nan_results += std::isnan(float_of(want[i]));
        }
        for (int k = 0; k < 2; ++k) {
            const auto got = run_at(kernels[k], dst, src, dst_off, src_off, guards);
            guard_failures += !guards;
            for (std::size_t i = 0; i < n; ++i) {
                // Same bits; for a NaN result that means NaN with the scalar's payload.
                const bool same = got[i] == want[i] &&
                                  std::isnan(float_of(got[i])) == std::isnan(float_of(want[i]));
                if (!same && mismatches[k]++ == 0) {
                    UNSCOPED_INFO(names[k] << " n=" << n << " i=" << i << " dst=" << std::hex << dst[i]
                                           << " src=" << src[i] << " want=" << want[i] << " got=" << got[i]);
                }
            }
        }
    }
    CHECK(nan_results > 1000);  // the data really exercised NaNs
    CHECK(reference_mismatches == 0);
    CHECK(guard_failures == 0);
    CHECK(mismatches[0] == 0);
    CHECK(mismatches[1] == 0);
}

TEST_CASE("all kernels agree on an accumulated sum of many packets", "[merge_kernel]") {
    // Merging k packets in sequence: each kernel must reproduce the scalar chain of roundings.
    constexpr std::size_t n = 2048;
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<std::vector<float>> packets(40, std::vector<float>(n));
    for (auto& p : packets)
        for (auto& x : p) x = dist(rng);
    std::vector<std::uint32_t> results[3];
    const SimdLevel levels[3] = {SimdLevel::Scalar, SimdLevel::Avx2, SimdLevel::Avx512};
    for (int k = 0; k < 3; ++k) {
        std::vector<float> acc = packets[0];
        for (std::size_t p = 1; p < packets.size(); ++p) add_f32_kernel(levels[k])(acc.data(), packets[p].data(), n);
        for (float f : acc) results[k].push_back(bits_of(f));
    }
    CHECK(results[1] == results[0]);
    CHECK(results[2] == results[0]);
    // And the scalar chain equals the plain left-to-right sum.
    for (std::size_t i = 0; i < n; i += 97) {
        float s = packets[0][i];
        for (std::size_t p = 1; p < packets.size(); ++p) s = s + packets[p][i];
        CHECK(bits_of(s) == results[0][i]);
    }
}

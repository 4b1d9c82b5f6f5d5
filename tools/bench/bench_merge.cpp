// `shesha-bench merge`: throughput of the fp32 merge kernels on payloads that stay in L1/L2 (the
// same two buffers are used over and over), against memcpy of the same bytes and a plain scalar
// loop compiled without vectorisation.
//
// Throughput is payload bytes merged per second (n * 4 bytes of src added into dst per call); the
// kernel reads 2x and writes 1x those bytes, memcpy reads 1x and writes 1x.
#include <fmt/core.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <new>

#include "bench_main.h"
#include "bench_util.h"
#include "merge_kernel.h"
#include "scalar_reference.h"

namespace shesha::bench {
namespace {

using AddFn = void (*)(float*, const float*, std::size_t) noexcept;

// Called through a volatile pointer so the compiler cannot inline or elide the library memcpy:
// the reference is glibc's real (vectorised) memcpy, called like the kernels are.
void* (*volatile g_memcpy)(void*, const void*, std::size_t) = &std::memcpy;

struct AlignedFree {
    void operator()(float* p) const { ::operator delete[](p, std::align_val_t{64}); }
};
using Buffer = std::unique_ptr<float[], AlignedFree>;
Buffer make_buffer(std::size_t n) {
    return Buffer(static_cast<float*>(::operator new[](n * sizeof(float), std::align_val_t{64})));
}

// Runs `calls` calls of one implementation; returns seconds taken.
using Runner = std::function<double(std::size_t calls)>;

template <class Body>
Runner make_runner(Body body) {
    return [body](std::size_t calls) {
        const auto t0 = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < calls; ++i) body();
        return seconds_since(t0);
    };
}

// Calls per repetition so that one repetition lasts about rep_seconds (timer overhead and clock
// granularity then do not matter); also warms caches and the branch predictor.
std::size_t calibrate(const Runner& run, double rep_seconds) {
    std::size_t calls = 256;
    for (;;) {
        const double s = run(calls);
        if (s >= rep_seconds / 4 || calls >= (std::size_t{1} << 30)) {
            return static_cast<std::size_t>(static_cast<double>(calls) * rep_seconds / std::max(s, 1e-9)) + 1;
        }
        calls *= 4;
    }
}

}  // namespace

Table run_merge_bench(const RunOptions& opt) {
    const int reps = opt.quick ? 3 : 21;
    const double rep_seconds = opt.quick ? 0.002 : 0.02;
    const std::size_t sizes[] = {256, 1024, 2048, 4096};

    struct Impl {
        std::string name;
        AddFn fn;  // nullptr: memcpy
    };
    std::vector<Impl> impls;
    impls.push_back({"memcpy", nullptr});
    impls.push_back({"plain-scalar", &add_f32_plain_scalar});
    const core::SimdLevel best = core::detect_simd();
    for (core::SimdLevel l : {core::SimdLevel::Scalar, core::SimdLevel::Avx2, core::SimdLevel::Avx512}) {
        if (static_cast<int>(l) > static_cast<int>(best)) continue;  // the CPU lacks it
        impls.push_back({"shesha-" + std::string(core::to_string(l)), core::add_f32_kernel(l)});
    }

    Table t("merge: fp32 add kernel throughput, L1/L2-resident payloads",
            {"bytes", "impl", "ns/call", "GB/s", "x memcpy", "x plain-scalar"});
    double checksum = 0;
    for (const std::size_t bytes : sizes) {
        const std::size_t n = bytes / sizeof(float);
        const std::size_t m = impls.size();
        // Small normal values: dst grows slowly and never reaches denormals or infinity.
        Buffer src = make_buffer(n);
        for (std::size_t i = 0; i < n; ++i) src[i] = 1e-3f * static_cast<float>(i % 7 + 1);
        std::vector<Buffer> dsts;  // one per implementation; all of them together stay in L1/L2
        std::vector<Runner> runners;
        for (std::size_t k = 0; k < m; ++k) {
            dsts.push_back(make_buffer(n));
            float* d = dsts.back().get();
            for (std::size_t i = 0; i < n; ++i) d[i] = 1.0f + static_cast<float>(i % 5);
            const float* s = src.get();
            if (const AddFn fn = impls[k].fn) {
                runners.push_back(make_runner([=] { fn(d, s, n); clobber_memory(d); }));
            } else {
                auto* const copy = g_memcpy;
                runners.push_back(make_runner([=] { copy(d, s, bytes); clobber_memory(d); }));
            }
        }
        std::vector<std::size_t> calls(m);
        for (std::size_t k = 0; k < m; ++k) calls[k] = calibrate(runners[k], rep_seconds);
        // Repetitions interleave the implementations, so a burst of load from another process hits
        // them alike; ratios are taken per repetition (paired) and then the median.
        std::vector<std::vector<double>> ns(m);
        for (int r = 0; r < reps; ++r) {
            for (std::size_t k = 0; k < m; ++k) {
                ns[k].push_back(runners[k](calls[k]) * 1e9 / static_cast<double>(calls[k]));
            }
        }
        for (std::size_t k = 0; k < m; ++k) {
            std::vector<double> vs_memcpy, vs_scalar;
            for (int r = 0; r < reps; ++r) {
                vs_memcpy.push_back(ns[0][r] / ns[k][r]);  // GB/s ratio = inverse time ratio
                vs_scalar.push_back(ns[1][r] / ns[k][r]);
            }
            const double ns_call = median(ns[k]);
            t.add_row({std::to_string(bytes), impls[k].name, ns_call, static_cast<double>(bytes) / ns_call,
                       median(vs_memcpy), median(vs_scalar)});
            for (std::size_t i = 0; i < n; ++i) checksum += dsts[k][i];
        }
    }
    t.add_note(fmt::format("median of {} interleaved repetitions of ~{} ms (ratios paired per repetition); best SIMD level on this CPU: {}", reps,
                           rep_seconds * 1e3, core::to_string(best)));
    t.add_note("GB/s = payload bytes merged (or copied) per second; target: best kernel >= 0.6x memcpy at 1-4 KB");
    t.add_note(fmt::format("output checksum {:.6g} (keeps every result observable)", checksum));
    return t;
}

}  // namespace shesha::bench

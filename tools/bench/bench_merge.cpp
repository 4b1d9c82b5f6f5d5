// `shesha-bench merge`: throughput of the fp32 merge kernels on payloads that stay in L1/L2 (the
// same two buffers are used over and over), against memcpy of the same bytes and a plain scalar
// loop compiled without vectorisation.
//
// Throughput is payload bytes merged per second (n * 4 bytes of src added into dst per call); the
// kernel reads 2x and writes 1x those bytes, memcpy reads 1x and writes 1x.
#include <fmt/core.h>

#include <algorithm>
#include <cstring>
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

// Median ns per call over `reps` repetitions; each repetition runs enough calls to last about
// rep_seconds, so timer overhead and clock granularity do not matter.
template <class Body>
double median_ns_per_call(Body&& body, int reps, double rep_seconds) {
    std::size_t iters = 256;
    for (;;) {  // calibrate (also warms caches and the branch predictor)
        const auto t0 = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < iters; ++i) body();
        const double s = seconds_since(t0);
        if (s >= rep_seconds / 4 || iters >= (std::size_t{1} << 30)) {
            iters = static_cast<std::size_t>(static_cast<double>(iters) * rep_seconds / std::max(s, 1e-9)) + 1;
            break;
        }
        iters *= 4;
    }
    std::vector<double> ns;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < iters; ++i) body();
        ns.push_back(seconds_since(t0) * 1e9 / static_cast<double>(iters));
    }
    return median(ns);
}

}  // namespace

Table run_merge_bench(const RunOptions& opt) {
    const int reps = opt.quick ? 3 : 15;
    const double rep_seconds = opt.quick ? 0.005 : 0.05;
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
        Buffer src = make_buffer(n), dst = make_buffer(n), copy_dst = make_buffer(n);
        std::vector<double> gbps(impls.size()), ns_call(impls.size());
        for (std::size_t k = 0; k < impls.size(); ++k) {
            // Small normal values: dst grows slowly and never reaches denormals or infinity.
            for (std::size_t i = 0; i < n; ++i) {
                src[i] = 1e-3f * static_cast<float>(i % 7 + 1);
                dst[i] = 1.0f + static_cast<float>(i % 5);
            }
            float* d = impls[k].fn ? dst.get() : copy_dst.get();
            const float* s = src.get();
            if (impls[k].fn) {
                const AddFn fn = impls[k].fn;
                ns_call[k] = median_ns_per_call([&] { fn(d, s, n); clobber_memory(d); }, reps, rep_seconds);
            } else {
                auto* const copy = g_memcpy;
                ns_call[k] = median_ns_per_call([&] { copy(d, s, bytes); clobber_memory(d); }, reps, rep_seconds);
            }
            gbps[k] = static_cast<double>(bytes) / ns_call[k];  // bytes per ns == GB/s
            for (std::size_t i = 0; i < n; ++i) checksum += d[i];
        }
        for (std::size_t k = 0; k < impls.size(); ++k) {
            t.add_row({std::to_string(bytes), impls[k].name, ns_call[k], gbps[k], gbps[k] / gbps[0],
                       gbps[k] / gbps[1]});
        }
    }
    t.add_note(fmt::format("median of {} repetitions of ~{} ms; best SIMD level on this CPU: {}", reps,
                           rep_seconds * 1e3, core::to_string(best)));
    t.add_note("GB/s = payload bytes merged (or copied) per second; target: best kernel >= 0.6x memcpy at 1-4 KB");
    t.add_note(fmt::format("output checksum {:.6g} (keeps every result observable)", checksum));
    return t;
}

}  // namespace shesha::bench

// Bounded-memory distribution of non-negative 64-bit values (used for ages in ns).
//
// Log-linear buckets: values below 64 have their own bucket; above, each power of two is split in
// 64 equal sub-buckets, so a reported percentile is at most 1/64 (about 1.6 %) above the true
// sample value. Count, sum, min and max are exact. Fixed size (about 30 KB), no allocation after
// construction, so a sink can keep one per cluster whatever the run length.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace shesha::metrics {

class LatencyHistogram {
public:
    static constexpr unsigned kSubBucketBits = 6;
    static constexpr std::size_t kSubBuckets = std::size_t{1} << kSubBucketBits;
    static constexpr std::size_t kBucketCount = (64 - kSubBucketBits + 1) * kSubBuckets;

    void add(std::uint64_t value) noexcept;

    std::uint64_t count() const noexcept { return count_; }
    std::uint64_t min() const noexcept { return count_ ? min_ : 0; }
    std::uint64_t max() const noexcept { return max_; }
    double mean() const noexcept { return count_ ? sum_ / static_cast<double>(count_) : 0.0; }

    // Smallest bucket upper bound at or below which at least fraction p (0..1] of the samples lie,
    // clamped to the exact max. 0 when empty.
    std::uint64_t percentile(double p) const noexcept;

    static std::size_t bucket_of(std::uint64_t value) noexcept;
    static std::uint64_t bucket_upper_bound(std::size_t bucket) noexcept;

private:
    std::array<std::uint64_t, kBucketCount> counts_{};
    std::uint64_t count_ = 0;
    double sum_ = 0.0;  // double: a u64 sum of ns ages could overflow on very long runs
    std::uint64_t min_ = UINT64_MAX;
    std::uint64_t max_ = 0;
};

}  // namespace shesha::metrics

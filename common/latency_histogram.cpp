#include "latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace shesha::metrics {

std::size_t LatencyHistogram::bucket_of(std::uint64_t value) noexcept {
    if (value < kSubBuckets) return static_cast<std::size_t>(value);
    const unsigned exponent = 63u - static_cast<unsigned>(std::countl_zero(value));  // >= kSubBucketBits
    const std::uint64_t sub = (value >> (exponent - kSubBucketBits)) - kSubBuckets;  // 0..kSubBuckets-1
    return (exponent - kSubBucketBits + 1) * kSubBuckets + static_cast<std::size_t>(sub);
}

std::uint64_t LatencyHistogram::bucket_upper_bound(std::size_t bucket) noexcept {
    if (bucket < kSubBuckets) return bucket;
    const unsigned exponent = static_cast<unsigned>(bucket / kSubBuckets) + kSubBucketBits - 1;
    const std::uint64_t sub = bucket % kSubBuckets;
    const unsigned shift = exponent - kSubBucketBits;
    const std::uint64_t lower = (kSubBuckets + sub) << shift;
    return lower + ((std::uint64_t{1} << shift) - 1);
}

void LatencyHistogram::add(std::uint64_t value) noexcept {
    ++counts_[bucket_of(value)];
    ++count_;
    sum_ += static_cast<double>(value);
    min_ = std::min(min_, value);
    max_ = std::max(max_, value);
}

std::uint64_t LatencyHistogram::percentile(double p) const noexcept {
    if (count_ == 0) return 0;
    p = std::clamp(p, 0.0, 1.0);
    const auto rank = std::max<std::uint64_t>(
        1, static_cast<std::uint64_t>(std::ceil(p * static_cast<double>(count_))));
    std::uint64_t seen = 0;
    for (std::size_t b = 0; b < kBucketCount; ++b) {
        seen += counts_[b];
        if (seen >= rank) return std::min(bucket_upper_bound(b), max_);
    }
    return max_;
}

}  // namespace shesha::metrics

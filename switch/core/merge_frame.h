// The one place that adds an arriving GRADIENT into a waiting one, payload and header: used by the
// aggregating queue (a packet waiting in the ring) and by the TX batch's merge index (a packet that
// bypassed an idle port's queue in this forwarding pass). No DPDK; no checks: the caller has
// matched the key, destination and layout and checked that the contributions fit in 16 bits.
#pragma once

#include <algorithm>
#include <cstdint>

#include "frame.h"
#include "merge_kernel.h"
#include "protocol.h"

namespace shesha::core {

// `waiting` and `arriving` point at the two Shesha headers, each followed by elem_count fp32.
// The waiting packet ends up carrying `contributions` (its old count plus the arrival's), the span
// of both packets' timestamps, MERGED, and the arrival's congestion mark if it had one.
[[gnu::always_inline]] inline void merge_gradient_into(std::uint8_t* waiting, const std::uint8_t* arriving,
                                                       std::uint16_t elem_count, std::uint16_t contributions) noexcept {
    namespace in = proto::inplace;
    add_f32(reinterpret_cast<float*>(waiting + proto::kHeaderSize),
            reinterpret_cast<const float*>(arriving + proto::kHeaderSize), elem_count);
    in::set_contrib_count(waiting, contributions);
    in::set_ts_earliest(waiting, std::min(in::ts_earliest(waiting), in::ts_earliest(arriving)));
    in::set_ts_latest(waiting, std::max(in::ts_latest(waiting), in::ts_latest(arriving)));
    in::set_flags(waiting, in::flags(waiting) | proto::flag::kMerged |
                               (in::flags(arriving) & proto::flag::kCongestionExperienced));
}

}  // namespace shesha::core

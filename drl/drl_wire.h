// Conventions the DRL worker and learner add on top of the Shesha protocol (docs/aom.md, "Wire
// conventions"). None changes the codec: the switch and every other tool see ordinary messages.
//
//   GRADIENT reserved bytes 44..47  the sending worker's cumulative env steps (u32, big-endian,
//                                   wrapping). Zero keeps protocol.md's meaning ("unknown"). The
//                                   switch never rewrites them, so a merged chunk carries the
//                                   first contributor's count, which is still that worker's.
//   MODEL from the learner          seq = the learner's incarnation (its start time in ms, u32):
//                                   a new incarnation means the learner restarted; model_version =
//                                   the published version the chunk belongs to.
//   MODEL with elem_count 0         a worker -> learner model request: "send me the whole current
//   (worker -> learner)             model"; worker_id and cluster_id name the worker, model_version
//                                   is the version it holds (0 = none), chunk_count is 1.
//   CREDIT                          seq = the learner's incarnation, model_version = its version.
//   GRADIENT seq                    the worker's first update takes first_gradient_seq(start time):
//                                   its start time in microseconds, so a worker restarted under the
//                                   same id continues ahead of its predecessor's seqs (the learner's
//                                   duplicate window, docs/transport.md "Duplicates").
#pragma once

#include <cstdint>
#include <span>

#include "protocol.h"
#include "big_endian.h"

namespace shesha::drl {


// The env-step count carried in a GRADIENT's sender info (message starts at the header): the low
// 24 bits of the worker's cumulative count; the learner unwraps it (kEnvStepsMask + 1 per turn).
inline constexpr std::uint32_t kEnvStepsMask = 0xFFFFFF;
inline std::uint32_t gradient_env_steps(std::span<const std::uint8_t> message) noexcept {
    if (message.size() < proto::kHeaderSize) return 0;
    const std::uint8_t* p = message.data() + proto::off::kSenderInfo;
    return (std::uint32_t{p[0]} << 16) | (std::uint32_t{p[1]} << 8) | p[2];
}
inline void set_gradient_env_steps(std::span<std::uint8_t> message, std::uint64_t steps) noexcept {
    if (message.size() < proto::kHeaderSize) return;
    std::uint8_t* p = message.data() + proto::off::kSenderInfo;
    p[0] = static_cast<std::uint8_t>(steps >> 16);
    p[1] = static_cast<std::uint8_t>(steps >> 8);
    p[2] = static_cast<std::uint8_t>(steps);
}
// How far a 24-bit env-step count moved on from the last one seen: the forward distance modulo
// 2^24, or 0 if `now` is not ahead (a reordered or merged packet carrying an older count).
inline std::uint32_t env_steps_advance(std::uint32_t now, std::uint32_t last) noexcept {
    const std::uint32_t d = (now - last) & kEnvStepsMask;
    return d != 0 && d < (kEnvStepsMask + 1) / 2 ? d : 0;
}

// The seq of a worker's first update: CLOCK_REALTIME in microseconds (mod 2^32, never 0, which
// means "nothing acked"). A predecessor that started at t0 and sent its last seq before t1 used
// seqs below t0 + (updates it offered); it offered far fewer than one update per microsecond, so a
// successor started at t1 begins ahead of all of them, in serial order for 35 minutes (2^31 us);
// a worker away longer has been expired by the learner, which then forgets its seqs.
inline std::uint32_t first_gradient_seq(std::uint64_t realtime_ns) noexcept {
    const auto us = static_cast<std::uint32_t>(realtime_ns / 1000);
    return us == 0 ? 1 : us;
}

// RFC 1982-style order on wrapping 32-bit counters: a is after b.
inline bool serial_after(std::uint32_t a, std::uint32_t b) noexcept {
    return a != b && static_cast<std::int32_t>(a - b) > 0;
}

inline bool is_model_request(const proto::Header& h) noexcept {
    return h.type == proto::MsgType::Model && h.elem_count == 0;
}

inline proto::Header model_request_header(std::uint16_t cluster_id, std::uint32_t worker_id,
                                          std::uint32_t held_version, std::uint64_t now_ns) noexcept {
    proto::Header h;
    h.type = proto::MsgType::Model;
    h.elem_type = proto::ElemType::F32;
    h.cluster_id = cluster_id;
    h.worker_id = worker_id;
    h.model_version = held_version;
    h.chunk_index = 0;
    h.chunk_count = 1;
    h.elem_count = 0;
    h.ts_earliest_ns = now_ns;
    h.ts_latest_ns = now_ns;
    return h;
}

}  // namespace shesha::drl

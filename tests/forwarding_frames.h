// Frames for the forwarding tests (the pipeline's, root-free, and the DPDK adapter's): hosts
// 02:00:00:00:00:xx at 10.0.0.xx, plain UDP and non-IP frames, and fp32 GRADIENTs whose payload
// is the pattern (gradient_pattern.h), so any merge can be checked exactly.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "frame.h"
#include "gradient_pattern.h"
#include "protocol.h"

namespace shesha::testing {

inline constexpr std::uint16_t kWorkerPort = 40000;
inline constexpr frame::MacAddr kBroadcast{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

inline frame::MacAddr mac(std::uint8_t last) { return {0x02, 0, 0, 0, 0, last}; }
inline std::uint32_t host_ip(std::uint8_t last) { return (10u << 24) | last; }  // 10.0.0.x, never sent anywhere

inline std::vector<std::uint8_t> udp_frame(const frame::MacAddr& src, const frame::MacAddr& dst, std::uint32_t sip,
                                           std::uint32_t dip, std::uint16_t dport, const std::vector<std::uint8_t>& payload,
                                           std::uint16_t sport = kWorkerPort) {
    std::vector<std::uint8_t> f(frame::kUdpPayloadOffset + payload.size());
    std::memcpy(f.data() + frame::kUdpPayloadOffset, payload.data(), payload.size());
    frame::Endpoints ep;
    ep.src_mac = src;
    ep.dst_mac = dst;
    ep.src_ip = sip;
    ep.dst_ip = dip;
    ep.src_port = sport;
    ep.dst_port = dport;
    ep.ecn = 1;
    REQUIRE(frame::build_udp_frame(ep, payload.size(), f) == f.size());
    return f;
}

// A non-IP frame (ARP ethertype), minimum size.
inline std::vector<std::uint8_t> l2_frame(const frame::MacAddr& src, const frame::MacAddr& dst, std::uint8_t tag) {
    std::vector<std::uint8_t> f(60, tag);
    std::memcpy(f.data(), dst.data(), 6);
    std::memcpy(f.data() + 6, src.data(), 6);
    f[12] = 0x08;
    f[13] = 0x06;
    return f;
}

inline proto::Header gradient_header(std::uint16_t cluster, std::uint16_t chunk, std::uint32_t worker, std::uint16_t n) {
    proto::Header h;
    h.type = proto::MsgType::Gradient;
    h.elem_type = proto::ElemType::F32;
    h.cluster_id = cluster;
    h.worker_id = worker;
    h.model_version = 5;
    h.seq = 100 + worker;
    h.chunk_index = chunk;
    h.chunk_count = 4;
    h.elem_count = n;
    h.contrib_count = 1;
    h.ts_earliest_ns = 1000 + worker;
    h.ts_latest_ns = 1000 + worker;
    return h;
}

inline std::vector<std::uint8_t> gradient_payload(const proto::Header& h) {
    std::vector<float> elems(h.elem_count);
    pattern::fill(elems.data(), elems.size(), h.cluster_id, h.chunk_index, h.worker_id);
    std::vector<std::uint8_t> body(elems.size() * 4);
    std::memcpy(body.data(), elems.data(), body.size());
    std::vector<std::uint8_t> out(proto::kHeaderSize + body.size());
    REQUIRE(proto::encode(h, body, out) == out.size());
    return out;
}

inline std::vector<std::uint8_t> gradient_frame(std::uint8_t worker_host, const frame::MacAddr& dst_mac, std::uint32_t dst_ip,
                                                std::uint16_t cluster, std::uint16_t chunk, std::uint16_t n = 64) {
    return udp_frame(mac(worker_host), dst_mac, host_ip(worker_host), dst_ip, proto::kDefaultUdpPort,
                     gradient_payload(gradient_header(cluster, chunk, worker_host, n)));
}

// ---- MODEL replication (tests/test_replication.cpp, tests/dpdk/test_switch_ring.cpp) ----

inline constexpr std::uint16_t kModelCluster = 7;
inline constexpr std::uint8_t kLearnerHost = 9;
inline constexpr std::uint32_t kGroup = (239u << 24) | (77u << 16) | 7u;  // 239.77.0.7
inline const frame::MacAddr kGroupMac{0x01, 0x00, 0x5e, 0x4d, 0x00, 0x07};
inline constexpr std::uint16_t kChunkElems = 256;

inline std::uint16_t worker_port(std::uint8_t host) { return static_cast<std::uint16_t>(kWorkerPort + host); }

// A Shesha message from (mac, ip, udp port) to (dst mac, dst ip, Shesha port).
inline std::vector<std::uint8_t> shesha_frame(const frame::MacAddr& src, std::uint32_t sip, std::uint16_t sport,
                                              const frame::MacAddr& dst, std::uint32_t dip, const proto::Header& h,
                                              const std::vector<std::uint8_t>& body) {
    std::vector<std::uint8_t> payload(proto::kHeaderSize + body.size());
    REQUIRE(proto::encode(h, body, payload) == payload.size());
    return udp_frame(src, dst, sip, dip, proto::kDefaultUdpPort, payload, sport);
}

// A worker's model request: a MODEL without elements, to the learner.
inline std::vector<std::uint8_t> model_request(std::uint8_t host, std::uint16_t cluster = kModelCluster) {
    proto::Header h;
    h.type = proto::MsgType::Model;
    h.elem_type = proto::ElemType::F32;
    h.cluster_id = cluster;
    h.worker_id = 100u + host;
    return shesha_frame(mac(host), host_ip(host), worker_port(host), mac(kLearnerHost), host_ip(kLearnerHost), h, {});
}

// One MODEL chunk (version 3, chunk 1 of 2) sent to the group, from `host` (the learner unless forged).
inline std::vector<std::uint8_t> group_model(std::uint8_t host = kLearnerHost, std::uint16_t cluster = kModelCluster) {
    proto::Header h;
    h.type = proto::MsgType::Model;
    h.elem_type = proto::ElemType::F32;
    h.cluster_id = cluster;
    h.worker_id = 0xFFFFFFFFu;
    h.model_version = 3;
    h.seq = 11;
    h.chunk_index = 1;
    h.chunk_count = 2;
    h.elem_count = kChunkElems;
    std::vector<std::uint8_t> body(kChunkElems * 4);
    for (std::size_t i = 0; i < body.size(); ++i) body[i] = static_cast<std::uint8_t>(i * 7 + 1);
    return shesha_frame(mac(host), host_ip(host), proto::kDefaultUdpPort, kGroupMac, kGroup, h, body);
}

}  // namespace shesha::testing

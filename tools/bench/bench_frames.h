// Crafted Shesha frames for the queue and forwarding benchmarks, built with the project's codec.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "frame.h"

namespace shesha::bench {

struct GradientFrameSpec {
    frame::Endpoints ep;
    std::uint16_t cluster_id = 1;
    std::uint16_t chunk_index = 0;
    std::uint16_t chunk_count = 1;
    std::uint32_t worker_id = 0;
    std::uint32_t model_version = 0;
    std::uint32_t seq = 0;
    std::uint16_t elem_count = 256;  // 256 fp32 = 1 KB of gradient
};

// Ethernet/IPv4/UDP + a valid GRADIENT (gradient_pattern payload, UDP checksum off). Returns the
// frame length, 0 if out is too small.
std::size_t build_gradient_frame(const GradientFrameSpec& spec, std::span<std::uint8_t> out);

// Default endpoints: worker w -> learner, on the Shesha UDP port.
frame::Endpoints bench_endpoints(std::uint32_t worker_id);
inline constexpr std::uint32_t kLearnerIp = 0x0A000064;  // 10.0.0.100

// Writes a classic libpcap file (Ethernet link type). Returns false on I/O error.
bool write_pcap(const std::string& path, const std::vector<std::vector<std::uint8_t>>& frames);

}  // namespace shesha::bench

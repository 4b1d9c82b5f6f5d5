#include "bench_frames.h"

#include <cstdio>
#include <cstring>

#include "gradient_pattern.h"
#include "protocol.h"

namespace shesha::bench {

frame::Endpoints bench_endpoints(std::uint32_t worker_id) {
    frame::Endpoints ep;
    ep.src_mac = {0x02, 0x00, 0x00, 0x00, 0x01, static_cast<std::uint8_t>(worker_id)};
    ep.dst_mac = {0x02, 0x00, 0x00, 0x00, 0x02, 0x01};
    ep.src_ip = 0x0A000001 + worker_id;  // 10.0.0.1 + w
    ep.dst_ip = kLearnerIp;
    ep.src_port = 40000;
    ep.dst_port = proto::kDefaultUdpPort;
    return ep;
}

std::size_t build_gradient_frame(const GradientFrameSpec& spec, std::span<std::uint8_t> out) {
    const std::size_t body_len = std::size_t{spec.elem_count} * sizeof(float);
    const std::size_t payload_len = proto::kHeaderSize + body_len;
    if (out.size() < frame::kUdpPayloadOffset + payload_len) return 0;

    std::vector<float> elems(spec.elem_count);
    pattern::fill(elems.data(), elems.size(), spec.cluster_id, spec.chunk_index, spec.worker_id);
    proto::Header h;
    h.type = proto::MsgType::Gradient;
    h.elem_type = proto::ElemType::F32;
    h.cluster_id = spec.cluster_id;
    h.worker_id = spec.worker_id;
    h.model_version = spec.model_version;
    h.seq = spec.seq;
    h.chunk_index = spec.chunk_index;
    h.chunk_count = spec.chunk_count;
    h.elem_count = spec.elem_count;
    h.contrib_count = 1;
    h.packet_count = 1;
    h.ts_earliest_ns = h.ts_latest_ns = 1;
    const std::span<const std::uint8_t> body(reinterpret_cast<const std::uint8_t*>(elems.data()), body_len);
    if (proto::encode(h, body, out.subspan(frame::kUdpPayloadOffset)) != payload_len) return 0;
    return frame::build_udp_frame(spec.ep, payload_len, out, /*udp_csum=*/false);
}

bool write_pcap(const std::string& path, const std::vector<std::vector<std::uint8_t>>& frames) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return false;
    // Global header: magic, version 2.4, tz 0, sigfigs 0, snaplen, LINKTYPE_ETHERNET (host order).
    const std::uint32_t magic = 0xa1b2c3d4, snaplen = 65535, linktype = 1, zero = 0;
    const std::uint16_t major = 2, minor = 4;
    bool ok = std::fwrite(&magic, 4, 1, f) == 1 && std::fwrite(&major, 2, 1, f) == 1 &&
              std::fwrite(&minor, 2, 1, f) == 1 && std::fwrite(&zero, 4, 1, f) == 1 &&
              std::fwrite(&zero, 4, 1, f) == 1 && std::fwrite(&snaplen, 4, 1, f) == 1 &&
              std::fwrite(&linktype, 4, 1, f) == 1;
    std::uint32_t usec = 0;
    for (const auto& fr : frames) {
        const std::uint32_t len = static_cast<std::uint32_t>(fr.size());
        const std::uint32_t rec[4] = {0, usec++, len, len};
        ok = ok && std::fwrite(rec, sizeof rec, 1, f) == 1 && std::fwrite(fr.data(), 1, fr.size(), f) == fr.size();
    }
    return std::fclose(f) == 0 && ok;
}

}  // namespace shesha::bench

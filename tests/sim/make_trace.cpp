// Writes the packet trace of the trace-equivalence test: what a rack port sees, in one capture per
// switch port. Port w0 (workers): fp32 GRADIENTs from 32 cluster members to the learner (mergeable
// runs, several chunks and versions, ECN-capable so marks set CE), GRADIENTs from a non-member,
// ARP broadcasts, unknown unicast, bad-magic Shesha, truncated IPv4, non-Shesha UDP. Port l0
// (learner): CREDIT-like replies to learned workers, and a frame to a station behind l0 itself.
// Port x0: two more cluster members' model requests (a third port, so floods copy, and MODEL
// replicas leave by two ports). MODEL chunks to the cluster's group come from the learner (l0). Deterministic: no clock, no RNG.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <pcap/pcap.h>

#include "frame.h"
#include "gradient_pattern.h"
#include "protocol.h"

namespace {

using namespace shesha;

frame::MacAddr worker_mac(unsigned w) { return {0x02, 0, 0, 0, 1, static_cast<std::uint8_t>(w)}; }
const frame::MacAddr kLearnerMac{0x02, 0, 0, 0, 2, 1};
const frame::MacAddr kBroadcast{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
constexpr std::uint32_t kLearnerIp = 0x0A000101;  // 10.0.1.1
std::uint32_t worker_ip(unsigned w) { return 0x0A000001 + w; }  // 10.0.0.1 ..

struct Writer {
    pcap_dumper_t* d;
    void put(const std::vector<std::uint8_t>& f) {
        pcap_pkthdr h{};
        h.caplen = h.len = static_cast<bpf_u_int32>(f.size());
        pcap_dump(reinterpret_cast<u_char*>(d), &h, f.data());
    }
};

std::vector<std::uint8_t> udp(const frame::MacAddr& src, const frame::MacAddr& dst, std::uint32_t sip, std::uint32_t dip,
                              std::uint16_t dport, const std::vector<std::uint8_t>& payload) {
    std::vector<std::uint8_t> f(frame::kUdpPayloadOffset + payload.size());
    std::memcpy(f.data() + frame::kUdpPayloadOffset, payload.data(), payload.size());
    frame::Endpoints ep;
    ep.src_mac = src;
    ep.dst_mac = dst;
    ep.src_ip = sip;
    ep.dst_ip = dip;
    ep.src_port = 40000;
    ep.dst_port = dport;
    ep.ecn = 1;
    frame::build_udp_frame(ep, payload.size(), f);
    return f;
}

std::vector<std::uint8_t> gradient(unsigned w, std::uint16_t chunk, std::uint32_t version, std::uint32_t seq) {
    constexpr std::uint16_t kElems = 64;
    proto::Header h;
    h.cluster_id = 1;
    h.worker_id = w;
    h.model_version = version;
    h.seq = seq;
    h.chunk_index = chunk;
    h.chunk_count = 4;
    h.elem_count = kElems;
    h.ts_earliest_ns = h.ts_latest_ns = 1000 + seq;
    std::vector<float> elems(kElems);
    pattern::fill(elems.data(), kElems, 1, chunk, w);
    std::vector<std::uint8_t> payload(proto::kHeaderSize + kElems * sizeof(float));
    proto::encode(h, {reinterpret_cast<const std::uint8_t*>(elems.data()), kElems * sizeof(float)}, payload);
    return udp(worker_mac(w), kLearnerMac, worker_ip(w), kLearnerIp, proto::kDefaultUdpPort, payload);
}

// A MODEL: a worker's request (no elements, to the learner) or a chunk of version 7 to the
// cluster's group 239.77.0.1 (replicated by the switch to the members that asked).
constexpr std::uint32_t kGroupIp = 0xEF4D0001;  // 239.77.0.1
const frame::MacAddr kGroupMac{0x01, 0x00, 0x5e, 0x4d, 0x00, 0x01};
std::vector<std::uint8_t> model(const frame::MacAddr& src, std::uint32_t sip, const frame::MacAddr& dst, std::uint32_t dip,
                                std::uint32_t worker, std::uint16_t elems, std::uint16_t chunk) {
    proto::Header h;
    h.type = proto::MsgType::Model;
    h.cluster_id = 1;
    h.worker_id = worker;
    h.model_version = 7;
    h.seq = 3;
    h.chunk_index = chunk;
    h.chunk_count = 4;
    h.elem_count = elems;
    h.ts_earliest_ns = h.ts_latest_ns = 5000 + chunk;
    std::vector<std::uint8_t> body(elems * sizeof(float));
    for (std::size_t i = 0; i < body.size(); ++i) body[i] = static_cast<std::uint8_t>(i + chunk);
    std::vector<std::uint8_t> payload(proto::kHeaderSize + body.size());
    proto::encode(h, body, payload);
    return udp(src, dst, sip, dip, proto::kDefaultUdpPort, payload);
}

std::vector<std::uint8_t> arp(const frame::MacAddr& src, std::uint8_t tag) {
    std::vector<std::uint8_t> f(60, tag);
    std::memcpy(f.data(), kBroadcast.data(), 6);
    std::memcpy(f.data() + 6, src.data(), 6);
    f[12] = 0x08;
    f[13] = 0x06;
    return f;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s WORKERS.pcap LEARNER.pcap EMPTY.pcap\n", argv[0]);
        return 2;
    }
    pcap_t* dead = pcap_open_dead(DLT_EN10MB, 65535);
    Writer w0{pcap_dump_open(dead, argv[1])}, l0{pcap_dump_open(dead, argv[2])}, x0{pcap_dump_open(dead, argv[3])};
    if (w0.d == nullptr || l0.d == nullptr || x0.d == nullptr) {
        std::fprintf(stderr, "make_trace: %s\n", pcap_geterr(dead));
        return 1;
    }
    // Every worker announces itself first (ARP broadcasts flood to l0 and x0), so the FDB knows it.
    for (unsigned w = 0; w < 32; ++w) w0.put(arp(worker_mac(w), static_cast<std::uint8_t>(w)));
    l0.put(arp(kLearnerMac, 0xEE));
    // MODEL replication: workers 0-7 (behind w0) and 32-33 (behind x0) join by a model request;
    // worker 40 is no member and is refused.
    for (unsigned w = 0; w < 8; ++w) w0.put(model(worker_mac(w), worker_ip(w), kLearnerMac, kLearnerIp, w, 0, 0));
    for (unsigned w = 32; w < 34; ++w) x0.put(model(worker_mac(w), worker_ip(w), kLearnerMac, kLearnerIp, w, 0, 0));
    w0.put(model(worker_mac(40), worker_ip(40), kLearnerMac, kLearnerIp, 40, 0, 0));
    std::uint32_t seq = 0;
    for (unsigned round = 0; round < 60; ++round) {
        // 32 frames per burst: every member once per burst (the FEEDBACK limiter is per sender),
        // chunks and versions chosen so runs of them merge.
        for (unsigned w = 0; w < 32; ++w) {
            const std::uint16_t chunk = static_cast<std::uint16_t>((round + w / 8) % 4);
            const std::uint32_t version = 10 + round / 3 + (w % 5 == 4 ? 1 : 0);
            w0.put(gradient(w, chunk, version, seq++));
        }
        if (round % 7 == 0) {  // a non-member's gradient, never merged
            auto f = gradient(40, 0, 10 + round / 3, seq++);
            std::memcpy(f.data() + 6, worker_mac(40).data(), 6);
            w0.put(f);
        }
        if (round % 11 == 0) {  // bad magic
            auto f = gradient(3, 1, 10, seq++);
            f[frame::kUdpPayloadOffset] ^= 0xFF;
            w0.put(f);
        }
        if (round % 13 == 0) {  // truncated IPv4 (total length beyond the frame)
            auto f = gradient(4, 1, 10, seq++);
            f.resize(frame::kEthHeaderSize + 24);
            w0.put(f);
        }
        if (round % 5 == 0) w0.put(udp(worker_mac(5), {0x02, 0, 0, 0, 9, 9}, worker_ip(5), kLearnerIp, 5353, {1, 2, 3, 4}));  // unknown unicast
        // The learner answers some workers (unicast back to w0) and one station behind itself.
        l0.put(udp(kLearnerMac, worker_mac(round % 32), kLearnerIp, worker_ip(round % 32), proto::kDefaultUdpPort,
                   std::vector<std::uint8_t>(64, static_cast<std::uint8_t>(round))));
        if (round % 9 == 0) l0.put(udp(kLearnerMac, kLearnerMac, kLearnerIp, kLearnerIp, 9, {9}));  // filtered
        // The learner publishes to the group (one copy per joined member); once, worker 5 forges one.
        if (round % 4 == 0)
            l0.put(model(kLearnerMac, kLearnerIp, kGroupMac, kGroupIp, 0xFFFFFFFFu, 64, static_cast<std::uint16_t>(round / 4 % 4)));
        if (round == 30) w0.put(model(worker_mac(5), worker_ip(5), kGroupMac, kGroupIp, 0xFFFFFFFFu, 64, 0));
    }
    pcap_dump_close(w0.d);
    pcap_dump_close(l0.d);
    pcap_dump_close(x0.d);
    pcap_close(dead);
    return 0;
}

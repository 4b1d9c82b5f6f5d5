// Writes a small classic-libpcap capture with one frame of each Shesha message type, two malformed
// messages, one Shesha message sent to another port, one MODEL and one CREDIT_BATCH to a multicast group. Used to test tools/wireshark/shesha.lua
// (tests/dissector/test_dissector.sh asserts the decoded values) and as a sample for humans.
//
// Usage: shesha-pcap-example OUT.pcap
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "frame.h"
#include "gradient_pattern.h"
#include "protocol.h"

namespace {

using namespace shesha;

constexpr std::uint16_t kOtherPort = 9999;

// Classic pcap writer (no libpcap): host byte order headers, as the magic number tells readers.
class PcapWriter {
public:
    explicit PcapWriter(std::FILE* out) : out_(out) {
        const std::uint32_t magic = 0xA1B2C3D4;  // microsecond timestamps
        const std::uint16_t major = 2, minor = 4;
        const std::int32_t thiszone = 0;
        const std::uint32_t sigfigs = 0, snaplen = 65535, linktype_ethernet = 1;
        put(magic), put(major), put(minor), put(thiszone), put(sigfigs), put(snaplen), put(linktype_ethernet);
    }
    void write(std::span<const std::uint8_t> frame) {
        ++count_;
        const std::uint32_t ts_sec = 1700000000, ts_usec = count_ * 1000;
        const auto len = static_cast<std::uint32_t>(frame.size());
        put(ts_sec), put(ts_usec), put(len), put(len);
        ok_ = ok_ && std::fwrite(frame.data(), 1, frame.size(), out_) == frame.size();
    }
    bool ok() const { return ok_; }

private:
    template <typename T>
    void put(T v) { ok_ = ok_ && std::fwrite(&v, sizeof v, 1, out_) == 1; }
    std::FILE* out_;
    std::uint32_t count_ = 0;
    bool ok_ = true;
};

frame::Endpoints endpoints(std::uint16_t dst_port = proto::kDefaultUdpPort) {
    frame::Endpoints ep;
    ep.src_mac = {0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
    ep.dst_mac = {0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
    ep.src_ip = 0xC0000201;  // 192.0.2.1 (documentation range)
    ep.dst_ip = 0xC0000202;  // 192.0.2.2
    ep.src_port = 40000;
    ep.dst_port = dst_port;
    ep.ecn = 1;
    return ep;
}

// Frames a Shesha message already encoded at buf[kUdpPayloadOffset...].
std::vector<std::uint8_t> to_frame(std::vector<std::uint8_t> buf, std::size_t msg_len,
                                   std::uint16_t dst_port = proto::kDefaultUdpPort) {
    buf.resize(frame::kUdpPayloadOffset + msg_len);
    if (frame::build_udp_frame(endpoints(dst_port), msg_len, buf) != buf.size()) {
        std::fprintf(stderr, "build_udp_frame failed\n");
        std::exit(1);
    }
    return buf;
}

// The same, to the cluster's multicast group 239.77.0.1 (replicated MODEL, CREDIT_BATCH).
std::vector<std::uint8_t> to_group_frame(std::vector<std::uint8_t> buf, std::size_t msg_len) {
    buf.resize(frame::kUdpPayloadOffset + msg_len);
    frame::Endpoints ep = endpoints();
    ep.dst_mac = {0x01, 0x00, 0x5e, 0x4d, 0x00, 0x01};
    ep.dst_ip = 0xEF4D0001;  // 239.77.0.1
    if (frame::build_udp_frame(ep, msg_len, buf) != buf.size()) {
        std::fprintf(stderr, "build_udp_frame failed\n");
        std::exit(1);
    }
    return buf;
}

void put_f32_le(std::uint8_t* p, float v) {
    const auto bits = std::bit_cast<std::uint32_t>(v);
    for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(bits >> (8 * i));
}

proto::Header gradient_header() {
    proto::Header h;
    h.type = proto::MsgType::Gradient;
    h.elem_type = proto::ElemType::F32;
    h.cluster_id = 7;
    h.worker_id = 3;
    h.model_version = 41;
    h.seq = 100;
    h.chunk_index = 2;
    h.chunk_count = 4;
    h.elem_count = 8;
    h.contrib_count = 1;
    h.ts_earliest_ns = 1700000000123456789ull;
    h.ts_latest_ns = 1700000000123456789ull;
    return h;
}

// A GRADIENT (or MODEL) carrying the sum of the pattern of the given workers.
std::vector<std::uint8_t> gradient_message(const proto::Header& h, std::span<const std::uint32_t> workers,
                                           std::size_t& msg_len) {
    std::vector<float> sum(h.elem_count, 0.0f), one(h.elem_count);
    for (auto w : workers) {
        pattern::fill(one.data(), one.size(), h.cluster_id, h.chunk_index, w);
        for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += one[i];
    }
    std::vector<std::uint8_t> body(sum.size() * 4);
    for (std::size_t i = 0; i < sum.size(); ++i) put_f32_le(body.data() + 4 * i, sum[i]);
    std::vector<std::uint8_t> buf(frame::kUdpPayloadOffset + proto::kHeaderSize + body.size());
    msg_len = proto::encode(h, body, std::span(buf).subspan(frame::kUdpPayloadOffset));
    if (msg_len == 0) {
        std::fprintf(stderr, "encode failed\n");
        std::exit(1);
    }
    return buf;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s OUT.pcap\n", argv[0]);
        return 2;
    }
    std::FILE* out = std::fopen(argv[1], "wb");
    if (!out) {
        std::perror(argv[1]);
        return 1;
    }
    PcapWriter pcap(out);
    std::size_t len = 0;

    // 1. GRADIENT from worker 3 (weight 4), fp32 pattern elements.
    {
        const std::uint32_t workers[] = {3};
        proto::Header h = gradient_header();
        h.packet_count = 1;
        auto buf = gradient_message(h, workers, len);
        pcap.write(to_frame(std::move(buf), len));
    }
    // 2. GRADIENT merged in network: workers 3, 4, 5 (weights 4 + 1 + 2), CE set by a queue.
    {
        proto::Header h = gradient_header();
        h.flags = proto::flag::kMerged | proto::flag::kCongestionExperienced;
        h.contrib_count = 3;
        h.packet_count = 3;
        h.model_version = 40;
        h.ts_latest_ns = h.ts_earliest_ns + 2500;
        const std::uint32_t workers[] = {3, 4, 5};
        auto buf = gradient_message(h, workers, len);
        auto f = to_frame(std::move(buf), len);
        frame::clear_udp_checksum(f.data() + frame::kEthHeaderSize + frame::kIpv4MinHeaderSize);
        pcap.write(f);
    }
    // 3. MODEL chunk in BF16: 1.0, -2.5, 0.15625, 3e38-ish (0x7F00 = 2^127).
    {
        proto::Header h = gradient_header();
        h.type = proto::MsgType::Model;
        h.elem_type = proto::ElemType::BF16;
        h.worker_id = 0;
        h.elem_count = 4;
        h.chunk_index = 0;
        h.chunk_count = 1;
        const std::uint16_t bf16[] = {0x3F80, 0xC020, 0x3E20, 0x7F00};
        std::uint8_t body[8];
        for (int i = 0; i < 4; ++i) {
            body[2 * i] = static_cast<std::uint8_t>(bf16[i]);
            body[2 * i + 1] = static_cast<std::uint8_t>(bf16[i] >> 8);
        }
        std::vector<std::uint8_t> buf(frame::kUdpPayloadOffset + proto::kHeaderSize + sizeof body);
        len = proto::encode(h, body, std::span(buf).subspan(frame::kUdpPayloadOffset));
        pcap.write(to_frame(std::move(buf), len));
    }
    // 4. CREDIT to worker 3, echoing congestion.
    {
        proto::Header h;
        h.type = proto::MsgType::Credit;
        h.elem_type = proto::ElemType::None;
        h.flags = proto::flag::kCongestionEcho;
        h.worker_id = 3;
        h.cluster_id = 7;
        h.model_version = 42;
        h.ts_earliest_ns = h.ts_latest_ns = 1700000000200000000ull;
        std::uint8_t body[proto::kCreditBodySize];
        proto::encode_credit({16, 99, 42, 5}, body);
        std::vector<std::uint8_t> buf(frame::kUdpPayloadOffset + proto::kHeaderSize + sizeof body);
        len = proto::encode(h, body, std::span(buf).subspan(frame::kUdpPayloadOffset));
        pcap.write(to_frame(std::move(buf), len));
    }
    // 5. FEEDBACK from the switch.
    {
        proto::Header h;
        h.type = proto::MsgType::Feedback;
        h.elem_type = proto::ElemType::None;
        h.cluster_id = 7;
        h.worker_id = 3;
        h.ts_earliest_ns = h.ts_latest_ns = 1700000000300000000ull;
        proto::FeedbackBody fb;
        fb.port_id = 2;
        fb.queue_capacity = 1024;
        fb.queue_depth = 300;
        fb.mark_permille = 125;
        fb.queue_bytes = 325800;
        fb.sojourn_us = 870;
        fb.merge_permille = 640;
        fb.drops = 12;
        std::uint8_t body[proto::kFeedbackBodySize];
        proto::encode_feedback(fb, body);
        std::vector<std::uint8_t> buf(frame::kUdpPayloadOffset + proto::kHeaderSize + sizeof body);
        len = proto::encode(h, body, std::span(buf).subspan(frame::kUdpPayloadOffset));
        pcap.write(to_frame(std::move(buf), len));
    }
    // 6. Malformed: GRADIENT whose header promises 8 elements but carries 30 bytes.
    {
        const std::uint32_t workers[] = {3};
        auto buf = gradient_message(gradient_header(), workers, len);
        pcap.write(to_frame(std::move(buf), len - 2));
    }
    // 7. Malformed: unknown flag bit 0x40 and earliest > latest (two violations, first is UnknownFlags).
    {
        proto::Header h = gradient_header();
        h.flags = 0x40;
        h.ts_earliest_ns = h.ts_latest_ns + 1;
        const std::uint32_t workers[] = {3};
        auto buf = gradient_message(gradient_header(), workers, len);
        proto::encode_header(h, std::span(buf).subspan(frame::kUdpPayloadOffset));
        pcap.write(to_frame(std::move(buf), len));
    }
    // 8. A valid GRADIENT sent to another UDP port: not Shesha unless the port preference says so.
    {
        proto::Header h = gradient_header();
        h.seq = 777;
        const std::uint32_t workers[] = {3};
        auto buf = gradient_message(h, workers, len);
        pcap.write(to_frame(std::move(buf), len, kOtherPort));
    }
    // 9. A MODEL chunk to a cluster's multicast group (replicated delivery): worker 0xFFFFFFFF, "every
    //    member"; a Shesha switch rewrites each member's copy (docs/switch.md, "Model replication").
    {
        proto::Header h = gradient_header();
        h.type = proto::MsgType::Model;
        h.worker_id = 0xFFFFFFFFu;
        h.elem_count = 2;
        h.chunk_index = 0;
        h.chunk_count = 1;
        h.contrib_count = 1;
        std::uint8_t body[8];
        put_f32_le(body, 0.5F);
        put_f32_le(body + 4, -2.0F);
        std::vector<std::uint8_t> buf(frame::kUdpPayloadOffset + proto::kHeaderSize + sizeof body);
        len = proto::encode(h, body, std::span(buf).subspan(frame::kUdpPayloadOffset));
        pcap.write(to_group_frame(std::move(buf), len));
    }
    // 10. A CREDIT_BATCH to the same group (learner.credit_batching): CREDITs for workers 3 and 4,
    //     the first echoing congestion; a Shesha switch sends each worker its own CREDIT.
    {
        proto::Header h;
        h.type = proto::MsgType::CreditBatch;
        h.elem_type = proto::ElemType::None;
        h.cluster_id = 7;
        h.model_version = 43;
        h.seq = 100;
        h.elem_count = 2;
        h.ts_earliest_ns = h.ts_latest_ns = 1700000000400000000ull;
        std::uint8_t body[2 * proto::kCreditBatchEntrySize];
        proto::encode_credit_batch_entry({3, proto::flag::kCongestionEcho, {2, 501, 43, 1}}, body);
        proto::encode_credit_batch_entry({4, 0, {1, 777, 43, 0}}, std::span(body).subspan(proto::kCreditBatchEntrySize));
        std::vector<std::uint8_t> buf(frame::kUdpPayloadOffset + proto::kHeaderSize + sizeof body);
        len = proto::encode(h, body, std::span(buf).subspan(frame::kUdpPayloadOffset));
        pcap.write(to_group_frame(std::move(buf), len));
    }

    const bool ok = pcap.ok() && std::fclose(out) == 0;
    if (!ok) {
        std::fprintf(stderr, "%s: write failed\n", argv[1]);
        return 1;
    }
    return 0;
}

// AggregatingQueue: FIFO order, merge rule, capacity, marking and counters, on real frames built
// with the shared frame/protocol code.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "aggregating_queue.h"
#include "frame.h"
#include "merge_kernel.h"
#include "port_queue.h"
#include "protocol.h"

using namespace shesha;
using namespace shesha::core;

namespace {

constexpr std::uint32_t kDstA = 0x0A000002;  // 10.0.0.2
constexpr std::uint32_t kDstB = 0x0A000003;

std::uint32_t bits_of(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

struct GradSpec {
    std::uint16_t cluster = 1;
    std::uint16_t chunk = 0;
    std::uint32_t version = 10;
    std::uint32_t worker = 1;
    std::uint16_t contrib = 1;
    std::uint8_t packets = 1;  // packet_count: one packet, as a sender writes it
    std::uint8_t flags = 0;
    std::uint64_t ts = 1000;  // ts_earliest = ts_latest = ts
    std::uint32_t dst_ip = kDstA;
    std::uint8_t ecn = 1;     // ECT(1)
    std::uint32_t tolerance = 0;
    bool mergeable = true;
    std::vector<float> values{1.0f, 2.0f, 3.0f};
};

// One test packet: its own buffer, with one leading pad byte so that the payload floats sit at an
// odd address, as they may in an mbuf.
struct Packet {
    std::vector<std::uint8_t> storage;
    std::uint8_t* frame = nullptr;
    std::uint32_t frame_len = 0;
    frame::FrameInfo info;
    Arrival arrival;

    std::uint8_t* shesha() { return frame + info.payload_offset; }
    proto::Message decoded() {
        proto::Message m;
        const auto err = proto::decode({frame + info.payload_offset, info.payload_len}, m);
        REQUIRE(err == proto::DecodeError::Ok);
        return m;
    }
    std::vector<float> elements() {
        const auto m = decoded();
        std::vector<float> v(m.hdr.elem_count);
        std::memcpy(v.data(), m.payload.data(), v.size() * sizeof(float));
        return v;
    }
    std::uint16_t udp_checksum_field() const {
        const std::uint8_t* udp = frame + info.l4_offset;
        return static_cast<std::uint16_t>((udp[6] << 8) | udp[7]);
    }
    std::uint8_t ip_ecn() const { return frame[info.l3_offset + 1] & 3u; }
    bool ip_checksum_valid() const {
        const std::uint8_t* ip = frame + info.l3_offset;
        const std::uint16_t stored = static_cast<std::uint16_t>((ip[10] << 8) | ip[11]);
        return frame::ipv4_header_checksum(ip, 20) == stored;
    }
};

frame::Endpoints endpoints(std::uint32_t dst_ip, std::uint8_t ecn) {
    frame::Endpoints ep;
    ep.src_mac = {0x02, 0, 0, 0, 0, 1};
    ep.dst_mac = {0x02, 0, 0, 0, 0, 2};
    ep.src_ip = 0x0A000001;
    ep.dst_ip = dst_ip;
    ep.src_port = 40000;
    ep.dst_port = proto::kDefaultUdpPort;
    ep.ecn = ecn;
    return ep;
}

// Owns packets so that their frames stay put while the queue holds them.
struct Pool {
    std::deque<Packet> packets;

    Packet& finish(Packet& p, std::size_t payload_len, const frame::Endpoints& ep) {
        const std::size_t len = frame::build_udp_frame(ep, payload_len, {p.frame, p.storage.size() - 1});
        REQUIRE(len != 0);
        p.frame_len = static_cast<std::uint32_t>(len);
        p.info = frame::classify({p.frame, p.frame_len}, proto::kDefaultUdpPort);
        return p;
    }

    Packet& gradient(const GradSpec& s) {
        Packet& p = packets.emplace_back();
        p.storage.assign(1 + frame::kUdpPayloadOffset + proto::kHeaderSize + s.values.size() * 4 + 64, 0);
        p.frame = p.storage.data() + 1;
        proto::Header h;
        h.type = proto::MsgType::Gradient;
        h.flags = s.flags;
        h.cluster_id = s.cluster;
        h.worker_id = s.worker;
        h.model_version = s.version;
        h.seq = 1;
        h.chunk_index = s.chunk;
        h.chunk_count = 64;
        h.elem_count = static_cast<std::uint16_t>(s.values.size());
        h.contrib_count = s.contrib;
        h.packet_count = s.packets;
        h.ts_earliest_ns = s.ts;
        h.ts_latest_ns = s.ts;
        const std::span<const std::uint8_t> body(reinterpret_cast<const std::uint8_t*>(s.values.data()),
                                                 s.values.size() * 4);
        const std::size_t n = proto::encode(
            h, body, {p.frame + frame::kUdpPayloadOffset, p.storage.size() - 1 - frame::kUdpPayloadOffset});
        REQUIRE(n == proto::kHeaderSize + s.values.size() * 4);
        finish(p, n, endpoints(s.dst_ip, s.ecn));
        REQUIRE(p.info.kind == frame::FrameKind::Shesha);
        REQUIRE(p.udp_checksum_field() != 0);

        Arrival& a = p.arrival;
        a.handle = &p;
        a.frame = p.frame;
        a.frame_len = p.frame_len;
        a.contributions = s.contrib;
        a.mergeable = s.mergeable;
        a.l3_offset = p.info.l3_offset;
        a.l4_offset = p.info.l4_offset;
        a.shesha_offset = p.info.payload_offset;
        a.cluster_id = s.cluster;
        a.chunk_index = s.chunk;
        a.elem_count = h.elem_count;
        a.model_version = s.version;
        a.dst_ip = s.dst_ip;
        a.version_tolerance = s.tolerance;
        return p;
    }

    // A plain UDP datagram to another port: not a Shesha message.
    Packet& plain(std::size_t payload_len, std::uint8_t ecn = 0) {
        Packet& p = packets.emplace_back();
        p.storage.assign(1 + frame::kUdpPayloadOffset + payload_len + 16, 0x11);
        p.frame = p.storage.data() + 1;
        frame::Endpoints ep = endpoints(kDstA, ecn);
        ep.dst_port = 5001;
        finish(p, payload_len, ep);
        Arrival& a = p.arrival;
        a.handle = &p;
        a.frame = p.frame;
        a.frame_len = p.frame_len;
        a.l3_offset = p.info.l3_offset;
        a.l4_offset = p.info.l4_offset;
        return p;
    }
};

Packet& handle_packet(const Departure& d) { return *static_cast<Packet*>(d.handle); }

QueueConfig config(std::uint32_t packets = 64, std::uint64_t bytes = 1u << 20) {
    QueueConfig c;
    c.capacity_packets = packets;
    c.capacity_bytes = bytes;
    return c;
}

}  // namespace

TEST_CASE("queue is FIFO and tracks depth, bytes and the head length", "[queue]") {
    Pool pool;
    AggregatingQueue q(config(8));
    CHECK(q.capacity() == 8);
    CHECK(q.front_len() == 0);
    std::vector<Packet*> sent;
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < 6; ++i) {
        Packet& p = pool.plain(100 + i * 10);
        sent.push_back(&p);
        total += p.frame_len;
        CHECK(q.enqueue(p.arrival, i).status == EnqueueStatus::Queued);
    }
    CHECK(q.depth() == 6);
    CHECK(q.depth_bytes() == total);
    for (std::size_t i = 0; i < 6; ++i) {
        CHECK(q.front_len() == sent[i]->frame_len);
        Departure d;
        REQUIRE(q.dequeue(100, d));
        CHECK(d.handle == sent[i]);
        CHECK(d.frame == sent[i]->frame);
        CHECK(d.frame_len == sent[i]->frame_len);
        CHECK(d.contributions == 0);  // plain frames carry no update
        CHECK(d.sojourn_ticks == 100 - i);
        CHECK_FALSE(d.marked);
    }
    Departure d;
    CHECK_FALSE(q.dequeue(200, d));
    CHECK(q.depth() == 0);
    CHECK(q.depth_bytes() == 0);
    // The ring wraps correctly: many more packets than slots pass through in order.
    for (std::size_t round = 0; round < 5; ++round) {
        Packet& a = pool.plain(60);
        Packet& b = pool.plain(61);
        REQUIRE(q.enqueue(a.arrival, 0).status == EnqueueStatus::Queued);
        REQUIRE(q.enqueue(b.arrival, 0).status == EnqueueStatus::Queued);
        REQUIRE(q.dequeue(0, d));
        CHECK(d.handle == &a);
        REQUIRE(q.dequeue(0, d));
        CHECK(d.handle == &b);
    }
}

TEST_CASE("k compatible gradients leave as one packet carrying the exact sum", "[queue]") {
    const auto level = GENERATE(SimdLevel::Scalar, SimdLevel::Avx2, SimdLevel::Avx512);
    set_simd_level(level);
    Pool pool;
    AggregatingQueue q(config());
    constexpr int k = 7;
    constexpr std::size_t n = 1027;  // not a multiple of any vector width
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> dist(-3.0f, 3.0f);

    std::vector<float> expected(n);
    std::uint64_t bytes_saved = 0;
    Packet* first = nullptr;
    for (int i = 0; i < k; ++i) {
        GradSpec s;
        s.worker = static_cast<std::uint32_t>(i + 1);
        s.ts = 5000 - static_cast<std::uint64_t>(i) * 100 + (i % 2) * 1000;  // not monotonic
        s.values.resize(n);
        for (auto& x : s.values) x = dist(rng);
        s.values[0] = 1.0f;
        for (std::size_t j = 0; j < n; ++j) expected[j] = i == 0 ? s.values[j] : expected[j] + s.values[j];
        Packet& p = pool.gradient(s);
        const auto r = q.enqueue(p.arrival, static_cast<std::uint64_t>(i));
        if (i == 0) {
            CHECK(r.status == EnqueueStatus::Queued);
            first = &p;
        } else {
            CHECK(r.status == EnqueueStatus::Merged);
            bytes_saved += p.frame_len;
        }
        CHECK(q.depth() == 1);
    }
    CHECK(q.depth_bytes() == first->frame_len);
    Departure d;
    REQUIRE(q.dequeue(10, d));
    CHECK(d.handle == first);
    CHECK(d.contributions == k);
    CHECK(d.sojourn_ticks == 10);
    Packet& out = handle_packet(d);
    const proto::Message m = out.decoded();
    CHECK(m.hdr.contrib_count == k);
    CHECK(m.hdr.packet_count == k);
    CHECK(m.hdr.flags == proto::flag::kMerged);
    CHECK(m.hdr.ts_earliest_ns == 5000 - 6 * 100);
    CHECK(m.hdr.ts_latest_ns == 5000 - 1 * 100 + 1000);
    CHECK(m.hdr.model_version == 10);
    CHECK(out.udp_checksum_field() == 0);  // payload changed: checksum dropped, not left wrong
    const auto got = out.elements();
    REQUIRE(got.size() == n);
    std::size_t mismatches = 0;
    for (std::size_t j = 0; j < n; ++j) mismatches += bits_of(got[j]) != bits_of(expected[j]);
    CHECK(mismatches == 0);
    CHECK(got[0] == static_cast<float>(k));

    const QueueStats& st = q.stats();
    CHECK(st.enqueued == 1);
    CHECK(st.merged == k - 1);
    CHECK(st.mergeable_arrivals == k);
    CHECK(st.bytes_saved == bytes_saved);
    CHECK(st.merge_refused == 0);
    CHECK(st.dequeued == 1);
    set_simd_level(detect_simd());
}

TEST_CASE("a merge sums packet counts, not contributions; an unknown count stays unknown", "[queue]") {
    Pool pool;
    AggregatingQueue q(config());
    GradSpec sender_merged;
    sender_merged.contrib = 47;
    sender_merged.flags = proto::flag::kSenderMerged;
    Packet& a = pool.gradient(sender_merged);
    sender_merged.worker = 2;
    sender_merged.contrib = 40;
    Packet& b = pool.gradient(sender_merged);
    REQUIRE(q.enqueue(a.arrival, 0).status == EnqueueStatus::Queued);
    REQUIRE(q.enqueue(b.arrival, 0).status == EnqueueStatus::Merged);
    GradSpec no_count;
    no_count.worker = 3;
    no_count.chunk = 1;
    Packet& c = pool.gradient(no_count);
    no_count.worker = 4;
    no_count.packets = 0;
    Packet& d = pool.gradient(no_count);
    REQUIRE(q.enqueue(c.arrival, 0).status == EnqueueStatus::Queued);
    REQUIRE(q.enqueue(d.arrival, 0).status == EnqueueStatus::Merged);
    Departure out;
    REQUIRE(q.dequeue(1, out));
    proto::Message m = handle_packet(out).decoded();
    CHECK(m.hdr.contrib_count == 87);
    CHECK(m.hdr.packet_count == 2);
    CHECK(m.hdr.flags == (proto::flag::kMerged | proto::flag::kSenderMerged));
    REQUIRE(q.dequeue(1, out));
    m = handle_packet(out).decoded();
    CHECK(m.hdr.contrib_count == 2);
    CHECK(m.hdr.packet_count == 0);
}

TEST_CASE("nothing merges into a packet already dequeued", "[queue]") {
    Pool pool;
    AggregatingQueue q(config());
    Packet& a = pool.gradient({});
    Packet& b = pool.gradient({});
    REQUIRE(q.enqueue(a.arrival, 0).status == EnqueueStatus::Queued);
    Departure d;
    REQUIRE(q.dequeue(1, d));
    CHECK(q.enqueue(b.arrival, 2).status == EnqueueStatus::Queued);
    CHECK(a.elements() == std::vector<float>{1.0f, 2.0f, 3.0f});
    CHECK(a.decoded().hdr.contrib_count == 1);
    CHECK(q.stats().merged == 0);
    // And the next arrival merges into b, the packet now waiting.
    Packet& c = pool.gradient({});
    CHECK(q.enqueue(c.arrival, 3).status == EnqueueStatus::Merged);
    CHECK(b.elements() == std::vector<float>{2.0f, 4.0f, 6.0f});
    CHECK(a.elements() == std::vector<float>{1.0f, 2.0f, 3.0f});
}

TEST_CASE("the ring slot reused after a dequeue is not a stale merge target", "[queue]") {
    Pool pool;
    AggregatingQueue q(config(2));
    REQUIRE(q.capacity() == 2);
    Packet& g1 = pool.gradient({});
    Packet& x = pool.plain(50);
    REQUIRE(q.enqueue(g1.arrival, 0).status == EnqueueStatus::Queued);
    REQUIRE(q.enqueue(x.arrival, 0).status == EnqueueStatus::Queued);
    Departure d;
    REQUIRE(q.dequeue(0, d));  // g1 leaves; its slot will be reused by y
    Packet& y = pool.plain(50);
    REQUIRE(q.enqueue(y.arrival, 0).status == EnqueueStatus::Queued);
    Packet& g2 = pool.gradient({});
    CHECK(q.enqueue(g2.arrival, 0).status == EnqueueStatus::DroppedFull);  // not merged into y
    CHECK(q.stats().merged == 0);
}

TEST_CASE("version tolerance decides merges; the merged version is the oldest", "[queue]") {
    Pool pool;
    AggregatingQueue q(config());
    GradSpec s;
    s.version = 10;
    Packet& w = pool.gradient(s);
    REQUIRE(q.enqueue(w.arrival, 0).status == EnqueueStatus::Queued);

    SECTION("tolerance 0: versions 11 and 9 queue separately") {
        s.version = 11;
        CHECK(q.enqueue(pool.gradient(s).arrival, 1).status == EnqueueStatus::Queued);
        s.version = 9;
        CHECK(q.enqueue(pool.gradient(s).arrival, 1).status == EnqueueStatus::Queued);
        CHECK(q.depth() == 3);
        CHECK(q.stats().merge_refused == 0);
    }
    SECTION("tolerance 1: version 11 merges, version 12 does not") {
        s.tolerance = 1;
        s.version = 11;
        CHECK(q.enqueue(pool.gradient(s).arrival, 1).status == EnqueueStatus::Merged);
        CHECK(w.decoded().hdr.model_version == 10);
        s.version = 12;
        CHECK(q.enqueue(pool.gradient(s).arrival, 1).status == EnqueueStatus::Queued);
        CHECK(q.depth() == 2);
    }
    SECTION("tolerance 1: merging an older version re-keys the waiting packet") {
        s.tolerance = 1;
        s.version = 9;
        CHECK(q.enqueue(pool.gradient(s).arrival, 1).status == EnqueueStatus::Merged);
        CHECK(w.decoded().hdr.model_version == 9);
        // Within 1 of the merged packet's version 9, but 2 away from its newest contribution 10:
        // merging would spread the packet over versions 8..10, beyond the tolerance.
        s.version = 8;
        Packet& w8 = pool.gradient(s);
        CHECK(q.enqueue(w8.arrival, 1).status == EnqueueStatus::Queued);
        CHECK(w.decoded().hdr.model_version == 9);
        CHECK(w.decoded().hdr.contrib_count == 2);
        s.version = 10;  // spread 9..10 with the first packet: merges there, not into 8
        CHECK(q.enqueue(pool.gradient(s).arrival, 1).status == EnqueueStatus::Merged);
        CHECK(w.decoded().hdr.contrib_count == 3);
        CHECK(w8.decoded().hdr.contrib_count == 1);
        CHECK(q.depth() == 2);
    }
    SECTION("the exact version is preferred over a neighbour") {
        s.version = 11;
        Packet& w11 = pool.gradient(s);
        REQUIRE(q.enqueue(w11.arrival, 1).status == EnqueueStatus::Queued);
        s.tolerance = 1;
        CHECK(q.enqueue(pool.gradient(s).arrival, 1).status == EnqueueStatus::Merged);
        CHECK(w11.decoded().hdr.contrib_count == 2);
        CHECK(w.decoded().hdr.contrib_count == 1);
    }
    SECTION("tolerance is capped at 16") {
        s.tolerance = 1000;
        s.version = 27;
        CHECK(q.enqueue(pool.gradient(s).arrival, 1).status == EnqueueStatus::Queued);
        s.version = 26;
        CHECK(q.enqueue(pool.gradient(s).arrival, 1).status == EnqueueStatus::Merged);
        CHECK(w.decoded().hdr.contrib_count == 1);  // 26 merged into 27, the nearer one
    }
}

TEST_CASE("version tolerance bounds the spread of a merged packet: max - min <= tolerance", "[queue]") {
    // Issue 11: with tolerance 2 a merged packet was seen carrying versions 100 and 103, because
    // each arrival was compared only with the waiting packet's current minimum.
    Pool pool;
    AggregatingQueue q(config());
    GradSpec s;
    s.tolerance = 2;
    s.version = 100;
    Packet& first = pool.gradient(s);
    REQUIRE(q.enqueue(first.arrival, 0).status == EnqueueStatus::Queued);
    s.version = 102;  // spread 100..102
    CHECK(q.enqueue(pool.gradient(s).arrival, 0).status == EnqueueStatus::Merged);
    s.version = 103;  // would spread 100..103: waits on its own
    Packet& late = pool.gradient(s);
    CHECK(q.enqueue(late.arrival, 0).status == EnqueueStatus::Queued);
    s.version = 101;  // 100..102 still: joins the first packet (the nearer key 100, d = 1)
    CHECK(q.enqueue(pool.gradient(s).arrival, 0).status == EnqueueStatus::Merged);
    s.version = 98;   // would spread 98..102 with the first, 98..103 with the late one
    CHECK(q.enqueue(pool.gradient(s).arrival, 0).status == EnqueueStatus::Queued);
    CHECK(first.decoded().hdr.contrib_count == 3);
    CHECK(first.decoded().hdr.model_version == 100);
    CHECK(late.decoded().hdr.contrib_count == 1);
    CHECK(q.depth() == 3);
    CHECK(q.stats().merged == 2);
}

TEST_CASE("versions near 0 and UINT32_MAX do not wrap around", "[queue]") {
    Pool pool;
    AggregatingQueue q(config());
    GradSpec s;
    s.version = 0xFFFFFFFFu;
    REQUIRE(q.enqueue(pool.gradient(s).arrival, 0).status == EnqueueStatus::Queued);
    s.version = 0;
    s.tolerance = 2;
    CHECK(q.enqueue(pool.gradient(s).arrival, 0).status == EnqueueStatus::Queued);
    s.version = 1;
    CHECK(q.enqueue(pool.gradient(s).arrival, 0).status == EnqueueStatus::Merged);
    s.version = 0xFFFFFFFEu;
    CHECK(q.enqueue(pool.gradient(s).arrival, 0).status == EnqueueStatus::Merged);
    CHECK(q.depth() == 2);
}

TEST_CASE("aggregation off is a plain FIFO", "[queue]") {
    Pool pool;
    QueueConfig c = config();
    c.aggregation = false;
    AggregatingQueue q(c);
    std::vector<Packet*> sent;
    for (int i = 0; i < 5; ++i) {
        sent.push_back(&pool.gradient({}));
        CHECK(q.enqueue(sent.back()->arrival, 0).status == EnqueueStatus::Queued);
    }
    CHECK(q.depth() == 5);
    CHECK(q.stats().merged == 0);
    CHECK(q.stats().mergeable_arrivals == 0);
    for (int i = 0; i < 5; ++i) {
        Departure d;
        REQUIRE(q.dequeue(0, d));
        CHECK(d.handle == sent[static_cast<std::size_t>(i)]);
        CHECK(handle_packet(d).elements() == std::vector<float>{1.0f, 2.0f, 3.0f});
    }
    // Switching it on at run time: merging starts with the next packets.
    q.set_aggregation(true);
    CHECK(q.config().aggregation);
    REQUIRE(q.enqueue(pool.gradient({}).arrival, 0).status == EnqueueStatus::Queued);
    CHECK(q.enqueue(pool.gradient({}).arrival, 0).status == EnqueueStatus::Merged);
    // And off again: packets queued while it was on are no longer merged into.
    q.set_aggregation(false);
    CHECK(q.enqueue(pool.gradient({}).arrival, 0).status == EnqueueStatus::Queued);
    CHECK(q.depth() == 2);
}

TEST_CASE("arrivals not flagged mergeable never merge", "[queue]") {
    Pool pool;
    AggregatingQueue q(config());
    GradSpec s;
    s.mergeable = false;
    REQUIRE(q.enqueue(pool.gradient({}).arrival, 0).status == EnqueueStatus::Queued);
    CHECK(q.enqueue(pool.gradient(s).arrival, 0).status == EnqueueStatus::Queued);
    // A non-mergeable packet is not a target either.
    AggregatingQueue q2(config());
    REQUIRE(q2.enqueue(pool.gradient(s).arrival, 0).status == EnqueueStatus::Queued);
    CHECK(q2.enqueue(pool.gradient({}).arrival, 0).status == EnqueueStatus::Queued);
    CHECK(q.stats().mergeable_arrivals == 1);
    CHECK(q2.stats().mergeable_arrivals == 1);
}

TEST_CASE("different destination, element count, cluster or chunk never merge", "[queue]") {
    Pool pool;
    AggregatingQueue q(config());
    Packet& w = pool.gradient({});
    REQUIRE(q.enqueue(w.arrival, 0).status == EnqueueStatus::Queued);

    GradSpec other_dst;
    other_dst.dst_ip = kDstB;
    CHECK(q.enqueue(pool.gradient(other_dst).arrival, 0).status == EnqueueStatus::Queued);
    CHECK(q.stats().merge_refused == 0);  // another flow, not a refusal

    GradSpec other_len;
    other_len.values = {1.0f, 2.0f, 3.0f, 4.0f};
    CHECK(q.enqueue(pool.gradient(other_len).arrival, 0).status == EnqueueStatus::Queued);

    GradSpec other_cluster;
    other_cluster.cluster = 2;
    CHECK(q.enqueue(pool.gradient(other_cluster).arrival, 0).status == EnqueueStatus::Queued);

    GradSpec other_chunk;
    other_chunk.chunk = 1;
    CHECK(q.enqueue(pool.gradient(other_chunk).arrival, 0).status == EnqueueStatus::Queued);

    CHECK(q.depth() == 5);
    CHECK(q.stats().merged == 0);
    CHECK(w.elements() == std::vector<float>{1.0f, 2.0f, 3.0f});
    CHECK(w.decoded().hdr.contrib_count == 1);
    CHECK(w.udp_checksum_field() != 0);
}

TEST_CASE("a length mismatch under the same key is a refused merge", "[queue]") {
    Pool pool;
    AggregatingQueue q(config());
    REQUIRE(q.enqueue(pool.gradient({}).arrival, 0).status == EnqueueStatus::Queued);
    GradSpec longer;
    longer.values = {1.0f, 2.0f, 3.0f, 4.0f};
    CHECK(q.enqueue(pool.gradient(longer).arrival, 0).status == EnqueueStatus::Queued);
    CHECK(q.stats().merge_refused == 1);
    // The 4-element packet is now the key's target: a 4-element arrival merges into it.
    CHECK(q.enqueue(pool.gradient(longer).arrival, 0).status == EnqueueStatus::Merged);
}

TEST_CASE("a mergeable arrival whose elements overrun its frame is queued, not merged", "[queue]") {
    Pool pool;
    AggregatingQueue q(config());
    REQUIRE(q.enqueue(pool.gradient({}).arrival, 0).status == EnqueueStatus::Queued);
    Packet& bad = pool.gradient({});
    bad.arrival.elem_count = 2000;  // classifier bug: claims more elements than the frame holds
    bad.arrival.frame_len = pool.packets.front().frame_len;
    CHECK(q.enqueue(bad.arrival, 0).status == EnqueueStatus::Queued);
    CHECK(q.stats().merged == 0);
}

TEST_CASE("contribution counts that would overflow 0xFFFF are refused", "[queue]") {
    Pool pool;
    AggregatingQueue q(config());
    GradSpec big;
    big.contrib = 0xFFFE;
    big.flags = proto::flag::kSenderMerged;
    Packet& w = pool.gradient(big);
    REQUIRE(q.enqueue(w.arrival, 0).status == EnqueueStatus::Queued);

    GradSpec two;
    two.contrib = 2;
    two.flags = proto::flag::kSenderMerged;
    Packet& t = pool.gradient(two);
    CHECK(q.enqueue(t.arrival, 0).status == EnqueueStatus::Queued);  // 0xFFFE + 2 > 0xFFFF
    CHECK(q.stats().merge_refused == 1);
    CHECK(w.decoded().hdr.contrib_count == 0xFFFE);

    // The refused packet became the key's target; one more single contribution merges into it.
    Packet& one = pool.gradient({});
    CHECK(q.enqueue(one.arrival, 0).status == EnqueueStatus::Merged);
    CHECK(t.decoded().hdr.contrib_count == 3);
    CHECK(t.decoded().hdr.flags == (proto::flag::kSenderMerged | proto::flag::kMerged));

    // Exactly 0xFFFF is allowed.
    AggregatingQueue q2(config());
    Packet& w2 = pool.gradient(big);
    REQUIRE(q2.enqueue(w2.arrival, 0).status == EnqueueStatus::Queued);
    CHECK(q2.enqueue(pool.gradient({}).arrival, 0).status == EnqueueStatus::Merged);
    CHECK(w2.decoded().hdr.contrib_count == 0xFFFF);
    CHECK(q2.enqueue(pool.gradient({}).arrival, 0).status == EnqueueStatus::Queued);
    CHECK(q2.stats().merge_refused == 1);
    Departure d;
    REQUIRE(q2.dequeue(0, d));
    CHECK(d.contributions == 0xFFFF);
}

TEST_CASE("tail drop on packet capacity", "[queue]") {
    Pool pool;
    AggregatingQueue q(config(5));  // rounded up to 8 slots
    CHECK(q.capacity() == 8);
    std::uint64_t dropped_bytes = 0;
    for (int i = 0; i < 11; ++i) {
        Packet& p = pool.plain(100);
        const auto r = q.enqueue(p.arrival, 0);
        CHECK(r.status == (i < 8 ? EnqueueStatus::Queued : EnqueueStatus::DroppedFull));
        if (i >= 8) dropped_bytes += p.frame_len;
    }
    CHECK(q.depth() == 8);
    CHECK(q.stats().dropped == 3);
    CHECK(q.stats().dropped_bytes == dropped_bytes);
    CHECK(q.stats().enqueued == 8);
    // A compatible gradient still merges into a full queue: it needs no slot.
    AggregatingQueue g(config(2));
    REQUIRE(g.enqueue(pool.gradient({}).arrival, 0).status == EnqueueStatus::Queued);
    REQUIRE(g.enqueue(pool.plain(10).arrival, 0).status == EnqueueStatus::Queued);
    CHECK(g.enqueue(pool.plain(10).arrival, 0).status == EnqueueStatus::DroppedFull);
    CHECK(g.enqueue(pool.gradient({}).arrival, 0).status == EnqueueStatus::Merged);
    CHECK(g.stats().dropped == 1);
}

TEST_CASE("tail drop on byte capacity", "[queue]") {
    Pool pool;
    Packet& first = pool.plain(200);
    const std::uint32_t len = first.frame_len;
    AggregatingQueue q(config(64, std::uint64_t{len} * 2 + len / 2));
    CHECK(q.enqueue(first.arrival, 0).status == EnqueueStatus::Queued);
    CHECK(q.enqueue(pool.plain(200).arrival, 0).status == EnqueueStatus::Queued);
    Packet& third = pool.plain(200);
    CHECK(q.enqueue(third.arrival, 0).status == EnqueueStatus::DroppedFull);
    // A smaller packet that fits in what is left is taken.
    Packet& small = pool.plain(10);
    REQUIRE(small.frame_len <= len / 2);
    CHECK(q.enqueue(small.arrival, 0).status == EnqueueStatus::Queued);
    CHECK(q.depth_bytes() == 2u * len + small.frame_len);
    CHECK(q.stats().dropped == 1);
    CHECK(q.stats().dropped_bytes == len);
    // Exactly full is allowed.
    AggregatingQueue exact(config(64, len));
    CHECK(exact.enqueue(pool.plain(200).arrival, 0).status == EnqueueStatus::Queued);
    CHECK(exact.enqueue(pool.plain(0).arrival, 0).status == EnqueueStatus::DroppedFull);
}

TEST_CASE("marking by depth sets CE in the Shesha header and in ECN-capable IPv4", "[queue]") {
    Pool pool;
    QueueConfig c = config();
    c.mark_depth_packets = 2;
    AggregatingQueue q(c);
    GradSpec ect;
    ect.ecn = 2;  // ECT(0)
    GradSpec not_ect;
    not_ect.ecn = 0;
    not_ect.chunk = 1;
    Packet& p0 = pool.gradient(ect);
    Packet& p1 = pool.plain(100, 1);
    CHECK_FALSE(q.enqueue(p0.arrival, 0).marked);  // depth 0
    CHECK_FALSE(q.enqueue(p1.arrival, 0).marked);  // depth 1
    Packet& p2 = pool.gradient(not_ect);           // depth 2: marked
    GradSpec ect_chunk2 = ect;
    ect_chunk2.chunk = 2;
    Packet& p3 = pool.gradient(ect_chunk2);        // depth 3: marked
    Packet& p4 = pool.plain(100, 1);                // depth 4: non-Shesha, ECT(1)
    Packet& p5 = pool.plain(100, 0);                // depth 5: non-Shesha, not ECT
    const std::vector<std::uint8_t> p5_before(p5.frame, p5.frame + p5.frame_len);
    for (Packet* p : {&p2, &p3, &p4, &p5}) {
        const auto r = q.enqueue(p->arrival, 0);
        CHECK(r.status == EnqueueStatus::Queued);
        CHECK(r.marked);
    }
    // Unmarked packets are untouched.
    CHECK(p0.decoded().hdr.flags == 0);
    CHECK(p0.ip_ecn() == 2);
    CHECK(p0.udp_checksum_field() != 0);
    CHECK(p1.ip_ecn() == 1);
    // Not ECT: Shesha CE flag only.
    CHECK(p2.decoded().hdr.flags == proto::flag::kCongestionExperienced);
    CHECK(p2.ip_ecn() == 0);
    CHECK(p2.udp_checksum_field() == 0);
    CHECK(p2.ip_checksum_valid());
    // ECT: both, with the IPv4 checksum still right.
    CHECK(p3.decoded().hdr.flags == proto::flag::kCongestionExperienced);
    CHECK(p3.ip_ecn() == 3);
    CHECK(p3.ip_checksum_valid());
    CHECK(frame::classify({p3.frame, p3.frame_len}, proto::kDefaultUdpPort).ecn == 3);
    // Non-Shesha: only ECN, payload untouched.
    CHECK(p4.ip_ecn() == 3);
    CHECK(p4.ip_checksum_valid());
    CHECK(std::vector<std::uint8_t>(p5.frame, p5.frame + p5.frame_len) == p5_before);

    const QueueStats& st = q.stats();
    CHECK(st.marked == 4);
    CHECK(st.ecn_ce_set == 2);
    std::vector<bool> marked;
    Departure d;
    while (q.dequeue(0, d)) marked.push_back(d.marked);
    CHECK(marked == std::vector<bool>{false, false, true, true, true, true});
}

TEST_CASE("mark_ip_ecn off leaves the IPv4 header alone", "[queue]") {
    Pool pool;
    QueueConfig c = config();
    c.mark_depth_packets = 1;
    c.mark_ip_ecn = false;
    AggregatingQueue q(c);
    GradSpec ect;
    ect.ecn = 2;
    REQUIRE(q.enqueue(pool.plain(10).arrival, 0).status == EnqueueStatus::Queued);
    Packet& p = pool.gradient(ect);
    CHECK(q.enqueue(p.arrival, 0).marked);
    CHECK(p.ip_ecn() == 2);
    CHECK(p.decoded().hdr.flags == proto::flag::kCongestionExperienced);
    CHECK(q.stats().marked == 1);
    CHECK(q.stats().ecn_ce_set == 0);
}

TEST_CASE("marking by sojourn at dequeue, once per packet", "[queue]") {
    Pool pool;
    QueueConfig c = config();
    c.mark_sojourn_ticks = 100;
    c.mark_depth_packets = 1;
    AggregatingQueue q(c);
    GradSpec ect;
    ect.ecn = 1;
    GradSpec ect1 = ect;
    ect1.chunk = 1;
    GradSpec ect2 = ect;
    ect2.chunk = 2;
    Packet& a = pool.gradient(ect);
    Packet& b = pool.gradient(ect1);  // depth-marked at enqueue, then waits long too
    Packet& e = pool.gradient(ect2);
    REQUIRE_FALSE(q.enqueue(a.arrival, 1000).marked);
    REQUIRE(q.enqueue(b.arrival, 1000).marked);
    REQUIRE(q.enqueue(e.arrival, 1050).marked);
    CHECK(q.stats().marked == 2);
    Departure d;
    REQUIRE(q.dequeue(1099, d));  // sojourn 99: below the threshold
    CHECK(d.handle == &a);
    CHECK_FALSE(d.marked);
    CHECK(a.decoded().hdr.flags == 0);
    CHECK(a.ip_ecn() == 1);
    REQUIRE(q.dequeue(1100, d));  // sojourn 100: already marked at enqueue, counted once
    CHECK(d.marked);
    CHECK(d.sojourn_ticks == 100);
    CHECK(q.stats().marked == 2);
    CHECK(q.stats().ecn_ce_set == 2);

    AggregatingQueue s(c);
    Packet& f = pool.gradient(ect);
    REQUIRE_FALSE(s.enqueue(f.arrival, 0).marked);
    REQUIRE(s.dequeue(100, d));  // sojourn exactly 100
    CHECK(d.marked);
    CHECK(f.decoded().hdr.flags == proto::flag::kCongestionExperienced);
    CHECK(f.ip_ecn() == 3);
    CHECK(f.ip_checksum_valid());
    CHECK(f.udp_checksum_field() == 0);
    CHECK(s.stats().marked == 1);
    CHECK(s.stats().ecn_ce_set == 1);
}

TEST_CASE("CE propagates through merges", "[queue]") {
    Pool pool;
    QueueConfig c = config();
    c.mark_depth_packets = 1;
    AggregatingQueue q(c);
    Packet& w = pool.gradient({});
    REQUIRE(q.enqueue(w.arrival, 0).status == EnqueueStatus::Queued);
    // An arrival that was CE-marked upstream passes its mark on to the packet it merges into.
    AggregatingQueue up(config());
    GradSpec ce;
    ce.flags = proto::flag::kCongestionExperienced;
    Packet& u = pool.gradient({});
    REQUIRE(up.enqueue(u.arrival, 0).status == EnqueueStatus::Queued);
    REQUIRE(up.enqueue(pool.gradient(ce).arrival, 0).status == EnqueueStatus::Merged);
    CHECK(u.decoded().hdr.flags == (proto::flag::kMerged | proto::flag::kCongestionExperienced));
    CHECK(up.stats().marked == 0);  // upstream marks are not this queue's marks

    // A merged arrival that hits the depth trigger marks the packet it merged into.
    const auto r = q.enqueue(pool.gradient({}).arrival, 0);
    CHECK(r.status == EnqueueStatus::Merged);
    CHECK(r.marked);
    CHECK(w.decoded().hdr.flags == (proto::flag::kMerged | proto::flag::kCongestionExperienced));
    CHECK(w.ip_ecn() == 3);
    CHECK(q.stats().marked == 1);
    CHECK(q.enqueue(pool.gradient({}).arrival, 0).marked);
    CHECK(q.stats().marked == 1);  // the same packet is counted once
}

TEST_CASE("statistics are exact over a mixed sequence", "[queue]") {
    Pool pool;
    QueueConfig c = config(4);
    c.mark_sojourn_ticks = 50;
    AggregatingQueue q(c);
    Packet& g0 = pool.gradient({});
    Packet& g1 = pool.gradient({});
    Packet& x0 = pool.plain(100);
    Packet& x1 = pool.plain(120);
    Packet& x2 = pool.plain(140);
    Packet& x3 = pool.plain(160);
    Departure d;
    REQUIRE(q.enqueue(g0.arrival, 0).status == EnqueueStatus::Queued);   // depth 0
    REQUIRE(q.enqueue(g1.arrival, 5).status == EnqueueStatus::Merged);   // depth 1
    REQUIRE(q.enqueue(x0.arrival, 10).status == EnqueueStatus::Queued);  // depth 1
    REQUIRE(q.enqueue(x1.arrival, 10).status == EnqueueStatus::Queued);  // depth 2
    REQUIRE(q.enqueue(x2.arrival, 20).status == EnqueueStatus::Queued);  // depth 3
    REQUIRE(q.enqueue(x3.arrival, 20).status == EnqueueStatus::DroppedFull);  // depth 4
    REQUIRE(q.dequeue(30, d));   // g0, sojourn 30
    REQUIRE(q.dequeue(70, d));   // x0, sojourn 60: marked
    REQUIRE(q.dequeue(70, d));   // x1, sojourn 60: marked
    REQUIRE(q.dequeue(75, d));   // x2, sojourn 55: marked
    const QueueStats& st = q.stats();
    CHECK(st.enqueued == 4);
    CHECK(st.enqueued_bytes == std::uint64_t{g0.frame_len} + x0.frame_len + x1.frame_len + x2.frame_len);
    CHECK(st.merged == 1);
    CHECK(st.bytes_saved == g1.frame_len);
    CHECK(st.merge_refused == 0);
    CHECK(st.mergeable_arrivals == 2);
    CHECK(st.dropped == 1);
    CHECK(st.dropped_bytes == x3.frame_len);
    CHECK(st.dequeued == 4);
    CHECK(st.dequeued_bytes == st.enqueued_bytes);
    CHECK(st.marked == 3);
    CHECK(st.ecn_ce_set == 0);  // plain packets are not ECN-capable here
    CHECK(st.depth_max == 4);
    CHECK(st.depth_sum == 0 + 1 + 1 + 2 + 3 + 4);
    CHECK(st.depth_samples == 6);
    CHECK(st.sojourn_sum_ticks == 30 + 60 + 60 + 55);
    CHECK(st.sojourn_max_ticks == 60);
    CHECK(q.depth() == 0);
    CHECK(q.depth_bytes() == 0);
}

TEST_CASE("count_bypass counts arrivals as enqueued and dequeued at depth 0, sojourn 0", "[queue]") {
    AggregatingQueue q(QueueConfig{});
    q.count_bypass(3, 180);
    q.count_bypass(0, 0);
    const QueueStats& st = q.stats();
    CHECK(st.bypassed == 3);
    CHECK(st.enqueued == 3);
    CHECK(st.enqueued_bytes == 180);
    CHECK(st.dequeued == 3);
    CHECK(st.dequeued_bytes == 180);
    CHECK(st.depth_samples == 3);
    CHECK(st.depth_sum == 0);
    CHECK(st.depth_max == 0);
    CHECK(st.sojourn_sum_ticks == 0);
    CHECK(st.sojourn_max_ticks == 0);
    CHECK(st.merged == 0);
    CHECK(st.dropped == 0);
    CHECK(st.marked == 0);
    CHECK(q.depth() == 0);  // no slot taken
    CHECK(q.depth_bytes() == 0);
    Departure d;
    CHECK_FALSE(q.dequeue(1, d));
}

TEST_CASE("random traffic matches a simple reference model", "[queue]") {
    // Reference: a list of waiting packets searched linearly by the same merge rule.
    struct RefPacket {
        Packet* p;
        std::uint16_t cluster, chunk, elems;
        std::uint32_t version, dst;
        std::vector<float> sum;
        std::uint32_t contrib;
    };
    Pool pool;
    QueueConfig c = config(16, 1u << 20);
    AggregatingQueue q(c);
    std::deque<RefPacket> ref;
    std::mt19937 rng(1234);
    std::uint64_t merged = 0, dropped = 0;
    for (int step = 0; step < 4000; ++step) {
        if (rng() % 3 == 0) {
            Departure d;
            const bool got = q.dequeue(0, d);
            REQUIRE(got == !ref.empty());
            if (!got) continue;
            RefPacket r = ref.front();
            ref.pop_front();
            REQUIRE(d.handle == r.p);
            REQUIRE(d.contributions == r.contrib);
            const auto els = r.p->elements();
            for (std::size_t i = 0; i < els.size(); ++i) REQUIRE(bits_of(els[i]) == bits_of(r.sum[i]));
            continue;
        }
        GradSpec s;
        s.cluster = static_cast<std::uint16_t>(rng() % 2);
        s.chunk = static_cast<std::uint16_t>(rng() % 3);
        s.version = 100 + rng() % 4;
        s.dst_ip = rng() % 5 == 0 ? kDstB : kDstA;
        s.values.assign(rng() % 7 == 0 ? 5 : 4, 0.0f);
        for (auto& v : s.values) v = static_cast<float>(rng() % 1000) / 7.0f;
        Packet& p = pool.gradient(s);
        // Reference decision: the newest waiting packet with the exact key (tolerance 0) is the
        // only candidate, and it must also match destination and length.
        RefPacket* target = nullptr;
        for (auto it = ref.rbegin(); it != ref.rend(); ++it) {
            if (it->cluster == s.cluster && it->chunk == s.chunk && it->version == s.version) {
                if (it->dst == s.dst_ip && it->elems == s.values.size()) target = &*it;
                break;
            }
        }
        const auto r = q.enqueue(p.arrival, 0);
        if (target != nullptr) {
            REQUIRE(r.status == EnqueueStatus::Merged);
            for (std::size_t i = 0; i < s.values.size(); ++i) target->sum[i] += s.values[i];
            ++target->contrib;
            ++merged;
        } else if (ref.size() == 16) {
            REQUIRE(r.status == EnqueueStatus::DroppedFull);
            ++dropped;
        } else {
            REQUIRE(r.status == EnqueueStatus::Queued);
            ref.push_back({&p, s.cluster, s.chunk, static_cast<std::uint16_t>(s.values.size()), s.version,
                           s.dst_ip, s.values, 1});
        }
        REQUIRE(q.depth() == ref.size());
    }
    CHECK(q.stats().merged == merged);
    CHECK(q.stats().dropped == dropped);
    CHECK(merged > 100);
    CHECK(dropped > 10);
}

TEST_CASE("dequeue_burst is the same as repeated dequeue", "[queue]") {
    // Three queues get the same arrivals (each with its own copies of the packets, since merging
    // writes into them); one is drained packet by packet, the others in bursts of random size,
    // into Departures and into the transmitter's three arrays.
    QueueConfig c = config(16, 1u << 20);
    c.mark_depth_packets = 6;
    c.mark_sojourn_ticks = 40;
    AggregatingQueue one(c);
    AggregatingQueue burst(c);
    AggregatingQueue arrays(c);
    Pool pool_one, pool_burst, pool_arrays;
    std::mt19937 rng(99);
    std::uint64_t now = 0;
    std::uint64_t departures = 0, merges = 0;
    for (int step = 0; step < 3000; ++step) {
        now += rng() % 7;
        if (rng() % 4 == 0) {
            const std::uint32_t max = 1 + rng() % 9;
            std::vector<Departure> got(max);
            const std::uint32_t n = burst.dequeue_burst(now, got.data(), max);
            REQUIRE(n == std::min(max, one.depth() + 0));
            std::vector<void*> handles(max);
            std::vector<std::uint32_t> lens(max);
            std::vector<std::uint16_t> contribs(max);
            REQUIRE(arrays.dequeue_burst(now, handles.data(), lens.data(), contribs.data(), max) == n);
            for (std::uint32_t i = 0; i < n; ++i) {
                Departure d;
                REQUIRE(one.dequeue(now, d));
                const Departure& b = got[i];
                REQUIRE(b.frame_len == d.frame_len);
                REQUIRE(b.contributions == d.contributions);
                REQUIRE(b.sojourn_ticks == d.sojourn_ticks);
                REQUIRE(b.marked == d.marked);
                REQUIRE(std::memcmp(b.frame, d.frame, d.frame_len) == 0);
                REQUIRE(b.frame == static_cast<Packet*>(b.handle)->frame);
                REQUIRE(lens[i] == d.frame_len);
                REQUIRE(contribs[i] == d.contributions);
                REQUIRE(std::memcmp(static_cast<Packet*>(handles[i])->frame, d.frame, d.frame_len) == 0);
                ++departures;
            }
            REQUIRE(burst.dequeue_burst(now, got.data(), 0) == 0);
            continue;
        }
        auto arrive = [&](Pool& pool) -> Packet& {
            if (step % 5 == 0) return pool.plain(64 + step % 3, 1);
            GradSpec s;
            s.chunk = static_cast<std::uint16_t>(step / 7 % 3);
            s.version = 100 + static_cast<std::uint32_t>(step / 11 % 3);
            s.tolerance = 1;
            s.values.assign(4, static_cast<float>(step % 13) / 3.0f);
            return pool.gradient(s);
        };
        Packet& p1 = arrive(pool_one);
        Packet& p2 = arrive(pool_burst);
        Packet& p3 = arrive(pool_arrays);
        const EnqueueResult r1 = one.enqueue(p1.arrival, now);
        const EnqueueResult r2 = burst.enqueue(p2.arrival, now);
        const EnqueueResult r3 = arrays.enqueue(p3.arrival, now);
        REQUIRE(r1.status == r2.status);
        REQUIRE(r1.marked == r2.marked);
        REQUIRE(r1.status == r3.status);
        REQUIRE(r1.marked == r3.marked);
        if (r1.status == EnqueueStatus::Merged) ++merges;
    }
    const QueueStats& a = one.stats();
    const QueueStats& b = burst.stats();
    CHECK(std::memcmp(&a, &b, sizeof a) == 0);
    CHECK(std::memcmp(&a, &arrays.stats(), sizeof a) == 0);
    CHECK(a.dequeued == departures);
    CHECK(a.merged == merges);
    CHECK(one.depth_bytes() == burst.depth_bytes());
    // The workload exercises merges, sojourn marks and depth marks.
    CHECK(merges > 100);
    CHECK(a.marked > 50);
    CHECK(departures > 500);
}

TEST_CASE("enqueue_burst is the same as repeated enqueue", "[queue]") {
    // Bursts of mixed plain packets and gradients (merges, refusals, drops, depth marks) at one
    // instant each; one queue takes them one by one, the other a burst at a time.
    QueueConfig c = config(8, 1u << 20);
    c.mark_depth_packets = 5;
    AggregatingQueue one(c);
    AggregatingQueue burst(c);
    Pool pool_one, pool_burst;
    std::mt19937 rng(5);
    std::uint64_t now = 0;
    std::uint64_t merged = 0, dropped = 0;
    for (int round = 0; round < 400; ++round) {
        now += 1 + rng() % 5;
        const std::uint32_t n = rng() % 12;
        std::vector<Arrival> arrivals;
        std::vector<EnqueueResult> expect;
        for (std::uint32_t i = 0; i < n; ++i) {
            const std::uint32_t kind = rng() % 4;
            const std::uint16_t chunk = static_cast<std::uint16_t>(rng() % 3);
            const std::size_t elems = rng() % 9 == 0 ? 5 : 4;
            auto make = [&](Pool& pool) -> Packet& {
                if (kind == 0) return pool.plain(80, 2);
                GradSpec s;
                s.chunk = chunk;
                s.values.assign(elems, 0.5f * static_cast<float>(i));
                return pool.gradient(s);
            };
            Packet& p1 = make(pool_one);
            Packet& p2 = make(pool_burst);
            expect.push_back(one.enqueue(p1.arrival, now));
            arrivals.push_back(p2.arrival);
        }
        std::vector<EnqueueResult> got(n);
        burst.enqueue_burst(arrivals.data(), n, now, got.data());
        for (std::uint32_t i = 0; i < n; ++i) {
            REQUIRE(got[i].status == expect[i].status);
            REQUIRE(got[i].marked == expect[i].marked);
            merged += got[i].status == EnqueueStatus::Merged;
            dropped += got[i].status == EnqueueStatus::DroppedFull;
        }
        // Drain a few from both, comparing what leaves.
        const std::uint32_t k = rng() % 10;
        for (std::uint32_t i = 0; i < k; ++i) {
            Departure a, b;
            const bool ga = one.dequeue(now, a);
            REQUIRE(burst.dequeue(now, b) == ga);
            if (!ga) break;
            REQUIRE(a.frame_len == b.frame_len);
            REQUIRE(a.contributions == b.contributions);
            REQUIRE(a.marked == b.marked);
            REQUIRE(std::memcmp(a.frame, b.frame, a.frame_len) == 0);
        }
    }
    const QueueStats& a = one.stats();
    const QueueStats& b = burst.stats();
    CHECK(std::memcmp(&a, &b, sizeof a) == 0);
    CHECK(merged > 100);
    CHECK(dropped > 100);
    CHECK(a.merge_refused > 10);
    CHECK(a.marked > 100);
    CHECK(a.ecn_ce_set > 10);
}

TEST_CASE("enqueue_burst of plain packets keeps exact statistics near every limit", "[queue]") {
    // Mostly bursts that cannot merge (the closed-form path), some that hit the packet or byte
    // limit or the marking depth, or carry a gradient (the per-arrival path); with aggregation on
    // and off, with depth marking and without (then the ring limit binds). Compared with one
    // enqueue() per packet, including the returned exception count.
    for (const int variant : {0, 1, 2}) {
        const bool aggregation = variant != 1;
        const bool marking = variant != 2;
        QueueConfig c = config(16, 6000);
        c.aggregation = aggregation;
        c.mark_depth_packets = marking ? 12 : 0;
        AggregatingQueue one(c);
        AggregatingQueue burst(c);
        Pool pool_one, pool_burst;
        std::mt19937 rng(17 + variant);
        std::uint64_t now = 0, fast_bursts = 0, exceptions_seen = 0;
        for (int round = 0; round < 600; ++round) {
            now += rng() % 4;
            const std::uint32_t n = rng() % 14;
            const bool with_gradient = rng() % 6 == 0;
            std::vector<Arrival> arrivals;
            std::vector<EnqueueResult> expect;
            std::uint32_t expect_exceptions = 0;
            for (std::uint32_t i = 0; i < n; ++i) {
                const std::size_t len = 40 + rng() % 400;
                const bool gradient = with_gradient && i == n / 2;
                Packet& p1 = gradient ? pool_one.gradient({}) : pool_one.plain(len, 1);
                Packet& p2 = gradient ? pool_burst.gradient({}) : pool_burst.plain(len, 1);
                expect.push_back(one.enqueue(p1.arrival, now));
                expect_exceptions += expect.back().status != EnqueueStatus::Queued || expect.back().marked;
                arrivals.push_back(p2.arrival);
            }
            const QueueStats before = burst.stats();
            std::vector<EnqueueResult> got(n);
            const std::uint32_t exceptions = burst.enqueue_burst(arrivals.data(), n, now, got.data());
            REQUIRE(exceptions == expect_exceptions);
            for (std::uint32_t i = 0; i < n; ++i) {
                REQUIRE(got[i].status == expect[i].status);
                REQUIRE(got[i].marked == expect[i].marked);
            }
            REQUIRE(std::memcmp(&one.stats(), &burst.stats(), sizeof(QueueStats)) == 0);
            REQUIRE(one.depth() == burst.depth());
            REQUIRE(one.depth_bytes() == burst.depth_bytes());
            fast_bursts += n > 1 && exceptions == 0 && burst.stats().depth_samples - before.depth_samples == n;
            exceptions_seen += exceptions;
            const std::uint32_t k = rng() % 12;
            for (std::uint32_t i = 0; i < k; ++i) {
                Departure a, b;
                const bool ga = one.dequeue(now, a);
                REQUIRE(burst.dequeue(now, b) == ga);
                if (!ga) break;
                REQUIRE(a.frame_len == b.frame_len);
                REQUIRE(a.marked == b.marked);
                REQUIRE(std::memcmp(a.frame, b.frame, a.frame_len) == 0);
            }
        }
        CHECK(fast_bursts > 100);
        CHECK(exceptions_seen > 100);
        CHECK(one.stats().dropped > 50);
        if (marking) CHECK(one.stats().marked > 20);
        if (aggregation) CHECK(one.stats().merged > 0);
        else CHECK(one.stats().merged == 0);
    }
}

TEST_CASE("per-cluster shares: a merged arrival adds contributions, not a waiting packet", "[queue][shares]") {
    Pool pool;
    const std::vector<SchedulingClass> classes{{1, 1}, {2, 1}};
    PortQueue q(config(), Scheduling::Fifo, classes);
    GradSpec one;  // cluster 1, chunk 0, version 10
    REQUIRE(q.enqueue(pool.gradient(one).arrival, 0).status == EnqueueStatus::Queued);
    one.worker = 2;
    REQUIRE(q.enqueue(pool.gradient(one).arrival, 1).status == EnqueueStatus::Merged);
    GradSpec two;
    two.cluster = 2;
    REQUIRE(q.enqueue(pool.gradient(two).arrival, 2).status == EnqueueStatus::Queued);
    Departure d;
    REQUIRE(q.dequeue(3, d));
    CHECK(d.contributions == 2);
    CHECK(d.cluster_id == 1);
    REQUIRE(q.dequeue(4, d));
    CHECK(d.cluster_id == 2);
    // Cluster 1's merged packet left while cluster 2 waited; cluster 2 then left alone (had the
    // merge counted as a second waiting packet of cluster 1, this departure would count as contended).
    REQUIRE(q.shares().size() == 2);
    CHECK(q.shares()[0].cluster_id == 1);
    CHECK(q.shares()[0].served == 2);
    CHECK(q.shares()[0].contended == 2);
    CHECK(q.shares()[1].served == 1);
    CHECK(q.shares()[1].contended == 0);
}

// Chunk following (docs/queue.md, "Chunk following"): after a head that carries merged
// contributions, the packets of its cluster and chunk that were waiting at that moment leave next,
// oldest first; the packets they pass keep their order; merge targets move with their packets.
namespace {
GradSpec spec(std::uint16_t chunk, std::uint32_t version, std::uint16_t cluster = 1) {
    GradSpec s;
    s.cluster = cluster;
    s.chunk = chunk;
    s.version = version;
    return s;
}
// (chunk, version, contributions) of a departure.
std::tuple<int, int, int> key_of(const Departure& d) {
    const proto::Message m = handle_packet(d).decoded();
    return {m.hdr.chunk_index, static_cast<int>(m.hdr.model_version), m.hdr.contrib_count};
}
std::tuple<int, int, int> next(AggregatingQueue& q) {
    q.follow_chunk();
    Departure d;
    REQUIRE(q.dequeue(0, d));
    return key_of(d);
}
}  // namespace

TEST_CASE("chunk following: a merged head's waiting chunk mates leave next, oldest first", "[queue][follow]") {
    Pool pool;
    AggregatingQueue q(config());
    // A = (0, v10) x2, B = (1, v10), C = (0, v11), D = (2, v10) x2, E = (0, v12)
    REQUIRE(q.enqueue(pool.gradient(spec(0, 10)).arrival, 0).status == EnqueueStatus::Queued);
    REQUIRE(q.enqueue(pool.gradient(spec(0, 10)).arrival, 0).status == EnqueueStatus::Merged);
    REQUIRE(q.enqueue(pool.gradient(spec(1, 10)).arrival, 0).status == EnqueueStatus::Queued);
    REQUIRE(q.enqueue(pool.gradient(spec(0, 11)).arrival, 0).status == EnqueueStatus::Queued);
    REQUIRE(q.enqueue(pool.gradient(spec(2, 10)).arrival, 0).status == EnqueueStatus::Queued);
    REQUIRE(q.enqueue(pool.gradient(spec(2, 10)).arrival, 0).status == EnqueueStatus::Merged);
    REQUIRE(q.enqueue(pool.gradient(spec(0, 12)).arrival, 0).status == EnqueueStatus::Queued);
    REQUIRE(q.depth() == 5);

    // A is a head of its own (nothing moves) and merged: its chunk's waiting packets follow it.
    CHECK_FALSE(q.follow_chunk());
    CHECK_FALSE(q.follow_chunk());  // idempotent until the next dequeue
    Departure d;
    REQUIRE(q.dequeue(0, d));
    CHECK(key_of(d) == std::tuple{0, 10, 2});
    // A packet of chunk 0 that arrives now was not waiting behind A: it does not follow.
    REQUIRE(q.enqueue(pool.gradient(spec(0, 13)).arrival, 0).status == EnqueueStatus::Queued);

    CHECK(q.follow_chunk());  // C to the head
    CHECK_FALSE(q.follow_chunk());
    CHECK(q.stats().followed == 1);
    CHECK(q.depth() == 5);
    // The index moved with the packets: arrivals still merge into C (now the head) and D (one place back).
    CHECK(q.enqueue(pool.gradient(spec(0, 11)).arrival, 0).status == EnqueueStatus::Merged);
    CHECK(q.enqueue(pool.gradient(spec(2, 10)).arrival, 0).status == EnqueueStatus::Merged);
    CHECK(q.enqueue(pool.gradient(spec(1, 10)).arrival, 0).status == EnqueueStatus::Merged);
    REQUIRE(q.dequeue(0, d));
    CHECK(key_of(d) == std::tuple{0, 11, 2});
    CHECK(next(q) == std::tuple{0, 12, 1});  // E, the last mate that was waiting behind A
    CHECK(q.stats().followed == 2);
    // Then FIFO again: B (merged: its chunk has no other packet), D (merged, none either), F.
    CHECK(next(q) == std::tuple{1, 10, 2});
    CHECK(next(q) == std::tuple{2, 10, 3});
    CHECK(next(q) == std::tuple{0, 13, 1});
    CHECK(q.depth() == 0);
    CHECK(q.stats().followed == 2);
    CHECK(q.stats().dequeued == 6);
}

TEST_CASE("chunk following: a head that did not merge keeps FIFO order; other clusters never follow",
          "[queue][follow]") {
    Pool pool;
    AggregatingQueue q(config());
    // Single contributions only: the head never merged, so nothing follows it.
    for (const auto& [chunk, version] : std::vector<std::pair<int, int>>{{0, 10}, {1, 10}, {0, 11}, {1, 11}})
        REQUIRE(q.enqueue(pool.gradient(spec(static_cast<std::uint16_t>(chunk), static_cast<std::uint32_t>(version))).arrival, 0)
                    .status == EnqueueStatus::Queued);
    CHECK(next(q) == std::tuple{0, 10, 1});
    CHECK(next(q) == std::tuple{1, 10, 1});
    CHECK(next(q) == std::tuple{0, 11, 1});
    CHECK(next(q) == std::tuple{1, 11, 1});
    CHECK(q.stats().followed == 0);

    // A merged head of cluster 1: cluster 2's packet of the same chunk index is not its mate.
    REQUIRE(q.enqueue(pool.gradient(spec(0, 10, 1)).arrival, 0).status == EnqueueStatus::Queued);
    REQUIRE(q.enqueue(pool.gradient(spec(0, 10, 1)).arrival, 0).status == EnqueueStatus::Merged);
    REQUIRE(q.enqueue(pool.gradient(spec(1, 10, 1)).arrival, 0).status == EnqueueStatus::Queued);
    REQUIRE(q.enqueue(pool.gradient(spec(0, 10, 2)).arrival, 0).status == EnqueueStatus::Queued);
    REQUIRE(q.enqueue(pool.gradient(spec(0, 11, 1)).arrival, 0).status == EnqueueStatus::Queued);
    CHECK(next(q) == std::tuple{0, 10, 2});
    CHECK(next(q) == std::tuple{0, 11, 1});  // cluster 1's chunk 0, past cluster 1's chunk 1 and cluster 2
    CHECK(next(q) == std::tuple{1, 10, 1});
    Departure d;
    q.follow_chunk();
    REQUIRE(q.dequeue(0, d));
    CHECK(handle_packet(d).decoded().hdr.cluster_id == 2);
    CHECK(q.stats().followed == 1);
}

TEST_CASE("PortQueue chunk_follow: each cluster class follows its chunks; turns and shares unchanged",
          "[port_queue][follow]") {
    const std::vector<SchedulingClass> classes{{1, 1}, {2, 1}};
    QueueConfig c = config();
    CHECK_FALSE(PortQueue(c, Scheduling::Fifo, classes, 1, 0, true).chunk_follow());  // FIFO: ignored
    CHECK_FALSE(PortQueue(c, Scheduling::Drr, classes, 1, 32).chunk_follow());        // off by default
    for (const std::uint32_t lag : {0u, 32u}) {
        PortQueue q(c, Scheduling::Drr, classes, 1, lag, true);
        CHECK(q.chunk_follow());
        Pool pool;
        // Each cluster: (0, v10) x2, (1, v10), (0, v11).
        for (const std::uint16_t cl : {1, 2}) {
            REQUIRE(q.enqueue(pool.gradient(spec(0, 10, cl)).arrival, 0).status == EnqueueStatus::Queued);
            REQUIRE(q.enqueue(pool.gradient(spec(0, 10, cl)).arrival, 0).status == EnqueueStatus::Merged);
            REQUIRE(q.enqueue(pool.gradient(spec(1, 10, cl)).arrival, 0).status == EnqueueStatus::Queued);
            REQUIRE(q.enqueue(pool.gradient(spec(0, 11, cl)).arrival, 0).status == EnqueueStatus::Queued);
        }
        std::vector<std::tuple<int, int, int, int>> order;  // (cluster, chunk, version, contributions)
        Departure d;
        while (q.front_len() != 0) {
            REQUIRE(q.dequeue(0, d));
            const proto::Message m = handle_packet(d).decoded();
            order.emplace_back(m.hdr.cluster_id, m.hdr.chunk_index, static_cast<int>(m.hdr.model_version), m.hdr.contrib_count);
        }
        // Each cluster's v11 chunk 0 follows its merged v10 chunk 0 within its class; the classes
        // alternate packet by packet as without chunk following (DRR counts packets).
        const std::vector<std::tuple<int, int, int, int>> expected{{1, 0, 10, 2}, {2, 0, 10, 2}, {1, 0, 11, 1},
                                                                   {2, 0, 11, 1}, {1, 1, 10, 1}, {2, 1, 10, 1}};
        CHECK(order == expected);
        CHECK(q.stats().followed == 2);
        CHECK(q.class_served(1) == 3);  // packets
        CHECK(q.class_served(2) == 3);
    }
}

// In-network MODEL replication (switch/core/replication.h) on the real pipeline, without DPDK:
// joins by model request, one copy per member with its own header (MAC, IP and checksum, UDP port,
// worker id) and the original payload, nothing to non-members or back to the learner, forged and
// non-member traffic counted and dropped, a full group, a member that moved ports and one that
// aged out of the FDB, no frame leaked; and the config's errors naming the key.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "big_endian.h"
#include "forwarding_frames.h"
#include "frame.h"
#include "memory_io.h"
#include "pipeline.h"
#include "protocol.h"
#include "switch_config.h"

using namespace shesha;
using namespace shesha::testing;

namespace {

constexpr std::uint64_t kHz = 1'000'000'000;  // fake clock: 1 tick = 1 ns
// Ports: p0 the learner (host 9), p1..p4 workers 1..4 (members), p5 host 5 (not a member).
struct Rig {
    static constexpr std::size_t kPorts = 6;

    static core::SwitchConfig config(std::uint32_t max_members = 64) {
        core::SwitchConfig cfg;
        cfg.burst = 32;
        cfg.mac_aging_s = 2;
        for (std::size_t i = 0; i < kPorts; ++i) {
            core::PortConfig p;
            p.name = fmt::format("p{}", i);
            p.device = "vector";
            p.queue_packets = 64;
            cfg.ports.push_back(p);
        }
        core::ClusterConfig c;
        c.id = kModelCluster;
        c.member_ips = {host_ip(1), host_ip(2), host_ip(3), host_ip(4)};
        c.model_replication = core::ModelReplicationConfig{kGroup, host_ip(kLearnerHost), max_members};
        cfg.clusters.push_back(c);
        return cfg;
    }

    explicit Rig(const core::SwitchConfig& cfg) : io(kPorts), pipeline(cfg, kHz, io) {}

    // Frames in on `port`, forwarded and transmitted in one round at `now`.
    void send(std::size_t port, const std::vector<std::uint8_t>& frame, std::uint64_t now) {
        core::MemoryFrame* f = io.make(frame);
        pipeline.receive_burst(rx, static_cast<std::uint16_t>(port), &f, 1, now);
        pipeline.transmit_all(now);
        pipeline.housekeeping(now);
    }
    // Every port's output since the last call, bytes only (frames freed).
    std::vector<std::vector<std::vector<std::uint8_t>>> take_all() {
        std::vector<std::vector<std::vector<std::uint8_t>>> out(kPorts);
        for (std::size_t p = 0; p < kPorts; ++p)
            for (core::MemoryFrame* f : io.take(p)) {
                out[p].push_back(f->bytes);
                io.free(f);
            }
        return out;
    }
    std::uint64_t counter(core::SwitchCounter c) const { return pipeline.egress()[c]; }

    core::MemoryIo io;
    core::SwitchCounters rx;
    core::Pipeline<core::MemoryIo> pipeline;
};

// Every member 1..n sends its model request; the learner (p0) sends one frame so it is learned.
void join_members(Rig& rig, std::uint8_t n, std::uint64_t now) {
    for (std::uint8_t w = 1; w <= n; ++w) rig.send(w, model_request(w), now);
    rig.send(0, l2_frame(mac(kLearnerHost), mac(1), 0x55), now);
    rig.take_all();
}

}  // namespace

TEST_CASE("a MODEL to the group reaches every member once, with that member's header", "[replication]") {
    Rig rig(Rig::config());
    std::uint64_t now = kHz;
    for (std::uint8_t w = 1; w <= 4; ++w) rig.send(w, model_request(w), now);
    // The requests travel on to the learner (flooded: the learner is not learned yet).
    auto out = rig.take_all();
    CHECK(out[0].size() == 4);
    CHECK(rig.counter(core::SwitchCounter::ModelJoined) == 4);
    rig.send(0, l2_frame(mac(kLearnerHost), mac(1), 0x55), now);
    rig.take_all();

    const auto original = group_model();
    const std::uint64_t sent_before = rig.pipeline.port(1).tx[core::PortCounter::TxPackets];
    rig.send(0, original, ++now);
    out = rig.take_all();
    CHECK(out[0].empty());  // nothing back to the learner's port
    CHECK(out[5].empty());  // nothing to the non-member
    for (std::uint8_t w = 1; w <= 4; ++w) {
        INFO("worker " << int(w));
        REQUIRE(out[w].size() == 1);
        const auto& copy = out[w][0];
        REQUIRE(copy.size() == original.size());
        CHECK(std::equal(copy.begin(), copy.begin() + 6, mac(w).begin()));         // destination MAC
        CHECK(std::equal(copy.begin() + 6, copy.begin() + 12, original.begin() + 6));  // source: the learner
        const std::uint8_t* ip = copy.data() + frame::kEthHeaderSize;
        CHECK(be::load32(ip + 16) == host_ip(w));
        CHECK(be::load32(ip + 12) == host_ip(kLearnerHost));
        CHECK(be::load16(ip + 10) == frame::ipv4_header_checksum(ip, 20));  // a valid IPv4 checksum
        const std::uint8_t* udp = ip + 20;
        CHECK(be::load16(udp + 2) == worker_port(w));
        CHECK(be::load16(udp + 6) == 0);  // no UDP checksum (allowed over IPv4)
        proto::Message m;
        REQUIRE(proto::decode({copy.data() + frame::kUdpPayloadOffset, copy.size() - frame::kUdpPayloadOffset}, m) ==
                proto::DecodeError::Ok);
        CHECK(m.hdr.worker_id == 100u + w);
        CHECK(m.hdr.model_version == 3);
        CHECK(m.hdr.chunk_index == 1);
        // The payload after the Shesha header is the original's, byte for byte.
        const std::size_t body = frame::kUdpPayloadOffset + proto::kHeaderSize;
        CHECK(std::equal(copy.begin() + static_cast<long>(body), copy.end(), original.begin() + static_cast<long>(body)));
    }
    CHECK(rig.counter(core::SwitchCounter::ModelReplicated) == 1);
    CHECK(rig.counter(core::SwitchCounter::ModelCopies) == 4);
    CHECK(rig.pipeline.port(1).tx[core::PortCounter::TxPackets] == sent_before + 1);
    CHECK(rig.io.alive == 0);  // the original and every copy freed
}

TEST_CASE("two pipelines in peer sync: joins and stations learned by one replicate on the other", "[replication]") {
    // As on a switch with two forwarding lcores: the workers' requests arrive at pipeline a, the
    // learner's MODEL at pipeline b.
    Rig a(Rig::config()), b(Rig::config());
    a.pipeline.start_peer_sync();
    b.pipeline.start_peer_sync();
    std::uint64_t now = kHz;
    for (std::uint8_t w = 1; w <= 4; ++w) a.send(w, model_request(w), now);
    a.take_all();
    std::vector<core::PeerUpdate> updates;
    a.pipeline.take_peer_updates([&](const core::PeerUpdate& u) { updates.push_back(u); });
    const auto joins = std::count_if(updates.begin(), updates.end(),
                                     [](const core::PeerUpdate& u) { return u.kind == core::PeerUpdate::Kind::Join; });
    CHECK(joins == 4);
    CHECK(updates.size() == 8);  // and the four workers' stations
    for (const auto& u : updates) b.pipeline.apply_peer_update(u);

    b.send(0, l2_frame(mac(kLearnerHost), mac(1), 0x55), now);
    b.take_all();
    b.send(0, group_model(), ++now);
    const auto out = b.take_all();
    for (std::uint8_t w = 1; w <= 4; ++w) CHECK(out[w].size() == 1);
    CHECK(out[5].empty());
    CHECK(b.counter(core::SwitchCounter::ModelCopies) == 4);
    CHECK(b.counter(core::SwitchCounter::ModelMemberPortUnknown) == 0);
    CHECK(b.counter(core::SwitchCounter::ModelJoined) == 0);  // counted where they joined
    CHECK(a.counter(core::SwitchCounter::ModelJoined) == 4);

    // The once-a-second export repeats a's stations seen since then and every member.
    std::size_t stations = 0, members = 0;
    a.pipeline.export_peer_state(kHz, [&](const core::PeerUpdate& u) {
        (u.kind == core::PeerUpdate::Kind::Join ? members : stations) += 1;
    });
    CHECK(stations == 4);
    CHECK(members == 4);
    CHECK(b.io.alive == 0);
}

TEST_CASE("a multicast tree: one group frame per fabric port, and the switch behind it copies", "[replication]") {
    // Upstream switch u: p0 the learner, p1 a fabric link to switch d, p2 worker 1, p3 a fabric
    // port with nobody behind it, p5 host 5. Downstream d: p0 its link up to u, p1..p3 workers 2..4.
    core::SwitchConfig ucfg = Rig::config();
    ucfg.clusters[0].model_replication->fabric_ports = {"p1", "p3"};
    Rig u(ucfg), d(Rig::config());
    std::uint64_t now = kHz;
    // The requests of workers 2..4 pass d (joining there) on their way up to u (joining there too).
    for (std::uint8_t w = 2; w <= 4; ++w) {
        d.send(w - 1, model_request(w), now);
        const auto out = d.take_all();
        for (const auto& f : out[0]) u.send(1, f, now);
    }
    u.send(2, model_request(1), now);
    u.send(0, l2_frame(mac(kLearnerHost), mac(1), 0x55), now);
    u.take_all();
    CHECK(u.counter(core::SwitchCounter::ModelJoined) == 4);
    CHECK(d.counter(core::SwitchCounter::ModelJoined) == 3);

    const auto original = group_model();
    u.send(0, original, ++now);
    auto up = u.take_all();
    REQUIRE(up[1].size() == 1);  // one frame for the three members behind d, not three
    CHECK(up[1][0] == original);  // unchanged: d copies from the group frame
    REQUIRE(up[2].size() == 1);
    CHECK(std::equal(up[2][0].begin(), up[2][0].begin() + 6, mac(1).begin()));
    CHECK(up[0].empty());
    CHECK(up[3].empty());  // a fabric port with no member behind it gets nothing
    CHECK(up[5].empty());
    CHECK(u.counter(core::SwitchCounter::ModelCopies) == 1);
    CHECK(u.counter(core::SwitchCounter::ModelFabricCopies) == 1);

    d.send(0, up[1][0], now);
    const auto down = d.take_all();
    CHECK(down[0].empty());  // never back up
    for (std::uint8_t w = 2; w <= 4; ++w) {
        INFO("worker " << int(w));
        REQUIRE(down[w - 1].size() == 1);
        const auto& copy = down[w - 1][0];
        REQUIRE(copy.size() == original.size());
        CHECK(std::equal(copy.begin(), copy.begin() + 6, mac(w).begin()));
        const std::uint8_t* ip = copy.data() + frame::kEthHeaderSize;
        CHECK(be::load32(ip + 16) == host_ip(w));
        CHECK(be::load16(ip + 10) == frame::ipv4_header_checksum(ip, 20));
        CHECK(be::load16(ip + 20 + 2) == worker_port(w));
        proto::Message m;
        REQUIRE(proto::decode({copy.data() + frame::kUdpPayloadOffset, copy.size() - frame::kUdpPayloadOffset}, m) ==
                proto::DecodeError::Ok);
        CHECK(m.hdr.worker_id == 100u + w);
        const std::size_t body = frame::kUdpPayloadOffset + proto::kHeaderSize;
        CHECK(std::equal(copy.begin() + static_cast<long>(body), copy.end(), original.begin() + static_cast<long>(body)));
    }
    CHECK(down[4].empty());
    CHECK(down[5].empty());
    CHECK(d.counter(core::SwitchCounter::ModelCopies) == 3);
    CHECK(d.counter(core::SwitchCounter::ModelFabricCopies) == 0);
    CHECK(u.io.alive == 0);
    CHECK(d.io.alive == 0);
}

TEST_CASE("forged and non-member MODEL traffic is counted, dropped or refused", "[replication]") {
    Rig rig(Rig::config());
    std::uint64_t now = kHz;
    join_members(rig, 4, now);

    // To the group from a host that is not the learner: dropped, no copy anywhere.
    rig.send(5, group_model(5), ++now);
    for (const auto& port : rig.take_all()) CHECK(port.empty());
    CHECK(rig.counter(core::SwitchCounter::ModelNotMember) == 1);
    // From the learner's address but for another cluster: dropped too.
    rig.send(0, group_model(kLearnerHost, kModelCluster + 1), ++now);
    for (const auto& port : rig.take_all()) CHECK(port.empty());
    CHECK(rig.counter(core::SwitchCounter::ModelNotMember) == 2);
    CHECK(rig.counter(core::SwitchCounter::ModelCopies) == 0);

    // A non-member's model request does not join, and still reaches the learner.
    rig.send(5, model_request(5), ++now);
    auto out = rig.take_all();
    CHECK(out[0].size() == 1);
    CHECK(rig.counter(core::SwitchCounter::ModelJoinRefused) == 1);
    rig.send(0, group_model(), ++now);
    out = rig.take_all();
    CHECK(out[5].empty());
    CHECK(rig.counter(core::SwitchCounter::ModelCopies) == 4);
    CHECK(rig.io.alive == 0);
}

TEST_CASE("a full group, a member that moved ports, one that left", "[replication]") {
    SECTION("max_members bounds the copies of one frame") {
        Rig rig(Rig::config(3));
        join_members(rig, 4, kHz);
        CHECK(rig.counter(core::SwitchCounter::ModelJoined) == 3);
        CHECK(rig.counter(core::SwitchCounter::ModelMembersFull) == 1);
        rig.send(0, group_model(), kHz + 1);
        const auto out = rig.take_all();
        CHECK(out[1].size() + out[2].size() + out[3].size() + out[4].size() == 3);
        CHECK(out[4].empty());  // the fourth request found the group full
        CHECK(rig.counter(core::SwitchCounter::ModelCopies) == 3);
    }
    SECTION("the copy follows the member's MAC to its new port") {
        Rig rig(Rig::config());
        join_members(rig, 4, kHz);
        // Worker 2 now sends from p5: the FDB moves it, and so does its copy.
        rig.send(5, l2_frame(mac(2), mac(kLearnerHost), 0x66), kHz + 1);
        rig.take_all();
        rig.send(0, group_model(), kHz + 2);
        const auto out = rig.take_all();
        CHECK(out[2].empty());
        REQUIRE(out[5].size() == 1);
        CHECK(std::equal(out[5][0].begin(), out[5][0].begin() + 6, mac(2).begin()));
        CHECK(rig.counter(core::SwitchCounter::ModelCopies) == 4);
    }
    SECTION("a member whose MAC aged out of the FDB is counted, not flooded") {
        Rig rig(Rig::config());
        join_members(rig, 4, kHz);
        // Everyone but worker 3 stays active; after the 2 s aging its entry is gone.
        const std::uint64_t later = 4 * kHz;
        for (std::uint8_t w : {1, 2, 4}) rig.send(w, l2_frame(mac(w), mac(kLearnerHost), 0x77), later);
        rig.send(0, l2_frame(mac(kLearnerHost), mac(1), 0x55), later);
        rig.pipeline.housekeeping(later + kHz);
        rig.take_all();
        rig.send(0, group_model(), later + kHz + 1);
        const auto out = rig.take_all();
        CHECK(out[3].empty());
        CHECK(out[5].empty());
        CHECK(out[1].size() == 1);
        CHECK(out[2].size() == 1);
        CHECK(out[4].size() == 1);
        CHECK(rig.counter(core::SwitchCounter::ModelMemberPortUnknown) == 1);
        CHECK(rig.counter(core::SwitchCounter::ModelCopies) == 3);
    }
}

TEST_CASE("without replication configured, a MODEL to a multicast group floods as before", "[replication]") {
    core::SwitchConfig cfg = Rig::config();
    cfg.clusters[0].model_replication.reset();
    Rig rig(cfg);
    join_members(rig, 4, kHz);
    rig.send(0, group_model(), kHz + 1);
    const auto out = rig.take_all();
    for (std::size_t p = 1; p < Rig::kPorts; ++p) CHECK(out[p].size() == 1);
    CHECK(out[1][0] == group_model());  // unchanged: a flood copy, not a replica
    CHECK(rig.counter(core::SwitchCounter::ModelReplicated) == 0);
    CHECK(rig.counter(core::SwitchCounter::ModelJoined) == 0);
}

TEST_CASE("model_replication config errors name the key", "[replication]") {
    const std::string ports =
        "ports:\n"
        "  - {name: a, device: net_null0}\n"
        "  - {name: b, device: net_null1}\n"
        "aggregation:\n"
        "  clusters:\n";
    const auto error_of = [&](const std::string& cluster) -> std::string {
        try {
            core::parse_switch_config(ports + cluster, "bad.yaml");
        } catch (const core::ConfigError& e) {
            return e.what();
        }
        FAIL("expected a ConfigError for:\n" << cluster);
        return {};
    };
    CHECK_THAT(error_of("    - {id: 1, members: [10.0.0.1], model_replication: {group: 10.0.0.7, learner: 10.0.0.9}}\n"),
               Catch::Contains("aggregation.clusters[0].model_replication.group") && Catch::Contains("multicast"));
    CHECK_THAT(error_of("    - {id: 1, members: [10.0.0.1], model_replication: {group: 239.1.1.1, learner: 239.0.0.9}}\n"),
               Catch::Contains("aggregation.clusters[0].model_replication.learner"));
    CHECK_THAT(error_of("    - {id: 1, members: [10.0.0.1], model_replication: {learner: 10.0.0.9}}\n"),
               Catch::Contains("group"));
    CHECK_THAT(error_of("    - {id: 1, members: [], model_replication: {group: 239.1.1.1, learner: 10.0.0.9}}\n"),
               Catch::Contains("aggregation.clusters[0].model_replication") && Catch::Contains("no members"));
    CHECK_THAT(error_of("    - {id: 1, members: [10.0.0.1], model_replication: {group: 239.1.1.1, learner: 10.0.0.9, max_members: 0}}\n"),
               Catch::Contains("max_members"));
    CHECK_THAT(error_of("    - {id: 1, members: [10.0.0.1], model_replication: {group: 239.1.1.1, learner: 10.0.0.9, fanout: 2}}\n"),
               Catch::Contains("fanout"));
    CHECK_THAT(error_of("    - {id: 1, members: [10.0.0.1], model_replication: {group: 239.1.1.1, learner: 10.0.0.9}}\n"
                        "    - {id: 2, members: [10.0.0.2], model_replication: {group: 239.1.1.1, learner: 10.0.0.9}}\n"),
               Catch::Contains("aggregation.clusters[1].model_replication.group") && Catch::Contains("one group per cluster"));
    CHECK_THAT(error_of("    - {id: 1, members: [10.0.0.1], model_replication: {group: 239.1.1.1, learner: 10.0.0.9, fabric_ports: [c]}}\n"),
               Catch::Contains("aggregation.clusters[0].model_replication.fabric_ports[0]") && Catch::Contains("a, b"));
    CHECK_THAT(error_of("    - {id: 1, members: [10.0.0.1], model_replication: {group: 239.1.1.1, learner: 10.0.0.9, fabric_ports: [b, b]}}\n"),
               Catch::Contains("aggregation.clusters[0].model_replication.fabric_ports[1]") && Catch::Contains("twice"));
    CHECK_THAT(error_of("    - {id: 1, members: [10.0.0.1], model_replication: {group: 239.1.1.1, learner: 10.0.0.9, fabric_ports: b}}\n"),
               Catch::Contains("aggregation.clusters[0].model_replication.fabric_ports"));
    // A good one round-trips through to_yaml.
    const core::SwitchConfig good = core::parse_switch_config(
        ports + "    - {id: 1, members: [10.0.0.1], model_replication: {group: 239.1.1.1, learner: 10.0.0.9, max_members: 8, "
                "fabric_ports: [b]}}\n");
    REQUIRE(good.clusters[0].model_replication);
    CHECK(good.clusters[0].model_replication->group == ((239u << 24) | (1u << 16) | (1u << 8) | 1u));
    CHECK(good.clusters[0].model_replication->max_members == 8);
    CHECK(good.clusters[0].model_replication->fabric_ports == std::vector<std::string>{"b"});
    CHECK(core::parse_switch_config(core::to_yaml(good)) == good);
}

namespace {

// A CREDIT_BATCH from `host` to the group, with these entries, as LearnerCore encodes one.
proto::Header credit_batch_header(std::uint16_t entries, std::uint16_t cluster = kModelCluster) {
    proto::Header h;
    h.type = proto::MsgType::CreditBatch;
    h.elem_type = proto::ElemType::None;
    h.cluster_id = cluster;
    h.model_version = 41;
    h.seq = 5;  // the learner's incarnation
    h.elem_count = entries;
    h.ts_earliest_ns = h.ts_latest_ns = 123456789;
    return h;
}
std::vector<std::uint8_t> credit_batch(const std::vector<proto::CreditBatchEntry>& entries,
                                       std::uint8_t host = kLearnerHost, std::uint16_t cluster = kModelCluster) {
    std::vector<std::uint8_t> body(entries.size() * proto::kCreditBatchEntrySize);
    for (std::size_t i = 0; i < entries.size(); ++i)
        REQUIRE(proto::encode_credit_batch_entry(entries[i], std::span<std::uint8_t>(body).subspan(i * proto::kCreditBatchEntrySize)));
    return shesha_frame(mac(host), host_ip(host), proto::kDefaultUdpPort, kGroupMac, kGroup,
                        credit_batch_header(static_cast<std::uint16_t>(entries.size()), cluster), body);
}
// The CREDIT the learner would have sent worker `host` itself, without a UDP checksum.
std::vector<std::uint8_t> direct_credit(std::uint8_t host, const proto::CreditBatchEntry& e) {
    proto::Header h = credit_batch_header(0);
    h.type = proto::MsgType::Credit;
    h.flags = e.flags;
    h.worker_id = e.worker_id;
    std::vector<std::uint8_t> body(proto::kCreditBodySize);
    REQUIRE(proto::encode_credit(e.body, body));
    std::vector<std::uint8_t> payload(proto::kHeaderSize + body.size());
    REQUIRE(proto::encode(h, body, payload) == payload.size());
    auto f = udp_frame(mac(kLearnerHost), mac(host), host_ip(kLearnerHost), host_ip(host), worker_port(host), payload,
                       proto::kDefaultUdpPort);
    frame::clear_udp_checksum(f.data() + frame::kEthHeaderSize + 20);
    return f;
}

}  // namespace

TEST_CASE("a CREDIT_BATCH from the learner becomes, per entry, the CREDIT the learner would have sent", "[replication]") {
    Rig rig(Rig::config());
    std::uint64_t now = kHz;
    join_members(rig, 4, now);
    const std::vector<proto::CreditBatchEntry> entries{
        {101, 0, {3, 17, 41, 0}},
        {103, proto::flag::kCongestionEcho, {1, 9, 41, 2}},
        {999, 0, {1, 1, 41, 0}},  // not a member: no CREDIT, counted
        {104, 0, {2, 5, 41, 0}},
        {102, 0, {1, 8, 41, 0}},
        {101, 0, {1, 18, 41, 0}},  // a second entry for worker 1: a second CREDIT, in order
        {100, 0, {1, 1, 41, 0}},   // below every member's id: not a member either
    };
    rig.send(0, credit_batch(entries), ++now);
    auto out = rig.take_all();
    CHECK(out[0].empty());  // nothing back to the learner
    CHECK(out[5].empty());  // nothing to the non-member
    REQUIRE(out[1].size() == 2);
    CHECK(out[1][0] == direct_credit(1, entries[0]));
    CHECK(out[1][1] == direct_credit(1, entries[5]));
    REQUIRE(out[2].size() == 1);
    CHECK(out[2][0] == direct_credit(2, entries[4]));
    REQUIRE(out[3].size() == 1);
    CHECK(out[3][0] == direct_credit(3, entries[1]));
    REQUIRE(out[4].size() == 1);
    CHECK(out[4][0] == direct_credit(4, entries[3]));
    // Each is a valid CREDIT for its worker, as shesha-worker decodes it.
    proto::Message m;
    const auto& c3 = out[3][0];
    REQUIRE(proto::decode({c3.data() + frame::kUdpPayloadOffset, c3.size() - frame::kUdpPayloadOffset}, m) ==
            proto::DecodeError::Ok);
    CHECK(m.hdr.type == proto::MsgType::Credit);
    CHECK(m.hdr.worker_id == 103);
    CHECK(m.hdr.flags == proto::flag::kCongestionEcho);
    const std::uint8_t* ip = c3.data() + frame::kEthHeaderSize;
    CHECK(be::load16(ip + 2) == c3.size() - frame::kEthHeaderSize);
    CHECK(be::load16(ip + 10) == frame::ipv4_header_checksum(ip, 20));
    CHECK(rig.counter(core::SwitchCounter::CreditBatches) == 1);
    CHECK(rig.counter(core::SwitchCounter::CreditCopies) == 5);
    CHECK(rig.counter(core::SwitchCounter::CreditWorkerUnknown) == 2);
    CHECK(rig.counter(core::SwitchCounter::ModelCopies) == 0);
    CHECK(rig.io.alive == 0);
}

TEST_CASE("CREDIT_BATCH: forged, foreign, bad entries and unknown ports are counted; without a group it travels on",
          "[replication]") {
    Rig rig(Rig::config());
    std::uint64_t now = kHz;
    join_members(rig, 2, now);  // workers 1 and 2 joined; 3 and 4 did not
    const proto::CreditBatchEntry e1{101, 0, {1, 1, 41, 0}};
    // From a host that is not the learner, or for another cluster: dropped whole.
    rig.send(5, credit_batch({e1}, 5), ++now);
    rig.send(0, credit_batch({e1}, kLearnerHost, kModelCluster + 1), ++now);
    for (const auto& port : rig.take_all()) CHECK(port.empty());
    CHECK(rig.counter(core::SwitchCounter::CreditBatchNotMember) == 2);
    // An entry with a flag a CREDIT may not carry: that entry only.
    auto batch = credit_batch({e1, {102, 0, {1, 1, 41, 0}}});
    batch[frame::kUdpPayloadOffset + proto::kHeaderSize + proto::kCreditBatchEntrySize + 4] = proto::flag::kMerged;
    rig.send(0, batch, ++now);
    auto out = rig.take_all();
    CHECK(out[1].size() == 1);
    CHECK(out[2].empty());
    CHECK(rig.counter(core::SwitchCounter::CreditBadEntry) == 1);
    // Worker 3 never joined: no CREDIT, counted, never flooded.
    rig.send(0, credit_batch({{103, 0, {1, 1, 41, 0}}}), ++now);
    for (const auto& port : rig.take_all()) CHECK(port.empty());
    CHECK(rig.counter(core::SwitchCounter::CreditWorkerUnknown) == 1);
    // A member whose station aged out of the FDB (aging 2 s): counted, not flooded.
    now += 5 * kHz;
    rig.send(0, l2_frame(mac(kLearnerHost), mac(1), 0x55), now);
    rig.take_all();
    rig.send(0, credit_batch({e1}), ++now);
    for (const auto& port : rig.take_all()) CHECK(port.empty());
    CHECK(rig.counter(core::SwitchCounter::CreditMemberPortUnknown) == 1);
    CHECK(rig.counter(core::SwitchCounter::CreditCopies) == 1);
    CHECK(rig.io.alive == 0);

    // Without replication configured there is no group: the batch is a datagram like any other.
    core::SwitchConfig cfg = Rig::config();
    cfg.clusters[0].model_replication.reset();
    Rig plain(cfg);
    join_members(plain, 4, kHz);
    plain.send(0, credit_batch({e1}), kHz + 1);
    out = plain.take_all();
    for (std::size_t p = 1; p < Rig::kPorts; ++p) CHECK(out[p].size() == 1);  // flooded to the group MAC
    CHECK(out[1][0] == credit_batch({e1}));
    CHECK(plain.counter(core::SwitchCounter::CreditBatches) == 0);
}

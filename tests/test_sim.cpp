// shesha-sim: hand-checked small cases, determinism, FIFO vs merging under overload,
// conservation of contributions, strict scenario keys, and the MODEL direction (unicast and
// replicated delivery, counted by hand), and the learner host's send queue (pfifo_fast bands by TOS,
// credit priority).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <string>
#include <vector>

#include "frame.h"
#include "host_queue.h"
#include "sim_config.h"
#include "simulator.h"
#include "transport/credit_sender.h"

using namespace shesha::sim;

namespace {

Summary run(const Scenario& s) {
    Simulator sim(s);
    return sim.run();
}

// 3 workers of one cluster under one ToR, one chunk of 64 elements per update, everyone starts at
// t = 0 with no jitter; the learner's 10 GbE port is the slow link (hosts have 100 GbE). One
// direction (model.delivery none): the hand computation follows the versions CREDIT names.
Scenario three_workers(bool aggregation, std::uint32_t updates, std::uint32_t version_tolerance = 0) {
    return load_scenario(
        "seed: 7\nduration_ms: 1\n"
        "topology: {kind: tor}\n"
        "workload: {clusters: 1, workers_per_cluster: 3, chunks: 1, chunk_elems: 64, compute_us: 100, jitter: 0,"
        " start_together: true, max_updates: " + std::to_string(updates) + "}\n"
        "links: {host_gbps: 100, learner_gbps: 10, prop_ns: 500}\n"
        "queue: {aggregation: " + std::string(aggregation ? "true" : "false") +
        ", mark_depth_packets: 0, version_tolerance: " + std::to_string(version_tolerance) + "}\n"
        "transport: {window_control: false, switch_feedback: false}\n"
        "model: {delivery: none}\n",
        "test");
}

std::string row_without_wall_time(const Scenario& s, Summary r) {
    r.wall_s = 0;
    r.packets_per_wall_s = 0;
    return summary_csv_row("x", s, r) + cluster_csv("x", r);
}

}  // namespace

TEST_CASE("three workers, one slow link: merges, departures and contributions as computed by hand") {
    // Frame: 42 B Ethernet/IPv4/UDP + 48 B header + 256 B payload = 346 B; wire cost 370 B.
    // Each host serializes its chunk in 30 ns (100 GbE), all three reach the ToR at 530 ns in worker
    // order. w0 finds the port idle and starts transmitting at once (it left the queue), w1 finds
    // an empty queue and waits, w2 merges into w1. So 1 merge and 2 departures, carrying 1 and 2
    // contributions.
    const Summary r = run(three_workers(true, 1));
    const HopSummary& port = r.hops[static_cast<int>(HopLevel::LearnerPort)];
    CHECK(port.ports == 1);
    CHECK(port.arrivals == 3);
    CHECK(port.merges == 1);
    CHECK(port.departures == 2);
    CHECK(port.bytes_saved == 346);
    CHECK(port.depth_max == 1);  // w2 found w1 waiting
    CHECK(port.drops == 0);
    CHECK(r.chunks_sent == 3);
    CHECK(r.contributions_sent == 3);
    CHECK(r.contributions_applied == 3);
    CHECK(r.contributions_dropped == 0);
    REQUIRE(r.per_cluster.size() == 1);
    CHECK(r.per_cluster[0].chunks_applied == 2);
    CHECK(r.per_cluster[0].bottleneck_bytes == 2 * 346);
    CHECK(r.per_cluster[0].learner_version == 2);  // K = 1: every chunk completes a version
    CHECK(r.verify_failures == 0);
    CHECK(r.learner_rejects == 0);
    // Host NICs: one chunk each, never merging (aggregation is off at hosts).
    CHECK(r.hops[static_cast<int>(HopLevel::HostNic)].departures == 3);
    CHECK(r.hops[static_cast<int>(HopLevel::HostNic)].merges == 0);
    // The learner gets w0's chunk (base version 0) at version 0, then the merged one (base 0) at
    // version 1: staleness 0 and 1.
    CHECK(r.staleness_max == 1);
    CHECK(r.staleness_mean == Approx(0.5));
    // The merged packet waited for w0's transmission at 10 GbE: 2960 bits = 296 ns.
    CHECK(port.sojourn_max_us == Approx(0.296));
    // Credits: w0's chunk completed version 1 -> w0 gets a unit with learner_version 1. The merged
    // chunk (named w1, MERGED, 2 contributions) completed version 2 -> w1 gets its unit and the one
    // spread unit goes round robin from cursor 0 to w0 (not w2). So the second round computes on
    // versions w0: 2, w1: 2, w2: 0.
}

TEST_CASE("three workers, second round: the planner's round robin decides what merges") {
    // Round 2 (100 us later, the network long drained): w0 is on the wire, w1 (version 2) waits,
    // w2 (version 0, it got no credit) cannot merge into w1 with version tolerance 0: no merge.
    const Summary strict = run(three_workers(true, 2, 0));
    const HopSummary& p0 = strict.hops[static_cast<int>(HopLevel::LearnerPort)];
    CHECK(p0.merges == 1);
    CHECK(p0.departures == 5);
    CHECK(strict.contributions_applied == 6);
    CHECK(strict.per_cluster[0].chunks_applied == 5);
    // With tolerance 2, w2's version-0 chunk merges into w1's version-2 chunk (nearest version
    // first: 0, then 1, then 2), and the merged chunk keeps the minimum version 0.
    const Summary loose = run(three_workers(true, 2, 2));
    const HopSummary& p2 = loose.hops[static_cast<int>(HopLevel::LearnerPort)];
    CHECK(p2.merges == 2);
    CHECK(p2.departures == 4);
    CHECK(loose.contributions_applied == 6);
    // Round 2's chunks: w0's (base 2) arrives at learner version 2; the merged one (base 0) at 3.
    CHECK(loose.staleness_max == 3);
}

TEST_CASE("three workers, FIFO arm: no merges, every chunk departs") {
    const Summary r = run(three_workers(false, 2));
    const HopSummary& port = r.hops[static_cast<int>(HopLevel::LearnerPort)];
    CHECK(port.merges == 0);
    CHECK(port.departures == 6);
    CHECK(port.depth_max == 1);  // w0 is already on the wire when w1 and w2 arrive
    CHECK(r.contributions_applied == 6);
    CHECK(r.per_cluster[0].chunks_applied == 6);
}

TEST_CASE("deterministic for a seed; another seed differs") {
    const Scenario a = load_scenario(
        "seed: 11\nduration_ms: 3\ntopology: {kind: leaf_spine, leaves: 3, spines: 2}\n"
        "workload: {clusters: 3, workers_per_cluster: 8, chunks: 4, chunk_elems: 128, compute_us: 200, jitter: 0.3}\n"
        "links: {learner_gbps: 10, fabric_gbps: 25}\nmodel: {delivery: none}\n",
        "test");
    Simulator s1(a), s2(a);
    const Summary r1 = s1.run();
    const Summary r2 = s2.run();
    CHECK(row_without_wall_time(a, r1) == row_without_wall_time(a, r2));
    CHECK(series_csv("x", s1.series()) == series_csv("x", s2.series()));
    Scenario b = a;
    b.seed = 12;
    CHECK(row_without_wall_time(b, run(b)) != row_without_wall_time(b, r1));
}

TEST_CASE("under overload the FIFO arm drops more than the merging arm") {
    // 2 clusters x 32 workers x 8 chunks of 1114 B every 100 us: about 23 Gbit/s offered per
    // cluster to a 10 GbE learner port.
    const std::string base =
        "seed: 3\nduration_ms: 5\n"
        "workload: {clusters: 2, workers_per_cluster: 32, chunks: 8, chunk_elems: 256, compute_us: 100, jitter: 0.2}\n"
        "links: {host_gbps: 100, learner_gbps: 10}\n"
        "transport: {window_control: false, switch_feedback: false}\n";
    const Summary fifo = run(load_scenario(base + "queue: {aggregation: false, capacity_packets: 128}\n", "test"));
    const Summary merge = run(load_scenario(base + "queue: {aggregation: true, capacity_packets: 128}\n", "test"));
    CHECK(fifo.merges == 0);
    CHECK(fifo.drops > 0);
    CHECK(merge.merges > 0);
    CHECK(fifo.drops > merge.drops);
    CHECK(fifo.contributions_dropped > merge.contributions_dropped);
    CHECK(merge.contributions_applied > fifo.contributions_applied);
    for (const Summary* r : {&fifo, &merge}) {
        CHECK(r->contributions_sent == r->contributions_applied + r->contributions_dropped);
        CHECK(r->verify_failures == 0);
    }
}

TEST_CASE("conservation of contributions with drops, window control and feedback on leaf-spine") {
    const Scenario s = load_scenario(
        "seed: 5\nduration_ms: 4\ntopology: {kind: leaf_spine, leaves: 4, spines: 2}\n"
        "workload: {clusters: 4, workers_per_cluster: 16, chunks: 8, chunk_elems: 256, compute_us: 100}\n"
        "links: {learner_gbps: 10, fabric_gbps: 40}\n"
        "queue: {capacity_packets: 16, mark_depth_packets: 4}\n"
        "transport: {window_control: true, switch_feedback: true, w_init: 8, credit_timeout_us: 500}\n"
        "model: {delivery: none}\n",
        "test");
    const Summary r = run(s);
    CHECK(r.drops > 0);  // so the identity below is tested with losses
    CHECK(r.contributions_sent == r.contributions_applied + r.contributions_dropped);
    CHECK(r.feedback_sent > 0);
    CHECK(r.sender_merges > 0);
    CHECK(r.hops[static_cast<int>(HopLevel::LeafUplink)].merges > 0);
    CHECK(r.hops[static_cast<int>(HopLevel::LearnerPort)].merges > 0);
    CHECK(r.verify_failures == 0);
    CHECK(r.learner_rejects == 0);
    CHECK(r.jain_fairness > 0);
    CHECK(r.jain_fairness <= 1.0);
}

TEST_CASE("the senders' flight expiry and excess units are summed into the summary") {
    // A fixed expiry shorter than any round trip here (the learner port alone is 1 us per frame):
    // chunks expire, and the units that come for them later find nothing in flight.
    const std::string base =
        "seed: 5\nduration_ms: 2\ntopology: {kind: tor}\n"
        "workload: {clusters: 1, workers_per_cluster: 8, chunks: 8, chunk_elems: 256, compute_us: 100}\n"
        "links: {learner_gbps: 10}\nqueue: {capacity_packets: 64, mark_depth_packets: 0}\nmodel: {delivery: none}\n";
    const Summary expiring = run(load_scenario(base + "transport: {window_control: true, flight_expiry_us: 0.5}\n", "test"));
    CHECK(expiring.chunks_expired > 0);
    CHECK(expiring.credits_excess > 0);
    CHECK(expiring.contributions_sent == expiring.contributions_applied + expiring.contributions_dropped);
    const Summary none = run(load_scenario(base + "transport: {window_control: true, flight_expiry_rtts: 0}\n", "test"));
    CHECK(none.chunks_expired == 0);
    CHECK(summary_csv_header().find(",chunks_expired,credits_excess,model_sends_deferred,sim_end_ms,") != std::string::npos);
}

TEST_CASE("merge-aware window with a merge floor and pacing: contributions conserved, sums exact") {
    const Scenario s = load_scenario(
        "seed: 5\nduration_ms: 4\ntopology: {kind: leaf_spine, leaves: 4, spines: 2}\n"
        "workload: {clusters: 4, workers_per_cluster: 16, chunks: 8, chunk_elems: 256, compute_us: 100}\n"
        "links: {learner_gbps: 10, fabric_gbps: 40}\n"
        "queue: {capacity_packets: 16, mark_depth_packets: 4}\n"
        "transport: {window_control: true, switch_feedback: true, w_init: 8, w_min: 0.25, merge_aware: true,"
        " merge_floor: 16, credit_timeout_us: 500}\n",
        "test");
    const Summary r = run(s);
    CHECK(r.feedback_sent > 0);
    CHECK(r.contributions_sent == r.contributions_applied + r.contributions_dropped);
    CHECK(r.verify_failures == 0);
    CHECK(r.learner_rejects == 0);
}

TEST_CASE("scenario keys are strict and errors name the key") {
    auto error_of = [](const std::string& yaml, std::vector<std::string> overrides = {}) {
        try {
            (void)load_scenario(yaml, "f.yaml", overrides);
        } catch (const ConfigError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    CHECK_THAT(error_of("queue: {capacty_packets: 4}\n"), Catch::Contains("unknown key 'queue.capacty_packets'"));
    CHECK_THAT(error_of("queue: {capacity_packets: -4}\n"), Catch::Contains("'queue.capacity_packets'"));
    CHECK_THAT(error_of("links: {host_gbps: fast}\n"), Catch::Contains("expected a number"));
    CHECK_THAT(error_of("topology: {kind: ring}\n"), Catch::Contains("expected tor or leaf_spine"));
    CHECK_THAT(error_of("", {"workload.clusters=0"}), Catch::Contains("'workload.clusters'"));
    CHECK_THAT(error_of("", {"nope=1"}), Catch::Contains("unknown key 'nope'"));
    CHECK_THAT(error_of("transport: {w_min: 8, w_init: 4}\n"), Catch::Contains("w_init"));
    CHECK_THAT(error_of("transport: {merge_floor: 8}\n"), Catch::Contains("transport.merge_floor needs transport.merge_aware"));
    CHECK_THAT(error_of("transport: {merge_aware: true, merge_floor: 100}\n"), Catch::Contains("transport.merge_floor must be"));
    CHECK_THAT(error_of("transport: {merge_floor: -1}\n"), Catch::Contains("'transport.merge_floor'"));
    CHECK(load_scenario("transport: {merge_aware: true, merge_floor: 32}\n", "f.yaml").merge_floor == 32);
    CHECK_THAT(error_of("transport: {flight_expiry_rtts: 0.5}\n"), Catch::Contains("transport.flight_expiry_rtts must be 0 (off) or at least 1"));
    CHECK_THAT(error_of("transport: {flight_expiry_rtts: -2}\n"), Catch::Contains("'transport.flight_expiry_rtts'"));
    CHECK(load_scenario("transport: {flight_expiry_rtts: 3}\n", "f.yaml").flight_expiry_rtts == 3);
    CHECK(load_scenario("", "f.yaml").flight_expiry_rtts == -1);  // unset: the sender's (2), or the cluster YAML's
    CHECK(load_scenario("", "f.yaml").w_min == shesha::transport::SenderConfig{}.w_min);  // the senders' floor, 1/16: pacing
    CHECK(load_scenario("", "f.yaml").slow_start);  // on, as the sender's default
    CHECK_FALSE(load_scenario("", "f.yaml", {"transport.slow_start=false"}).slow_start);
    CHECK_THAT(error_of("transport: {slow_start: often}\n"), Catch::Contains("'transport.slow_start'"));
    CHECK_THAT(error_of("queue: {fair: false, fair_lag: 32}\n"), Catch::Contains("queue.fair_lag needs queue.fair: true"));
    // queue.fair: auto (the default) is on with aggregation and two or more clusters, as the switch's scheduling: auto.
    CHECK_THAT(error_of("workload: {clusters: 1}\nqueue: {fair_lag: 32}\n"), Catch::Contains("queue.fair_lag needs queue.fair: true"));
    CHECK_THAT(error_of("queue: {aggregation: false, fair: auto, fair_lag: 32}\n"), Catch::Contains("queue.fair_lag needs queue.fair: true"));
    CHECK_THAT(error_of("queue: {fair: maybe}\n"), Catch::Contains("expected auto, true or false"));
    CHECK_THAT(error_of("queue: {fair: true, fair_lag: 70000}\n"), Catch::Contains("'queue.fair_lag'"));
    CHECK_THAT(error_of("queue: {fair: true, fair_lag: -1}\n"), Catch::Contains("'queue.fair_lag'"));
    CHECK(load_scenario("queue: {fair: true, fair_lag: 32}\n", "f.yaml").fair_lag == 32);
    CHECK(load_scenario("", "f.yaml").fair_lag == 0);
    CHECK_THAT(error_of("queue: {fair: false, chunk_follow: true}\n"), Catch::Contains("queue.chunk_follow needs queue.fair: true"));
    CHECK_THAT(error_of("queue: {fair: true, chunk_follow: 3}\n"), Catch::Contains("'queue.chunk_follow'"));
    CHECK(load_scenario("queue: {fair: true, chunk_follow: true}\n", "f.yaml").chunk_follow);
    CHECK(!load_scenario("", "f.yaml").chunk_follow);
    CHECK_THAT(error_of("model: {delivery: multicast}\n"), Catch::Contains("expected none, unicast or replicated"));
    CHECK_THAT(error_of("model: {delivery: replicated}\n", {"workload.workers_per_cluster=5000"}),
               Catch::Contains("a replication group at most 4096"));
    CHECK_THAT(error_of("model: {learner_nic_packets: 0}\n"), Catch::Contains("'model.learner_nic_packets'"));
    CHECK(load_scenario("", "f.yaml").model_delivery == ModelDelivery::Unicast);
    CHECK(load_scenario("model: {delivery: replicated}\n", "f.yaml").model_delivery == ModelDelivery::Replicated);
    CHECK_THAT(error_of("model: {credit_batching: true}\n"), Catch::Contains("model.credit_batching needs model.delivery replicated"));
    CHECK(load_scenario("model: {delivery: replicated, credit_batching: true}\n", "f.yaml").credit_batching == shesha::drl::CreditBatching::On);
    CHECK(load_scenario("model: {delivery: unicast, credit_batching: false}\n", "f.yaml").credit_batching == shesha::drl::CreditBatching::Off);
    CHECK(load_scenario("model: {delivery: replicated}\n", "f.yaml").credit_batching == shesha::drl::CreditBatching::Auto);
    CHECK_THAT(error_of("model: {credit_batching: yes}\n"), Catch::Contains("model.credit_batching"));
    CHECK_THAT(error_of("model: {delivery: replicated, tree: false}\n"), Catch::Contains("model.tree needs"));
    CHECK_THAT(error_of("topology: {kind: leaf_spine}\nmodel: {delivery: unicast, tree: true}\n"),
               Catch::Contains("model.tree needs"));
    CHECK(!load_scenario("topology: {kind: leaf_spine}\nmodel: {delivery: replicated, tree: false}\n", "f.yaml").model_tree);
    CHECK(load_scenario("topology: {kind: leaf_spine}\nmodel: {delivery: replicated}\n", "f.yaml").model_tree);
    CHECK_THAT(error_of("workload: {clusters: 3, cluster_workers: '2,4'}\n"),
               Catch::Contains("workload.cluster_workers lists 2 counts for 3 clusters"));
    CHECK_THAT(error_of("workload: {clusters: 2, cluster_workers: '2,0'}\n"), Catch::Contains("'workload.cluster_workers'"));
    CHECK_THAT(error_of("workload: {clusters: 2, cluster_workers: '2,,3'}\n"), Catch::Contains("'workload.cluster_workers'"));
    CHECK_THAT(error_of("workload: {clusters: 2, cluster_workers: '2,x'}\n"), Catch::Contains("'workload.cluster_workers'"));
    CHECK(load_scenario("workload: {clusters: 2, cluster_workers: '3, 5'}\n", "f.yaml").workers_in(1) == 5);
    const Scenario s = load_scenario("workload: {clusters: 2}\n", "f.yaml", {"workload.clusters=5", "queue.aggregation=off"});
    CHECK(s.clusters == 5);
    CHECK_FALSE(s.aggregation);
}

namespace {

// Two clusters behind one shared 10 GbE learner port, offering more than it carries (3 ms, seed 3).
Scenario two_clusters_one_port(const std::string& workers, const std::string& queue, bool fair) {
    return load_scenario(fmt::format("seed: 3\nduration_ms: 3\ntopology: {{kind: tor, shared_bottleneck: true}}\n"
                                     "workload: {{clusters: 2, {}, chunks: 8, chunk_elems: 256, compute_us: 200}}\n"
                                     "links: {{learner_gbps: 10}}\nqueue: {{{}capacity_packets: 256, fair: {}}}\n",
                                     workers, queue, fair),
                         "test");
}

}  // namespace

TEST_CASE("contended service at a shared learner port: counted, and equal per cluster under fair queues") {
    const auto scenario = [](bool fair) { return two_clusters_one_port("workers_per_cluster: 32", "", fair); };
    const Summary fifo = run(scenario(false));
    const Summary fair = run(scenario(true));
    // Both clusters were backlogged at the one learner port for a while in both arms.
    CHECK(fifo.jain_contended > 0.5);
    CHECK(fifo.jain_contended <= 1.0);
    // DRR in contributions: equal contended service, up to one packet's contributions per turn.
    CHECK(fair.jain_contended > 0.999);
    CHECK(fair.jain_contended <= 1.0);
}

TEST_CASE("clusters of different sizes: FIFO shares the port per worker, fair queues per cluster") {
    const auto scenario = [](bool fair) { return two_clusters_one_port("cluster_workers: '8, 24'", "aggregation: false, ", fair); };
    const Scenario s = scenario(false);
    CHECK(s.total_workers() == 32);
    CHECK(s.first_worker(1) == 8);
    const Summary fifo = run(s);
    const Summary fair = run(scenario(true));
    REQUIRE(fifo.per_cluster.size() == 2);
    CHECK(fifo.per_cluster[0].workers == 8);
    CHECK(fifo.per_cluster[1].workers == 24);
    CHECK(fifo.workers == 32);
    // Offered 8:24 into one 10 GbE port: FIFO serves about that (Jain near 1/(2 (1/16 + 9/16)) = 0.8),
    // the fair queues half each.
    CHECK(fifo.jain_contended < 0.9);
    CHECK(fair.jain_contended > 0.99);
    for (const Summary* r : {&fifo, &fair}) CHECK(r->contributions_sent == r->contributions_applied + r->contributions_dropped);
}

namespace {

// The MODEL direction by hand: 3 workers of one cluster, K = 2 chunks of 64 elements (346 B
// frames), one update each, everyone asks for the model at t = 0; FIFO ports (no merging), so each
// GRADIENT is credited to its own sender. The learner publishes every 400 us when something was
// applied: version 1 at t = 0 (sent in answer to the three requests), version 2 at 400 us (the
// updates arrived at about 105 us), and at 800 us nothing new was applied. Rebroadcasts (250 ms)
// fall outside the 1 ms run.
Scenario model_by_hand(const char* delivery) {
    return load_scenario(fmt::format(
        "seed: 7\nduration_ms: 1\ntopology: {{kind: tor}}\n"
        "workload: {{clusters: 1, workers_per_cluster: 3, chunks: 2, chunk_elems: 64, compute_us: 100, jitter: 0,"
        " start_together: true, max_updates: 1}}\n"
        "links: {{host_gbps: 100, learner_gbps: 10, prop_ns: 500}}\n"
        "queue: {{aggregation: false, mark_depth_packets: 0}}\n"
        "transport: {{window_control: false, switch_feedback: false}}\n"
        "model: {{delivery: {}, publish_interval_us: 400}}\n", delivery), "test");
}

}  // namespace

TEST_CASE("MODEL direction by hand: requests, publishes, CREDIT frames and both directions' bytes") {
    constexpr std::uint64_t kChunk = 42 + 48 + 64 * 4;  // a GRADIENT or MODEL frame: 346 B
    constexpr std::uint64_t kRequest = 42 + 48;         // a model request: header only
    constexpr std::uint64_t kCredit = 42 + 48 + 16;     // a CREDIT: header + body
    const Summary uni = run(model_by_hand("unicast"));
    Scenario rep_scenario = model_by_hand("replicated");
    rep_scenario.credit_batching = shesha::drl::CreditBatching::Off;  // one CREDIT frame each, as unicast (fan-out: below)
    const Summary rep = run(rep_scenario);
    for (const Summary* r : {&uni, &rep}) {
        const ModelTraffic& m = r->model;
        CHECK(m.requests_sent == 3);
        CHECK(m.requests_answered == 3);
        CHECK(m.answer_chunks == 6);           // version 1: 2 chunks to each asker, unicast either way
        CHECK(m.versions_published == 1);      // version 2; nothing applied between 400 and 800 us
        CHECK(m.chunks_received == 12);
        CHECK(m.versions_adopted == 6);        // versions 1 and 2 at each worker
        CHECK(m.verify_failures == 0);
        CHECK(m.workers_without_model == 0);
        CHECK(m.learner_nic_drops == 0);
        CHECK(r->chunks_sent == 6);
        CHECK(r->contributions_applied == 6);
        CHECK(r->staleness_max == 0);          // computed on version 1, applied while 1 was current
        CHECK(r->staleness_at_generation_mean == 0);
        // Up: 6 GRADIENTs and 3 requests; down: 6 CREDITs (one per chunk, to its sender) and MODEL.
        CHECK(m.up_bytes == 6 * kChunk + 3 * kRequest);
        CHECK(m.down_credit_bytes == 6 * kCredit);
        // Wire time at 10 GbE over the 1 ms run: (frame + 24 B) * 8 bits / 10 per ns, rounded up.
        CHECK(m.up_utilisation == Approx((6 * 296 + 3 * 92) / 1e6));
    }
    // Unicast: version 2 goes to each of the 3 workers; replicated: once, and the switch makes the copies.
    CHECK(uni.model.unicast_chunks == 12);
    CHECK(uni.model.group_chunks == 0);
    CHECK(uni.model.down_model_bytes == 12 * kChunk);
    CHECK(uni.model.down_bytes == 12 * kChunk + 6 * kCredit);
    CHECK(uni.model.down_utilisation == Approx((12 * 296 + 6 * 104) / 1e6));
    CHECK(rep.model.unicast_chunks == 6);
    CHECK(rep.model.group_chunks == 2);
    CHECK(rep.model.down_model_bytes == 8 * kChunk);
    CHECK(rep.model.down_utilisation == Approx((8 * 296 + 6 * 104) / 1e6));
    // The publish alone: 1/N of unicast's chunks (N = 3 workers).
    CHECK(uni.model.unicast_chunks - uni.model.answer_chunks == 3 * rep.model.group_chunks);
    using shesha::core::SwitchCounter;
    CHECK(rep.switch_counters[SwitchCounter::ModelJoined] == 3);
    CHECK(rep.switch_counters[SwitchCounter::ModelReplicated] == 2);
    CHECK(rep.switch_counters[SwitchCounter::ModelCopies] == 6);
    CHECK(rep.switch_counters[SwitchCounter::ModelNotMember] == 0);
    CHECK(rep.switch_counters[SwitchCounter::ModelMemberPortUnknown] == 0);
    CHECK(uni.switch_counters[SwitchCounter::ModelReplicated] == 0);
    // The one-directional run of the same scenario: nothing on the way back.
    Scenario none = model_by_hand("none");
    const Summary one = run(none);
    CHECK(one.model.down_bytes == 0);
    CHECK(one.model.up_bytes == 6 * kChunk);
}

TEST_CASE("unicast MODEL copies that find the learner's send queue full wait in the learner and all arrive whole") {
    // The same run with room for 3 datagrams in the learner host's send queue: the three answers to
    // t = 0's requests (6 chunks) and later the publish (6 more) do not fit at once. The learner
    // sends unicast MODEL only while the queue is less than half full (1 datagram here) and the
    // rest as it drains: nothing is lost, every worker adopts both versions, and no CREDIT is lost
    // either (the other half of the queue is CREDIT's).
    Scenario tight = model_by_hand("unicast");
    tight.learner_nic_packets = 3;
    const Summary r = run(tight);
    const ModelTraffic& m = r.model;
    CHECK(m.learner_nic_model_drops == 0);
    CHECK(m.learner_nic_credit_drops == 0);
    CHECK(m.sends_deferred == 6);  // answers and publish together, in this deterministic run
    CHECK(m.unicast_chunks == 12);
    CHECK(m.answer_chunks == 6);
    CHECK(m.chunks_received == 12);
    CHECK(m.versions_adopted == 6);
    CHECK(m.workers_without_model == 0);
    CHECK(m.verify_failures == 0);
    CHECK(r.contributions_applied == 6);
}

TEST_CASE("model.credit_batching: each chunk's CREDITs as one CREDIT_BATCH to the group, fanned out by the switch") {
    constexpr std::uint64_t kBatch = 42 + 48 + 24;  // a CREDIT_BATCH of one entry: header + entry
    Scenario unbatched = model_by_hand("replicated");
    unbatched.credit_batching = shesha::drl::CreditBatching::Off;
    const Summary rep = run(unbatched);
    const Summary bat = run(model_by_hand("replicated"));  // on by default with replicated delivery
    Scenario forced = model_by_hand("replicated");
    forced.credit_batching = shesha::drl::CreditBatching::On;
    CHECK(run(forced).model.down_credit_bytes == bat.model.down_credit_bytes);
    using shesha::core::SwitchCounter;
    // FIFO ports: each chunk is credited to its own sender, so six batches of one entry each, and the
    // switch hands each worker the CREDIT it would have had: the same run otherwise.
    CHECK(bat.switch_counters[SwitchCounter::CreditBatches] == 6);
    CHECK(bat.switch_counters[SwitchCounter::CreditCopies] == 6);
    CHECK(bat.switch_counters[SwitchCounter::CreditWorkerUnknown] == 0);
    CHECK(bat.switch_counters[SwitchCounter::CreditMemberPortUnknown] == 0);
    CHECK(rep.switch_counters[SwitchCounter::CreditBatches] == 0);
    CHECK(bat.model.down_credit_bytes == 6 * kBatch);
    CHECK(bat.contributions_applied == rep.contributions_applied);
    CHECK(bat.model.versions_adopted == rep.model.versions_adopted);
    CHECK(bat.credit_timeouts == 0);
    // Merging, windows and FEEDBACK at the study's 16 shared clusters: a batch carries the units of a
    // merged chunk, so fewer CREDIT bytes leave the learners (a quarter fewer at least); contributions are conserved.
    const auto study = [](bool batching) {
        Scenario x = load_scenario(
            "seed: 3\nduration_ms: 5\ntopology: {kind: tor, shared_bottleneck: true}\n"
            "workload: {clusters: 16, workers_per_cluster: 32, chunks: 8, chunk_elems: 256, compute_us: 1000}\n"
            "links: {host_gbps: 100, learner_gbps: 10, prop_ns: 500}\n"
            "queue: {capacity_packets: 512, mark_depth_packets: 32}\nmodel: {delivery: replicated}\n",
            "test");
        x.credit_batching = batching ? shesha::drl::CreditBatching::Auto : shesha::drl::CreditBatching::Off;
        return run(x);
    };
    const Summary one = study(false), many = study(true);
    for (const Summary* r : {&one, &many}) CHECK(r->contributions_sent == r->contributions_applied + r->contributions_dropped);
    CHECK(many.switch_counters[SwitchCounter::CreditBatches] > 0);
    CHECK(many.switch_counters[SwitchCounter::CreditCopies] > 2 * many.switch_counters[SwitchCounter::CreditBatches]);
    CHECK(many.model.down_credit_bytes * 4 < one.model.down_credit_bytes * 3);  // 637 against 1,047 kB
}

TEST_CASE("staleness splits into versions behind at generation and versions published during the trip") {
    // The scaling study's 16 shared clusters of 32 workers (run_study.py) for 10 ms: unicast MODEL (one
    // copy per worker) fills the 10 GbE port's downlink, so workers compute on late models;
    // replicated MODEL (one copy per cluster) reaches them in time.
    const auto scenario = [](const char* delivery) {
        return load_scenario(fmt::format(
            "seed: 3\nduration_ms: 10\n"
            "topology: {{kind: tor, shared_bottleneck: true}}\n"
            "workload: {{clusters: 16, workers_per_cluster: 32, chunks: 8, chunk_elems: 256, compute_us: 1000}}\n"
            "links: {{host_gbps: 100, learner_gbps: 10, prop_ns: 500}}\n"
            "queue: {{capacity_packets: 512, mark_depth_packets: 32}}\n"
            "model: {{delivery: {}}}\n", delivery), "test");
    };
    const Summary uni = run(scenario("unicast"));
    const Summary rep = run(scenario("replicated"));
    for (const Summary* r : {&uni, &rep}) {
        CHECK(r->staleness_split);
        CHECK(r->staleness_mean > 0);
        CHECK(r->staleness_at_generation_mean >= 0);
        CHECK(r->staleness_at_generation_mean <= r->staleness_mean);  // the trip adds, never subtracts
    }
    // MODEL waits at the learner for its host's send queue (none lost): workers keep old models.
    CHECK(uni.model.learner_nic_drops == 0);
    CHECK(uni.model.sends_deferred > 0);
    CHECK(uni.staleness_at_generation_mean > rep.staleness_at_generation_mean);
    CHECK(uni.staleness_at_generation_mean > 0);
    // One direction: no MODEL, so no split.
    const Summary one = run(scenario("none"));
    CHECK_FALSE(one.staleness_split);
    CHECK(one.staleness_at_generation_mean == 0);
}

TEST_CASE("links.learner_down_gbps: the learner host's sends (MODEL, CREDIT) at their own rate, the learner port's egress at learner_gbps") {
    // model_by_hand's run with the learner's own link at 1 Gbit/s: the same frames both ways (the
    // run is sparse enough that nothing else changes), the way down serialized at 1 Gbit/s (370 B
    // MODEL and 130 B CREDIT on the wire: 2,960 and 1,040 ns), the way up still at 10 (296, 92 ns).
    Scenario s = model_by_hand("unicast");
    CHECK(s.learner_down_rate_gbps() == 10);  // unset: learner_gbps, as before the key
    s = load_scenario("links: {learner_gbps: 10, learner_down_gbps: 1}\n", "test");
    CHECK(s.learner_down_rate_gbps() == 1);
    Scenario slow = model_by_hand("unicast");
    slow.learner_down_gbps = 1;
    const Summary r = run(slow);
    const ModelTraffic& m = r.model;
    CHECK(m.unicast_chunks == 12);
    CHECK(m.down_model_bytes == 12 * (42 + 48 + 64 * 4));
    CHECK(m.down_credit_bytes == 6 * (42 + 48 + 16));
    CHECK(m.down_utilisation == Approx((12 * 2960 + 6 * 1040) / 1e6));
    CHECK(m.up_utilisation == Approx((6 * 296 + 3 * 92) / 1e6));
    // Strict: a rate out of range names the key.
    try {
        (void)load_scenario("links: {learner_down_gbps: 0}\n", "f.yaml");
        FAIL("no error");
    } catch (const ConfigError& e) {
        CHECK_THAT(std::string(e.what()), Catch::Contains("'links.learner_down_gbps'"));
    }
}

TEST_CASE("MODEL direction on leaf-spine: replicated copies cross the fabric; deterministic for a seed") {
    const Scenario a = load_scenario(
        "seed: 11\nduration_ms: 12\ntopology: {kind: leaf_spine, leaves: 3, spines: 2}\n"
        "workload: {clusters: 3, workers_per_cluster: 8, chunks: 4, chunk_elems: 128, compute_us: 200, jitter: 0.3}\n"
        "links: {learner_gbps: 10, fabric_gbps: 25}\nmodel: {delivery: replicated, publish_interval_us: 2000}\n",
        "test");
    Simulator s1(a), s2(a);
    const Summary r1 = s1.run();
    const Summary r2 = s2.run();
    CHECK(row_without_wall_time(a, r1) == row_without_wall_time(a, r2));
    CHECK(series_csv("x", s1.series()) == series_csv("x", s2.series()));
    const ModelTraffic& m = r1.model;
    CHECK(m.versions_published > 0);
    CHECK(m.workers_without_model == 0);
    CHECK(m.verify_failures == 0);
    // A multicast tree (model.tree, the default): each worker's request joined at its leaf, at its
    // cluster's spine and at the learners' leaf (3 x 24). A group chunk went once from the
    // learners' leaf to the cluster's spine and once from the spine to each of the 3 leaves (4
    // fabric copies), was replicated at those 5 switches, and became one copy per member (8 per
    // cluster) at the leaves; each copy reached its worker.
    using shesha::core::SwitchCounter;
    CHECK(r1.switch_counters[SwitchCounter::ModelJoined] == 3 * 24);
    CHECK(r1.switch_counters[SwitchCounter::ModelReplicated] == 5 * m.group_chunks);
    CHECK(r1.switch_counters[SwitchCounter::ModelFabricCopies] == 4 * m.group_chunks);
    CHECK(r1.switch_counters[SwitchCounter::ModelCopies] == 8 * m.group_chunks);
    CHECK(r1.switch_counters[SwitchCounter::ModelMemberPortUnknown] == 0);
    CHECK(m.chunks_received == m.unicast_chunks + 8 * m.group_chunks);
    CHECK(r1.hops[static_cast<int>(HopLevel::FabricReturn)].departures > 0);
    CHECK(r1.contributions_sent == r1.contributions_applied + r1.contributions_dropped);
    CHECK(r1.verify_failures == 0);
    CHECK(r1.learner_rejects == 0);
    Scenario b = a;
    b.seed = 12;
    CHECK(row_without_wall_time(b, run(b)) != row_without_wall_time(b, r1));

    // Without the tree only the learners' leaf replicates: 8 copies per group chunk cross the fabric.
    Scenario flat = a;
    flat.model_tree = false;
    const Summary f = run(flat);
    CHECK(f.switch_counters[SwitchCounter::ModelJoined] == 24);
    CHECK(f.switch_counters[SwitchCounter::ModelReplicated] == f.model.group_chunks);
    CHECK(f.switch_counters[SwitchCounter::ModelFabricCopies] == 0);
    CHECK(f.switch_counters[SwitchCounter::ModelCopies] == 8 * f.model.group_chunks);
    CHECK(f.model.chunks_received == f.model.unicast_chunks + 8 * f.model.group_chunks);
    CHECK(f.model.workers_without_model == 0);
}

namespace {

// A 200-byte UDP frame with the given IPv4 TOS, tagged by its first payload byte.
std::vector<std::uint8_t> tos_frame(std::uint8_t tos, std::uint8_t tag) {
    std::vector<std::uint8_t> f(256, 0);
    shesha::frame::Endpoints ep;
    ep.src_ip = 0x0B000000u;
    ep.dst_ip = 0x0A000001u;
    ep.src_port = ep.dst_port = 17717;
    f[shesha::frame::kUdpPayloadOffset] = tag;
    f.resize(shesha::frame::build_udp_frame(ep, 200 - shesha::frame::kUdpPayloadOffset, f, false));
    f[shesha::frame::kEthHeaderSize + 1] = tos;
    return f;
}

// Enqueues the frames in order, then drains the queue: the tags in departure order (0xFF: refused).
std::vector<int> through(HostQueue& q, std::vector<std::vector<std::uint8_t>>& frames) {
    std::vector<int> order;
    std::uint64_t now = 0;
    for (auto& f : frames) {
        shesha::core::Arrival a;
        a.handle = f.data();
        a.frame = f.data();
        a.frame_len = static_cast<std::uint32_t>(f.size());
        if (q.enqueue(a, now++).status != shesha::core::EnqueueStatus::Queued) order.push_back(0xFF);
    }
    shesha::core::Departure d;
    while (q.dequeue(now++, d)) order.push_back(d.frame[shesha::frame::kUdpPayloadOffset]);
    return order;
}

}  // namespace

TEST_CASE("learner host send queue: pfifo_fast bands by TOS, CREDIT (0x10) ahead of MODEL (0), one shared capacity") {
    // The kernel's map: TOS 0x10 (IPTOS_LOWDELAY) band 0; 0 and ECN-only values band 1; 0x08
    // (IPTOS_THROUGHPUT, bulk) band 2.
    CHECK(HostQueue::tos_band(0x10) == 0);
    CHECK(HostQueue::tos_band(0x00) == 1);
    CHECK(HostQueue::tos_band(0x01) == 1);
    CHECK(HostQueue::tos_band(0x02) == 1);
    CHECK(HostQueue::tos_band(0x08) == 2);
    CHECK(HostQueue::tos_band(0xB8) == 1);  // DSCP EF: rt_tos2priority sees 0x18, INTERACTIVE_BULK, band 1

    // Three MODEL (tags 1-3, TOS 0), then two CREDIT (tags 4, 5): with credit priority the CREDITs
    // leave first, each band in its own order.
    std::vector<std::vector<std::uint8_t>> prio = {tos_frame(0, 1), tos_frame(0, 2), tos_frame(0, 3), tos_frame(0x10, 4),
                                                   tos_frame(0x10, 5)};
    HostQueue q3(16, 16 * 2048, 3);
    CHECK(through(q3, prio) == std::vector<int>{4, 5, 1, 2, 3});
    // Without it the learner sends CREDIT with TOS 0 too: one band, FIFO, as the one-band queue.
    std::vector<std::vector<std::uint8_t>> plain = {tos_frame(0, 1), tos_frame(0, 2), tos_frame(0, 3), tos_frame(0, 4),
                                                    tos_frame(0, 5)};
    HostQueue fifo3(16, 16 * 2048, 3);
    HostQueue fifo1(16, 16 * 2048, 1);
    CHECK(through(fifo3, plain) == std::vector<int>{1, 2, 3, 4, 5});
    CHECK(through(fifo1, plain) == std::vector<int>{1, 2, 3, 4, 5});

    // One capacity for the bands together: 4 packets; the fifth arrival is refused whatever its band.
    std::vector<std::vector<std::uint8_t>> full = {tos_frame(0, 1), tos_frame(0, 2), tos_frame(0, 3), tos_frame(0x10, 4),
                                                   tos_frame(0x10, 5)};
    HostQueue small(4, 4 * 2048, 3);
    CHECK(through(small, full) == std::vector<int>{0xFF, 4, 1, 2, 3});
    const shesha::core::QueueStats st = small.stats();
    CHECK(st.dropped == 1);
    CHECK(st.dequeued == 4);
    CHECK(st.depth_samples == 5);
    CHECK(st.depth_max == 4);
    CHECK(st.depth_sum == 0 + 1 + 2 + 3 + 4);
    // The same arrivals all in one band: the same statistics as the one-band queue.
    std::vector<std::vector<std::uint8_t>> same = {tos_frame(0, 1), tos_frame(0, 2), tos_frame(0, 3), tos_frame(0, 4),
                                                   tos_frame(0, 5)};
    HostQueue a3(4, 4 * 2048, 3);
    HostQueue a1(4, 4 * 2048, 1);
    CHECK(through(a3, same) == through(a1, same));
    CHECK(a3.stats().dropped == a1.stats().dropped);
    CHECK(a3.stats().depth_sum == a1.stats().depth_sum);
    CHECK(a3.stats().sojourn_sum_ticks == a1.stats().sojourn_sum_ticks);
}

TEST_CASE("model.credit_priority: CREDITs wait far less behind MODEL at the learner host's send queue") {
    // One cluster of 64 workers whose learner host sends at 1 Gbit/s: unicast publishes (64 x 8
    // chunks of 1,114 B every 5 ms) and the CREDITs (one per gradient chunk) overrun it. With the
    // priority the learner marks CREDIT 0x10 and its send queue serves them first.
    const auto scenario = [](bool prio) {
        return load_scenario(fmt::format("seed: 2\nduration_ms: 6\ntopology: {{kind: tor}}\n"
                                         "workload: {{clusters: 1, workers_per_cluster: 64, chunks: 8, chunk_elems: 256, compute_us: 1000}}\n"
                                         "links: {{learner_gbps: 10, learner_down_gbps: 1}}\n"
                                         "model: {{credit_priority: {}}}\n",
                                         prio),
                             "test");
    };
    CHECK(load_scenario("", "f.yaml").credit_priority);
    const Scenario s_on = scenario(true);
    const Scenario s_off = scenario(false);
    const Summary on = run(s_on);
    const Summary off = run(s_off);
    for (const Summary* r : {&on, &off}) {
        CHECK(r->model.credits_sent > 1000);
        CHECK(r->contributions_sent == r->contributions_applied + r->contributions_dropped);
        CHECK(r->verify_failures == 0);
        CHECK(r->learner_rejects == 0);
        CHECK(r->model.verify_failures == 0);
    }
    // Behind MODEL bursts of 4.6 ms of wire time, against only the CREDITs ahead.
    CHECK(off.model.credit_wait_mean_us > 500);
    CHECK(on.model.credit_wait_mean_us < off.model.credit_wait_mean_us / 10);
    // Deterministic, as every run.
    CHECK(row_without_wall_time(s_on, run(s_on)) == row_without_wall_time(s_on, on));
    try {
        (void)load_scenario("model: {credit_priority: 3}\n", "f.yaml");
        FAIL("no error");
    } catch (const ConfigError& e) {
        CHECK_THAT(std::string(e.what()), Catch::Contains("'model.credit_priority'"));
    }
}

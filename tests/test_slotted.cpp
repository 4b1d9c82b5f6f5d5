// shesha-sim's slotted mode: hand-checked runs of the real queue and senders slot by slot, the
// measurements of fairness, responsiveness and AoM on hand-built traces, replay-file errors.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "slotted.h"

using namespace shesha::sim;

namespace {

SlottedSystem small_system() {
    SlottedSystem s;
    s.clusters = 2;
    s.horizon = 3;
    s.chunks = 2;
    s.queue_packets = 4;
    s.service_rate = 1;
    s.max_arrivals = 2;
    s.mark_depth = 0;
    s.feedback = false;
    return s;
}

std::vector<std::pair<int, int>> departures(const SlotRecord& r) {
    std::vector<std::pair<int, int>> out;
    for (const auto& d : r.departures) out.emplace_back(d.cluster, d.contributions);
    return out;
}

// A slot record for measure(): served, backlogged/greedy, congested, cut per cluster.
SlotRecord slot(std::vector<std::int64_t> served, std::vector<bool> backlogged, std::int64_t depth_end,
                std::vector<bool> congested = {false, false}, std::vector<bool> cut = {false, false}) {
    SlotRecord r;
    r.served = served;
    r.backlogged = backlogged;
    r.greedy = backlogged;
    r.congested = congested;
    r.cut = cut;
    r.depth_end = depth_end;
    return r;
}

const char* kReplay = R"({
  "property": "aom", "step": 1, "what": "test",
  "model": {"clusters": 2, "horizon": 2, "chunks": 2, "elems_per_chunk": 8, "service_rate": 1, "max_arrivals": 2,
            "credit_delay": 1, "feedback_delay": 1, "feedback": true, "queue_packets": 4, "mark_depth": 2,
            "aggregation": true, "w_init": 2, "w_min": 1, "w_max": 4, "additive_increase": 1, "gain": 0.0625,
            "alpha_init": 1, "congestion_threshold": 0},
  "properties": {"aom": {"bound": 1}},
  "steps": [{"t": 0, "send": [2, 2]}, {"t": 1, "send": [0, 0]}]
})";

}  // namespace

TEST_CASE("two clusters, distinct keys: FIFO order, depths and ages as computed by hand") {
    // t0: arrivals c0k0 c1k0 c0k1 c1k1 (round robin), nothing to merge; c0k0 leaves.
    // t1: c1k0 leaves; t2: c0k1 leaves. c1k1 still waits at the end.
    const SlottedRun run = run_slotted(small_system(), {{2, 2}, {0, 0}, {0, 0}});
    REQUIRE(run.slots.size() == 3);
    REQUIRE(run.payloads_exact);
    REQUIRE(run.notes.empty());
    CHECK(run.slots[0].sent == std::vector<std::int64_t>{2, 2});
    CHECK(run.slots[0].depth_after_arrivals == 4);
    CHECK(departures(run.slots[0]) == std::vector<std::pair<int, int>>{{0, 1}});
    CHECK(departures(run.slots[1]) == std::vector<std::pair<int, int>>{{1, 1}});
    CHECK(departures(run.slots[2]) == std::vector<std::pair<int, int>>{{0, 1}});
    CHECK(run.slots[0].depth_end == 3);
    CHECK(run.slots[1].depth_end == 2);
    CHECK(run.slots[2].depth_end == 1);
    for (const auto& s : run.slots) {
        CHECK(s.merges == 0);
        CHECK(s.drops == 0);
    }
    const SlotMeasurements m = measure(run.slots, SlotBounds{});
    CHECK(m.ages == std::vector<std::vector<std::int64_t>>{{0, 1}, {1, 0}, {0, 1}});
    CHECK(m.aom_peak == std::vector<std::int64_t>{1, 1});
    CHECK(m.violations.empty());
}

TEST_CASE("one cluster, one chunk: two updates merge in the queue and leave as one exact packet") {
    SlottedSystem s = small_system();
    s.clusters = 1;
    s.chunks = 1;
    s.horizon = 2;
    const SlottedRun run = run_slotted(s, {{2}, {0}});
    REQUIRE(run.payloads_exact);
    CHECK(run.slots[0].merges == 1);
    CHECK(run.slots[0].depth_after_arrivals == 1);
    CHECK(departures(run.slots[0]) == std::vector<std::pair<int, int>>{{0, 2}});
    CHECK(run.slots[0].served == std::vector<std::int64_t>{1});  // one packet (carrying both updates)
    CHECK(run.slots[1].departures.empty());

    s.aggregation = false;  // the FIFO arm: two packets, two slots
    const SlottedRun fifo = run_slotted(s, {{2}, {0}});
    CHECK(fifo.slots[0].merges == 0);
    CHECK(departures(fifo.slots[0]) == std::vector<std::pair<int, int>>{{0, 1}});
    CHECK(departures(fifo.slots[1]) == std::vector<std::pair<int, int>>{{0, 1}});
}

TEST_CASE("a one-slot queue tail-drops what does not fit") {
    SlottedSystem s = small_system();
    s.queue_packets = 1;
    s.aggregation = false;
    s.horizon = 1;
    const SlottedRun run = run_slotted(s, {{2, 2}});
    CHECK(run.slots[0].drops == 3);
    CHECK(departures(run.slots[0]) == std::vector<std::pair<int, int>>{{0, 1}});
    CHECK(run.slots[0].depth_end == 0);
}

TEST_CASE("the real window limits what a sender puts on the wire") {
    SlottedSystem s = small_system();
    s.w_init = 1;
    s.w_max = 1;
    s.clusters = 1;
    const SlottedRun run = run_slotted(s, {{2}, {0}, {0}});
    CHECK(run.slots[0].sent == std::vector<std::int64_t>{1});
    REQUIRE(run.notes.size() == 1);
    CHECK(run.notes[0] == "slot 0: cluster 0 asked to send 2 but the real window allowed 1");
}

TEST_CASE("an invalid system is refused, not run") {
    SlottedSystem s = small_system();
    s.queue_packets = 3;
    CHECK_THROWS_AS(run_slotted(s, {{1, 1}}), std::invalid_argument);
    s = small_system();
    s.elems_per_chunk = 1000;  // would not fit the frame buffers
    CHECK_THROWS_AS(run_slotted(s, {{1, 1}}), std::invalid_argument);
}

TEST_CASE("slotted runs are deterministic") {
    SlottedSystem s = small_system();
    s.horizon = 6;
    s.mark_depth = 2;
    s.feedback = true;
    const std::vector<std::vector<int>> w{{2, 2}, {2, 1}, {1, 2}, {2, 2}, {0, 1}, {2, 0}};
    const SlottedRun a = run_slotted(s, w), b = run_slotted(s, w);
    const SlotMeasurements ma = measure(a.slots, {}), mb = measure(b.slots, {});
    CHECK(slots_csv(a.slots, ma) == slots_csv(b.slots, mb));
}

TEST_CASE("measure: ages, fairness windows and reaction times on a hand-built trace") {
    // Cluster 0 is served 2 per slot, cluster 1 nothing, both backlogged in slots 0..3.
    std::vector<SlotRecord> tr{
        slot({2, 0}, {true, true}, 3, {true, false}),
        slot({2, 0}, {true, true}, 3),
        slot({2, 0}, {true, true}, 3, {false, false}, {true, false}),
        slot({2, 0}, {true, true}, 3),
        slot({0, 1}, {false, true}, 1, {false, true}),
    };
    SlotBounds b;
    b.aom = AomBound{3};
    b.fairness = FairnessBound{3, 5};
    b.responsiveness = ResponsivenessBound{1, 2};
    const SlotMeasurements m = measure(tr, b);
    CHECK(m.ages == std::vector<std::vector<std::int64_t>>{{0, 1}, {0, 2}, {0, 3}, {0, 4}, {0, 0}});
    CHECK(m.aom_peak == std::vector<std::int64_t>{0, 4});
    CHECK(m.fairness_worst == 6);         // windows 0..2 and 1..3: 6 apart
    CHECK(m.fairness_worst_slot == 0);
    // Cluster 0 congested at 0, cut at 2: 2 slots. Cluster 1 congested at 4, depth 1 < 2 at once.
    CHECK(m.reaction_worst == std::vector<std::int64_t>{2, 0});
    std::vector<std::pair<std::string, int>> v;
    for (const auto& x : m.violations) v.emplace_back(x.property, x.slot);
    CHECK(v == std::vector<std::pair<std::string, int>>{{"aom", 3}, {"fairness", 0}, {"fairness", 1},
                                                       {"responsiveness", 0}});
    // Looser bounds: nothing violated.
    b.aom = AomBound{4};
    b.fairness = FairnessBound{3, 6};
    b.responsiveness = ResponsivenessBound{2, 2};
    CHECK(measure(tr, b).violations.empty());
}

TEST_CASE("replay files: parsed, and errors name the key") {
    const SlottedReplay r = parse_replay(kReplay, "x.json");
    CHECK(r.property == "aom");
    CHECK(r.system.clusters == 2);
    CHECK(r.system.mark_depth == 2);
    REQUIRE(r.bounds.aom);
    CHECK(r.bounds.aom->bound == 1);
    CHECK(!r.bounds.fairness);
    CHECK(r.workload == std::vector<std::vector<int>>{{2, 2}, {0, 0}});

    auto error_of = [](std::string text) {
        try {
            parse_replay(text, "x.json");
        } catch (const ReplayFileError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    // Each row: a piece of the valid file, its replacement, the whole message.
    const struct {
        const char* from;
        const char* to;
        const char* message;
    } edits[] = {
        {"\"gain\": 0.0625,", "", "x.json: missing key model.gain"},
        {"\"horizon\": 2", "\"horizon\": \"two\"", "x.json: key model.horizon: wrong type"},
        {"[0, 0]", "[0]", "x.json: steps[1].send has 1 entries, expected one per cluster (2)"},
        {"\"horizon\": 2", "\"horizon\": 3", "x.json: the workload has 2 steps, model.horizon is 3"},
        {"\"queue_packets\": 4", "\"queue_packets\": 3",
         "x.json: queue_packets must be a power of two >= 1 (the real queue rounds up)"},
        {"[2, 2]", "[2, 3]", "x.json: steps[0].send: 3 lies outside [0, model.max_arrivals = 2]"},
    };
    for (const auto& e : edits) {
        std::string t = kReplay;
        t.replace(t.find(e.from), std::string(e.from).size(), e.to);
        CHECK(error_of(t) == e.message);
    }
    CHECK(error_of("[1, 2]").find("expected a JSON object") != std::string::npos);
    CHECK(error_of("{\"property\": ").find("not a counterexample file") != std::string::npos);
    // Damaged files: the file named first, then what is wrong (nlohmann-json's own words for syntax).
    CHECK(error_of("{\"property\": ").starts_with("x.json: not a counterexample file: not valid JSON: parse error at line 1"));
    CHECK(error_of("").starts_with("x.json: not a counterexample file: not valid JSON: "));
    std::string t = kReplay;
    t.replace(t.find("[0, 0]"), 6, "[0, \"x\"]");
    CHECK(error_of(t) == "x.json: key steps[1].send: wrong type");
    t = kReplay;
    t.replace(t.find("\"clusters\": 2"), 13, "\"clusters\": 2.5");
    CHECK(error_of(t) == "x.json: key model.clusters: wrong type");
    t = kReplay;
    t.replace(t.find("\"feedback\": true"), 16, "\"feedback\": 1");
    CHECK(error_of(t) == "x.json: key model.feedback: wrong type");
    CHECK(error_of(std::string(kReplay) + "}").find("x.json: not a counterexample file: not valid JSON") == 0);
}

// shesha-sim's training workload (docs/simulation.md, "Training workload"): real A3C workers and
// the real learner core in virtual time. Deterministic for a seed (bit-identical return curve and
// counters), contributions conserved exactly (sent = applied + dropped + refused, with drops
// forced), CartPole learns within a few virtual seconds, and bad scenarios are refused naming the key.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "sim_config.h"
#include "simulator.h"
#include "training_backend.h"

using namespace shesha::sim;

namespace {

std::string configs_dir() {
    const char* d = std::getenv("SHESHA_CONFIGS_DIR");
    return d != nullptr ? d : "configs";
}

// Two clusters (CartPole-v1, Acrobot-v1 from the shipped cluster YAMLs) of `workers` each behind
// one shared 10 GbE learner port; `extra` is appended (other YAML sections), `overrides` are --set's.
Scenario scenario(std::uint64_t seed, double duration_ms, const std::string& workers = "2, 2", const std::string& extra = "",
                  const std::vector<std::string>& overrides = {}) {
    const std::string dir = configs_dir();
    return load_scenario(fmt::format("seed: {}\nduration_ms: {}\n"
                                     "topology: {{kind: tor, shared_bottleneck: true}}\n"
                                     "workload: {{kind: training, cluster_workers: \"{}\", jitter: 0.1}}\n"
                                     "training: {{clusters: \"{}/cluster-cartpole.yaml, {}/cluster-acrobot.yaml\", "
                                     "targets: \"475, none\"}}\n"
                                     "links: {{host_gbps: 10, learner_gbps: 10}}\n"
                                     "model: {{delivery: replicated}}\n"
                                     "output: {{sample_us: 10000}}\n{}",
                                     seed, duration_ms, workers, dir, dir, extra),
                         "test", overrides);
}

Summary run(const Scenario& s) {
    Simulator sim(s, &torch_training_backend());
    return sim.run();
}

// Everything a run reports except wall time, the returns to the bit.
std::string fingerprint(const Scenario& s, Summary r) {
    r.wall_s = 0;
    r.packets_per_wall_s = 0;
    r.compute_wall_s = 0;
    std::string out = summary_csv_row("x", s, r) + cluster_csv("x", r) + training_curve_csv("x", r);
    for (const TrainingClusterSummary& t : r.training)
        out += fmt::format("{} {} {} {} {} {} {} {} {} {} {}\n", t.env_steps, t.episodes, t.gradients_computed,
                           t.chunks_applied, t.contributions_applied, t.contributions_refused, t.optimizer_steps,
                           t.rejected, t.duplicates, t.versions_published, t.version);
    for (const TrainingPoint& p : r.curve)  // hexadecimal floats: every bit of every return
        out += fmt::format("{:a} {:a}\n", p.eval_mean_return, p.eval_min_return);
    return out;
}

}  // namespace

TEST_CASE("training: the same seed gives a bit-identical return curve and the same counters; another seed differs") {
    const Scenario s = scenario(7, 3000);
    const Summary a = run(s);
    const Summary b = run(s);
    REQUIRE(a.curve.size() == 6);  // learner.eval_interval_ms 1000 in both YAMLs: 1, 2, 3 s per cluster
    REQUIRE(a.curve.size() == b.curve.size());
    for (std::size_t i = 0; i < a.curve.size(); ++i) {
        CHECK(a.curve[i].t_s == b.curve[i].t_s);
        CHECK(a.curve[i].env_steps == b.curve[i].env_steps);
        CHECK(a.curve[i].version == b.curve[i].version);
        // bit for bit, not within a tolerance
        CHECK(std::memcmp(&a.curve[i].eval_mean_return, &b.curve[i].eval_mean_return, sizeof(double)) == 0);
        CHECK(std::memcmp(&a.curve[i].eval_min_return, &b.curve[i].eval_min_return, sizeof(double)) == 0);
    }
    CHECK(fingerprint(s, a) == fingerprint(s, b));
    CHECK(a.events == b.events);

    const Summary c = run(scenario(8, 3000));
    CHECK(fingerprint(s, a) != fingerprint(s, c));
}

TEST_CASE("training: the learner applies exactly what the workers sent, minus what was dropped or refused (drops forced)") {
    // The FIFO arm with windows pinned open into an 8-packet port queue: tail drops at the learner port.
    const Scenario s = scenario(3, 2000, "4, 4",
                                "queue: {aggregation: false, capacity_packets: 8, mark_depth_packets: 0}\n"
                                "transport: {window_control: false, switch_feedback: false}\n");
    const Summary r = run(s);
    REQUIRE(r.training.size() == 2);
    CHECK(r.contributions_dropped > 0);
    CHECK(r.drops > 0);
    CHECK(r.contributions_sent == r.contributions_applied + r.contributions_dropped + r.contributions_refused);
    CHECK(r.learner_rejects == 0);
    std::uint64_t applied = 0, gradients = 0, chunks = 0;
    for (std::size_t c = 0; c < r.training.size(); ++c) {
        const TrainingClusterSummary& t = r.training[c];
        applied += t.contributions_applied;
        gradients += t.gradients_computed;
        chunks += t.chunks_applied;
        CHECK(t.gradients_failed == 0);
        CHECK(t.contributions_applied == r.per_cluster[c].contributions_applied);
        // FIFO arm: nothing merges, so every applied chunk is one contribution.
        CHECK(t.chunks_applied == t.contributions_applied);
        CHECK(t.env_steps >= t.gradients_computed);  // at least one step per rollout
        CHECK(t.env_steps <= 5 * t.gradients_computed + 5 * 4);  // n_steps 5 (+ a rollout under way per worker)
    }
    CHECK(applied == r.contributions_applied);
    CHECK(gradients == r.updates);  // every gradient computed was offered to the worker's CreditSender
    CHECK(r.merges == 0);
}

TEST_CASE("training: merging on, every chunk of a merged contribution is accounted for and nothing is dropped") {
    const Summary r = run(scenario(5, 2000, "4, 4"));
    CHECK(r.merges > 0);
    CHECK(r.contributions_dropped == 0);
    CHECK(r.contributions_sent == r.contributions_applied + r.contributions_refused);
    for (const TrainingClusterSummary& t : r.training) {
        CHECK(t.chunks_applied < t.contributions_applied);  // merged chunks carry several contributions
        CHECK(t.contributions_refused == 0);
        // Each gradient is 19 (CartPole) or 20 (Acrobot) chunks; what was not applied still waits in a
        // sender at the end (out of credit), so at most that many, and most of them.
        CHECK(t.contributions_applied <= t.gradients_computed * t.chunks);
        CHECK(t.contributions_applied * 10 >= t.gradients_computed * t.chunks * 9);
    }
}

TEST_CASE("training: CartPole's evaluation return rises from its start within 8 virtual seconds") {
    const Scenario s = scenario(1, 8000, "3, 1", "", {"training.targets=150, none"});
    const Summary r = run(s);
    REQUIRE(r.training.size() == 2);
    const TrainingClusterSummary& cartpole = r.training[0];
    CHECK(cartpole.env == "CartPole-v1");
    double first = -1;
    for (const TrainingPoint& p : r.curve)
        if (p.cluster == 0) {
            first = p.eval_mean_return;
            break;
        }
    REQUIRE(first >= 0);
    CHECK(first < 50);  // an untrained policy falls within a few dozen steps
    CHECK(cartpole.best_eval_mean >= 150);
    CHECK(cartpole.reached);
    CHECK(cartpole.seconds_to_target > 1.0);
    CHECK(cartpole.seconds_to_target <= 8.0);
    // Acrobot has no target here, so reaching CartPole's ends the run (stop_at_target).
    CHECK(r.sim_end_ms < 8000);
}

TEST_CASE("training: gradients on helper threads (training.compute_threads) give the same run, bit for bit") {
    const Scenario inline_ = scenario(11, 1500, "6, 6", "", {"training.eval_interval_ms=250"});
    const Scenario helpers = scenario(11, 1500, "6, 6", "", {"training.eval_interval_ms=250", "training.compute_threads=2"});
    const Summary a = run(inline_);
    const Summary b = run(helpers);
    REQUIRE(a.curve.size() == 12);
    CHECK(a.updates > 10'000);
    CHECK(fingerprint(inline_, a) == fingerprint(inline_, b));
    CHECK(a.events == b.events);
}

TEST_CASE("training: per-cluster compute (training.step_us/update_us lists); one value still means every cluster") {
    // "190" and "190, 190" are the same run, bit for bit.
    const Scenario one = scenario(4, 1000, "2, 2", "", {"training.step_us=8.2", "training.update_us=190"});
    const Scenario each = scenario(4, 1000, "2, 2", "", {"training.step_us=8.2, 8.2", "training.update_us=190,190"});
    CHECK(each.update_us.size() == 2);
    CHECK(fingerprint(one, run(one)) == fingerprint(each, run(each)));
    // Acrobot's gradient takes 2 virtual seconds (x 0.9..1.1 jitter), so each of its 2 workers
    // finishes exactly one, its first, due after duration_ms while the run drains (no rollout starts
    // after duration_ms); CartPole's go on at 190 us.
    const Scenario slow = scenario(4, 1000, "2, 2", "", {"training.update_us=190, 2000000"});
    CHECK(slow.update_us_of(0) == 190);
    CHECK(slow.update_us_of(1) == 2'000'000);
    const Summary r = run(slow);
    REQUIRE(r.training.size() == 2);
    CHECK(r.training[0].gradients_computed > 1000);
    CHECK(r.training[1].gradients_computed == 2);
    CHECK(r.training[1].env_steps > 0);  // each worker's first rollout was stepped, its gradient never due
}

TEST_CASE("training: a woken worker starts its rollout training.wake_us after the model that woke it") {
    // 0 is the run without the key, bit for bit (no random draw is spent on it).
    const Scenario plain = scenario(5, 300);
    const Scenario zero = scenario(5, 300, "2, 2", "", {"training.wake_us=0, 0"});
    CHECK(fingerprint(plain, run(plain)) == fingerprint(zero, run(zero)));
    // Acrobot's workers wait 2 virtual seconds (x 0.9..1.1) for a core after their first model
    // arrives: within a 1-second run they never start a rollout. CartPole's start at once.
    const Scenario s = scenario(5, 1000, "2, 2", "", {"training.wake_us=0, 2000000"});
    CHECK(s.wake_us_of(1) == 2'000'000);
    const Summary r = run(s);
    REQUIRE(r.training.size() == 2);
    CHECK(r.training[0].gradients_computed > 1000);
    CHECK(r.training[1].gradients_computed == 0);
    CHECK(r.training[1].env_steps == 0);
    // CartPole's workers compute their 4 gradients of a version in about 1 ms and then wait for the
    // next, published 5 ms later: 2 x 4 x 60 = 480 in 300 ms. Woken 4.5 ms after each, the 4 no
    // longer fit between two versions: fewer gradients, the same run for the same seed.
    const Scenario some = scenario(5, 300, "2, 2", "", {"training.wake_us=4500"});
    const Summary a = run(some);
    const Summary base = run(plain);
    CHECK(base.training[0].gradients_computed == 480);
    CHECK(a.training[0].gradients_computed < 480);
    CHECK(fingerprint(some, a) == fingerprint(some, run(some)));
}

TEST_CASE("training: a learner reads what reached it training.learner_wake_us after the datagram that woke it") {
    // 0 is the run without the key, bit for bit (no random draw is spent on it).
    const Scenario plain = scenario(5, 300);
    const Scenario zero = scenario(5, 300, "2, 2", "", {"training.learner_wake_us=0"});
    CHECK(fingerprint(plain, run(plain)) == fingerprint(zero, run(zero)));
    // Acrobot's learner waits 2 virtual seconds (x 0.9..1.1) for a core after its first datagram,
    // its workers' first model requests: within a 1-second run it answers none, so its workers
    // never get a model and compute nothing. CartPole's learner reads at once.
    const Scenario s = scenario(5, 1000, "2, 2", "", {"training.learner_wake_us=0, 2000000"});
    CHECK(s.learner_wake_us_of(0) == 0);
    CHECK(s.learner_wake_us_of(1) == 2'000'000);
    const Summary r = run(s);
    REQUIRE(r.training.size() == 2);
    CHECK(r.training[0].chunks_applied > 1000);
    CHECK(r.training[1].versions_published == 0);
    CHECK(r.training[1].gradients_computed == 0);
    CHECK(r.training[1].chunks_applied == 0);
    // CartPole's learner woken 8 ms late, later than its 5 ms publish interval: it applies, and so
    // publishes, at most once per wake, and its workers, who compute 4 gradients per version,
    // compute fewer in the same virtual time; every contribution sent is still accounted for (the
    // run drains what waits for a learner at its end); the same run for the same seed.
    const Scenario late = scenario(5, 300, "2, 2", "", {"training.learner_wake_us=8000, 0"});
    const Summary a = run(late);
    const Summary base = run(plain);
    CHECK(base.training[0].gradients_computed == 480);
    CHECK(a.training[0].gradients_computed < 480);
    CHECK(a.training[1].gradients_computed == base.training[1].gradients_computed);
    CHECK(a.contributions_sent == a.contributions_applied + a.contributions_dropped + a.contributions_refused);
    CHECK(fingerprint(late, a) == fingerprint(late, run(late)));
}

TEST_CASE("training: workers_read_between_rollouts: a worker reads its CREDITs after the rollout under way") {
    // One CartPole worker with a window of exactly one chunk (19 chunks a gradient) and no limit
    // of gradients per version, so that it is always computing. Read on arrival, each CREDIT lets
    // the next chunk go within microseconds: most of every gradient's chunks leave before the next
    // gradient. Read between rollouts (shesha-worker's one loop), the CREDIT of the chunk in
    // flight waits for the rollout under way: one chunk leaves per gradient, the others are summed
    // into their waiting chunks.
    std::ifstream in(configs_dir() + "/cluster-cartpole.yaml");
    std::stringstream text;
    text << in.rdbuf();
    std::string one = std::regex_replace(text.str(), std::regex("w_init: *16 "), "w_init: 1 ");
    one = std::regex_replace(one, std::regex("w_min: *0.0625 "), "w_min: 1 ");
    one = std::regex_replace(one, std::regex("w_max: *256"), "w_max: 1");
    one = std::regex_replace(one, std::regex("max_updates_per_version: *4 "), "max_updates_per_version: 0 ");
    REQUIRE(std::regex_search(one, std::regex("w_init: 1 [^]*w_min: 1 [^]*w_max: 1[^]*max_updates_per_version: 0 ")));
    const std::filesystem::path path = std::filesystem::temp_directory_path() / "shesha-test-cartpole-window-1.yaml";
    std::ofstream(path) << one;
    const auto with = [&](const char* between) {
        return scenario(2, 200, "1", "", {"training.clusters=" + path.string(), "training.targets=none",
                                          std::string("training.workers_read_between_rollouts=") + between});
    };
    const Scenario arrival_s = with("false");
    const Scenario between_s = with("true");
    const Summary arrival = run(arrival_s);
    const Summary between = run(between_s);
    const std::string again = fingerprint(between_s, run(between_s));
    std::filesystem::remove(path);
    REQUIRE(arrival.training.size() == 1);
    REQUIRE(between.training.size() == 1);
    CHECK(arrival.training[0].gradients_computed > 100);
    CHECK(arrival.chunks_sent > 10 * arrival.training[0].gradients_computed);
    // Exactly: one per gradient, and once the run's end stops its rollouts, it reads each CREDIT
    // at once and the last gradient's other 18 chunks leave.
    CHECK(between.chunks_sent == between.training[0].gradients_computed + 18);
    CHECK(between.contributions_sent == between.contributions_applied + between.contributions_dropped +
                                            between.contributions_refused);
    CHECK(fingerprint(between_s, between) == again);
    // false is the run without the key, bit for bit.
    const Scenario plain = scenario(5, 300);
    const Scenario off = scenario(5, 300, "2, 2", "", {"training.workers_read_between_rollouts=false"});
    CHECK(fingerprint(plain, run(plain)) == fingerprint(off, run(off)));
}

TEST_CASE("training: a learner publishes at its YAML's fractional publish_interval_ms, to the learner tick") {
    // CartPole's file with publish_interval_ms 7.5 (the lab's check writes such copies: the rack's
    // measured cadence), Acrobot's as shipped (5 ms); learners tick every 100 us. Over 300 virtual
    // ms a learner that always has something applied publishes every 7.5 ms (at most 40 versions;
    // 7 ms, a truncated 7.5, would give 42) and every 5 ms (at most 60).
    std::ifstream in(configs_dir() + "/cluster-cartpole.yaml");
    std::stringstream text;
    text << in.rdbuf();
    const std::string slow = std::regex_replace(text.str(), std::regex("publish_interval_ms: *5 "), "publish_interval_ms: 7.5 ");
    REQUIRE(slow != text.str());
    const std::filesystem::path path = std::filesystem::temp_directory_path() / "shesha-test-cartpole-7.5ms.yaml";
    std::ofstream(path) << slow;
    const Scenario s = scenario(3, 300, "2, 2", "", {"training.learner_tick_us=100",
                                                      "training.clusters=" + path.string() + ", " + configs_dir() + "/cluster-acrobot.yaml"});
    const Summary r = run(s);
    std::filesystem::remove(path);
    REQUIRE(r.training.size() == 2);
    CHECK(r.training[0].versions_published >= 36);
    CHECK(r.training[0].versions_published <= 40);
    CHECK(r.training[1].versions_published >= 54);
    CHECK(r.training[1].versions_published <= 60);
}

TEST_CASE("training: stop_at_target cluster stops a cluster at its own target; its AoM ends there") {
    // CartPole (target 150, reached within 8 s with seed 1) and Acrobot (no target). `all` ends the
    // run at CartPole's target; `cluster` stops CartPole's workers and learner there and Acrobot goes
    // on to duration_ms. The runs are identical up to that evaluation, so CartPole's time to target
    // and AoM are the same bit for bit, and its AoM does not depend on how long Acrobot runs on.
    const auto with = [](const char* mode, double ms) {
        return scenario(1, ms, "3, 1", "", {"training.targets=150, none", std::string("training.stop_at_target=") + mode});
    };
    const Summary all = run(with("all", 8000));
    const Summary cluster = run(with("cluster", 8000));
    const Summary longer = run(with("cluster", 9000));
    REQUIRE(all.training[0].reached);
    const double t = all.training[0].seconds_to_target;
    CHECK(all.sim_end_ms < 8000);
    CHECK(cluster.training[0].reached);
    CHECK(cluster.training[0].seconds_to_target == t);
    CHECK(cluster.sim_end_ms >= 8000);  // Acrobot ran on
    CHECK(cluster.per_cluster[0].aom_mean_us == all.per_cluster[0].aom_mean_us);
    CHECK(cluster.per_cluster[0].aom_peak_us == all.per_cluster[0].aom_peak_us);
    CHECK(longer.per_cluster[0].aom_mean_us == cluster.per_cluster[0].aom_mean_us);
    CHECK(longer.per_cluster[1].aom_mean_us != cluster.per_cluster[1].aom_mean_us);
    // CartPole stopped: no evaluation and no gradient after its target, however long Acrobot runs.
    double last_cartpole = 0, last_acrobot = 0;
    for (const TrainingPoint& p : cluster.curve) (p.cluster == 0 ? last_cartpole : last_acrobot) = p.t_s;
    CHECK(last_cartpole == t);
    CHECK(last_acrobot == 8.0);
    CHECK(longer.training[0].gradients_computed == cluster.training[0].gradients_computed);
    CHECK(longer.training[0].env_steps == cluster.training[0].env_steps);
    CHECK(longer.training[1].gradients_computed > cluster.training[1].gradients_computed);
    // Nothing is lost by the stop: what was on the wire reached the learner.
    CHECK(cluster.contributions_sent == cluster.contributions_applied + cluster.contributions_dropped +
                                            cluster.contributions_refused);
    // The series' AoM for CartPole ends at its stop too.
    Simulator sim(with("cluster", 8000), &torch_training_backend());
    (void)sim.run();
    double last_aom = 0;
    for (const SeriesRow& row : sim.series())
        if (std::string(row.metric) == "aom_us" && row.key == 0) last_aom = row.t_ms;
    CHECK(last_aom > 0);
    CHECK(last_aom <= t * 1000);
}

TEST_CASE("training scenarios: bad input is refused naming the key") {
    const std::string dir = configs_dir();
    const auto message = [](const std::function<void()>& f) {
        try {
            f();
        } catch (const ConfigError& e) {
            return std::string(e.what());
        }
        return std::string("(no error)");
    };
    CHECK_THAT(message([] { load_scenario("workload: {kind: training}\n", "t"); }), Catch::Contains("training.clusters"));
    CHECK_THAT(message([] { load_scenario("workload: {kind: trained}\n", "t"); }), Catch::Contains("workload.kind"));
    CHECK_THAT(message([&] {
                   load_scenario("workload: {kind: training}\ntraining: {clusters: " + dir +
                                     "/cluster-cartpole.yaml, targets: \"1, 2\"}\n", "t");
               }),
               Catch::Contains("training.targets"));
    CHECK_THAT(message([&] {
                   load_scenario("workload: {kind: training}\nmodel: {delivery: none}\ntraining: {clusters: " + dir +
                                     "/cluster-cartpole.yaml}\n", "t");
               }),
               Catch::Contains("model.delivery"));
    CHECK_THAT(message([&] { load_scenario("training: {clusters: " + dir + "/cluster-cartpole.yaml}\n", "t"); }),
               Catch::Contains("workload.kind"));
    // Per-cluster compute: one value, or one per cluster; stop_at_target: all, cluster, never.
    CHECK_THAT(message([] { scenario(1, 10, "2, 2", "", {"training.update_us=1, 2, 3"}); }),
               Catch::Contains("training.update_us lists 3 values for the 2 clusters"));
    CHECK_THAT(message([] { scenario(1, 10, "2, 2", "", {"training.step_us=8, fast"}); }),
               Catch::Contains("'training.step_us'"));
    CHECK_THAT(message([] { scenario(1, 10, "2, 2", "", {"training.step_us=8,,9"}); }), Catch::Contains("'training.step_us'"));
    CHECK_THAT(message([] { scenario(1, 10, "2, 2", "", {"training.update_us=-1"}); }), Catch::Contains("'training.update_us'"));
    CHECK_THAT(message([] { scenario(1, 10, "2, 2", "", {"training.wake_us=-5"}); }), Catch::Contains("'training.wake_us'"));
    CHECK_THAT(message([] { scenario(1, 10, "2, 2", "", {"training.wake_us=1, 2, 3"}); }),
               Catch::Contains("training.wake_us lists 3 values for the 2 clusters"));
    CHECK_THAT(message([] { scenario(1, 10, "2, 2", "", {"training.learner_wake_us=-5"}); }),
               Catch::Contains("'training.learner_wake_us'"));
    CHECK_THAT(message([] { scenario(1, 10, "2, 2", "", {"training.learner_wake_us=1, 2, 3"}); }),
               Catch::Contains("training.learner_wake_us lists 3 values for the 2 clusters"));
    CHECK_THAT(message([] { scenario(1, 10, "2, 2", "", {"training.stop_at_target=each"}); }),
               Catch::Contains("'training.stop_at_target'"));
    CHECK(scenario(1, 10, "2, 2", "", {"training.stop_at_target=true"}).stop_at_target == StopAtTarget::All);
    CHECK(scenario(1, 10, "2, 2", "", {"training.stop_at_target=false"}).stop_at_target == StopAtTarget::Never);
    CHECK(scenario(1, 10, "2, 2", "", {"training.stop_at_target=cluster"}).stop_at_target == StopAtTarget::Cluster);
    CHECK(scenario(1, 10).stop_at_target == StopAtTarget::All);
    // Without the libtorch backend (a build without libtorch) a training scenario is refused.
    CHECK_THAT(message([&] { Simulator sim(scenario(1, 10), nullptr); }), Catch::Contains("workload.kind: training needs libtorch"));
    CHECK_THAT(message([&] {
                   Simulator sim(load_scenario("workload: {kind: training}\ntraining: {clusters: /nonexistent/x.yaml}\n", "t"),
                                 &torch_training_backend());
               }),
               Catch::Contains("training.clusters[0]"));
    // More workers than the YAML's learner.max_workers (256) would register: refused, naming it.
    CHECK_THAT(message([&] { Simulator sim(scenario(1, 10, "300, 1"), &torch_training_backend()); }),
               Catch::Contains("learner.max_workers"));
}

TEST_CASE("the shipped training scenarios load, find their cluster YAMLs next to them, and build") {
    for (const char* name : {"sim-training.yaml", "sim-training-1k.yaml"}) {
        INFO(name);
        const Scenario s = load_scenario_file(configs_dir() + "/" + name);
        CHECK(s.training());
        REQUIRE(s.training_clusters.size() == 2);
        CHECK(s.clusters == 2);
        CHECK(s.training_targets.size() == 2);
        CHECK(s.model_delivery == ModelDelivery::Replicated);
        Simulator sim(s, &torch_training_backend());  // loads both YAMLs, builds the models and learner cores
    }
    CHECK(load_scenario_file(configs_dir() + "/sim-training-1k.yaml").total_workers() == 1024);
}

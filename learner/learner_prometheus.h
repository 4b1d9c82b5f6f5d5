// shesha-learner's counters in Prometheus text format, for node_exporter's textfile collector
// (--prometheus-textfile). Names: shesha_learner_*, label cluster="<wire id>"; AoM in seconds.
// The same values as learner.json (docs/aom.md for the definitions); docs/deployment.md lists them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "learner/learner_core.h"

namespace shesha::learner {

// What the process knows beyond LearnerCore (evaluations, target, files, sockets).
struct LearnerRunMetrics {
    std::uint16_t cluster = 0;
    std::string env;
    double wall_s = 0;
    std::optional<double> target;
    bool target_reached = false;
    std::uint64_t evaluations = 0;
    double last_eval_mean = 0, last_eval_min = 0, best_eval_mean = 0;
    std::uint32_t workers_expected = 0;
    std::uint64_t checkpoints_written = 0, checkpoint_errors = 0;
    std::uint64_t send_errors = 0, receive_errors = 0;
};

// now_real: CLOCK_REALTIME ns; the AoM tracker is advanced to it (as learner.json does).
std::string learner_prometheus_text(LearnerCore& core, const LearnerRunMetrics& run, std::uint64_t now_real);

}  // namespace shesha::learner

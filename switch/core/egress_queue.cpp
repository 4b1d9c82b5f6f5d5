#include "egress_queue.h"

namespace shesha::core {

std::vector<SchedulingClass> scheduling_classes_from(const SwitchConfig& cfg) {
    std::vector<SchedulingClass> classes;
    for (const auto& c : cfg.clusters) classes.push_back({c.id, c.weight});
    return classes;
}

}  // namespace shesha::core

#include "lcore_loops.h"

#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <rte_cycles.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <spdlog/spdlog.h>

namespace shesha::sw {

namespace {

struct LoopArgs {
    Switch* sw;
    unsigned lcore;  // forwarding lcore index
};

int forwarding_loop(void* arg) {
    const auto* args = static_cast<const LoopArgs*>(arg);
    Switch& sw = *args->sw;
    const std::uint32_t backoff_us = sw.config().idle_backoff_us;
    spdlog::debug("forwarding lcore {} running on EAL lcore {}", args->lcore, rte_lcore_id());
    while (!sw.stop_requested()) {
        const unsigned n = sw.poll_round(args->lcore, rte_rdtsc());
        if (n == 0 && backoff_us != 0) rte_delay_us_sleep(backoff_us);
    }
    return 0;
}

}  // namespace

void run_switch(Switch& sw, const ControlHook& control, std::uint64_t control_interval_ticks) {
    std::vector<LoopArgs> args;
    std::vector<unsigned> launched;
    if (rte_lcore_count() < sw.lcores())
        throw std::runtime_error(fmt::format("config needs {} lcores (lcores: {}), EAL has {}", sw.lcores(),
                                             sw.config().lcores, rte_lcore_count()));
    args.reserve(sw.lcores());
    unsigned eal_lcore = rte_get_next_lcore(-1, 1, 0);
    for (unsigned l = 1; l < sw.lcores(); ++l, eal_lcore = rte_get_next_lcore(eal_lcore, 1, 0)) {
        args.push_back({&sw, l});
        const int rc = rte_eal_remote_launch(forwarding_loop, &args.back(), eal_lcore);
        if (rc != 0) {
            sw.request_stop();
            rte_eal_mp_wait_lcore();
            throw std::runtime_error(fmt::format("cannot launch forwarding lcore {} on EAL lcore {}: {}", l, eal_lcore, rc));
        }
        launched.push_back(eal_lcore);
    }

    const std::uint32_t backoff_us = sw.config().idle_backoff_us;
    std::uint64_t next_control = rte_rdtsc() + control_interval_ticks;
    while (!sw.stop_requested()) {
        const std::uint64_t now = rte_rdtsc();
        const unsigned n = sw.poll_round(0, now);
        if (now >= next_control) {
            next_control = now + control_interval_ticks;
            if (!control(now)) sw.request_stop();
        }
        if (n == 0 && backoff_us != 0) rte_delay_us_sleep(backoff_us);
    }
    for (unsigned lcore : launched) rte_eal_wait_lcore(lcore);
    sw.publish(rte_rdtsc());
}

}  // namespace shesha::sw

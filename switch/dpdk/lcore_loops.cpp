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

struct RxLoopArgs {
    Switch* sw;
    unsigned worker;
};

int rx_loop(void* arg) {
    const auto* args = static_cast<const RxLoopArgs*>(arg);
    Switch& sw = *args->sw;
    const std::uint32_t backoff_us = sw.config().idle_backoff_us;
    spdlog::debug("RX worker {} running on lcore {}", args->worker, rte_lcore_id());
    while (!sw.stop_requested()) {
        const unsigned n = sw.rx_round(args->worker, rte_rdtsc());
        if (n == 0 && backoff_us != 0) rte_delay_us_sleep(backoff_us);
    }
    return 0;
}

}  // namespace

void run_switch(Switch& sw, const ControlHook& control, std::uint64_t control_interval_ticks) {
    std::vector<RxLoopArgs> args;
    std::vector<unsigned> launched;
    if (sw.multi_lcore()) {
        const unsigned needed = sw.rx_workers() + 1;
        if (rte_lcore_count() < needed)
            throw std::runtime_error(fmt::format("config needs {} lcores (lcores: {}), EAL has {}", needed,
                                                 sw.config().lcores, rte_lcore_count()));
        args.reserve(sw.rx_workers());
        unsigned lcore = rte_get_next_lcore(-1, 1, 0);
        for (unsigned w = 0; w < sw.rx_workers(); ++w, lcore = rte_get_next_lcore(lcore, 1, 0)) {
            args.push_back({&sw, w});
            const int rc = rte_eal_remote_launch(rx_loop, &args.back(), lcore);
            if (rc != 0) {
                sw.request_stop();
                rte_eal_mp_wait_lcore();
                throw std::runtime_error(fmt::format("cannot launch RX worker on lcore {}: {}", lcore, rc));
            }
            launched.push_back(lcore);
        }
    }

    const std::uint32_t backoff_us = sw.config().idle_backoff_us;
    std::uint64_t next_control = rte_rdtsc() + control_interval_ticks;
    while (!sw.stop_requested()) {
        const std::uint64_t now = rte_rdtsc();
        const unsigned n = sw.multi_lcore() ? sw.egress_round(now) : sw.poll_round(now);
        if (now >= next_control) {
            next_control = now + control_interval_ticks;
            if (!control(now)) sw.request_stop();
        }
        if (n == 0 && backoff_us != 0) rte_delay_us_sleep(backoff_us);
    }
    for (unsigned lcore : launched) rte_eal_wait_lcore(lcore);
    // Packets handed over by the RX lcores after the last egress round are forwarded now, so the
    // final counters add up; whatever is still queued is freed by drain().
    if (sw.multi_lcore()) sw.egress_round(rte_rdtsc());
    sw.publish(rte_rdtsc());
}

}  // namespace shesha::sw

// The shesha-bench subcommands; each returns its result tables.
#pragma once

#include <string>
#include <vector>

#include "bench_util.h"

namespace shesha::bench {

Table run_merge_bench(const RunOptions& opt);
Table run_queue_bench(const RunOptions& opt);

// DRL: the learner's GRADIENT chunk apply path and the worker's send path (bench_drl.cpp).
Table run_learner_bench(const RunOptions& opt);
Table run_sender_bench(const RunOptions& opt, const std::string& gen_binary);

// Forwarding needs DPDK processes (shesha-switch and dpdk-testpmd).
struct ForwardOptions {
    std::string switch_binary;   // path to shesha-switch
    std::string testpmd_binary = "dpdk-testpmd";
    std::string work_dir;        // scratch directory for configs, pcaps and logs
    // OVS-DPDK reference: "auto" (on, except in --quick runs), "on" or "off".
    std::string ovs = "auto";
    std::string ovs_vswitchd = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk";
    std::string ovs_schema = "/usr/share/openvswitch/vswitch.ovsschema";
    bool ovs_flood_local = false;  // keep OVS's default: floods also reach the bridge's internal port
    bool hugepages = false;        // every program's DPDK memory from 2 MB hugepages (--in-memory), not --no-huge
    std::vector<std::string> workloads;  // run only these (ids: null64, pcap64, grad1k, grad8k, model16, model64); empty: all
};
struct ForwardResult {
    std::vector<Table> tables;   // already printed
    bool skipped = false;        // DPDK cannot run here: nothing measured
    bool failed = false;         // a run failed (details in the tables' notes)
    std::string reason;          // why skipped or failed
    json::Json json;             // the "shesha-bench-forward" object (docs/benchmarks.md), null if skipped
};
ForwardResult run_forward_bench(const RunOptions& opt, const ForwardOptions& fwd);

}  // namespace shesha::bench

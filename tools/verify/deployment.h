// shesha-verify check on what a deployment really runs (issue 26, item 3): a lab scenario
// (configs/lab-*.yaml, read through the lab's own loader so that its defaults and checks apply), or
// a shesha-switch YAML plus the cluster YAMLs its workers read. Either becomes the bounded model of
// the port the clusters share, at small bounds that the output states (docs/verification.md,
// "Checking a deployment"); settings the model cannot represent are errors naming the key.
#pragma once

#include <string>
#include <vector>

#include "verify_config.h"

namespace shesha::verify {

// What the file given to check is, from its top-level keys.
enum class InputKind { VerifyYaml, LabScenario, SwitchYaml };
InputKind input_kind(const std::string& path);

struct Deployment {
    VerifyConfig config;               // the bounded model and the properties checked
    std::string port;                  // "learners on switch tor (arm shesha)", "egress"
    std::vector<int> cluster_ids;      // the switch's cluster ids sharing it (model cluster c = cluster_ids[c])
    std::vector<std::string> bounds;   // what was scaled down, one line each
    std::vector<std::string> abstracted;  // "key: reason" for settings the model abstracts
};

// The switch's port `port` (empty: the one every cluster's rule reaches, else the first) with
// the clusters of cluster_files (one per cluster, in cluster id order of the switch's rules).
Deployment deployment_from_switch(const std::string& switch_yaml, const std::string& port,
                                  const std::vector<std::string>& cluster_files);
// A lab scenario's shared learner port under one arm (empty: the arm named shesha, else the last).
// lab_cli: the lab's entry point (tools/lab/shesha-lab), run as `python3 lab_cli check FILE`.
Deployment deployment_from_lab(const std::string& scenario, const std::string& arm, const std::string& lab_cli);

}  // namespace shesha::verify

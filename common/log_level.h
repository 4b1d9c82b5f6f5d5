// --log-level for every program: one option, the same values everywhere, spdlog underneath.
//
//   std::string level = "info";
//   shesha::logging::add_log_level_option(app, level);
//   ... app.parse ...
//   shesha::logging::init("shesha-sink", level);
//
// Log messages (progress, warnings, errors found while running) go to stderr as "NAME: message";
// a program's primary output (tables, summaries on stdout) and its usage errors do not go
// through here. A value outside the list is refused by CLI11 with a message naming --log-level.
// Header only: link shesha_log_dep (spdlog + CLI11).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace shesha::logging {

inline const std::vector<std::string>& level_names() {
    static const std::vector<std::string> names{"trace", "debug", "info", "warn", "error", "off"};
    return names;
}

inline CLI::Option* add_log_level_option(CLI::App& app, std::string& level) {
    return app.add_option("--log-level", level, "log messages at or above: trace, debug, info, warn, error or off")
        ->check(CLI::IsMember(level_names()))
        ->capture_default_str();
}

inline spdlog::level::level_enum to_level(const std::string& name) {
    if (name == "trace") return spdlog::level::trace;
    if (name == "debug") return spdlog::level::debug;
    if (name == "warn") return spdlog::level::warn;
    if (name == "error") return spdlog::level::err;
    if (name == "off") return spdlog::level::off;
    return spdlog::level::info;
}

// The default logger writes "NAME: message" to stderr at the given level and above. Safe to call
// again (replaces the logger).
inline void init(const std::string& program, const std::string& level = "info") {
    auto logger = std::make_shared<spdlog::logger>(program, std::make_shared<spdlog::sinks::stderr_sink_mt>());
    logger->set_pattern("%n: %v");
    logger->set_level(to_level(level));
    logger->flush_on(spdlog::level::trace);
    spdlog::set_default_logger(std::move(logger));
}

}  // namespace shesha::logging

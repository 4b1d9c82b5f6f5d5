// Prometheus text exposition format (version 0.0.4) for node_exporter's textfile collector.
//
// TextWriter collects samples in any order and prints them grouped by metric family, each family
// once with its # HELP and # TYPE lines (the format requires a family's samples to be contiguous;
// per-port loops would otherwise interleave them). write_textfile() replaces the file atomically
// (temporary file in the same directory, then rename), so the collector never reads half a file.
// Used by shesha-switch and shesha-learner (--prometheus-textfile); docs/deployment.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace shesha::prom {

enum class Type { Counter, Gauge };

using Labels = std::vector<std::pair<std::string, std::string>>;

class TextWriter {
public:
    // name: a metric name (characters outside [a-zA-Z0-9_:] become '_'); the first sample of a
    // family fixes its type and help text.
    void add(std::string_view name, Type type, std::string_view help, const Labels& labels, std::uint64_t value);
    void add(std::string_view name, Type type, std::string_view help, const Labels& labels, double value);
    void add(std::string_view name, Type type, std::string_view help, const Labels& labels, std::int64_t value);

    std::string str() const;
    std::size_t families() const noexcept { return families_.size(); }

private:
    struct Family {
        std::string name;
        Type type;
        std::string help;
        std::vector<std::string> lines;
    };
    void add_line(std::string_view name, Type type, std::string_view help, const Labels& labels, std::string value);

    std::vector<Family> families_;
    std::unordered_map<std::string, std::size_t> index_;
};

// "a-b.c" -> "a_b_c"; a leading digit gets a '_' in front.
std::string sanitize_name(std::string_view name);
// Label value escaping of the text format: backslash, double quote, newline.
std::string escape_label_value(std::string_view value);
// Shortest text that parses back to the same double; NaN and infinities as Prometheus spells them.
std::string format_value(double value);

// Startup check for --prometheus-textfile PATH: the name must end in ".prom" (the only files the
// textfile collector reads) and PATH.tmp must be creatable in PATH's directory. Returns false
// with a one-line reason.
bool check_textfile_path(const std::string& path, std::string& error);
// Writes text to PATH.tmp and renames it over PATH. Returns false with the reason on failure.
bool write_textfile(const std::string& path, std::string_view text, std::string& error);

}  // namespace shesha::prom

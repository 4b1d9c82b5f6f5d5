#include "prometheus.h"
#include "replace_file.h"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

namespace shesha::prom {

namespace {

std::string escape_help(std::string_view help) {
    std::string out;
    for (char c : help) {
        if (c == '\\') out += "\\\\";
        else if (c == '\n') out += "\\n";
        else out += c;
    }
    return out;
}

bool valid_label_name(std::string_view n) {
    if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0]))) return false;
    for (char c : n)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
    return true;
}

}  // namespace

std::string sanitize_name(std::string_view name) {
    std::string out;
    out.reserve(name.size() + 1);
    if (!name.empty() && std::isdigit(static_cast<unsigned char>(name[0]))) out += '_';
    for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':') ? c : '_';
    return out;
}

std::string escape_label_value(std::string_view value) {
    std::string out;
    for (char c : value) {
        if (c == '\\') out += "\\\\";
        else if (c == '"') out += "\\\"";
        else if (c == '\n') out += "\\n";
        else out += c;
    }
    return out;
}

std::string format_value(double value) {
    if (std::isnan(value)) return "NaN";
    if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, value);  // shortest round-trip form
    return std::string(buf, r.ptr);
}

void TextWriter::add_line(std::string_view name, Type type, std::string_view help, const Labels& labels,
                          std::string value) {
    const std::string n = sanitize_name(name);
    auto it = index_.find(n);
    if (it == index_.end()) {
        it = index_.emplace(n, families_.size()).first;
        families_.push_back(Family{n, type, std::string(help), {}});
    }
    std::string line = n;
    if (!labels.empty()) {
        line += '{';
        for (std::size_t i = 0; i < labels.size(); ++i) {
            if (i) line += ',';
            line += valid_label_name(labels[i].first) ? labels[i].first : sanitize_name(labels[i].first);
            line += "=\"";
            line += escape_label_value(labels[i].second);
            line += '"';
        }
        line += '}';
    }
    line += ' ';
    line += value;
    families_[it->second].lines.push_back(std::move(line));
}

void TextWriter::add(std::string_view name, Type type, std::string_view help, const Labels& labels,
                     std::uint64_t value) {
    add_line(name, type, help, labels, std::to_string(value));
}

void TextWriter::add(std::string_view name, Type type, std::string_view help, const Labels& labels,
                     std::int64_t value) {
    add_line(name, type, help, labels, std::to_string(value));
}

void TextWriter::add(std::string_view name, Type type, std::string_view help, const Labels& labels, double value) {
    add_line(name, type, help, labels, format_value(value));
}

std::string TextWriter::str() const {
    std::string out;
    for (const Family& f : families_) {
        if (!f.help.empty()) out += fmt::format("# HELP {} {}\n", f.name, escape_help(f.help));
        out += fmt::format("# TYPE {} {}\n", f.name, f.type == Type::Counter ? "counter" : "gauge");
        for (const std::string& l : f.lines) {
            out += l;
            out += '\n';
        }
    }
    return out;
}

bool check_textfile_path(const std::string& path, std::string& error) {
    constexpr std::string_view kSuffix = ".prom";
    if (path.size() <= kSuffix.size() || path.compare(path.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
        error = fmt::format("{}: the file name must end in .prom (node_exporter's textfile collector reads only *.prom)",
                            path);
        return false;
    }
    const std::string tmp = path + ".tmp";
    std::FILE* f = std::fopen(tmp.c_str(), "w");
    if (f == nullptr) {
        error = fmt::format("cannot write {}: {}", tmp, std::strerror(errno));
        return false;
    }
    std::fclose(f);
    std::remove(tmp.c_str());
    return true;
}

bool write_textfile(const std::string& path, std::string_view text, std::string& error) {
    return replace_file(path, text, error);
}

}  // namespace shesha::prom

#include "bench_util.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <thread>

namespace shesha::bench {

Table::Table(std::string name, std::vector<std::string> columns, int precision)
    : name_(std::move(name)), columns_(std::move(columns)), precision_(precision) {}

void Table::add_row(std::vector<Cell> cells) {
    cells.resize(columns_.size(), Cell{std::string{"-"}});
    rows_.push_back(std::move(cells));
}

void Table::add_note(std::string note) { notes_.push_back(std::move(note)); }

namespace {
std::string format_cell(const Cell& c, int precision) {
    if (const auto* s = std::get_if<std::string>(&c)) return *s;
    return fmt::format("{:.{}f}", std::get<double>(c), precision);
}

std::string json_number(double v) {
    if (!std::isfinite(v)) return "null";  // JSON has no NaN/inf; all_finite() reports these
    return fmt::format("{:.6g}", v);
}
}  // namespace

void Table::print() const {
    std::vector<std::size_t> width(columns_.size());
    for (std::size_t c = 0; c < columns_.size(); ++c) width[c] = columns_[c].size();
    for (const auto& row : rows_) {
        for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], format_cell(row[c], precision_).size());
    }
    fmt::print("\n== {} ==\n", name_);
    std::string line;
    for (std::size_t c = 0; c < columns_.size(); ++c) line += fmt::format("{:>{}}  ", columns_[c], width[c]);
    fmt::print("{}\n", line);
    for (const auto& row : rows_) {
        line.clear();
        for (std::size_t c = 0; c < row.size(); ++c) {
            line += fmt::format("{:>{}}  ", format_cell(row[c], precision_), width[c]);
        }
        fmt::print("{}\n", line);
    }
    for (const auto& n : notes_) fmt::print("  note: {}\n", n);
    std::fflush(stdout);
}

std::string Table::to_json() const {
    std::string out = fmt::format("{{\"name\": \"{}\", \"columns\": [", json_escape(name_));
    for (std::size_t c = 0; c < columns_.size(); ++c) {
        out += fmt::format("{}\"{}\"", c ? ", " : "", json_escape(columns_[c]));
    }
    out += "], \"rows\": [";
    for (std::size_t r = 0; r < rows_.size(); ++r) {
        out += r ? ",\n    {" : "\n    {";
        for (std::size_t c = 0; c < columns_.size(); ++c) {
            const Cell& cell = rows_[r][c];
            const std::string value = std::holds_alternative<double>(cell)
                                          ? json_number(std::get<double>(cell))
                                          : fmt::format("\"{}\"", json_escape(std::get<std::string>(cell)));
            out += fmt::format("{}\"{}\": {}", c ? ", " : "", json_escape(columns_[c]), value);
        }
        out += "}";
    }
    out += "], \"notes\": [";
    for (std::size_t i = 0; i < notes_.size(); ++i) out += fmt::format("{}\"{}\"", i ? ", " : "", json_escape(notes_[i]));
    out += "]}";
    return out;
}

bool Table::all_finite() const {
    for (const auto& row : rows_) {
        for (const auto& cell : row) {
            if (const auto* d = std::get_if<double>(&cell); d && !std::isfinite(*d)) return false;
        }
    }
    return true;
}

double median(std::vector<double> v) {
    if (v.empty()) return std::nan("");
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

std::string json_escape(const std::string& s) {
    std::string out;
    for (const char ch : s) {
        switch (ch) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        default:
            if (static_cast<unsigned char>(ch) < 0x20) {
                out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(ch)));
            } else {
                out += ch;
            }
        }
    }
    return out;
}

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0) {
            const auto colon = line.find(':');
            if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
        }
    }
    return "unknown";
}

unsigned online_cpus() { return std::thread::hardware_concurrency(); }

}  // namespace shesha::bench

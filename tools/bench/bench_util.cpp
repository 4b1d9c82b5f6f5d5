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

json::Json Table::to_json() const {
    json::Json rows = json::Json::array();
    for (const auto& row : rows_) {
        json::Json r = json::Json::object();
        for (std::size_t c = 0; c < columns_.size(); ++c) {
            const Cell& cell = row[c];
            // JSON has no NaN/inf: null (all_finite() reports these); 6 significant digits.
            if (const auto* d = std::get_if<double>(&cell)) r[columns_[c]] = json::significant(*d, 6);
            else r[columns_[c]] = std::get<std::string>(cell);
        }
        rows.push_back(std::move(r));
    }
    return {{"name", name_}, {"columns", columns_}, {"rows", std::move(rows)}, {"notes", notes_}};
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

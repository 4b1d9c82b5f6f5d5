#include "strict_yaml.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace shesha::yaml {
namespace {

std::string join(std::initializer_list<std::string_view> items, std::string_view sep) {
    std::string out;
    for (std::string_view item : items) {
        if (!out.empty()) out += sep;
        out += item;
    }
    return out;
}

std::string child_path(const std::string& parent, std::string_view key) {
    return parent.empty() ? std::string(key) : fmt::format("{}.{}", parent, key);
}

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
// neighbouring characters ("burts" is one step from "burst").
std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        for (std::size_t j = 1; j <= b.size(); ++j) {
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    }
    return d[a.size()][b.size()];
}

std::string unknown_key_message(const std::string& name, std::initializer_list<std::string_view> allowed) {
    // Suggest the closest allowed key if it is a plausible typo, or one that contains the given
    // name ("tolerance" -> "version_tolerance").
    const std::string lower = lowercase(name);
    std::string best;
    std::size_t best_distance = std::numeric_limits<std::size_t>::max();
    for (std::string_view candidate : allowed) {
        std::size_t d = edit_distance(lower, candidate);
        if (d > std::max<std::size_t>(1, candidate.size() / 3) &&
            !(lower.size() >= 4 && candidate.find(lower) != std::string_view::npos))
            continue;
        if (d < best_distance) {
            best_distance = d;
            best = std::string(candidate);
        }
    }
    const bool close = !best.empty();
    return fmt::format("unknown key '{}'{}; expected one of: {}", name,
                       close ? fmt::format(" (did you mean '{}'?)", best) : std::string(), join(allowed, ", "));
}

}  // namespace

std::optional<Value> MapView::get(std::string_view key) const {
    for (const Entry& e : entries_)
        if (e.name == key) return e.value;
    return std::nullopt;
}

Value MapView::require(std::string_view key) const {
    if (auto v = get(key)) return *v;
    reader_->fail(mark_, path_, fmt::format("missing required key '{}'", key));
}

void Reader::fail(const YAML::Mark& mark, const std::string& path, std::string_view what) const {
    const std::string where = path.empty() ? std::string("(top level)") : path;
    if (mark.line >= 0)
        throw Error(fmt::format("{}:{}:{}: {}: {}", source_, mark.line + 1, mark.column + 1, where, what));
    throw Error(fmt::format("{}: {}: {}", source_, where, what));
}

MapView Reader::map(const Value& v, std::initializer_list<std::string_view> allowed) const {
    MapView view;
    view.reader_ = this;
    view.path_ = v.path;
    view.mark_ = v.mark;
    if (v.node.IsNull()) return view;
    if (!v.node.IsMap())
        fail(v, fmt::format("expected a mapping with keys {}, got {}", join(allowed, ", "), describe(v.node)));
    for (const auto& pair : v.node) {  // range-for: it->first trips GCC 12's -Wdangling-pointer
        const YAML::Node& key = pair.first;
        if (!key.IsScalar()) fail(key.Mark(), v.path, fmt::format("expected a key name, got {}", describe(key)));
        const std::string& name = key.Scalar();
        const std::string path = child_path(v.path, name);
        if (std::find(allowed.begin(), allowed.end(), name) == allowed.end())
            fail(key.Mark(), path, unknown_key_message(name, allowed));
        if (auto first = std::find_if(view.entries_.begin(), view.entries_.end(),
                                      [&](const MapView::Entry& e) { return e.name == name; });
            first != view.entries_.end())
            fail(key.Mark(), path,
                 fmt::format("duplicate key '{}' (first given on line {})", name, first->key_mark.line + 1));
        const YAML::Node& value = pair.second;
        const YAML::Mark value_mark = value.IsNull() ? key.Mark() : value.Mark();
        view.entries_.push_back(MapView::Entry{name, key.Mark(), Value{value, path, value_mark}});
    }
    return view;
}

std::vector<Value> Reader::list(const Value& v, std::string_view what_items) const {
    std::vector<Value> out;
    if (v.node.IsNull()) return out;
    if (!v.node.IsSequence()) fail(v, fmt::format("expected a list of {}, got {}", what_items, describe(v.node)));
    for (const YAML::Node& item : v.node)
        out.push_back(Value{item, fmt::format("{}[{}]", v.path, out.size()), item.IsNull() ? v.mark : item.Mark()});
    return out;
}

std::uint64_t Reader::uint(const Value& v, std::uint64_t lo, std::uint64_t hi) const {
    const std::string expected = fmt::format("expected an integer in {}..{}", lo, hi);
    if (!v.node.IsScalar()) fail(v, fmt::format("{}, got {}", expected, describe(v.node)));
    const std::optional<std::uint64_t> value = parse_uint(trim(v.node.Scalar()));
    if (!value) fail(v, fmt::format("{}, got {}", expected, describe(v.node)));
    if (*value < lo || *value > hi) fail(v, fmt::format("{}, got {}", expected, *value));
    return *value;
}

double Reader::number(const Value& v, double lo, double hi) const {
    const std::string expected = fmt::format("expected a number in [{}, {}]", lo, hi);
    if (!v.node.IsScalar()) fail(v, fmt::format("{}, got {}", expected, describe(v.node)));
    const std::optional<double> value = parse_number(trim(v.node.Scalar()));
    if (!value || *value < lo || *value > hi) fail(v, fmt::format("{}, got {}", expected, describe(v.node)));
    return *value;
}

bool Reader::boolean(const Value& v) const {
    if (v.node.IsScalar())
        if (const std::optional<bool> b = parse_bool(lowercase(trim(v.node.Scalar())))) return *b;
    fail(v, fmt::format("expected true or false, got {}", describe(v.node)));
}

std::string Reader::string(const Value& v, std::string_view what, bool allow_empty) const {
    if (!v.node.IsScalar() || (!allow_empty && v.node.Scalar().empty()))
        fail(v, fmt::format("expected {}, got {}", what, describe(v.node)));
    return v.node.Scalar();
}

std::size_t Reader::choice(const Value& v, std::initializer_list<std::string_view> choices) const {
    if (v.node.IsScalar()) {
        const std::string text = lowercase(trim(v.node.Scalar()));
        for (std::size_t i = 0; i < choices.size(); ++i)
            if (text == choices.begin()[i]) return i;
    }
    fail(v, fmt::format("expected {}, got {}", join(choices, " or "), describe(v.node)));
}

std::string describe(const YAML::Node& n) {
    switch (n.Type()) {
        case YAML::NodeType::Null: return "nothing";
        case YAML::NodeType::Sequence: return "a list";
        case YAML::NodeType::Map: return "a mapping";
        case YAML::NodeType::Scalar: return fmt::format("'{}'", n.Scalar());
        default: return "an undefined value";
    }
}

std::string lowercase(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

std::optional<std::uint64_t> parse_uint(std::string_view text) {
    std::uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
    return value;
}

std::optional<double> parse_number(std::string_view text) {
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(value))
        return std::nullopt;
    return value;
}

std::optional<bool> parse_bool(std::string_view text) {
    if (text == "true" || text == "yes" || text == "on") return true;
    if (text == "false" || text == "no" || text == "off") return false;
    return std::nullopt;
}

}  // namespace shesha::yaml

// Strict YAML reading shared by the configuration parsers (switch, DRL cluster, verifier; the
// simulator uses the scalar parsers). Scalars are read from their text, never through yaml-cpp's
// lenient conversions, so "0x10", "1e3" or "-1" for an integer are rejected instead of being
// silently reinterpreted.
//
// Every failure throws yaml::Error "SOURCE:LINE:COL: KEY.PATH: what was expected, got what". Each
// parser catches it at its entry point and rethrows it as its own error type, so callers keep
// catching core::ConfigError, drl::ConfigError, ... as before.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace shesha::yaml {

class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// A YAML value with the key path that led to it and the best source position for messages.
struct Value {
    YAML::Node node;
    std::string path;   // "ports[1].shaper.rate"; empty for the document root
    YAML::Mark mark;    // the value's position, or its key's when the value is empty
};

class Reader;

// A mapping whose keys were all checked against the allowed set (no unknown, no duplicate).
class MapView {
public:
    std::optional<Value> get(std::string_view key) const;
    Value require(std::string_view key) const;
    const std::string& path() const { return path_; }
    const YAML::Mark& mark() const { return mark_; }

private:
    friend class Reader;
    const Reader* reader_ = nullptr;
    std::string path_;
    YAML::Mark mark_;
    struct Entry {
        std::string name;
        YAML::Mark key_mark;
        Value value;
    };
    std::vector<Entry> entries_;
};

class Reader {
public:
    explicit Reader(std::string source) : source_(std::move(source)) {}

    const std::string& source() const { return source_; }
    Value root(const YAML::Node& document) const { return Value{document, "", document.Mark()}; }

    [[noreturn]] void fail(const YAML::Mark& mark, const std::string& path, std::string_view what) const;
    [[noreturn]] void fail(const Value& v, std::string_view what) const { fail(v.mark, v.path, what); }

    // An empty value (a section written with nothing after the colon) reads as an empty mapping.
    // An unknown key is an error listing the allowed ones, with a suggestion for a plausible typo.
    MapView map(const Value& v, std::initializer_list<std::string_view> allowed) const;
    // An empty value reads as an empty list.
    std::vector<Value> list(const Value& v, std::string_view what_items) const;

    std::uint64_t uint(const Value& v, std::uint64_t lo, std::uint64_t hi) const;
    // A finite decimal number (1e-3 and 0.0007 both accepted) in [lo, hi].
    double number(const Value& v, double lo, double hi) const;
    // true/yes/on or false/no/off, in any case.
    bool boolean(const Value& v) const;
    std::string string(const Value& v, std::string_view what, bool allow_empty = false) const;
    // One of a few words (in any case); returns its index in choices.
    std::size_t choice(const Value& v, std::initializer_list<std::string_view> choices) const;

private:
    std::string source_;
};

// What a value looks like, for "got ..." in messages: nothing, a list, a mapping or 'text'.
std::string describe(const YAML::Node& n);

std::string lowercase(std::string_view s);
std::string_view trim(std::string_view s);

// The scalar grammar of the Reader, for values that come without a YAML node (shesha-sim's --set
// overrides). Nothing is trimmed; nullopt when the text does not match.
std::optional<std::uint64_t> parse_uint(std::string_view text);  // decimal digits only
std::optional<double> parse_number(std::string_view text);       // a finite decimal number
std::optional<bool> parse_bool(std::string_view text);           // true/yes/on, false/no/off (lowercase)

}  // namespace shesha::yaml

// JSON files through nlohmann-json, the project's one JSON library: every summary, metrics, stats,
// bench and counterexample file the programs write, and every JSON file they read.
//
// Writing: build a Json (insertion-ordered, so keys keep the order they are set in) and print it
// with pretty() (one value per line) or rows() (one line per record; for files people read in a
// terminal and edit with sed). Both never throw: non-finite doubles become null, invalid UTF-8 in
// strings is replaced.
//
// Reading: parse() and the typed getters throw json::Error whose message names the source file
// and, for a missing key or a value of the wrong type, the key's path (model.horizon, steps[1].send).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

namespace shesha::json {

using Json = nlohmann::ordered_json;

// Two-space indentation, one value per line, newline-terminated.
std::string pretty(const Json& j);
// Newline-terminated; a container is written on one line ({"a": 1, "b": [1, 2]}) unless it holds,
// at any depth, an array of objects: then one member per line. The top level is always expanded.
std::string rows(const Json& j);

// v rounded to `decimals` decimal places (what fmt's {:.Nf} printed before), as a JSON number.
// Non-finite values pass through (written as null).
double fixed(double v, int decimals);
// v rounded to `digits` significant digits ({:.Ng}).
double significant(double v, int digits);

struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Parses text; on a syntax error throws Error("SOURCE: not valid JSON: <where and what>").
Json parse(const std::string& text, const std::string& source);
// Reads and parses a file; Error("PATH: cannot read the file: <reason>") when it cannot be read.
Json parse_file(const std::string& path);

// A key of the wrong type or a missing key: the message names the key's path only; callers
// prefix the source ("x.json: missing key model.gain").
struct KeyError : Error {
    using Error::Error;
};

namespace detail {
template <class T> struct is_vector : std::false_type {};
template <class T> struct is_vector<std::vector<T>> : std::true_type {};

// Strict conversion: integers must be JSON integers within T's range, floating point any number,
// bool a boolean, strings a string, vectors arrays of such. Returns nullopt on a mismatch.
template <class T> std::optional<T> convert(const Json& j) {
    if constexpr (std::is_same_v<T, bool>) {
        if (!j.is_boolean()) return std::nullopt;
        return j.get<bool>();
    } else if constexpr (std::is_integral_v<T>) {
        if (j.is_number_unsigned()) {
            const auto v = j.get<std::uint64_t>();
            if (v > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) return std::nullopt;
            return static_cast<T>(v);
        }
        if (j.is_number_integer()) {
            const auto v = j.get<std::int64_t>();
            if constexpr (std::is_unsigned_v<T>) {
                if (v < 0 || static_cast<std::uint64_t>(v) > std::numeric_limits<T>::max()) return std::nullopt;
            } else {
                if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) return std::nullopt;
            }
            return static_cast<T>(v);
        }
        return std::nullopt;
    } else if constexpr (std::is_floating_point_v<T>) {
        if (!j.is_number()) return std::nullopt;
        return j.get<T>();
    } else if constexpr (std::is_same_v<T, std::string>) {
        if (!j.is_string()) return std::nullopt;
        return j.get<std::string>();
    } else if constexpr (is_vector<T>::value) {
        if (!j.is_array()) return std::nullopt;
        T out;
        for (const Json& e : j) {
            auto v = convert<typename T::value_type>(e);
            if (!v) return std::nullopt;
            out.push_back(std::move(*v));
        }
        return out;
    } else {
        static_assert(sizeof(T) == 0, "json::convert: unsupported type");
    }
}
}  // namespace detail

// obj[key] as T. path is the key's parent path with its trailing dot ("model."), for messages.
// Throws KeyError("missing key PATHKEY") or KeyError("key PATHKEY: wrong type").
template <class T> T required(const Json& obj, std::string_view key, std::string_view path = {}) {
    const std::string name = std::string(path) + std::string(key);
    if (!obj.is_object()) throw KeyError("missing key " + name);
    const auto it = obj.find(std::string(key));
    if (it == obj.end()) throw KeyError("missing key " + name);
    auto v = detail::convert<T>(*it);
    if (!v) throw KeyError("key " + name + ": wrong type");
    return std::move(*v);
}

// Like required(), but nullopt when the key is absent (still KeyError on the wrong type).
template <class T> std::optional<T> optional(const Json& obj, std::string_view key, std::string_view path = {}) {
    if (!obj.is_object() || !obj.contains(std::string(key))) return std::nullopt;
    return required<T>(obj, key, path);
}

// Writes the text to path ("-" = stdout) through PATH.tmp and a rename (replace_file.h), so a
// reader never sees it half written. Returns false and sets err on failure.
bool write_text_file(const std::string& path, const std::string& text, std::string& err);

// "bad chunk index/count" -> "bad_chunk_index_count": human-readable names as JSON keys.
std::string snake_key(std::string_view text);

}  // namespace shesha::json

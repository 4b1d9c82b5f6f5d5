#include "json_io.h"
#include "replace_file.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace shesha::json {

namespace {

constexpr auto kReplace = Json::error_handler_t::replace;

// A scalar (or an empty container) exactly as nlohmann prints it.
std::string scalar(const Json& j) { return j.dump(-1, ' ', false, kReplace); }

bool holds_object_rows(const Json& j) {
    if (j.is_array())
        for (const Json& e : j)
            if (e.is_object() || holds_object_rows(e)) return true;
    if (j.is_object())
        for (const auto& [k, v] : j.items())
            if (holds_object_rows(v)) return true;
    return false;
}

void one_line(const Json& j, std::string& out) {
    if (j.is_object() && !j.empty()) {
        out += '{';
        bool first = true;
        for (const auto& [k, v] : j.items()) {
            if (!first) out += ", ";
            first = false;
            out += scalar(Json(k));
            out += ": ";
            one_line(v, out);
        }
        out += '}';
    } else if (j.is_array() && !j.empty()) {
        out += '[';
        for (std::size_t i = 0; i < j.size(); ++i) {
            if (i) out += ", ";
            one_line(j[i], out);
        }
        out += ']';
    } else {
        out += scalar(j);
    }
}

void expanded(const Json& j, int indent, std::string& out) {
    if (!j.is_structured() || j.empty() || (indent > 0 && !holds_object_rows(j))) {
        one_line(j, out);
        return;
    }
    const std::string pad(static_cast<std::size_t>(indent) + 2, ' ');
    out += j.is_object() ? "{\n" : "[\n";
    bool first = true;
    if (j.is_object()) {
        for (const auto& [k, v] : j.items()) {
            if (!first) out += ",\n";
            first = false;
            out += pad + scalar(Json(k)) + ": ";
            expanded(v, indent + 2, out);
        }
    } else {
        for (const Json& v : j) {
            if (!first) out += ",\n";
            first = false;
            out += pad;
            expanded(v, indent + 2, out);
        }
    }
    out += '\n' + std::string(static_cast<std::size_t>(indent), ' ') + (j.is_object() ? '}' : ']');
}

}  // namespace

std::string pretty(const Json& j) { return j.dump(2, ' ', false, kReplace) + "\n"; }

std::string rows(const Json& j) {
    std::string out;
    expanded(j, 0, out);
    return out + "\n";
}

double fixed(double v, int decimals) {
    if (!std::isfinite(v)) return v;
    return std::strtod(fmt::format("{:.{}f}", v, decimals).c_str(), nullptr);
}

double significant(double v, int digits) {
    if (!std::isfinite(v)) return v;
    return std::strtod(fmt::format("{:.{}g}", v, digits).c_str(), nullptr);
}

Json parse(const std::string& text, const std::string& source) {
    try {
        return Json::parse(text);
    } catch (const Json::parse_error& e) {
        // e.what() reads "[json.exception.parse_error.101] parse error at line 1, column 5: ...".
        std::string what = e.what();
        if (const auto p = what.find("] "); what.starts_with("[json.exception") && p != std::string::npos)
            what = what.substr(p + 2);
        throw Error(fmt::format("{}: not valid JSON: {}", source, what));
    }
}

Json parse_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw Error(fmt::format("{}: cannot read the file: {}", path, std::strerror(errno)));
    std::stringstream ss;
    ss << in.rdbuf();
    return parse(ss.str(), path);
}


bool write_text_file(const std::string& path, const std::string& text, std::string& err) {
    if (path == "-") {
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
        return true;
    }
    // Metrics files are read while their writer runs and survive its kill -9: never truncated.
    return replace_file(path, text, err);
}

std::string snake_key(std::string_view text) {
    std::string s(text);
    for (char& c : s) c = (c == ' ' || c == '-' || c == '/') ? '_' : c;
    return s;
}

}  // namespace shesha::json

#include "json_writer.h"

#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cerrno>

namespace shesha::tools {

void JsonWriter::append_escaped(std::string& out, std::string_view s) {
    out.push_back('"');
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
            if (c < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                out += buf;
            } else {
                out.push_back(ch);
            }
        }
    }
    out.push_back('"');
}

void JsonWriter::prefix(std::string_view key) {
    if (!first_in_level_.empty()) {
        if (!first_in_level_.back()) out_.push_back(',');
        first_in_level_.back() = false;
        out_.push_back('\n');
        out_.append(2 * first_in_level_.size(), ' ');
    }
    if (!key.empty()) {
        append_escaped(out_, key);
        out_ += ": ";
    }
}

JsonWriter& JsonWriter::begin_object(std::string_view key) {
    prefix(key);
    out_.push_back('{');
    first_in_level_.push_back(true);
    return *this;
}

JsonWriter& JsonWriter::begin_array(std::string_view key) {
    prefix(key);
    out_.push_back('[');
    first_in_level_.push_back(true);
    return *this;
}

void JsonWriter::close(char c) {
    assert(!first_in_level_.empty());
    const bool empty = first_in_level_.back();
    first_in_level_.pop_back();
    if (!empty) {
        out_.push_back('\n');
        out_.append(2 * first_in_level_.size(), ' ');
    }
    out_.push_back(c);
    if (first_in_level_.empty()) out_.push_back('\n');
}

JsonWriter& JsonWriter::end_object() {
    close('}');
    return *this;
}

JsonWriter& JsonWriter::end_array() {
    close(']');
    return *this;
}

JsonWriter& JsonWriter::field(std::string_view key, std::uint64_t v) {
    prefix(key);
    out_ += std::to_string(v);
    return *this;
}

JsonWriter& JsonWriter::field(std::string_view key, std::int64_t v) {
    prefix(key);
    out_ += std::to_string(v);
    return *this;
}

JsonWriter& JsonWriter::field(std::string_view key, double v) {
    prefix(key);
    if (!std::isfinite(v)) {
        out_ += "null";
        return *this;
    }
    char buf[64];
    const auto res = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
    out_.append(buf, res.ptr);
    return *this;
}

JsonWriter& JsonWriter::field(std::string_view key, bool v) {
    prefix(key);
    out_ += v ? "true" : "false";
    return *this;
}

JsonWriter& JsonWriter::field(std::string_view key, std::string_view v) {
    prefix(key);
    append_escaped(out_, v);
    return *this;
}

bool write_text_file(const std::string& path, const std::string& text, std::string& err) {
    if (path == "-") {
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
        return true;
    }
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) {
        err = "cannot open " + path + ": " + std::strerror(errno);
        return false;
    }
    const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    const bool closed = std::fclose(f) == 0;
    if (!wrote || !closed) {
        err = "cannot write " + path;
        return false;
    }
    return true;
}

}  // namespace shesha::tools

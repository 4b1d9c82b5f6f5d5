// Minimal streaming JSON writer for the tools' summaries (no JSON library is a project dependency).
// Keys are escaped; non-finite doubles become null. Misuse (unbalanced end_*) is a programming
// error caught by assert in debug builds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shesha::tools {

class JsonWriter {
public:
    // In an object pass the key; in an array (or at the top level) pass an empty key.
    JsonWriter& begin_object(std::string_view key = {});
    JsonWriter& end_object();
    JsonWriter& begin_array(std::string_view key = {});
    JsonWriter& end_array();

    JsonWriter& field(std::string_view key, std::uint64_t v);
    JsonWriter& field(std::string_view key, std::int64_t v);
    JsonWriter& field(std::string_view key, std::uint32_t v) { return field(key, std::uint64_t{v}); }
    JsonWriter& field(std::string_view key, int v) { return field(key, std::int64_t{v}); }
    JsonWriter& field(std::string_view key, double v);
    JsonWriter& field(std::string_view key, bool v);
    JsonWriter& field(std::string_view key, std::string_view v);
    JsonWriter& field(std::string_view key, const char* v) { return field(key, std::string_view(v)); }

    // The document so far, newline-terminated once complete.
    const std::string& str() const noexcept { return out_; }

    static void append_escaped(std::string& out, std::string_view s);

private:
    void prefix(std::string_view key);
    void close(char c);

    std::string out_;
    std::vector<bool> first_in_level_;  // one entry per open object/array
};

// Writes the text to path ("-" = stdout). Returns false and sets err on failure.
bool write_text_file(const std::string& path, const std::string& text, std::string& err);

}  // namespace shesha::tools

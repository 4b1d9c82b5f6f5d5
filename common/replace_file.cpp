#include "replace_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

namespace shesha {

bool replace_file(const std::string& path, std::string_view text, std::string& error) {
    const std::string tmp = path + ".tmp";
    std::FILE* f = std::fopen(tmp.c_str(), "w");
    if (f == nullptr) {
        error = fmt::format("cannot write {}: {}", tmp, std::strerror(errno));
        return false;
    }
    const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    const int saved = errno;
    if (std::fclose(f) != 0 || !ok) {
        error = fmt::format("cannot write {}: {}", tmp, std::strerror(ok ? errno : saved));
        std::remove(tmp.c_str());
        return false;
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        error = fmt::format("cannot rename {} to {}: {}", tmp, path, std::strerror(errno));
        std::remove(tmp.c_str());
        return false;
    }
    return true;
}

}  // namespace shesha

// Writing a file that readers may open at any moment (metrics, stats, Prometheus textfiles): the
// text goes to PATH.tmp, which is then renamed over PATH, so a reader (or a process killed
// mid-write) never leaves or sees a truncated file.
#pragma once

#include <string>
#include <string_view>

namespace shesha {

// Returns false with a one-line reason (naming PATH.tmp or PATH) on failure; the temporary file
// is removed then.
bool replace_file(const std::string& path, std::string_view text, std::string& error);

}  // namespace shesha

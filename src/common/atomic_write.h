// Writing a file atomically: the text goes to a temporary file in the same directory, is
// flushed and closed, and is renamed over the target, so a reader (or a crash) never sees half a
// report. Every file decodebench writes goes through here.
#pragma once

#include <filesystem>
#include <string>

namespace decodebench {

// On any failure the temporary file is removed and `path` is left as it was; throws
// RuntimeFailure naming the path and the reason.
// Test hook (tests only): DECODEBENCH_TEST_WRITE_FAIL=ERRNO[@N] (ERRNO: ENOSPC or EIO) makes
// the N-th call in this process (default 1) and every later one fail as write(2) would with it.
void write_text_atomic(const std::filesystem::path& path, const std::string& text);

}  // namespace decodebench

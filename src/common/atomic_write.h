// Writing a file atomically: the text goes to a temporary file in the same directory, is
// flushed and closed, and is renamed over the target, so a reader (or a crash) never sees half a
// report. Every file decodebench writes goes through here.
#pragma once

#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>

namespace decodebench {

// On any failure the temporary file is removed and `path` is left as it was; throws
// RuntimeFailure naming the path and the reason.
// Test hook (tests only): DECODEBENCH_TEST_WRITE_FAIL=ERRNO[@N] (ERRNO: ENOSPC or EIO) makes
// the N-th call in this process (default 1) and every later one fail as write(2) would with it.
void write_text_atomic(const std::filesystem::path& path, const std::string& text);
// The same for binary files written in pieces (a .npy header and its data), without joining them.
void write_bytes_atomic(const std::filesystem::path& path,
                        std::initializer_list<std::string_view> pieces);

}  // namespace decodebench

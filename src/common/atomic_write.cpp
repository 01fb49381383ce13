#include "common/atomic_write.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "common/errors.h"

namespace decodebench {

namespace {

// DECODEBENCH_TEST_WRITE_FAIL=ERRNO[@N] (atomic_write.h): the errno the N-th and later writes of
// this process fail with, 0 for this call to succeed. For tests of a disk that fills up mid-sweep.
int injected_write_errno() {
  const char* env = std::getenv("DECODEBENCH_TEST_WRITE_FAIL");
  if (!env || !*env) return 0;
  static std::atomic<int> calls{0};
  const int call = ++calls;
  const std::string spec(env);
  const std::string name = spec.substr(0, spec.find('@'));
  int from = 1;
  if (spec.find('@') != std::string::npos) from = std::atoi(spec.c_str() + spec.find('@') + 1);
  if (call < from) return 0;
  if (name == "ENOSPC") return ENOSPC;
  if (name == "EIO") return EIO;
  throw InputError(fmt::format(
      "DECODEBENCH_TEST_WRITE_FAIL='{}': valid: ENOSPC or EIO, optionally @N (from the N-th "
      "write on)",
      spec));
}

}  // namespace

void write_text_atomic(const std::filesystem::path& path, const std::string& text) {
  write_bytes_atomic(path, {std::string_view(text)});
}

void write_bytes_atomic(const std::filesystem::path& path,
                        std::initializer_list<std::string_view> pieces) {
  namespace fs = std::filesystem;
  const int injected = injected_write_errno();
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(dir, ec);  // a missing directory is reported by mkstemp below
  // mkstemp in the target's directory: rename() is atomic only within one file system.
  std::string tmpl = (dir / fmt::format(".{}.tmp-XXXXXX", path.filename().string())).string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) {
    throw RuntimeFailure(fmt::format("cannot write {}: cannot create a temporary file in {} ({})",
                                     path.string(), dir.string(), std::strerror(errno)));
  }
  auto fail = [&](std::string_view what) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmpl.c_str());
    throw RuntimeFailure(fmt::format("cannot write {}: {} ({}); the file is left as it was",
                                     path.string(), what, std::strerror(err)));
  };
  if (injected != 0) {
    // Half the first piece gets out, then the disk "fails": the temporary file must not survive.
    const std::string_view first = pieces.size() ? *pieces.begin() : std::string_view();
    [[maybe_unused]] const ssize_t n = ::write(fd, first.data(), first.size() / 2);
    errno = injected;
    fail("write failed");
  }
  for (const std::string_view piece : pieces) {
    std::size_t written = 0;
    while (written < piece.size()) {
      const ssize_t n = ::write(fd, piece.data() + written, piece.size() - written);
      if (n < 0) {
        if (errno == EINTR) continue;
        fail("write failed");
      }
      written += static_cast<std::size_t>(n);
    }
  }
  if (::fsync(fd) != 0) fail("fsync failed");
  ::fchmod(fd, 0644);  // mkstemp creates 0600; a report is meant to be read by others
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmpl.c_str());
    throw RuntimeFailure(
        fmt::format("cannot write {}: close failed ({})", path.string(), std::strerror(err)));
  }
  if (std::rename(tmpl.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmpl.c_str());
    throw RuntimeFailure(
        fmt::format("cannot write {}: rename failed ({})", path.string(), std::strerror(err)));
  }
}

}  // namespace decodebench

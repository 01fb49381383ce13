// Where a report was made: tool version, host, time.
#include <ctime>
#include <fstream>
#include <string>
#include <thread>

#include <sys/utsname.h>
#include <unistd.h>

#include <fmt/format.h>

#include "common/host_facts.h"
#include "git_sha.h"  // generated at build time: cmake/git_sha.cmake
#include "results/report.h"

namespace decodebench {

ToolInfo this_tool() {
  ToolInfo t;
  t.version = DECODEBENCH_VERSION;
  t.git_sha = DECODEBENCH_GIT_SHA;
  return t;
}

namespace {

std::string compiler_name() {
#if defined(__clang__)
  return fmt::format("Clang {}.{}.{}", __clang_major__, __clang_minor__, __clang_patchlevel__);
#elif defined(__GNUC__)
  return fmt::format("GCC {}.{}.{}", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#else
  return "unknown";
#endif
}

}  // namespace

HostInfo this_host() {
  HostInfo h;
  char name[256] = {};
  h.hostname = ::gethostname(name, sizeof(name) - 1) == 0 ? name : "unknown";
  struct utsname u {};
  h.os = ::uname(&u) == 0 ? fmt::format("{} {} {}", u.sysname, u.release, u.machine) : "unknown";
  h.cpu = cpu_model_name();
  h.cpu_threads = static_cast<int>(std::thread::hardware_concurrency());
  h.compiler = compiler_name();
  h.build_type = DECODEBENCH_BUILD_TYPE;
  return h;
}

std::string iso8601_utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace decodebench

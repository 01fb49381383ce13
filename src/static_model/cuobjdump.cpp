#include "static_model/cuobjdump.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/errors.h"

namespace decodebench::static_model {
namespace {

namespace fs = std::filesystem;

bool executable(const std::string& path) {
  std::error_code ec;
  return !path.empty() && fs::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// A shell word: 'it''s' quoting.
std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs `command` through the shell; its stdout, and its exit status in `status`.
std::string capture(const std::string& command, int& status) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) {
    status = -1;
    return out;
  }
  std::array<char, 1 << 16> buf;
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int raw = ::pclose(pipe);
  status = raw == -1 ? -1 : (WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw));
  return out;
}

// The first `name` on PATH that is executable, or "".
std::string on_path(const std::string& name) {
  std::stringstream path(env("PATH"));
  std::string dir;
  while (std::getline(path, dir, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = (fs::path(dir) / name).string();
    if (executable(candidate)) return candidate;
  }
  return "";
}

// The wheel's cuobjdump, asked of the package's own file list (as check-spills.sh does).
std::string from_wheel() {
  if (on_path("python3").empty()) return "";
  static const char* kScript =
      "import importlib.metadata as md\n"
      "try:\n"
      "    dist = md.distribution('nvidia-cuda-cuobjdump')\n"
      "except md.PackageNotFoundError:\n"
      "    raise SystemExit(1)\n"
      "for f in dist.files or []:\n"
      "    if f.name == 'cuobjdump':\n"
      "        print(dist.locate_file(f))\n"
      "        break\n";
  int status = 0;
  std::string out = capture("python3 -c " + quote(kScript) + " 2>/dev/null", status);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return status == 0 ? out : "";
}

}  // namespace

std::string find_cuobjdump(const std::string& explicit_path) {
  if (!explicit_path.empty()) {
    if (executable(explicit_path)) return explicit_path;
    throw InputError("--cuobjdump " + explicit_path + ": not an executable file");
  }
  const std::string from_env = env("DECODEBENCH_CUOBJDUMP");
  if (!from_env.empty()) {
    if (executable(from_env)) return from_env;
    throw InputError("$DECODEBENCH_CUOBJDUMP=" + from_env + ": not an executable file");
  }
  std::vector<std::string> looked;
  auto try_path = [&](const std::string& what, const std::string& path) {
    looked.push_back(what + (path.empty() || path == what ? "" : " (" + path + ")"));
    return executable(path);
  };
  const std::string cuobjdump_env = env("CUOBJDUMP");
  if (try_path("$CUOBJDUMP", cuobjdump_env)) return cuobjdump_env;
  const std::string path = on_path("cuobjdump");
  if (try_path("PATH", path)) return path;
  const std::string cuda_home = env("CUDA_HOME");
  const std::string home_bin = cuda_home.empty() ? "" : cuda_home + "/bin/cuobjdump";
  if (try_path("$CUDA_HOME/bin", home_bin)) return home_bin;
  const std::string nvcc = on_path("nvcc");
  const std::string beside_nvcc =
      nvcc.empty() ? "" : (fs::path(nvcc).parent_path() / "cuobjdump").string();
  if (try_path("beside nvcc", beside_nvcc)) return beside_nvcc;
  const std::string usr_local = "/usr/local/cuda/bin/cuobjdump";
  if (try_path(usr_local, usr_local)) return usr_local;
  const std::string wheel = from_wheel();
  if (try_path("the nvidia-cuda-cuobjdump wheel", wheel)) return wheel;
  std::string where;
  for (const std::string& w : looked) where += (where.empty() ? "" : ", ") + w;
  throw InputError("no cuobjdump found (looked at --cuobjdump, $DECODEBENCH_CUOBJDUMP, " + where +
                   "); name one with --cuobjdump or run scripts/bootstrap.sh");
}

std::string run_cuobjdump(const std::string& cuobjdump, const std::vector<std::string>& args) {
  char err_template[] = "/tmp/decodebench_cuobjdump_XXXXXX";
  const int fd = ::mkstemp(err_template);
  if (fd < 0) throw RuntimeFailure("cannot create a temporary file for cuobjdump's errors");
  ::close(fd);
  const std::string err_file = err_template;
  std::string command = quote(cuobjdump);
  std::string shown = cuobjdump;
  for (const std::string& a : args) {
    // Appended piecewise: `" " + a` trips GCC 12's -Wrestrict false positive.
    command += ' ';
    command += quote(a);
    shown += ' ';
    shown += a;
  }
  int status = 0;
  std::string out = capture(command + " 2>" + quote(err_file), status);
  std::ifstream in(err_file);
  std::stringstream err;
  err << in.rdbuf();
  std::error_code ec;
  fs::remove(err_file, ec);
  const std::string message = err.str();
  if (status != 0 || message.find("fatal") != std::string::npos) {
    std::string hint;
    if (message.find("nvdisasm") != std::string::npos) {
      hint =
          " (cuobjdump -sass runs nvdisasm, which must sit beside it or on PATH: the PyPI "
          "wheel nvidia-cuda-nvdisasm of cuobjdump's version, or the toolkit's)";
    }
    throw InputError("`" + shown + "` failed (exit " + std::to_string(status) + "): " + message +
                     hint);
  }
  return out;
}

std::string this_executable() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw RuntimeFailure("cannot resolve /proc/self/exe: " + ec.message());
  return p.string();
}

}  // namespace decodebench::static_model

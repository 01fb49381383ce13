#include "backends/cuda/cublaslt_loader.h"

#include <dlfcn.h>
#include <glob.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string_view>
#include <system_error>

#include <fmt/format.h>

namespace decodebench::cuda {
namespace {

constexpr int kMajors[] = {13, 12};  // newest first
constexpr const char* kSystemToolkit = "/usr/local/cuda";

std::string soname(int major) { return fmt::format("libcublasLt.so.{}", major); }

bool is_path(const std::string& candidate) { return candidate.find('/') != std::string::npos; }

std::string trim_trailing_slashes(std::string s) {
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

// A dlerror() text, shortened where it only says the file is not there.
std::string dl_failure(const char* err) {
  const std::string text = err ? err : "unknown dlopen error";
  if (text.find("cannot open shared object file") != std::string::npos) return "not found";
  return text;
}

// The symbols of CublasLtApi: each name with where its pointer goes.
struct Symbol {
  const char* name;
  void** slot;
  bool required;
};
std::vector<Symbol> symbols_of(CublasLtApi& a) {
  auto slot = [](auto& fn) { return reinterpret_cast<void**>(&fn); };
  return {{"cublasLtGetVersion", slot(a.get_version), true},
          {"cublasLtCreate", slot(a.create), true},
          {"cublasLtDestroy", slot(a.destroy), true},
          {"cublasLtMatmulDescCreate", slot(a.matmul_desc_create), true},
          {"cublasLtMatmulDescDestroy", slot(a.matmul_desc_destroy), true},
          {"cublasLtMatmulDescSetAttribute", slot(a.matmul_desc_set_attribute), true},
          {"cublasLtMatrixLayoutCreate", slot(a.matrix_layout_create), true},
          {"cublasLtMatrixLayoutDestroy", slot(a.matrix_layout_destroy), true},
          {"cublasLtMatmulPreferenceCreate", slot(a.preference_create), true},
          {"cublasLtMatmulPreferenceDestroy", slot(a.preference_destroy), true},
          {"cublasLtMatmulPreferenceSetAttribute", slot(a.preference_set_attribute), true},
          {"cublasLtMatmulAlgoGetHeuristic", slot(a.algo_get_heuristic), true},
          {"cublasLtMatmul", slot(a.matmul), true},
          {"cublasLtGetStatusName", slot(a.status_name), false},
          {"cublasLtGetStatusString", slot(a.status_string), false}};
}

// One candidate: the loaded API, or why not (`why`).
bool try_candidate(const std::string& candidate, CublasLtApi& api, std::string& why) {
  if (is_path(candidate)) {
    std::error_code ec;
    if (!std::filesystem::exists(candidate, ec)) {
      why = "no such file";
      return false;
    }
  }
  (void)dlerror();  // clear
  void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    why = dl_failure(dlerror());
    return false;
  }
  CublasLtApi found;
  std::vector<std::string> missing;
  for (const Symbol& s : symbols_of(found)) {
    (void)dlerror();
    *s.slot = dlsym(handle, s.name);
    if (*s.slot == nullptr && s.required) missing.emplace_back(s.name);
  }
  if (!missing.empty()) {
    std::size_t required = 0;
    for (const Symbol& s : symbols_of(found)) required += s.required ? 1 : 0;
    if (missing.size() == required) {
      why =
          "loaded, but has no cublasLtMatmul nor any other cuBLASLt function: not a cuBLASLt "
          "library";
    } else {
      std::string list;
      for (const std::string& m : missing) list += (list.empty() ? "" : ", ") + m;
      why = fmt::format("loaded, but lacks {}: not a cuBLASLt library this build can use", list);
    }
    dlclose(handle);
    return false;
  }
  found.version = found.get_version();
  if (cublaslt_version_major(found.version) < kMinCublasLtMajor) {
    why = fmt::format("cuBLASLt {}: layer scope needs {} or later",
                      cublaslt_version_text(found.version), kMinCublasLtMajor);
    dlclose(handle);
    return false;
  }
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(found.get_version), &info) != 0 && info.dli_fname != nullptr &&
      info.dli_fname[0] != '\0') {
    found.path = info.dli_fname;
  } else {
    found.path = candidate;
  }
  // Kept open for the life of the process: its handles and kernels may be in use until exit.
  api = found;
  return true;
}

void add_glob(const std::string& pattern, std::vector<std::string>& out) {
  glob_t g{};
  if (glob(pattern.c_str(), GLOB_ONLYDIR, nullptr, &g) == 0) {
    for (std::size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  }
  globfree(&g);
}

// sys.path of the python3 on PATH, one entry per line; empty when there is none.
std::vector<std::string> python_sys_path() {
  std::vector<std::string> lines;
  FILE* pipe = popen("python3 -c 'import sys; print(\"\\n\".join(sys.path))' 2>/dev/null", "r");
  if (pipe == nullptr) return lines;
  std::string current;
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) {
    for (std::size_t i = 0; i < n; ++i) {
      if (buf[i] == '\n') {
        lines.push_back(current);
        current.clear();
      } else {
        current += buf[i];
      }
    }
  }
  if (!current.empty()) lines.push_back(current);
  (void)pclose(pipe);
  return lines;
}

const char* nonempty(const char* s) { return s != nullptr && s[0] != '\0' ? s : nullptr; }

}  // namespace

std::string cublaslt_version_text(std::size_t version) {
  if (version < 100000) {
    return fmt::format("older than 12.0 (version number {})", version);
  }
  return fmt::format("{}.{}.{}", version / 10000, version / 100 % 100, version % 100);
}

int cublaslt_version_major(std::size_t version) {
  return version < 100000 ? 0 : static_cast<int>(version / 10000);
}

std::string CublasLtApi::description() const {
  return fmt::format("cuBLASLt {} ({})", cublaslt_version_text(version), path);
}

std::string CublasLtApi::status_text(cublasStatus_t status) const {
  const char* name = status_name ? status_name(status) : nullptr;
  const char* text = status_string ? status_string(status) : nullptr;
  if (name != nullptr && text != nullptr) return fmt::format("{} ({})", name, text);
  if (name != nullptr) return name;
  return fmt::format("cublasStatus_t {}", static_cast<int>(status));
}

std::vector<std::string> cublaslt_wheel_candidates(const std::vector<std::string>& site_dirs) {
  std::vector<std::string> out;
  for (const std::string& raw : site_dirs) {
    const std::string dir = trim_trailing_slashes(raw);
    out.push_back(dir + "/nvidia/cu13/lib/" + soname(13));
    for (int major : kMajors) out.push_back(dir + "/nvidia/cublas/lib/" + soname(major));
  }
  return out;
}

std::vector<std::string> cublaslt_search_order(const std::string& env, const std::string& cuda_home,
                                               const std::vector<std::string>& site_dirs) {
  if (!env.empty()) return {env};
  std::vector<std::string> out;
  std::vector<std::string> toolkits;
  if (!cuda_home.empty()) toolkits.push_back(trim_trailing_slashes(cuda_home));
  if (toolkits.empty() || toolkits.front() != kSystemToolkit) toolkits.emplace_back(kSystemToolkit);
  for (int major : kMajors) {
    out.push_back(soname(major));
    for (const std::string& t : toolkits) out.push_back(t + "/lib64/" + soname(major));
  }
  for (std::string& c : cublaslt_wheel_candidates(site_dirs)) out.push_back(std::move(c));
  return out;
}

std::vector<std::string> merge_site_dirs(const std::vector<std::string>& from_python,
                                         const std::vector<std::string>& globbed) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  auto add = [&](const std::string& raw) {
    const std::string dir = trim_trailing_slashes(raw);
    const std::string_view base = std::string_view(dir).substr(dir.rfind('/') + 1);
    if (base != "site-packages" && base != "dist-packages") return;
    if (seen.insert(dir).second) out.push_back(dir);
  };
  for (const std::string& d : from_python) add(d);
  for (const std::string& d : globbed) add(d);
  return out;
}

std::vector<std::string> python_site_dirs() {
  std::vector<std::string> globbed;
  add_glob("/usr/lib/python3*/site-packages", globbed);
  add_glob("/usr/lib/python3/dist-packages", globbed);
  add_glob("/usr/local/lib/python3*/dist-packages", globbed);
  add_glob("/usr/local/lib/python3*/site-packages", globbed);
  if (const char* home = nonempty(std::getenv("HOME"))) {
    add_glob(std::string(home) + "/.local/lib/python3*/site-packages", globbed);
  }
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    if (const char* prefix = nonempty(std::getenv(var))) {
      add_glob(std::string(prefix) + "/lib/python3*/site-packages", globbed);
    }
  }
  std::vector<std::string> dirs;
  for (const std::string& d : merge_site_dirs(python_sys_path(), globbed)) {
    std::error_code ec;
    if (std::filesystem::is_directory(d, ec)) dirs.push_back(d);
  }
  return dirs;
}

namespace {
// Tries `candidates` in order into `load`; appends "where (why)" of each failure to `tried`.
bool try_all(const std::vector<std::string>& candidates, CublasLtLoad& load, std::string& tried) {
  for (const std::string& c : candidates) {
    std::string why;
    if (try_candidate(c, load.api, why)) return true;
    const std::string where = is_path(c) ? c : c + " via the dynamic linker";
    tried += fmt::format("{}{} ({})", tried.empty() ? "" : ", ", where, why);
  }
  return false;
}

constexpr const char* kHint =
    "set DECODEBENCH_CUBLASLT to the path of a libcublasLt.so.12 or .13 (a CUDA toolkit's, or "
    "the nvidia-cublas wheel's next to PyTorch); attention scope needs none";
}  // namespace

CublasLtLoad load_cublaslt_from(const std::vector<std::string>& candidates,
                                const std::string& context) {
  CublasLtLoad load;
  std::string tried;
  if (try_all(candidates, load, tried)) return load;
  load.api = CublasLtApi{};
  load.error = fmt::format("{}: tried {}", context, tried.empty() ? "nothing" : tried);
  return load;
}

CublasLtLoad load_cublaslt(const char* env, const char* cuda_home) {
  CublasLtLoad load;
  std::string tried;
  if (const char* path = nonempty(env)) {
    if (try_all({path}, load, tried)) return load;
    load.api = CublasLtApi{};
    load.error = fmt::format("$DECODEBENCH_CUBLASLT={} does not load: {}; {}", path, tried, kHint);
    return load;
  }
  const std::string home = nonempty(cuda_home) ? cuda_home : "";
  if (try_all(cublaslt_search_order("", home, {}), load, tried)) return load;
  // The wheels' directories only now: finding them runs python3.
  const std::vector<std::string> site_dirs = python_site_dirs();
  if (try_all(cublaslt_wheel_candidates(site_dirs), load, tried)) return load;
  load.api = CublasLtApi{};
  load.error = fmt::format("no cuBLASLt found: tried {} ({} Python site directories); {}", tried,
                           site_dirs.size(), kHint);
  return load;
}

const CublasLtLoad& cublaslt() {
  static const CublasLtLoad load =
      load_cublaslt(std::getenv("DECODEBENCH_CUBLASLT"), std::getenv("CUDA_HOME"));
  return load;
}

}  // namespace decodebench::cuda

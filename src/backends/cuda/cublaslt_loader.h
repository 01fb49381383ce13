// cuBLASLt, loaded at run time with dlopen, never linked. The GPU bundle (scripts/gpu-bundle.sh)
// cannot carry cuBLASLt (over 500 MB), so layer scope uses the GPU machine's own: its CUDA
// toolkit's, or the nvidia-cublas wheel that PyTorch installs. Where none is found the bundle
// still runs attention scope; layer points are skipped with the loader's message, which lists
// every place it looked.
//
// The types and signatures come from the toolkit's cublasLt.h (decltype of each declaration);
// only the functions below are resolved, with dlsym, from the file that was loaded. cuBLASLt 12
// and 13 keep these entry points, their arguments and the enum values used here unchanged.
//
// Search order (cublaslt_search_order):
//   1. $DECODEBENCH_CUBLASLT, a path to the library (or a bare name for the dynamic linker).
//      When it is set it is the only candidate: a deliberate choice that fails is an error, not
//      a reason to load some other file.
//   2. for the majors 13, then 12: libcublasLt.so.<major> through the dynamic linker's own
//      search (LD_LIBRARY_PATH, ld.so.cache, the system directories), then explicitly in
//      $CUDA_HOME/lib64 and /usr/local/cuda/lib64 (a toolkit not registered with ldconfig).
//   3. PyTorch's wheels in each Python site directory (python_site_dirs): nvidia/cu13/lib (the
//      CUDA 13 wheels' one directory) and nvidia/cublas/lib (the CUDA 12 nvidia-cublas-cu12
//      wheel), libcublasLt.so.13, then .so.12.
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <string>
#include <vector>

namespace decodebench::cuda {

// The entry points decodebench calls, resolved from one loaded library. Every pointer is set
// (a library lacking one is refused), except the two status-text functions, which may be null.
struct CublasLtApi {
  decltype(&cublasLtGetVersion) get_version = nullptr;
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtMatmulDescCreate) matmul_desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) matmul_desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) matmul_desc_set_attribute = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) matrix_layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) matrix_layout_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) preference_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) preference_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preference_set_attribute = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) algo_get_heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
  decltype(&cublasLtGetStatusName) status_name = nullptr;      // optional
  decltype(&cublasLtGetStatusString) status_string = nullptr;  // optional

  std::string path;         // the file that was loaded, resolved (dladdr)
  std::size_t version = 0;  // cublasLtGetVersion()
  // "cuBLASLt 12.4.5 (/usr/local/cuda/lib64/libcublasLt.so.12)": PreparedLayer::gemm_library.
  std::string description() const;
  // "CUBLAS_STATUS_NOT_SUPPORTED (the functionality requested is not supported)", or the number
  // where the library has no status text.
  std::string status_text(cublasStatus_t status) const;
};

// The outcome of a search: `api` set (and `error` empty), or `error` saying why not, listing
// every candidate with what happened to it.
struct CublasLtLoad {
  bool ok() const { return api.matmul != nullptr; }
  CublasLtApi api;
  std::string error;
};

// The lowest cuBLASLt this backend uses (fp8 matmul on Hopper came with 12.0).
inline constexpr int kMinCublasLtMajor = 12;

// cublasLtGetVersion()'s number as text: major * 10000 + minor * 100 + patch since 12.0
// (120405 -> "12.4.5"), major * 1000 + minor * 100 + patch before (11201 -> "11.2.1"); and the
// major alone.
std::string cublaslt_version_text(std::size_t version);
int cublaslt_version_major(std::size_t version);

// The candidates of step 2 and 3 above, in order, for $CUDA_HOME = `cuda_home` (empty: unset)
// and the given site directories; a bare name is for the dynamic linker's search, anything with
// a '/' is a path. With `env` ($DECODEBENCH_CUBLASLT) non-empty: {env} alone.
std::vector<std::string> cublaslt_search_order(const std::string& env, const std::string& cuda_home,
                                               const std::vector<std::string>& site_dirs);
// Step 3 alone, for the given site directories.
std::vector<std::string> cublaslt_wheel_candidates(const std::vector<std::string>& site_dirs);

// Python site directories where a PyTorch install keeps its nvidia wheels: what `python3 -c
// 'import sys; print(sys.path)'` lists (when python3 runs), then the directories matching
// /usr/lib/python3*/site-packages, /usr/lib/python3/dist-packages,
// /usr/local/lib/python3*/{dist,site}-packages, ~/.local/lib/python3*/site-packages and
// $VIRTUAL_ENV / $CONDA_PREFIX's lib/python3*/site-packages. Existing directories only, each
// once, in that order.
std::vector<std::string> python_site_dirs();
// The filtering and ordering of python_site_dirs on given lists (what python3 printed, one
// entry per line, then the globbed directories): entries naming a site-packages or
// dist-packages directory, first occurrence kept. Pure, for tests.
std::vector<std::string> merge_site_dirs(const std::vector<std::string>& from_python,
                                         const std::vector<std::string>& globbed);

// Tries `candidates` in order; the first that loads, has every required symbol and is at least
// kMinCublasLtMajor wins (it stays loaded for the life of the process). `context` starts the
// error message ("$DECODEBENCH_CUBLASLT=/x/libm.so.6", "no cuBLASLt found").
CublasLtLoad load_cublaslt_from(const std::vector<std::string>& candidates,
                                const std::string& context);
// The whole search for these values of $DECODEBENCH_CUBLASLT and $CUDA_HOME (null or empty:
// unset); the wheels' directories are looked up only when the toolkit candidates fail.
CublasLtLoad load_cublaslt(const char* env, const char* cuda_home);
// load_cublaslt(getenv("DECODEBENCH_CUBLASLT"), getenv("CUDA_HOME")), once per process; the
// result is kept (success or failure).
const CublasLtLoad& cublaslt();

}  // namespace decodebench::cuda

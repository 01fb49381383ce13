// PLACEHOLDER (kernel work replaces it): split_kv planner.
#include "kernels.h"
namespace decodebench::kernels {
int plan_num_splits(const PagedDecodeParams&, int) { return 1; }
std::size_t split_kv_workspace_bytes(const PagedDecodeParams&, int) { return 0; }
}  // namespace decodebench::kernels

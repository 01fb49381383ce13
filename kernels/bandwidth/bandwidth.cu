// PLACEHOLDER (emulator work replaces it)
#include "kernels.h"
namespace decodebench::kernels::DECODEBENCH_TARGET_NS {
LaunchResult launch_bandwidth(BandwidthKernel, const BandwidthParams&, void*) {
  return {LaunchStatus::unsupported, "bandwidth kernels not implemented yet"};
}
}  // namespace decodebench::kernels::DECODEBENCH_TARGET_NS

// The bandwidth kernels compiled once more for the emulator with a planted fault: the
// grid-stride tails dropped (DECODEBENCH_BANDWIDTH_PLANT_SKIP_TAIL in
// kernels/bandwidth/bandwidth.cu), in a namespace of their own. bandwidth_test.cpp shows that its
// checks catch the fault on every size with a tail and only there.
#define DECODEBENCH_BANDWIDTH_PLANT_SKIP_TAIL 1
#define DECODEBENCH_TARGET_NS emu_skip_tail
#include "bandwidth/bandwidth.cu"

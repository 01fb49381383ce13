// Finding and running cuobjdump, the CUDA Toolkit's reader of the device code in a binary.
#pragma once

#include <string>
#include <vector>

namespace decodebench::static_model {

// The cuobjdump to use, searched in the order scripts/check-spills.sh --find-cuobjdump uses,
// after an explicit one: `explicit_path` (--cuobjdump), $DECODEBENCH_CUOBJDUMP, $CUOBJDUMP,
// PATH, $CUDA_HOME/bin, beside the nvcc on PATH, /usr/local/cuda/bin, then the PyPI wheel
// nvidia-cuda-cuobjdump (located through python3's package metadata). Throws InputError naming
// every place it looked when none is an executable file (and at once when `explicit_path` or
// $DECODEBENCH_CUOBJDUMP names one that is not).
std::string find_cuobjdump(const std::string& explicit_path);

// `cuobjdump args...`'s standard output. Throws InputError with its standard error when it
// fails (exit status, or a missing nvdisasm, which -sass needs beside it or on PATH).
std::string run_cuobjdump(const std::string& cuobjdump, const std::vector<std::string>& args);

// The running executable (/proc/self/exe resolved): the decodebench binary, whose device code
// is linked in statically.
std::string this_executable();

}  // namespace decodebench::static_model

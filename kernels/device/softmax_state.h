// Online-softmax state, written once and used by the CPU backend, the kernels and the split-KV
// merge (the flashinfer "state.cuh" idea). Base 2: callers pre-multiply scores by log2(e), so
// the hot loops use exp2 (one ex2.approx on the GPU).
//
// For one query row over a set of keys with scores s_j (log2 domain):
//   max = max_j s_j,  sum = Σ_j exp2(s_j - max),  acc = Σ_j exp2(s_j - max) · v_j
// and the attention output is acc / sum. Two states over disjoint key sets merge exactly.
#pragma once

#include <cmath>

#include "device/float_formats.h"  // DECODEBENCH_HD
#include "device/math.h"           // kLog2e: the base-2 convention

namespace decodebench {

template <typename T>
struct SoftmaxState {
  T max = -INFINITY;  // running max of the scores seen (log2 domain)
  T sum = 0;          // Σ exp2(score - max)

  // std::exp2 as a function object: merge()'s default exp2.
  struct StdExp2 {
    DECODEBENCH_HD T operator()(T x) const { return exp2_(x); }
  };

  // Raises the running max to `new_max` (>= max) and returns the factor by which an
  // accumulator built against the old max must be multiplied.
  DECODEBENCH_HD T raise_max(T new_max) {
    const T factor = (max == -INFINITY) ? T(0) : exp2_(max - new_max);
    sum *= factor;
    max = new_max;
    return factor;
  }

  // Merges `other` into this state. On return, an accumulator of this state must be multiplied
  // by `self_factor` and other's accumulator by `other_factor`, then added. `exp2` is the
  // exp2 to use: std::exp2 by default, a kernel's hardware approximation (dev::FastExp2) where
  // the merge must match the kernel's own arithmetic.
  template <typename Exp2 = StdExp2>
  DECODEBENCH_HD void merge(const SoftmaxState& other, T& self_factor, T& other_factor,
                            Exp2 exp2 = {}) {
    const T new_max = max > other.max ? max : other.max;
    if (new_max == -INFINITY) {  // both empty
      self_factor = other_factor = T(0);
      return;
    }
    self_factor = (max == -INFINITY) ? T(0) : exp2(max - new_max);
    other_factor = (other.max == -INFINITY) ? T(0) : exp2(other.max - new_max);
    sum = sum * self_factor + other.sum * other_factor;
    max = new_max;
  }

  // log2 of Σ exp2(score): what a split stores so that splits can be merged later.
  DECODEBENCH_HD T log2_sum_exp2() const { return max + log2_(sum); }

 private:
  DECODEBENCH_HD static T exp2_(T x) {
    using std::exp2;
    return exp2(x);
  }
  DECODEBENCH_HD static T log2_(T x) {
    using std::log2;
    return log2(x);
  }
};

}  // namespace decodebench

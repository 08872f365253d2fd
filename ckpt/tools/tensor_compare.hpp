// Element-by-element comparison of two tensors of the same dtype and shape, as the raw bytes
// Checkpoint::read returns, for primus-ckpt diff.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "primus/ckpt/dtype.hpp"

namespace primus::ckpt::tool {

struct TensorComparison {
  std::uint64_t elements = 0;
  std::uint64_t differing = 0;  // elements whose bytes differ (so 0.0 and -0.0 differ)
  // Floating-point dtypes: the largest |a - b| over the differing elements (0 when none differ,
  // NaN when a NaN is involved).
  std::optional<double> max_abs_diff;
};

// a and b hold the same number of elements of `dtype`; throws Error otherwise.
TensorComparison compare_tensors(DType dtype, const std::vector<std::uint8_t>& a,
                                 const std::vector<std::uint8_t>& b);

bool is_floating(DType dtype);

// One element of a floating-point dtype, as a double.
double element_as_double(DType dtype, const std::uint8_t* bytes);

}  // namespace primus::ckpt::tool

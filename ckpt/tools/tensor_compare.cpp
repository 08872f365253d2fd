#include "tensor_compare.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "primus/common/error.hpp"

namespace primus::ckpt::tool {
namespace {

double half_to_double(std::uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1F;
  const int mantissa = bits & 0x3FF;
  double value = 0;
  if (exponent == 0) {
    value = std::ldexp(mantissa, -24);
  } else if (exponent == 31) {
    value = mantissa != 0 ? std::numeric_limits<double>::quiet_NaN()
                          : std::numeric_limits<double>::infinity();
  } else {
    value = std::ldexp(mantissa + 1024, exponent - 25);
  }
  return (bits & 0x8000) != 0 ? -value : value;
}

}  // namespace

bool is_floating(DType dtype) {
  return dtype == DType::kFloat64 || dtype == DType::kFloat32 || dtype == DType::kFloat16 ||
         dtype == DType::kBFloat16;
}

double element_as_double(DType dtype, const std::uint8_t* bytes) {
  switch (dtype) {
    case DType::kFloat64: {
      double value = 0;
      std::memcpy(&value, bytes, sizeof value);
      return value;
    }
    case DType::kFloat32: {
      float value = 0;
      std::memcpy(&value, bytes, sizeof value);
      return value;
    }
    case DType::kFloat16: {
      std::uint16_t bits = 0;
      std::memcpy(&bits, bytes, sizeof bits);
      return half_to_double(bits);
    }
    case DType::kBFloat16: {
      std::uint16_t half = 0;
      std::memcpy(&half, bytes, sizeof half);
      const std::uint32_t bits = std::uint32_t{half} << 16;
      float value = 0;
      std::memcpy(&value, &bits, sizeof value);
      return value;
    }
    default:
      throw Error("element_as_double: " + std::string(to_string(dtype)) +
                  " is not a floating-point dtype");
  }
}

TensorComparison compare_tensors(DType dtype, const std::vector<std::uint8_t>& a,
                                 const std::vector<std::uint8_t>& b) {
  const std::size_t size = dtype_size(dtype);
  if (a.size() != b.size() || a.size() % size != 0) {
    throw Error("compare_tensors: " + std::to_string(a.size()) + " and " +
                std::to_string(b.size()) + " bytes are not two tensors of the same shape");
  }
  TensorComparison result;
  result.elements = a.size() / size;
  const bool floating = is_floating(dtype);
  if (floating) result.max_abs_diff = 0.0;
  for (std::size_t offset = 0; offset < a.size(); offset += size) {
    if (std::memcmp(a.data() + offset, b.data() + offset, size) == 0) continue;
    ++result.differing;
    if (!floating || std::isnan(*result.max_abs_diff)) continue;
    const double diff = std::fabs(element_as_double(dtype, a.data() + offset) -
                                  element_as_double(dtype, b.data() + offset));
    if (std::isnan(diff) || diff > *result.max_abs_diff) result.max_abs_diff = diff;
  }
  return result;
}

}  // namespace primus::ckpt::tool

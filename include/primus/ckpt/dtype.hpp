// Element types of checkpointed tensors. bfloat16 is stored as its raw 16 bits in an HDF5 float
// type of its own (sign 15, exponent 7-14, mantissa 0-6), never converted by HDF5.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace primus::ckpt {

enum class DType : std::uint8_t {
  kFloat64,
  kFloat32,
  kFloat16,
  kBFloat16,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUInt8,
  kBool,
};

// "float64", "float32", "float16", "bfloat16", "int8", ..., "uint8", "bool" (numpy's names).
std::string_view to_string(DType dtype);
std::optional<DType> parse_dtype(std::string_view name);
std::size_t dtype_size(DType dtype);
const std::vector<DType>& all_dtypes();

using Shape = std::vector<std::uint64_t>;

// Product of the dimensions (1 for a scalar); throws Error on overflow.
std::uint64_t element_count(const Shape& shape);

}  // namespace primus::ckpt

#include "primus/ckpt/dtype.hpp"

#include <array>
#include <limits>

#include "primus/common/error.hpp"

namespace primus::ckpt {
namespace {

struct DTypeRow {
  DType dtype;
  std::string_view name;
  std::size_t size;
};

constexpr std::array<DTypeRow, 10> kRows = {{
    {DType::kFloat64, "float64", 8},
    {DType::kFloat32, "float32", 4},
    {DType::kFloat16, "float16", 2},
    {DType::kBFloat16, "bfloat16", 2},
    {DType::kInt8, "int8", 1},
    {DType::kInt16, "int16", 2},
    {DType::kInt32, "int32", 4},
    {DType::kInt64, "int64", 8},
    {DType::kUInt8, "uint8", 1},
    {DType::kBool, "bool", 1},
}};

const DTypeRow& row(DType dtype) {
  for (const DTypeRow& r : kRows) {
    if (r.dtype == dtype) return r;
  }
  throw Error("unknown dtype");
}

}  // namespace

std::string_view to_string(DType dtype) {
  return row(dtype).name;
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (const DTypeRow& r : kRows) {
    if (r.name == name) return r.dtype;
  }
  return std::nullopt;
}

std::size_t dtype_size(DType dtype) {
  return row(dtype).size;
}

const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> dtypes = [] {
    std::vector<DType> all;
    for (const DTypeRow& r : kRows)
      all.push_back(r.dtype);
    return all;
  }();
  return dtypes;
}

std::uint64_t element_count(const Shape& shape) {
  std::uint64_t count = 1;
  for (const std::uint64_t dim : shape) {
    if (dim != 0 && count > std::numeric_limits<std::uint64_t>::max() / dim) {
      throw Error("tensor shape overflows 64 bits");
    }
    count *= dim;
  }
  return count;
}

}  // namespace primus::ckpt

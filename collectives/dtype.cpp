// Names and sizes of the element types and reduction operations of libprimus-coll.
#include "primus/collectives/dtype.hpp"

#include <array>
#include <stdexcept>
#include <string>

namespace primus::coll {
namespace {

struct DTypeRow {
  DType dtype;
  std::string_view name;
  std::size_t size;
};

constexpr std::array<DTypeRow, 7> kDTypes = {{
    {DType::kFloat64, "float64", 8},
    {DType::kFloat32, "float32", 4},
    {DType::kFloat16, "float16", 2},
    {DType::kBFloat16, "bfloat16", 2},
    {DType::kInt32, "int32", 4},
    {DType::kInt64, "int64", 8},
    {DType::kUInt8, "uint8", 1},
}};

struct ReduceOpRow {
  ReduceOp op;
  std::string_view name;
};

constexpr std::array<ReduceOpRow, 4> kReduceOps = {{
    {ReduceOp::kSum, "sum"},
    {ReduceOp::kMax, "max"},
    {ReduceOp::kMin, "min"},
    {ReduceOp::kProd, "prod"},
}};

const DTypeRow& row(DType dtype) {
  for (const DTypeRow& r : kDTypes) {
    if (r.dtype == dtype) return r;
  }
  throw std::invalid_argument("invalid collectives dtype " +
                              std::to_string(static_cast<int>(dtype)));
}

const ReduceOpRow& row(ReduceOp op) {
  for (const ReduceOpRow& r : kReduceOps) {
    if (r.op == op) return r;
  }
  throw std::invalid_argument("invalid collectives reduce op " +
                              std::to_string(static_cast<int>(op)));
}

}  // namespace

std::size_t dtype_size(DType dtype) {
  return row(dtype).size;
}

std::string_view to_string(DType dtype) {
  return row(dtype).name;
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (const DTypeRow& r : kDTypes) {
    if (r.name == name) return r.dtype;
  }
  return std::nullopt;
}

std::string_view to_string(ReduceOp op) {
  return row(op).name;
}

std::optional<ReduceOp> parse_reduce_op(std::string_view name) {
  for (const ReduceOpRow& r : kReduceOps) {
    if (r.name == name) return r.op;
  }
  return std::nullopt;
}

}  // namespace primus::coll

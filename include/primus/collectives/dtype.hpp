// Element types and reduction operations of libprimus-coll, with their names as they appear
// in options and messages ("float32", "sum").
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace primus::coll {

enum class DType { kFloat64, kFloat32, kFloat16, kBFloat16, kInt32, kInt64, kUInt8 };

enum class ReduceOp { kSum, kMax, kMin, kProd };

// Bytes per element: 8, 4, 2, 2, 4, 8, 1. Throws std::invalid_argument for a value outside
// the enumeration (as do both to_string overloads).
std::size_t dtype_size(DType dtype);

// "float64", "float32", "float16", "bfloat16", "int32", "int64", "uint8".
std::string_view to_string(DType dtype);

// The inverse of to_string (exact, case-sensitive match); nullopt for any other name.
std::optional<DType> parse_dtype(std::string_view name);

// "sum", "max", "min", "prod".
std::string_view to_string(ReduceOp op);

// The inverse of to_string(ReduceOp); nullopt for any other name.
std::optional<ReduceOp> parse_reduce_op(std::string_view name);

}  // namespace primus::coll

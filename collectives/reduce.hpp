// Element-wise reduction kernels of libprimus-coll (acc = op(acc, in)), and the IEEE
// float16 / bfloat16 conversions they use.
#pragma once

#include <cstddef>
#include <cstdint>

#include "primus/collectives/dtype.hpp"

namespace primus::coll {

// acc[i] = op(acc[i], in[i]) for i in [0, count), elements of type dtype in native
// (little-endian) byte order. Either pointer may be unaligned; acc and in may be the same
// buffer but must not otherwise overlap.
//
// Integers: sum and prod wrap around modulo 2^bits; max and min as usual.
// float32/float64: sum and prod are plain IEEE operations. max and min return a quiet NaN
// when either operand is NaN, and treat -0 as smaller than +0, so that the result does not
// depend on the order of the operands.
// float16/bfloat16: both operands are converted to float32, the op is applied in float32 as
// above and the result is rounded back (to nearest, ties to even).
//
// Throws std::invalid_argument if dtype or op is not a value of its enumeration.
void reduce_into(DType dtype, ReduceOp op, void* acc, const void* in, std::size_t count);

// IEEE 754 binary16 <-> binary32. half_to_float is exact. float_to_half rounds to nearest,
// ties to even, produces subnormals and signed zeros, returns infinity for magnitudes that
// round above 65504 (65520 and up), and maps NaN to a quiet NaN of the same sign.
float half_to_float(std::uint16_t h);
std::uint16_t float_to_half(float f);

// bfloat16 (the upper 16 bits of a binary32) <-> binary32. bfloat16_to_float is exact.
// float_to_bfloat16 rounds to nearest, ties to even (overflowing to infinity) and maps NaN to
// a quiet NaN of the same sign.
float bfloat16_to_float(std::uint16_t b);
std::uint16_t float_to_bfloat16(float f);

}  // namespace primus::coll

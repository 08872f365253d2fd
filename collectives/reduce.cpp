// Element-wise reduction kernels of libprimus-coll, and float16 / bfloat16 conversions.
#include "reduce.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace primus::coll {
namespace {

// ---- float16 / bfloat16 conversions -------------------------------------------------------

inline std::uint32_t float_bits(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bits_float(std::uint32_t u) {
  float f = 0;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

constexpr std::uint32_t kF32SignMask = 0x80000000U;
constexpr std::uint32_t kF32Inf = 0x7F800000U;

// The conversions are branch-free so that the loops of reduce_into over float16 and bfloat16
// vectorize: select_bits() rather than ?:, which GCC may turn into branches around the float
// arithmetic (that it will then not if-convert).

// c ? x : y, computed with masks.
inline std::uint32_t select_bits(bool c, std::uint32_t x, std::uint32_t y) {
  const std::uint32_t mask = 0U - static_cast<std::uint32_t>(c);
  return (x & mask) | (y & ~mask);
}

inline float half_to_float_inline(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000U) << 16;
  const std::uint32_t magnitude = h & 0x7FFFU;
  // Normal numbers: exponent and mantissa move up 13 bits, the exponent is rebiased from 15
  // to 127.
  std::uint32_t bits = (magnitude << 13) + (112U << 23);
  // Infinity and NaN: exponent 31 must become 255, 112 further up.
  bits = select_bits(magnitude >= 0x7C00U, bits + (112U << 23), bits);
  // Zero and subnormals, mantissa * 2^-24: (2^-14 + mantissa * 2^-24) - 2^-14, all exact.
  const float subnormal = bits_float((magnitude << 13) + (113U << 23)) - 0x1p-14F;
  bits = select_bits(magnitude < 0x400U, float_bits(subnormal), bits);
  return bits_float(sign | bits);
}

inline std::uint16_t float_to_half_inline(float f) {
  const std::uint32_t bits = float_bits(f);
  const std::uint32_t sign = (bits >> 16) & 0x8000U;
  const std::uint32_t magnitude = bits & ~kF32SignMask;
  // Normal range [2^-14, 2^16): rebias the exponent from 127 to 15 and round the 13 dropped
  // mantissa bits to nearest, ties to even. A carry moves into the exponent, and from 65520
  // up reaches 0x7C00, infinity. (Unsigned arithmetic: out of range, the value is unused.)
  const std::uint32_t odd = (magnitude >> 13) & 1U;
  std::uint32_t result = (magnitude - (112U << 23) + 0xFFFU + odd) >> 13;
  // Below 2^-14: half subnormals are multiples of 2^-24, the spacing of float32 in [0.5, 1),
  // so the float32 addition 0.5 + |f| rounds |f| to nearest even (in the default rounding
  // mode, which this code assumes) and the low bits of the sum count units of 2^-24. Rounding
  // up to 2^-14 gives 0x0400, the smallest normal half.
  const float shifted = bits_float(magnitude) + 0.5F;
  result = select_bits(magnitude < 0x38800000U, float_bits(shifted) - float_bits(0.5F), result);
  result = select_bits(magnitude >= 0x47800000U, 0x7C00U, result);  // 2^16 and up, and infinity
  // NaN: keep the top payload bits and set the quiet bit, so that it stays a NaN.
  result = select_bits(magnitude > kF32Inf, 0x7E00U | ((magnitude >> 13) & 0x3FFU), result);
  return static_cast<std::uint16_t>(sign | result);
}

inline float bfloat16_to_float_inline(std::uint16_t b) {
  return bits_float(static_cast<std::uint32_t>(b) << 16);
}

inline std::uint16_t float_to_bfloat16_inline(float f) {
  const std::uint32_t bits = float_bits(f);
  // Round to nearest, ties to even, on the 16 bits dropped; overflow carries to infinity.
  const std::uint32_t rounded = (bits + 0x7FFFU + ((bits >> 16) & 1U)) >> 16;
  // NaN: set the quiet bit, so that a payload only in the low bits does not vanish.
  const std::uint32_t quiet_nan = (bits >> 16) | 0x0040U;
  return static_cast<std::uint16_t>(
      select_bits((bits & ~kF32SignMask) > kF32Inf, quiet_nan, rounded));
}

// ---- operations -----------------------------------------------------------------------------

struct Plus {
  template <typename T>
  T operator()(T a, T b) const {
    return a + b;
  }
};

struct Times {
  template <typename T>
  T operator()(T a, T b) const {
    return a * b;
  }
};

// Floating max and min: NaN if either operand is NaN (always the same quiet NaN), and -0 < +0,
// so the result is the same whatever the order of the operands.
struct FloatMax {
  template <typename T>
  T operator()(T a, T b) const {
    T larger = a > b ? a : b;
    larger = a == b ? (std::signbit(a) ? b : a) : larger;
    return std::isunordered(a, b) ? std::numeric_limits<T>::quiet_NaN() : larger;
  }
};

struct FloatMin {
  template <typename T>
  T operator()(T a, T b) const {
    T smaller = a < b ? a : b;
    smaller = a == b ? (std::signbit(a) ? a : b) : smaller;
    return std::isunordered(a, b) ? std::numeric_limits<T>::quiet_NaN() : smaller;
  }
};

// Integer arithmetic in an unsigned type at least as wide as unsigned int, so that it wraps
// (modulo 2^bits) instead of overflowing, and so that uint8 does not promote to signed int.
template <typename T>
using WrapType =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

struct WrapPlus {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(static_cast<WrapType<T>>(a) + static_cast<WrapType<T>>(b));
  }
};

struct WrapTimes {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(static_cast<WrapType<T>>(a) * static_cast<WrapType<T>>(b));
  }
};

struct IntMax {
  template <typename T>
  T operator()(T a, T b) const {
    return a > b ? a : b;
  }
};

struct IntMin {
  template <typename T>
  T operator()(T a, T b) const {
    return a < b ? a : b;
  }
};

struct HalfFormat {
  static constexpr std::uint32_t kInf = 0x7C00U;
  static constexpr std::uint32_t kQuietNaN = 0x7E00U;  // float_to_half of float's quiet NaN
  static float to_float(std::uint16_t h) { return half_to_float_inline(h); }
  static std::uint16_t from_float(float f) { return float_to_half_inline(f); }
};

struct BFloat16Format {
  static constexpr std::uint32_t kInf = 0x7F80U;
  static constexpr std::uint32_t kQuietNaN = 0x7FC0U;
  static float to_float(std::uint16_t b) { return bfloat16_to_float_inline(b); }
  static std::uint16_t from_float(float f) { return float_to_bfloat16_inline(f); }
};

// A float32 operation on 16-bit floats stored as std::uint16_t.
template <typename Format, typename FloatOp>
struct Via32 {
  std::uint16_t operator()(std::uint16_t a, std::uint16_t b) const {
    return Format::from_float(FloatOp{}(Format::to_float(a), Format::to_float(b)));
  }
};

// FloatMax or FloatMin through float32 on 16-bit floats, computed from the bit patterns: the
// result is one of the operands (exact in both formats) or the quiet NaN, so the conversions
// can be skipped. Sign-magnitude patterns map to keys in increasing order of value, -0 just
// below +0: positive x to x | 0x8000, negative x to ~x.
template <typename Format, bool kMax>
struct Bits16MaxMin {
  static std::uint32_t key(std::uint32_t x) { return x ^ (0x8000U | ((0U - (x >> 15)) & 0x7FFFU)); }
  std::uint16_t operator()(std::uint16_t a, std::uint16_t b) const {
    const std::uint32_t ka = key(a);
    const std::uint32_t kb = key(b);
    const std::uint32_t chosen = select_bits(kMax ? ka >= kb : ka <= kb, a, b);
    const bool nan = (a & 0x7FFFU) > Format::kInf || (b & 0x7FFFU) > Format::kInf;
    return static_cast<std::uint16_t>(select_bits(nan, Format::kQuietNaN, chosen));
  }
};

// ---- loops ------------------------------------------------------------------------------------

// Elements are processed in blocks of a fixed byte size: a loop of known trip count that GCC
// vectorizes even at -O2 (where its cost model will not vectorize a loop of unknown length).
constexpr std::size_t kBlockBytes = 256;

// Both buffers aligned for T and distinct (the caller checked).
template <typename T, typename Op>
void reduce_aligned(T* __restrict acc, const T* __restrict in, std::size_t count, Op op) {
  constexpr std::size_t kBlock = kBlockBytes / sizeof(T);
  std::size_t i = 0;
  for (; count - i >= kBlock; i += kBlock) {
    for (std::size_t j = 0; j < kBlock; ++j) {
      acc[i + j] = op(acc[i + j], in[i + j]);
    }
  }
  for (; i < count; ++i) {
    acc[i] = op(acc[i], in[i]);
  }
}

// acc == in, aligned for T.
template <typename T, typename Op>
void reduce_self(T* acc, std::size_t count, Op op) {
  constexpr std::size_t kBlock = kBlockBytes / sizeof(T);
  std::size_t i = 0;
  for (; count - i >= kBlock; i += kBlock) {
    for (std::size_t j = 0; j < kBlock; ++j) {
      acc[i + j] = op(acc[i + j], acc[i + j]);
    }
  }
  for (; i < count; ++i) {
    acc[i] = op(acc[i], acc[i]);
  }
}

// Any alignment: blocks are copied to local arrays and back. Each block is read in full
// before it is written, so acc == in is fine.
template <typename T, typename Op>
void reduce_unaligned(unsigned char* acc, const unsigned char* in, std::size_t count, Op op) {
  constexpr std::size_t kBlock = kBlockBytes / sizeof(T);
  T a[kBlock];
  T b[kBlock];
  std::size_t i = 0;
  for (; count - i >= kBlock; i += kBlock) {
    std::memcpy(a, acc + i * sizeof(T), sizeof a);
    std::memcpy(b, in + i * sizeof(T), sizeof b);
    for (std::size_t j = 0; j < kBlock; ++j) {
      a[j] = op(a[j], b[j]);
    }
    std::memcpy(acc + i * sizeof(T), a, sizeof a);
  }
  for (; i < count; ++i) {
    std::memcpy(&a[0], acc + i * sizeof(T), sizeof(T));
    std::memcpy(&b[0], in + i * sizeof(T), sizeof(T));
    a[0] = op(a[0], b[0]);
    std::memcpy(acc + i * sizeof(T), &a[0], sizeof(T));
  }
}

template <typename T>
bool is_aligned(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % alignof(T) == 0;
}

template <typename T, typename Op>
void run(void* acc, const void* in, std::size_t count, Op op) {
  if (acc == in && is_aligned<T>(acc)) {
    reduce_self(static_cast<T*>(acc), count, op);
  } else if (acc != in && is_aligned<T>(acc) && is_aligned<T>(in)) {
    reduce_aligned(static_cast<T*>(acc), static_cast<const T*>(in), count, op);
  } else {
    reduce_unaligned<T>(static_cast<unsigned char*>(acc), static_cast<const unsigned char*>(in),
                        count, op);
  }
}

[[noreturn]] void throw_invalid(ReduceOp op) {
  throw std::invalid_argument("invalid collectives reduce op " +
                              std::to_string(static_cast<int>(op)));
}

template <typename T>
void reduce_float(ReduceOp op, void* acc, const void* in, std::size_t count) {
  switch (op) {
    case ReduceOp::kSum:
      return run<T>(acc, in, count, Plus{});
    case ReduceOp::kMax:
      return run<T>(acc, in, count, FloatMax{});
    case ReduceOp::kMin:
      return run<T>(acc, in, count, FloatMin{});
    case ReduceOp::kProd:
      return run<T>(acc, in, count, Times{});
  }
  throw_invalid(op);
}

template <typename Format>
void reduce_16bit_float(ReduceOp op, void* acc, const void* in, std::size_t count) {
  using Bits = std::uint16_t;
  switch (op) {
    case ReduceOp::kSum:
      return run<Bits>(acc, in, count, Via32<Format, Plus>{});
    case ReduceOp::kMax:
      return run<Bits>(acc, in, count, Bits16MaxMin<Format, true>{});
    case ReduceOp::kMin:
      return run<Bits>(acc, in, count, Bits16MaxMin<Format, false>{});
    case ReduceOp::kProd:
      return run<Bits>(acc, in, count, Via32<Format, Times>{});
  }
  throw_invalid(op);
}

template <typename T>
void reduce_integer(ReduceOp op, void* acc, const void* in, std::size_t count) {
  switch (op) {
    case ReduceOp::kSum:
      return run<T>(acc, in, count, WrapPlus{});
    case ReduceOp::kMax:
      return run<T>(acc, in, count, IntMax{});
    case ReduceOp::kMin:
      return run<T>(acc, in, count, IntMin{});
    case ReduceOp::kProd:
      return run<T>(acc, in, count, WrapTimes{});
  }
  throw_invalid(op);
}

}  // namespace

void reduce_into(DType dtype, ReduceOp op, void* acc, const void* in, std::size_t count) {
  switch (dtype) {
    case DType::kFloat64:
      return reduce_float<double>(op, acc, in, count);
    case DType::kFloat32:
      return reduce_float<float>(op, acc, in, count);
    case DType::kFloat16:
      return reduce_16bit_float<HalfFormat>(op, acc, in, count);
    case DType::kBFloat16:
      return reduce_16bit_float<BFloat16Format>(op, acc, in, count);
    case DType::kInt32:
      return reduce_integer<std::int32_t>(op, acc, in, count);
    case DType::kInt64:
      return reduce_integer<std::int64_t>(op, acc, in, count);
    case DType::kUInt8:
      return reduce_integer<std::uint8_t>(op, acc, in, count);
  }
  throw std::invalid_argument("invalid collectives dtype " +
                              std::to_string(static_cast<int>(dtype)));
}

float half_to_float(std::uint16_t h) {
  return half_to_float_inline(h);
}

std::uint16_t float_to_half(float f) {
  return float_to_half_inline(f);
}

float bfloat16_to_float(std::uint16_t b) {
  return bfloat16_to_float_inline(b);
}

std::uint16_t float_to_bfloat16(float f) {
  return float_to_bfloat16_inline(f);
}

}  // namespace primus::coll

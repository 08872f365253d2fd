// libprimus-coll's element-wise reductions (reduce_into), their dtype and op names, and the
// float16 / bfloat16 conversions, checked against references computed independently.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "primus/collectives/dtype.hpp"
#include "reduce.hpp"

namespace primus::coll {
namespace {

constexpr DType kAllDTypes[] = {DType::kFloat64, DType::kFloat32, DType::kFloat16, DType::kBFloat16,
                                DType::kInt32,   DType::kInt64,   DType::kUInt8};
constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kProd};

float float_of(std::uint32_t u) {
  float f = 0;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

bool half_bits_are_nan(std::uint16_t h) {
  return (h & 0x7C00U) == 0x7C00U && (h & 0x3FFU) != 0;
}

bool bfloat16_bits_are_nan(std::uint16_t b) {
  return (b & 0x7F80U) == 0x7F80U && (b & 0x7FU) != 0;
}

// ---- independent references for the 16-bit formats ------------------------------------------

// The value of a non-NaN half, from the definition.
double half_value(std::uint16_t h) {
  const int exponent = (h >> 10) & 0x1F;
  const int mantissa = h & 0x3FF;
  const double sign = (h & 0x8000U) != 0 ? -1.0 : 1.0;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  if (exponent == 0x1F) return sign * std::numeric_limits<double>::infinity();  // not NaN
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

double bfloat16_value(std::uint16_t b) {
  const int exponent = (b >> 7) & 0xFF;
  const int mantissa = b & 0x7F;
  const double sign = (b & 0x8000U) != 0 ? -1.0 : 1.0;
  if (exponent == 0) return sign * std::ldexp(mantissa, -133);
  if (exponent == 0xFF) return sign * std::numeric_limits<double>::infinity();  // not NaN
  return sign * std::ldexp(128 + mantissa, exponent - 134);
}

// Round x (not NaN) to the nearest value of a 16-bit format whose positive patterns
// 0..inf_bits are increasing in value, by binary search. For rounding, infinity stands for
// `beyond`, the next power of two past the largest finite value (as if the exponent range
// went on): anything at or above it, or rounding to it, is infinity. Ties go to the even
// pattern. The distances are exact in double for float inputs.
std::uint16_t round_reference(double x, std::uint16_t inf_bits, double (*value)(std::uint16_t),
                              double beyond) {
  const auto sign = static_cast<std::uint16_t>(std::signbit(x) ? 0x8000U : 0U);
  const double mag = std::fabs(x);
  const auto value_or_beyond = [&](std::uint32_t p) {
    return p == inf_bits ? beyond : value(static_cast<std::uint16_t>(p));
  };
  if (mag >= beyond) return static_cast<std::uint16_t>(sign | inf_bits);
  std::uint32_t lo = 0;         // value(lo) <= mag
  std::uint32_t hi = inf_bits;  // mag < value(hi)
  while (hi - lo > 1) {
    const std::uint32_t mid = (lo + hi) / 2;
    if (value_or_beyond(mid) <= mag) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  const double below = mag - value_or_beyond(lo);
  const double above = value_or_beyond(hi) - mag;
  std::uint32_t nearest = hi;
  if (below < above || (below == above && lo % 2 == 0)) nearest = lo;
  return static_cast<std::uint16_t>(sign | nearest);
}

std::uint16_t half_reference(float f) {
  return round_reference(f, 0x7C00, half_value, 0x1p16);
}

std::uint16_t bfloat16_reference(float f) {
  return round_reference(f, 0x7F80, bfloat16_value, 0x1p128);
}

// ---- the element types as the tests see them -------------------------------------------------
//
// Floating types: random inputs are chosen so that no result overflows or loses precision
// beyond its final rounding, and each result is compared with the op applied in double:
//   float64: exactly equal (the reference is the same IEEE double operation);
//   float32: |result - ref| <= 2^-24 |ref| (one rounding to float32);
//   float16: |result - ref| <= 2^-11 |ref| (one rounding of the result to float16; the float32
//            intermediate is exact for these inputs);
//   bfloat16: |result - ref| <= 2^-8 |ref| (likewise, one rounding to bfloat16).
// max and min must give the reference exactly.
// Integer types: the reference is computed exactly in a wider integer type and reduced
// modulo 2^bits (double cannot hold 64-bit products).

struct Float64Case {
  using T = double;
  static constexpr DType kDType = DType::kFloat64;
  static constexpr bool kFloating = true;
  static constexpr double kRelTolerance = 0.0;
  static T random(std::mt19937_64& rng) { return std::uniform_real_distribution<>(-100, 100)(rng); }
  static double value(T x) { return x; }
  static T from_float(float f) { return f; }
};

struct Float32Case {
  using T = float;
  static constexpr DType kDType = DType::kFloat32;
  static constexpr bool kFloating = true;
  static constexpr double kRelTolerance = 0x1p-24;
  static T random(std::mt19937_64& rng) {
    return static_cast<float>(std::uniform_real_distribution<>(-100, 100)(rng));
  }
  static double value(T x) { return x; }
  static T from_float(float f) { return f; }
};

struct Float16Case {
  using T = std::uint16_t;
  static constexpr DType kDType = DType::kFloat16;
  static constexpr bool kFloating = true;
  static constexpr double kRelTolerance = 0x1p-11;
  // Random sign and mantissa, magnitude in [2^-6, 2^7): sums and products stay finite and the
  // float32 intermediate is exact.
  static T random(std::mt19937_64& rng) {
    const auto r = static_cast<std::uint32_t>(rng());
    const std::uint32_t exponent = 9 + (r >> 16) % 13;
    return static_cast<T>((r & 0x8000U) | (exponent << 10) | (r & 0x3FFU));
  }
  static double value(T x) { return half_to_float(x); }
  static T from_float(float f) { return float_to_half(f); }
};

struct BFloat16Case {
  using T = std::uint16_t;
  static constexpr DType kDType = DType::kBFloat16;
  static constexpr bool kFloating = true;
  static constexpr double kRelTolerance = 0x1p-8;
  // Magnitude in [2^-6, 2^7).
  static T random(std::mt19937_64& rng) {
    const auto r = static_cast<std::uint32_t>(rng());
    const std::uint32_t exponent = 121 + (r >> 16) % 13;
    return static_cast<T>((r & 0x8000U) | (exponent << 7) | (r & 0x7FU));
  }
  static double value(T x) { return bfloat16_to_float(x); }
  static T from_float(float f) { return float_to_bfloat16(f); }
};

struct Int32Case {
  using T = std::int32_t;
  static constexpr DType kDType = DType::kInt32;
  static constexpr bool kFloating = false;
  static T random(std::mt19937_64& rng) {
    return static_cast<T>(static_cast<std::uint32_t>(rng()));
  }
  static T reference(ReduceOp op, T a, T b) {
    const std::int64_t x = a;
    const std::int64_t y = b;
    switch (op) {
      case ReduceOp::kSum:
        return static_cast<T>(static_cast<std::uint32_t>(x + y));
      case ReduceOp::kProd:
        return static_cast<T>(static_cast<std::uint32_t>(x * y));
      case ReduceOp::kMax:
        return a > b ? a : b;
      case ReduceOp::kMin:
        return a < b ? a : b;
    }
    return 0;
  }
};

struct Int64Case {
  using T = std::int64_t;
  static constexpr DType kDType = DType::kInt64;
  static constexpr bool kFloating = false;
  static T random(std::mt19937_64& rng) { return static_cast<T>(rng()); }
  static T reference(ReduceOp op, T a, T b) {
    const __int128 x = a;
    const __int128 y = b;
    switch (op) {
      case ReduceOp::kSum:
        return static_cast<T>(static_cast<std::uint64_t>(x + y));
      case ReduceOp::kProd:
        return static_cast<T>(static_cast<std::uint64_t>(x * y));
      case ReduceOp::kMax:
        return a > b ? a : b;
      case ReduceOp::kMin:
        return a < b ? a : b;
    }
    return 0;
  }
};

struct UInt8Case {
  using T = std::uint8_t;
  static constexpr DType kDType = DType::kUInt8;
  static constexpr bool kFloating = false;
  static T random(std::mt19937_64& rng) { return static_cast<T>(rng()); }
  static T reference(ReduceOp op, T a, T b) {
    const int x = a;
    const int y = b;
    switch (op) {
      case ReduceOp::kSum:
        return static_cast<T>((x + y) & 0xFF);
      case ReduceOp::kProd:
        return static_cast<T>((x * y) & 0xFF);
      case ReduceOp::kMax:
        return a > b ? a : b;
      case ReduceOp::kMin:
        return a < b ? a : b;
    }
    return 0;
  }
};

// Calls f(Case{}) for the Case of dtype.
template <typename F>
void with_case(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat64:
      return f(Float64Case{});
    case DType::kFloat32:
      return f(Float32Case{});
    case DType::kFloat16:
      return f(Float16Case{});
    case DType::kBFloat16:
      return f(BFloat16Case{});
    case DType::kInt32:
      return f(Int32Case{});
    case DType::kInt64:
      return f(Int64Case{});
    case DType::kUInt8:
      return f(UInt8Case{});
  }
  FAIL() << "no test case for dtype " << static_cast<int>(dtype);
}

// Calls f(Case{}) for the Case of a floating dtype.
template <typename F>
void with_float_case(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat64:
      return f(Float64Case{});
    case DType::kFloat32:
      return f(Float32Case{});
    case DType::kFloat16:
      return f(Float16Case{});
    case DType::kBFloat16:
      return f(BFloat16Case{});
    default:
      break;
  }
  FAIL() << "not a floating dtype: " << to_string(dtype);
}

double double_reference(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::kSum:
      return a + b;
    case ReduceOp::kProd:
      return a * b;
    case ReduceOp::kMax:
      return a > b ? a : b;
    case ReduceOp::kMin:
      return a < b ? a : b;
  }
  return std::nan("");
}

template <typename Case>
::testing::AssertionResult element_matches(ReduceOp op, typename Case::T a, typename Case::T b,
                                           typename Case::T result) {
  if constexpr (Case::kFloating) {
    const double ref = double_reference(op, Case::value(a), Case::value(b));
    const double got = Case::value(result);
    const bool exact = op == ReduceOp::kMax || op == ReduceOp::kMin;
    const double tolerance = exact ? 0.0 : Case::kRelTolerance * std::fabs(ref);
    if (std::fabs(got - ref) <= tolerance) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << to_string(op) << "(" << Case::value(a) << ", " << Case::value(b) << ") gave " << got
           << ", reference " << ref << ", tolerance " << tolerance;
  } else {
    const typename Case::T ref = Case::reference(op, a, b);
    if (result == ref) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << to_string(op) << "(" << +a << ", " << +b << ") gave "
                                         << +result << ", reference " << +ref;
  }
}

template <typename Case>
std::vector<typename Case::T> random_values(std::size_t count, std::mt19937_64& rng) {
  std::vector<typename Case::T> values(count);
  for (auto& v : values)
    v = Case::random(rng);
  return values;
}

template <typename T>
std::vector<unsigned char> bytes_of(const std::vector<T>& values) {
  std::vector<unsigned char> bytes(values.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// ---- names and sizes -------------------------------------------------------------------------

TEST(CollDType, SizesAndNames) {
  const std::size_t sizes[] = {8, 4, 2, 2, 4, 8, 1};
  const char* names[] = {"float64", "float32", "float16", "bfloat16", "int32", "int64", "uint8"};
  for (std::size_t i = 0; i < std::size(kAllDTypes); ++i) {
    EXPECT_EQ(dtype_size(kAllDTypes[i]), sizes[i]) << names[i];
    EXPECT_EQ(to_string(kAllDTypes[i]), names[i]);
    EXPECT_EQ(parse_dtype(names[i]), kAllDTypes[i]) << names[i];
  }
  const char* op_names[] = {"sum", "max", "min", "prod"};
  for (std::size_t i = 0; i < std::size(kAllOps); ++i) {
    EXPECT_EQ(to_string(kAllOps[i]), op_names[i]);
    EXPECT_EQ(parse_reduce_op(op_names[i]), kAllOps[i]) << op_names[i];
  }
}

TEST(CollDType, RejectsUnknownNames) {
  for (const char* bad : {"", "Float32", "float", "fp16", "float32 ", "int8", "bool", "uint8\n"}) {
    EXPECT_EQ(parse_dtype(bad), std::nullopt) << bad;
  }
  for (const char* bad : {"", "Sum", "avg", "product", "max ", "mean"}) {
    EXPECT_EQ(parse_reduce_op(bad), std::nullopt) << bad;
  }
}

TEST(CollDType, InvalidEnumValuesThrow) {
  const auto bad_dtype = static_cast<DType>(99);
  const auto bad_op = static_cast<ReduceOp>(-1);
  EXPECT_THROW(dtype_size(bad_dtype), std::invalid_argument);
  EXPECT_THROW(to_string(bad_dtype), std::invalid_argument);
  EXPECT_THROW(to_string(bad_op), std::invalid_argument);
  float acc[1] = {1};
  const float in[1] = {2};
  EXPECT_THROW(reduce_into(bad_dtype, ReduceOp::kSum, acc, in, 1), std::invalid_argument);
  EXPECT_THROW(reduce_into(DType::kFloat32, bad_op, acc, in, 1), std::invalid_argument);
  EXPECT_THROW(reduce_into(bad_dtype, ReduceOp::kSum, nullptr, nullptr, 0), std::invalid_argument);
  EXPECT_THROW(reduce_into(DType::kInt64, bad_op, nullptr, nullptr, 0), std::invalid_argument);
  EXPECT_EQ(acc[0], 1.0F);
}

// ---- every op on every dtype against the reference --------------------------------------------

using RandomParam = std::tuple<DType, ReduceOp, std::size_t>;

class CollReduceRandom : public ::testing::TestWithParam<RandomParam> {};

TEST_P(CollReduceRandom, MatchesReference) {
  const auto [dtype, op, count] = GetParam();
  with_case(dtype, [&, op = op, count = count](auto c) {
    using Case = decltype(c);
    std::mt19937_64 rng(count * 31 + static_cast<std::size_t>(op));
    const auto original = random_values<Case>(count, rng);
    const auto in = random_values<Case>(count, rng);
    auto acc = original;
    reduce_into(Case::kDType, op, acc.data(), in.data(), count);
    for (std::size_t i = 0; i < count; ++i) {
      ASSERT_TRUE(element_matches<Case>(op, original[i], in[i], acc[i])) << "element " << i;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(AllOpsAllTypes, CollReduceRandom,
                         ::testing::Combine(::testing::ValuesIn(kAllDTypes),
                                            ::testing::ValuesIn(kAllOps),
                                            ::testing::Values(std::size_t{1}, std::size_t{7},
                                                              std::size_t{1000},
                                                              std::size_t{4097})),
                         [](const ::testing::TestParamInfo<RandomParam>& info) {
                           return std::string(to_string(std::get<0>(info.param))) + "_" +
                                  std::string(to_string(std::get<1>(info.param))) + "_" +
                                  std::to_string(std::get<2>(info.param));
                         });

TEST(CollReduce, ZeroCountTouchesNothing) {
  for (const DType dtype : kAllDTypes) {
    for (const ReduceOp op : kAllOps) {
      reduce_into(dtype, op, nullptr, nullptr, 0);
      unsigned char acc[8] = {1, 2, 3, 4, 5, 6, 7, 8};
      const unsigned char in[8] = {9, 9, 9, 9, 9, 9, 9, 9};
      reduce_into(dtype, op, acc, in, 0);
      EXPECT_EQ(acc[0], 1);
      EXPECT_EQ(acc[7], 8);
    }
  }
}

// ---- integers wrap ---------------------------------------------------------------------------

template <typename T>
T reduce_one(DType dtype, ReduceOp op, T a, T b) {
  reduce_into(dtype, op, &a, &b, 1);
  return a;
}

TEST(CollReduce, IntegerSumAndProdWrapAround) {
  using I32 = std::numeric_limits<std::int32_t>;
  using I64 = std::numeric_limits<std::int64_t>;
  EXPECT_EQ(reduce_one<std::int32_t>(DType::kInt32, ReduceOp::kSum, I32::max(), 1), I32::min());
  EXPECT_EQ(reduce_one<std::int32_t>(DType::kInt32, ReduceOp::kSum, I32::min(), -1), I32::max());
  EXPECT_EQ(reduce_one<std::int32_t>(DType::kInt32, ReduceOp::kProd, 65536, 65536), 0);
  EXPECT_EQ(reduce_one<std::int32_t>(DType::kInt32, ReduceOp::kProd, 0x10001, 0x10001), 0x20001);
  EXPECT_EQ(reduce_one<std::int32_t>(DType::kInt32, ReduceOp::kProd, I32::min(), -1), I32::min());
  EXPECT_EQ(reduce_one<std::int64_t>(DType::kInt64, ReduceOp::kSum, I64::max(), 1), I64::min());
  EXPECT_EQ(reduce_one<std::int64_t>(DType::kInt64, ReduceOp::kSum, I64::min(), -1), I64::max());
  EXPECT_EQ(reduce_one<std::int64_t>(DType::kInt64, ReduceOp::kProd, std::int64_t{1} << 32,
                                     std::int64_t{1} << 32),
            0);
  EXPECT_EQ(reduce_one<std::int64_t>(DType::kInt64, ReduceOp::kProd, I64::min(), -1), I64::min());
  EXPECT_EQ(reduce_one<std::int64_t>(DType::kInt64, ReduceOp::kProd, I64::max(), I64::max()), 1);
  EXPECT_EQ(reduce_one<std::uint8_t>(DType::kUInt8, ReduceOp::kSum, 200, 100), 44);
  EXPECT_EQ(reduce_one<std::uint8_t>(DType::kUInt8, ReduceOp::kProd, 16, 16), 0);
  EXPECT_EQ(reduce_one<std::uint8_t>(DType::kUInt8, ReduceOp::kProd, 255, 255), 1);
  EXPECT_EQ(reduce_one<std::uint8_t>(DType::kUInt8, ReduceOp::kMax, 255, 0), 255);
  EXPECT_EQ(reduce_one<std::int32_t>(DType::kInt32, ReduceOp::kMin, I32::min(), I32::max()),
            I32::min());
  EXPECT_EQ(reduce_one<std::int64_t>(DType::kInt64, ReduceOp::kMax, -5, -7), -5);

  // The same wrap in the vectorized part of a long buffer.
  std::vector<std::int32_t> acc(4097, I32::max());
  const std::vector<std::int32_t> in(4097, 2);
  reduce_into(DType::kInt32, ReduceOp::kSum, acc.data(), in.data(), acc.size());
  for (const std::int32_t v : acc)
    ASSERT_EQ(v, I32::min() + 1);
  std::vector<std::uint8_t> bytes(4097, 128);
  const std::vector<std::uint8_t> twos(4097, 2);
  reduce_into(DType::kUInt8, ReduceOp::kProd, bytes.data(), twos.data(), bytes.size());
  for (const std::uint8_t v : bytes)
    ASSERT_EQ(v, 0);
}

// ---- NaN and signed zeros in max / min -------------------------------------------------------

const DType kFloatDTypes[] = {DType::kFloat64, DType::kFloat32, DType::kFloat16, DType::kBFloat16};

TEST(CollReduce, MaxMinPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float other_nan = float_of(0xFFC12345U);  // negative, different payload
  for (const DType dtype : kFloatDTypes) {
    with_float_case(dtype, [&](auto c) {
      using Case = decltype(c);
      SCOPED_TRACE(std::string(to_string(dtype)));
      constexpr std::size_t kCount = 4097;
      std::mt19937_64 rng(7);
      const auto a = random_values<Case>(kCount, rng);
      const auto b = random_values<Case>(kCount, rng);
      auto x = a;
      auto y = b;
      std::vector<bool> has_nan(kCount);
      for (std::size_t i = 0; i < kCount; ++i) {
        const auto r = rng() % 8;
        if (r == 0 || r == 2) x[i] = Case::from_float(nan);
        if (r == 1 || r == 2) y[i] = Case::from_float(r == 2 ? other_nan : nan);
        has_nan[i] = r <= 2;
      }
      for (const ReduceOp op : kAllOps) {
        auto acc = x;
        reduce_into(dtype, op, acc.data(), y.data(), kCount);
        for (std::size_t i = 0; i < kCount; ++i) {
          if (has_nan[i]) {
            ASSERT_TRUE(std::isnan(Case::value(acc[i]))) << to_string(op) << " element " << i;
          } else {
            ASSERT_TRUE(element_matches<Case>(op, x[i], y[i], acc[i])) << "element " << i;
          }
        }
      }
    });
  }
}

// max(a, b) and max(b, a) are the same bits, NaNs (of any payload) and signed zeros included.
TEST(CollReduce, MaxMinDoNotDependOnOperandOrder) {
  const std::vector<float> specials = {0.0F,
                                       -0.0F,
                                       1.0F,
                                       -1.0F,
                                       std::numeric_limits<float>::infinity(),
                                       -std::numeric_limits<float>::infinity(),
                                       std::numeric_limits<float>::quiet_NaN(),
                                       -std::numeric_limits<float>::quiet_NaN(),
                                       float_of(0x7FA00001U),  // signalling NaN
                                       float_of(0xFFC00777U)};
  for (const DType dtype : kFloatDTypes) {
    with_float_case(dtype, [&](auto c) {
      using Case = decltype(c);
      SCOPED_TRACE(std::string(to_string(dtype)));
      std::vector<typename Case::T> a;
      std::vector<typename Case::T> b;
      for (const float x : specials) {
        for (const float y : specials) {
          a.push_back(Case::from_float(x));
          b.push_back(Case::from_float(y));
        }
      }
      // Repeat to fill whole vector blocks as well as the tail.
      const auto a_pairs = a;
      const auto b_pairs = b;
      while (a.size() < 1000) {
        a.insert(a.end(), a_pairs.begin(), a_pairs.end());
        b.insert(b.end(), b_pairs.begin(), b_pairs.end());
      }
      for (const ReduceOp op : {ReduceOp::kMax, ReduceOp::kMin}) {
        auto ab = a;
        auto ba = b;
        reduce_into(dtype, op, ab.data(), b.data(), a.size());
        reduce_into(dtype, op, ba.data(), a.data(), a.size());
        ASSERT_EQ(bytes_of(ab), bytes_of(ba)) << to_string(op);
      }
      // Signed zeros: -0 < +0.
      const typename Case::T zero = Case::from_float(0.0F);
      const typename Case::T minus_zero = Case::from_float(-0.0F);
      for (const auto& [p, q] : {std::pair{zero, minus_zero}, std::pair{minus_zero, zero}}) {
        EXPECT_FALSE(std::signbit(Case::value(reduce_one(dtype, ReduceOp::kMax, p, q))));
        EXPECT_TRUE(std::signbit(Case::value(reduce_one(dtype, ReduceOp::kMin, p, q))));
      }
    });
  }
}

TEST(CollReduce, SumAndProdWithNaNOrInfinity) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const DType dtype : kFloatDTypes) {
    with_float_case(dtype, [&](auto c) {
      using Case = decltype(c);
      SCOPED_TRACE(std::string(to_string(dtype)));
      const auto f = [](float v) { return Case::from_float(v); };
      EXPECT_TRUE(std::isnan(Case::value(reduce_one(dtype, ReduceOp::kSum, f(nan), f(1)))));
      EXPECT_TRUE(std::isnan(Case::value(reduce_one(dtype, ReduceOp::kProd, f(2), f(nan)))));
      EXPECT_TRUE(std::isnan(Case::value(reduce_one(dtype, ReduceOp::kSum, f(inf), f(-inf)))));
      EXPECT_TRUE(std::isnan(Case::value(reduce_one(dtype, ReduceOp::kProd, f(0), f(inf)))));
      EXPECT_EQ(Case::value(reduce_one(dtype, ReduceOp::kSum, f(inf), f(1))), inf);
      EXPECT_EQ(Case::value(reduce_one(dtype, ReduceOp::kMax, f(-inf), f(-1))), -1.0);
      EXPECT_EQ(Case::value(reduce_one(dtype, ReduceOp::kMin, f(inf), f(3))), 3.0);
    });
  }
  // Rounding of the float32 result back to 16 bits overflows to infinity.
  EXPECT_EQ(reduce_one<std::uint16_t>(DType::kFloat16, ReduceOp::kSum, 0x7BFF, 0x7BFF), 0x7C00);
  EXPECT_EQ(reduce_one<std::uint16_t>(DType::kFloat16, ReduceOp::kProd, 0x5C00, 0x5C00),
            0x7C00);  // 256 * 256
  EXPECT_EQ(reduce_one<std::uint16_t>(DType::kBFloat16, ReduceOp::kSum, 0x7F7F, 0x7F7F), 0x7F80);
  // 2049 is not a half: 2048 + 1 rounds to even, 2048 + 3 to 2052.
  EXPECT_EQ(reduce_one<std::uint16_t>(DType::kFloat16, ReduceOp::kSum, 0x6800, 0x3C00), 0x6800);
  EXPECT_EQ(reduce_one<std::uint16_t>(DType::kFloat16, ReduceOp::kSum, 0x6800, 0x4200), 0x6802);
}

// float16 and bfloat16 over all bit patterns (NaNs, infinities, subnormals, signed zeros):
// exactly the float32 operation on the converted operands, rounded back with the (separately
// tested) conversion; max and min as defined above (NaN if either is NaN, -0 < +0).
TEST(CollReduce, SixteenBitFloatsFollowFloat32Semantics) {
  constexpr std::size_t kCount = 1 << 18;
  const auto float_max = [](float a, float b) {
    if (a == b) return std::signbit(a) ? b : a;
    return a > b ? a : b;
  };
  const auto float_min = [](float a, float b) {
    if (a == b) return std::signbit(a) ? a : b;
    return a < b ? a : b;
  };
  struct Format {
    DType dtype;
    float (*to_float)(std::uint16_t);
    std::uint16_t (*from_float)(float);
    bool (*is_nan)(std::uint16_t);
  };
  for (const Format& format :
       {Format{DType::kFloat16, half_to_float, float_to_half, half_bits_are_nan},
        Format{DType::kBFloat16, bfloat16_to_float, float_to_bfloat16, bfloat16_bits_are_nan}}) {
    std::mt19937_64 rng(13);
    std::vector<std::uint16_t> a(kCount);
    std::vector<std::uint16_t> b(kCount);
    for (std::size_t i = 0; i < kCount; ++i) {
      a[i] = static_cast<std::uint16_t>(rng());
      b[i] = static_cast<std::uint16_t>(rng());
    }
    for (const ReduceOp op : kAllOps) {
      SCOPED_TRACE(std::string(to_string(format.dtype)) + " " + std::string(to_string(op)));
      auto acc = a;
      reduce_into(format.dtype, op, acc.data(), b.data(), kCount);
      for (std::size_t i = 0; i < kCount; ++i) {
        const float x = format.to_float(a[i]);
        const float y = format.to_float(b[i]);
        float expected = 0;
        switch (op) {
          case ReduceOp::kSum:
            expected = x + y;
            break;
          case ReduceOp::kProd:
            expected = x * y;
            break;
          case ReduceOp::kMax:
            expected = float_max(x, y);
            break;
          case ReduceOp::kMin:
            expected = float_min(x, y);
            break;
        }
        if (std::isnan(x) || std::isnan(y) || std::isnan(expected)) {
          ASSERT_TRUE(format.is_nan(acc[i])) << std::hex << a[i] << " " << b[i] << " " << acc[i];
        } else {
          ASSERT_EQ(acc[i], format.from_float(expected)) << std::hex << a[i] << " " << b[i];
        }
      }
    }
  }
}

// ---- alignment and aliasing ------------------------------------------------------------------

TEST(CollReduce, UnalignedAndAliasedBuffersGiveTheSameResult) {
  constexpr std::size_t kCount = 4097;
  for (const DType dtype : kAllDTypes) {
    with_case(dtype, [&](auto c) {
      using Case = decltype(c);
      std::mt19937_64 rng(11);
      const auto acc_bytes = bytes_of(random_values<Case>(kCount, rng));
      const auto in_bytes = bytes_of(random_values<Case>(kCount, rng));
      const std::size_t size = acc_bytes.size();
      for (const ReduceOp op : kAllOps) {
        SCOPED_TRACE(std::string(to_string(dtype)) + " " + std::string(to_string(op)));
        std::vector<typename Case::T> acc(kCount);
        std::vector<typename Case::T> in(kCount);
        std::memcpy(acc.data(), acc_bytes.data(), size);
        std::memcpy(in.data(), in_bytes.data(), size);
        reduce_into(dtype, op, acc.data(), in.data(), kCount);
        const auto expected = bytes_of(acc);

        // Offsets of 1 byte (and, for wider types, 3) on either or both buffers.
        for (const auto& [acc_offset, in_offset] :
             {std::pair{1, 0}, std::pair{0, 1}, std::pair{1, 1}, std::pair{3, 1}}) {
          std::vector<unsigned char> acc_buffer(size + 8);
          std::vector<unsigned char> in_buffer(size + 8);
          unsigned char* acc_ptr = acc_buffer.data() + acc_offset;
          unsigned char* in_ptr = in_buffer.data() + in_offset;
          std::memcpy(acc_ptr, acc_bytes.data(), size);
          std::memcpy(in_ptr, in_bytes.data(), size);
          reduce_into(dtype, op, acc_ptr, in_ptr, kCount);
          ASSERT_EQ(std::vector<unsigned char>(acc_ptr, acc_ptr + size), expected)
              << "offsets " << acc_offset << ", " << in_offset;
          ASSERT_EQ(std::vector<unsigned char>(in_ptr, in_ptr + size), in_bytes);
        }

        // acc and in the same buffer (aligned and not): op(x, x).
        std::vector<typename Case::T> twice(kCount);
        std::vector<typename Case::T> copy(kCount);
        std::memcpy(twice.data(), acc_bytes.data(), size);
        std::memcpy(copy.data(), acc_bytes.data(), size);
        reduce_into(dtype, op, twice.data(), copy.data(), kCount);
        std::vector<typename Case::T> self(kCount);
        std::memcpy(self.data(), acc_bytes.data(), size);
        reduce_into(dtype, op, self.data(), self.data(), kCount);
        ASSERT_EQ(bytes_of(self), bytes_of(twice));
        std::vector<unsigned char> odd(size + 1);
        std::memcpy(odd.data() + 1, acc_bytes.data(), size);
        reduce_into(dtype, op, odd.data() + 1, odd.data() + 1, kCount);
        ASSERT_EQ(std::vector<unsigned char>(odd.begin() + 1, odd.end()), bytes_of(twice));
      }
    });
  }
}

// ---- float16 conversions ---------------------------------------------------------------------

TEST(CollHalf, EveryPatternConvertsExactlyAndRoundTrips) {
  for (std::uint32_t i = 0; i <= 0xFFFF; ++i) {
    const auto h = static_cast<std::uint16_t>(i);
    const float f = half_to_float(h);
    if (half_bits_are_nan(h)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << i;
      const std::uint16_t back = float_to_half(f);
      ASSERT_TRUE(half_bits_are_nan(back)) << std::hex << i << " -> " << back;
      ASSERT_EQ(back & 0x8000U, h & 0x8000U) << std::hex << i;
    } else {
      ASSERT_EQ(static_cast<double>(f), half_value(h)) << std::hex << i;
      ASSERT_EQ(std::signbit(f), (h & 0x8000U) != 0) << std::hex << i;
      ASSERT_EQ(float_to_half(f), h) << std::hex << i;
    }
  }
}

TEST(CollHalf, RoundsToNearestEven) {
  EXPECT_EQ(float_to_half(1.0F), 0x3C00);
  EXPECT_EQ(float_to_half(1.0F + 0x1p-11F), 0x3C00);             // tie, down to even
  EXPECT_EQ(float_to_half(1.0F + 0x1p-11F + 0x1p-20F), 0x3C01);  // just above the tie
  EXPECT_EQ(float_to_half(1.0F + 3 * 0x1p-11F), 0x3C02);         // tie, up to even
  EXPECT_EQ(float_to_half(-(1.0F + 3 * 0x1p-11F)), 0xBC02);
  EXPECT_EQ(float_to_half(65504.0F), 0x7BFF);  // largest finite
  EXPECT_EQ(float_to_half(65519.996F), 0x7BFF);
  EXPECT_EQ(float_to_half(65520.0F), 0x7C00);  // tie, to even: infinity
  EXPECT_EQ(float_to_half(-65520.0F), 0xFC00);
  EXPECT_EQ(float_to_half(1e10F), 0x7C00);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::max()), 0x7C00);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(float_to_half(-std::numeric_limits<float>::infinity()), 0xFC00);
  EXPECT_EQ(float_to_half(0x1p-24F), 0x0001);  // smallest subnormal
  EXPECT_EQ(half_to_float(0x0001), 0x1p-24F);
  EXPECT_EQ(float_to_half(0x1p-25F), 0x0000);  // tie, to even: zero
  EXPECT_EQ(float_to_half(-0x1p-25F), 0x8000);
  EXPECT_EQ(float_to_half(0x1p-25F + 0x1p-40F), 0x0001);  // just above the tie
  EXPECT_EQ(float_to_half(3 * 0x1p-25F), 0x0002);         // tie, up to even
  EXPECT_EQ(float_to_half(1023 * 0x1p-24F), 0x03FF);      // largest subnormal
  EXPECT_EQ(float_to_half(0x1p-14F - 0x1p-26F), 0x0400);  // rounds up to the smallest normal
  EXPECT_EQ(float_to_half(0x1p-14F), 0x0400);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(float_to_half(-std::numeric_limits<float>::denorm_min()), 0x8000);
  EXPECT_EQ(float_to_half(0.0F), 0x0000);
  EXPECT_EQ(float_to_half(-0.0F), 0x8000);
  EXPECT_TRUE(half_bits_are_nan(float_to_half(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(half_bits_are_nan(float_to_half(float_of(0x7F800001U))));  // low payload only
  EXPECT_EQ(float_to_half(float_of(0xFF800001U)) & 0x8000U, 0x8000U);
  EXPECT_EQ(half_to_float(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(half_to_float(0xC000), -2.0F);
  EXPECT_EQ(half_to_float(0x3555), 0x1.554p-2F);
}

// Every tie between two adjacent halves and its float neighbours, then random floats, against
// the search-based reference.
TEST(CollHalf, MatchesReferenceRounding) {
  for (std::uint32_t p = 0; p < 0x7C00; ++p) {
    const double next = p + 1 == 0x7C00 ? 0x1p16 : half_value(static_cast<std::uint16_t>(p + 1));
    const double mid = (half_value(static_cast<std::uint16_t>(p)) + next) / 2;
    const auto f = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(f), mid) << "tie after " << std::hex << p;
    for (const float x : {f, std::nextafter(f, 0.0F), std::nextafter(f, 1e30F), -f}) {
      ASSERT_EQ(float_to_half(x), half_reference(x)) << x;
    }
  }
  std::mt19937_64 rng(3);
  for (int i = 0; i < 1000000; ++i) {
    const auto r = static_cast<std::uint32_t>(rng());
    // Half the samples anywhere, half with exponents around the half range.
    std::uint32_t bits = r;
    if (i % 2 == 0) bits = (r & 0x807FFFFFU) | ((96 + (r >> 23) % 48) << 23);
    const float x = float_of(bits);
    if (std::isnan(x)) {
      ASSERT_TRUE(half_bits_are_nan(float_to_half(x))) << std::hex << bits;
    } else {
      ASSERT_EQ(float_to_half(x), half_reference(x)) << std::hex << bits;
    }
  }
}

// ---- bfloat16 conversions --------------------------------------------------------------------

TEST(CollBFloat16, EveryPatternConvertsExactlyAndRoundTrips) {
  for (std::uint32_t i = 0; i <= 0xFFFF; ++i) {
    const auto b = static_cast<std::uint16_t>(i);
    const float f = bfloat16_to_float(b);
    if (bfloat16_bits_are_nan(b)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << i;
      const std::uint16_t back = float_to_bfloat16(f);
      ASSERT_TRUE(bfloat16_bits_are_nan(back)) << std::hex << i << " -> " << back;
      ASSERT_EQ(back & 0x8000U, b & 0x8000U) << std::hex << i;
    } else {
      ASSERT_EQ(static_cast<double>(f), bfloat16_value(b)) << std::hex << i;
      ASSERT_EQ(std::signbit(f), (b & 0x8000U) != 0) << std::hex << i;
      ASSERT_EQ(float_to_bfloat16(f), b) << std::hex << i;
    }
  }
}

TEST(CollBFloat16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bfloat16(1.0F), 0x3F80);
  EXPECT_EQ(float_to_bfloat16(1.0F + 0x1p-8F), 0x3F80);  // tie, down to even
  EXPECT_EQ(float_to_bfloat16(1.0F + 0x1p-8F + 0x1p-20F), 0x3F81);
  EXPECT_EQ(float_to_bfloat16(1.0F + 3 * 0x1p-8F), 0x3F82);  // tie, up to even
  EXPECT_EQ(float_to_bfloat16(-(1.0F + 3 * 0x1p-8F)), 0xBF82);
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::max()), 0x7F80);  // overflows
  EXPECT_EQ(float_to_bfloat16(float_of(0x7F7F7FFFU)), 0x7F7F);              // just below the tie
  EXPECT_EQ(float_to_bfloat16(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(float_to_bfloat16(float_of(0x00018000U)), 0x0002);  // subnormal tie, up to even
  EXPECT_EQ(float_to_bfloat16(float_of(0x00008000U)), 0x0000);  // subnormal tie, down to even
  EXPECT_EQ(float_to_bfloat16(-0.0F), 0x8000);
  EXPECT_EQ(bfloat16_to_float(0x0001), 0x1p-133F);
  EXPECT_TRUE(bfloat16_bits_are_nan(float_to_bfloat16(std::numeric_limits<float>::quiet_NaN())));
  // A NaN whose payload lives only in the low 16 bits must not become infinity.
  EXPECT_TRUE(bfloat16_bits_are_nan(float_to_bfloat16(float_of(0x7F800001U))));
  EXPECT_EQ(float_to_bfloat16(float_of(0xFF800001U)) & 0x8000U, 0x8000U);
}

TEST(CollBFloat16, MatchesReferenceRounding) {
  std::mt19937_64 rng(5);
  for (int i = 0; i < 1000000; ++i) {
    auto bits = static_cast<std::uint32_t>(rng());
    if (i % 4 == 0) bits = (bits & 0xFFFF0000U) | 0x8000U;  // exact ties
    const float x = float_of(bits);
    if (std::isnan(x)) {
      ASSERT_TRUE(bfloat16_bits_are_nan(float_to_bfloat16(x))) << std::hex << bits;
    } else {
      ASSERT_EQ(float_to_bfloat16(x), bfloat16_reference(x)) << std::hex << bits;
    }
  }
}

}  // namespace
}  // namespace primus::coll

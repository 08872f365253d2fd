// The deterministic checkpoint of the reliability tests: what crash-writer saves for a step and
// what crash-check expects to load for it. Every value is derived from the step number and a
// generation (which save of that step it is: a step saved again gets a new generation), so a
// checkpoint that mixes two saves, even two saves of the same step, or a torn one that passed
// verification, cannot match.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "primus/ckpt/dtype.hpp"
#include "primus/ckpt/writer.hpp"

namespace primus::ckpt::crash {

inline constexpr int kWorld = 2;
inline constexpr std::uint64_t kCols = 128;
inline constexpr std::uint64_t kDefaultRows = 512;      // 256 KiB of float32
inline constexpr std::uint64_t kChunkBytes = 32 << 10;  // several chunks, several HDF5 writes
inline constexpr std::uint64_t kBiasSize = 96;
// Generations are 0 .. kGenerations - 1: crash-check tells which one each part of a checkpoint
// holds by trying them all.
inline constexpr std::int64_t kGenerations = 64;

inline std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// A finite float32 (never NaN, so a value compares equal to itself) hashed from (step,
// generation, what, i): two steps' values, or two generations', differ almost everywhere.
inline float value(std::int64_t step, std::int64_t generation, std::uint64_t what,
                   std::uint64_t i) {
  const std::uint64_t seed = mix(static_cast<std::uint64_t>(step) * 1000003ULL + what) ^
                             mix(0xC0FFEEULL + static_cast<std::uint64_t>(generation));
  const std::uint64_t h = mix(seed ^ i);
  // Sign, an exponent in [2^-20, 2^20) and 23 mantissa bits.
  const std::uint32_t bits = static_cast<std::uint32_t>(h >> 63) << 31 |
                             static_cast<std::uint32_t>(107 + (h >> 32) % 40) << 23 |
                             static_cast<std::uint32_t>(h & 0x7FFFFF);
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// What the tensors hold: value(step, generation, kWeight, i) is element i of "w" in row-major
// order, value(step, generation, kBias, i) element i of "model/bias".
inline constexpr std::uint64_t kWeight = 1;
inline constexpr std::uint64_t kBias = 2;

// Rows [begin, end) of the sharded tensor "w" [rows, kCols].
inline std::vector<float> weight_rows(std::int64_t step, std::uint64_t begin, std::uint64_t end,
                                      std::int64_t generation = 0) {
  std::vector<float> out((end - begin) * kCols);
  for (std::uint64_t i = 0; i < out.size(); ++i)
    out[i] = value(step, generation, kWeight, begin * kCols + i);
  return out;
}

// The replicated tensor "model/bias" [kBiasSize], saved by rank 0 only.
inline std::vector<float> bias(std::int64_t step, std::int64_t generation = 0) {
  std::vector<float> out(kBiasSize);
  for (std::uint64_t i = 0; i < out.size(); ++i)
    out[i] = value(step, generation, kBias, i);
  return out;
}

// Rank r's share of the rows: [rows * r / world, rows * (r + 1) / world).
inline std::uint64_t shard_begin(std::uint64_t rows, int rank, int world) {
  return rows * static_cast<std::uint64_t>(rank) / static_cast<std::uint64_t>(world);
}

// Per-rank state. "generation" (an int) names the save; the other values depend on it too.
inline std::uint64_t generation_salt(std::int64_t generation) {
  return generation == 0 ? 0 : mix(0xBEEFULL + static_cast<std::uint64_t>(generation));
}
inline std::int64_t state_cursor(std::int64_t step, int rank, std::int64_t generation = 0) {
  return static_cast<std::int64_t>(
      (mix(static_cast<std::uint64_t>(step) * 7 + rank) ^ generation_salt(generation)) >> 1);
}
inline std::string state_meta(std::int64_t step, int rank, std::int64_t generation = 0) {
  return "{\"step\": " + std::to_string(step) + ", \"rank\": " + std::to_string(rank) +
         ", \"generation\": " + std::to_string(generation) + ", \"tag\": \"" +
         std::to_string(mix(static_cast<std::uint64_t>(step) + 99) ^ generation_salt(generation)) +
         "\"}";
}
inline std::vector<std::uint8_t> state_rng(std::int64_t step, int rank,
                                           std::int64_t generation = 0) {
  std::vector<std::uint8_t> out(40);
  const std::uint64_t seed =
      mix(static_cast<std::uint64_t>(step) * 31 + rank) ^ generation_salt(generation);
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<std::uint8_t>(mix(seed + i));
  return out;
}

inline std::vector<std::uint8_t> as_bytes(const std::vector<float>& values) {
  std::vector<std::uint8_t> out(values.size() * sizeof(float));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// Writes rank `rank`'s file of step `step`, generation `generation`, and finishes it. The rows
// of "w" come from step `data_step`, generation `data_generation`: they differ from `step` and
// `generation` only in a writer that sabotages on purpose.
inline void write_rank(RankWriter& writer, std::int64_t step, int rank, std::uint64_t rows,
                       std::int64_t data_step, std::int64_t generation = 0,
                       std::int64_t data_generation = 0) {
  const std::uint64_t begin = shard_begin(rows, rank, kWorld);
  const std::uint64_t end = shard_begin(rows, rank + 1, kWorld);
  const std::vector<float> part = weight_rows(data_step, begin, end, data_generation);
  writer.add_tensor(
      {"w", DType::kFloat32, {end - begin, kCols}, part.data(), {rows, kCols}, {begin, 0}});
  if (rank == 0) {
    const std::vector<float> first_bias = bias(step, generation);
    writer.add_tensor({"model/bias", DType::kFloat32, {kBiasSize}, first_bias.data(), {}, {}});
  }
  writer.set_int("step", step);
  writer.set_int("generation", generation);
  writer.set_int("cursor", state_cursor(step, rank, generation));
  writer.set_string("meta", state_meta(step, rank, generation));
  writer.set_bytes("rng", state_rng(step, rank, generation));
  writer.finish();
}

}  // namespace primus::ckpt::crash

// ckpt-make DIR STEP WORLD [--no-commit] [--scale X] [--rows R] [--skip NAME] [--metadata TEXT]:
// writes a checkpoint with libprimus-ckpt for tests/tools/primus-ckpt.test, as WORLD ranks
// would (one after the other), then commits it unless --no-commit.
//   "embed.weight"  float32 [R, 4] (R = 8), sharded by rows: element i is X * (i + 0.25)
//   "counts"        int64 [5], replicated, written by rank 0: element i is round(X * 1000 * i)
//   "norm.scale"    bfloat16 [6], replicated, written by the last rank: X * (i + 1)
//   "lr"            float64 scalar, rank 0: X / 1000
// The values depend on X only, so two steps written with the same X have identical tensors.
// --skip leaves the tensor NAME out. Every rank's state: int "step" (STEP), string "metadata"
// ({"rank": r, "world": WORLD}, or TEXT), bytes "rng" (16 bytes of r + 1).
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "primus/ckpt.hpp"

namespace {

using namespace primus::ckpt;

constexpr std::uint64_t kColumns = 4;

long long number(const std::string& text, const char* what, long long lo, long long hi) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || value < lo || value > hi) {
    throw primus::Error(std::string(what) + ": expected a number from " + std::to_string(lo) +
                        " to " + std::to_string(hi) + ", got '" + text + "'");
  }
  return value;
}

std::uint16_t to_bfloat16(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return static_cast<std::uint16_t>(bits >> 16);  // truncation: exact for the values used
}

int run(int argc, char** argv) {
  std::vector<std::string> operands;
  bool commit_it = true;
  double scale = 1.0;
  std::uint64_t rows = 8;
  std::string skip;
  std::optional<std::string> metadata;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--no-commit") {
      commit_it = false;
    } else if (arg == "--scale" && i + 1 < argc) {
      char* end = nullptr;
      scale = std::strtod(argv[++i], &end);
      if (*end != '\0' || !std::isfinite(scale)) {
        throw primus::Error(std::string("--scale: expected a number, got '") + argv[i] + "'");
      }
    } else if (arg == "--rows" && i + 1 < argc) {
      rows = static_cast<std::uint64_t>(number(argv[++i], "--rows", 1, 1 << 20));
    } else if (arg == "--skip" && i + 1 < argc) {
      skip = argv[++i];
    } else if (arg == "--metadata" && i + 1 < argc) {
      metadata = argv[++i];
    } else if (arg.rfind("--", 0) == 0) {
      throw primus::Error("unknown option '" + arg + "'");
    } else {
      operands.push_back(arg);
    }
  }
  if (operands.size() != 3) {
    throw primus::Error(
        "usage: ckpt-make DIR STEP WORLD [--no-commit] [--scale X] [--rows R] [--skip NAME] "
        "[--metadata TEXT]");
  }
  const std::string root = operands[0];
  const std::int64_t step = number(operands[1], "STEP", 0, kMaxStep);
  const int world = static_cast<int>(number(operands[2], "WORLD", 1, 64));

  std::vector<float> weight(rows * kColumns);
  for (std::size_t i = 0; i < weight.size(); ++i)
    weight[i] = static_cast<float>(scale * (static_cast<double>(i) + 0.25));
  std::vector<std::int64_t> counts(5);
  for (std::size_t i = 0; i < counts.size(); ++i)
    counts[i] = std::llround(scale * 1000.0 * static_cast<double>(i));
  std::vector<std::uint16_t> norm(6);
  for (std::size_t i = 0; i < norm.size(); ++i)
    norm[i] = to_bfloat16(static_cast<float>(scale * static_cast<double>(i + 1)));
  const double lr = scale / 1000.0;

  for (int rank = 0; rank < world; ++rank) {
    RankWriter writer(root, step, rank, world);
    const std::uint64_t begin = rows * static_cast<std::uint64_t>(rank) / world;
    const std::uint64_t end = rows * static_cast<std::uint64_t>(rank + 1) / world;
    const auto add = [&](const TensorRef& tensor) {
      if (tensor.name != skip) writer.add_tensor(tensor);
    };
    add({"embed.weight",
         DType::kFloat32,
         {end - begin, kColumns},
         weight.data() + begin * kColumns,
         {rows, kColumns},
         {begin, 0}});
    if (rank == 0) {
      add({"counts", DType::kInt64, {counts.size()}, counts.data(), {}, {}});
      add({"lr", DType::kFloat64, {}, &lr, {}, {}});
    }
    if (rank == world - 1) {
      add({"norm.scale", DType::kBFloat16, {norm.size()}, norm.data(), {}, {}});
    }
    writer.set_int("step", step);
    writer.set_string("metadata", metadata.value_or("{\"rank\": " + std::to_string(rank) +
                                                    ", \"world\": " + std::to_string(world) + "}"));
    writer.set_bytes("rng", std::vector<std::uint8_t>(16, static_cast<std::uint8_t>(rank + 1)));
    writer.finish();
  }
  if (commit_it) commit(root, step, world);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "ckpt-make: " << e.what() << "\n";
    return 2;
  }
}

// crash-check: loads the newest valid checkpoint under each ROOT with full verification and
// checks that every tensor, every box of it a reader of another world size would read, and
// every state value equal exactly what crash-writer saves for the step the checkpoint claims,
// all of one generation (one save of that step). The generation is found, not trusted: each
// rank's shard of "w", the bias and each rank's state are matched on their own against every
// generation crash-writer can write, and they must all name the same one.
//
// Prints one line per root: the step loaded (or "none"), "LATEST=<step>" (or "LATEST=none"
// when LATEST is missing or unreadable), "GEN=<generation>" (or "GEN=none": nothing loaded, or
// no single generation), "ok" or "MISMATCH", and the root, e.g.
//   17 LATEST=17 GEN=0 ok /tmp/ckpt
// Mismatches, errors and the checkpoints skipped on the way (and why) go to stderr, each line
// naming its root. Exit 0 when every checkpoint is exact (or there is none), 1 otherwise.
// Several roots in one run spare the crash tests a process start per trial.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "crash_common.hpp"
#include "primus/ckpt.hpp"
#include "primus/common/error.hpp"

namespace {

using namespace primus::ckpt;

int mismatches = 0;
std::string current_root;

void mismatch(std::int64_t step, const std::string& what) {
  std::fprintf(stderr, "crash-check: %s: step %lld: %s\n", current_root.c_str(),
               static_cast<long long>(step), what.c_str());
  ++mismatches;
}

std::string shape_text(const Shape& shape) {
  std::ostringstream out;
  out << '[';
  for (std::size_t i = 0; i < shape.size(); ++i)
    out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

void compare(std::int64_t step, const std::string& what, const std::vector<std::uint8_t>& got,
             const std::vector<float>& want) {
  const std::vector<std::uint8_t> bytes = crash::as_bytes(want);
  if (got.size() != bytes.size()) {
    mismatch(step, what + ": " + std::to_string(got.size()) + " bytes, expected " +
                       std::to_string(bytes.size()));
    return;
  }
  for (std::size_t i = 0; i < want.size(); ++i) {
    float value;
    std::memcpy(&value, got.data() + i * sizeof(float), sizeof value);
    if (std::memcmp(&value, &want[i], sizeof value) != 0) {
      mismatch(step, what + ": element " + std::to_string(i) + " is " + std::to_string(value) +
                         ", expected " + std::to_string(want[i]));
      return;
    }
  }
}

// The rows [begin, end) and columns [col, col + ncols) of "w" as crash-writer saved them.
std::vector<float> weight_box(std::int64_t step, std::int64_t generation, std::uint64_t begin,
                              std::uint64_t end, std::uint64_t col, std::uint64_t ncols) {
  const std::vector<float> rows = crash::weight_rows(step, begin, end, generation);
  std::vector<float> out;
  for (std::uint64_t r = 0; r < end - begin; ++r) {
    for (std::uint64_t c = col; c < col + ncols; ++c)
      out.push_back(rows[r * crash::kCols + c]);
  }
  return out;
}

// The generation whose element `index` of tensor `what` (crash::kWeight, crash::kBias) is
// `bytes`' first float; nothing when none is.
std::optional<std::int64_t> generation_of(std::int64_t step, std::uint64_t what,
                                          std::uint64_t index,
                                          const std::vector<std::uint8_t>& bytes) {
  if (bytes.size() < sizeof(float)) return std::nullopt;
  float first;
  std::memcpy(&first, bytes.data(), sizeof first);
  for (std::int64_t g = 0; g < crash::kGenerations; ++g) {
    const float want = crash::value(step, g, what, index);
    if (std::memcmp(&first, &want, sizeof first) == 0) return g;
  }
  return std::nullopt;
}

std::map<std::string, StateValue> state_of(std::int64_t step, int rank, std::int64_t generation) {
  return {
      {"step", StateValue(step)},
      {"generation", StateValue(generation)},
      {"cursor", StateValue(crash::state_cursor(step, rank, generation))},
      {"meta", StateValue(crash::state_meta(step, rank, generation))},
      {"rng", StateValue(crash::state_rng(step, rank, generation))},
  };
}

// Each part of the checkpoint with the generation it was found to hold.
class Generations {
 public:
  void add(const std::string& part, std::int64_t generation) {
    parts_.emplace_back(part, generation);
  }
  // A part of no generation (already reported).
  void add_unknown() { unknown_ = true; }
  // The one generation of every part; nothing when a part has none, or (a mismatch) when they
  // differ.
  std::optional<std::int64_t> single(std::int64_t step) const {
    if (parts_.empty() || unknown_) return std::nullopt;
    std::string listing;
    bool mixed = false;
    for (const auto& [part, generation] : parts_) {
      listing += (listing.empty() ? "" : ", ") + part + " " + std::to_string(generation);
      mixed = mixed || generation != parts_.front().second;
    }
    if (mixed) {
      mismatch(step, "the checkpoint mixes generations (" + listing + ")");
      return std::nullopt;
    }
    return parts_.front().second;
  }

 private:
  std::vector<std::pair<std::string, std::int64_t>> parts_;
  bool unknown_ = false;
};

// Checks the checkpoint; returns its generation when all of it is one generation.
std::optional<std::int64_t> check(const Checkpoint& ckpt, std::uint64_t rows) {
  const std::int64_t step = ckpt.step();
  if (ckpt.dir().filename() != step_dir_name(step)) {
    mismatch(step, "loaded from " + ckpt.dir().string());
  }
  if (ckpt.world_size() != crash::kWorld) {
    mismatch(step, "world size " + std::to_string(ckpt.world_size()));
    return std::nullopt;
  }
  std::set<std::string> names;
  for (const auto& [name, entry] : ckpt.manifest().tensors)
    names.insert(name);
  if (names != std::set<std::string>{"w", "model/bias"}) {
    mismatch(step, "unexpected set of tensors (" + std::to_string(names.size()) + ")");
    return std::nullopt;
  }

  const TensorEntry& w = ckpt.tensor("w");
  if (w.dtype != DType::kFloat32 || w.global_shape != Shape{rows, crash::kCols}) {
    mismatch(step, "tensor 'w' is " + std::string(to_string(w.dtype)) + " " +
                       shape_text(w.global_shape) + ", expected float32 " +
                       shape_text({rows, crash::kCols}));
    return std::nullopt;
  }
  if (w.shards.size() != static_cast<std::size_t>(crash::kWorld)) {
    mismatch(step, "tensor 'w' has " + std::to_string(w.shards.size()) + " shards");
  }
  Generations generations;
  for (const Shard& shard : w.shards) {
    const std::uint64_t begin = crash::shard_begin(rows, shard.rank, crash::kWorld);
    const std::uint64_t end = crash::shard_begin(rows, shard.rank + 1, crash::kWorld);
    if (shard.offset != Shape{begin, 0} || shard.shape != Shape{end - begin, crash::kCols} ||
        shard.file != rank_file_name(shard.rank)) {
      mismatch(step, "tensor 'w': rank " + std::to_string(shard.rank) + "'s shard is at " +
                         shape_text(shard.offset) + " " + shape_text(shard.shape));
      generations.add_unknown();
      continue;
    }
    // Each rank's rows on their own: which save wrote them, and all of them that save's.
    const std::string part = "tensor 'w' rank " + std::to_string(shard.rank) + "'s rows";
    const std::vector<std::uint8_t> got = ckpt.read_rows("w", begin, end);
    const std::optional<std::int64_t> generation =
        generation_of(step, crash::kWeight, begin * crash::kCols, got);
    if (!generation) {
      mismatch(step, part + ": of no generation of this step");
      generations.add_unknown();
      continue;
    }
    generations.add(part, *generation);
    compare(step, part + " (generation " + std::to_string(*generation) + ")", got,
            crash::weight_rows(step, begin, end, *generation));
  }

  const TensorEntry& bias = ckpt.tensor("model/bias");
  if (bias.dtype != DType::kFloat32 || bias.global_shape != Shape{crash::kBiasSize} ||
      bias.shards.size() != 1 || bias.shards[0].rank != 0) {
    mismatch(step, "tensor 'model/bias' is not the replicated float32 vector rank 0 saves");
    generations.add_unknown();
  } else {
    const std::vector<std::uint8_t> got = ckpt.read("model/bias");
    const std::optional<std::int64_t> generation = generation_of(step, crash::kBias, 0, got);
    if (!generation) {
      mismatch(step, "tensor 'model/bias': of no generation of this step");
      generations.add_unknown();
    } else {
      generations.add("tensor 'model/bias'", *generation);
      compare(step, "tensor 'model/bias' (generation " + std::to_string(*generation) + ")", got,
              crash::bias(step, *generation));
    }
  }

  for (int rank = 0; rank < crash::kWorld; ++rank) {
    const std::map<std::string, StateValue> state = ckpt.state(rank);
    const auto stored = state.find("generation");
    const std::int64_t* generation =
        stored == state.end() ? nullptr : std::get_if<std::int64_t>(&stored->second);
    if (generation == nullptr || *generation < 0 || *generation >= crash::kGenerations) {
      mismatch(step, "rank " + std::to_string(rank) + "'s state names no generation");
      generations.add_unknown();
      continue;
    }
    generations.add("rank " + std::to_string(rank) + "'s state", *generation);
    if (state != state_of(step, rank, *generation)) {
      std::string keys;
      for (const auto& [key, value] : state)
        keys += " " + key;
      mismatch(step, "rank " + std::to_string(rank) + "'s state differs from generation " +
                         std::to_string(*generation) + "'s (keys:" + keys + ")");
    }
  }

  const std::optional<std::int64_t> generation = generations.single(step);
  if (!generation) return std::nullopt;
  // The whole tensor, and what readers of another world size read, of that one generation.
  compare(step, "tensor 'w'", ckpt.read("w"), crash::weight_rows(step, 0, rows, *generation));
  // Loaded into three ranks: each one's rows straddle the two saved shards differently.
  for (int rank = 0; rank < 3; ++rank) {
    const std::uint64_t begin = crash::shard_begin(rows, rank, 3);
    const std::uint64_t end = crash::shard_begin(rows, rank + 1, 3);
    compare(step, "tensor 'w' rows [" + std::to_string(begin) + ", " + std::to_string(end) + ")",
            ckpt.read_rows("w", begin, end), crash::weight_rows(step, begin, end, *generation));
  }
  // A box across the shard boundary, not whole in dimension 1.
  const std::uint64_t middle = rows / 2;
  const std::uint64_t box_begin = middle >= 3 ? middle - 3 : 0;
  const std::uint64_t box_end = std::min(rows, middle + 4);
  compare(step, "tensor 'w' box", ckpt.read("w", {box_begin, 5}, {box_end - box_begin, 7}),
          weight_box(step, *generation, box_begin, box_end, 5, 7));
  return generation;
}

[[noreturn]] void usage() {
  std::fprintf(stderr, "usage: crash-check ROOT... [--rows R | --mib M]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::filesystem::path> roots;
  std::uint64_t rows = crash::kDefaultRows;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 < argc && arg == "--rows") {
      rows = std::strtoull(argv[++i], nullptr, 10);
    } else if (i + 1 < argc && arg == "--mib") {
      rows = std::strtoull(argv[++i], nullptr, 10) * (std::uint64_t{1} << 20) /
             (crash::kCols * sizeof(float));
    } else if (arg.empty() || arg[0] == '-') {
      usage();
    } else {
      roots.emplace_back(arg);
    }
  }
  if (roots.empty()) usage();
  int failed = 0;
  for (const std::filesystem::path& root : roots) {
    current_root = root.string();
    const int before = mismatches;
    std::string loaded_text = "none";
    std::string latest_text = "none";
    std::string generation_text = "none";
    try {
      std::vector<std::string> skipped;
      const std::optional<Loaded> loaded = load_latest(root, Verify::kFull, &skipped);
      for (const std::string& why : skipped)
        std::fprintf(stderr, "crash-check: %s: skipped %s\n", current_root.c_str(), why.c_str());
      const std::optional<std::int64_t> latest = read_latest(root);
      if (latest) latest_text = std::to_string(*latest);
      if (loaded) {
        loaded_text = std::to_string(loaded->checkpoint.step());
        const std::optional<std::int64_t> generation = check(loaded->checkpoint, rows);
        if (generation) generation_text = std::to_string(*generation);
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "crash-check: %s: %s\n", current_root.c_str(), e.what());
      ++mismatches;
    }
    const bool ok = mismatches == before;
    failed += ok ? 0 : 1;
    std::printf("%s LATEST=%s GEN=%s %s %s\n", loaded_text.c_str(), latest_text.c_str(),
                generation_text.c_str(), ok ? "ok" : "MISMATCH", current_root.c_str());
  }
  return failed == 0 ? 0 : 1;
}

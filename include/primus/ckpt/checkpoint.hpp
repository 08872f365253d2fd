// Reading committed checkpoints: verification, the newest valid one, tensors into any world
// size.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "primus/ckpt/manifest.hpp"

namespace primus::ckpt {

enum class Verify {
  kQuick,  // manifest checksum, every file present with its size, every rank index as listed
  kFull,   // and every dataset's CRC32C
};

using StateValue = std::variant<std::int64_t, std::string, std::vector<std::uint8_t>>;

class Checkpoint {
 public:
  // Opens and verifies <dir>; throws CorruptCheckpoint naming the file and dataset at fault.
  static Checkpoint open(const std::filesystem::path& dir, Verify verify = Verify::kQuick);

  const std::filesystem::path& dir() const { return dir_; }
  const Manifest& manifest() const { return manifest_; }
  std::int64_t step() const { return manifest_.step; }
  int world_size() const { return manifest_.world_size; }
  const TensorEntry& tensor(const std::string& name) const;  // throws Error if absent

  // The box [offset, offset + shape) of the tensor, raw bytes in C order, assembled from the
  // shards that overlap it; each shard read is checked against its CRC32C. Empty offset and
  // shape: the whole tensor. Loading into another world size reads another box.
  std::vector<std::uint8_t> read(const std::string& name, const Shape& offset = {},
                                 const Shape& shape = {}) const;

  // As read(), into `out`, which holds exactly the box's bytes (no copy for a box that is one
  // shard): how the Python side fills a numpy array or a torch tensor in place.
  void read_into(const std::string& name, const Shape& offset, const Shape& shape, void* out,
                 std::size_t bytes) const;

  // Several whole tensors, each into its `out` of exactly its bytes, verified as read_into()
  // verifies them: the shards of one rank file that hold whole tensors read in one pass over
  // it, in the file's order, so that the reads do not stop at each tensor's end (a cold load).
  struct WholeRead {
    std::string name;
    void* out;
    std::size_t bytes;
  };
  void read_whole(const std::vector<WholeRead>& reads) const;

  // Rows [begin, end) of the first dimension (the usual shard of a new world size).
  std::vector<std::uint8_t> read_rows(const std::string& name, std::uint64_t begin,
                                      std::uint64_t end) const;

  // Whether `data` (`bytes` long) is the box exactly as it was saved: the box (the whole tensor
  // for an empty offset and shape) is one shard, and data's CRC32C is the one its writer
  // computed. Reads no file: how a copy kept in memory (python/primus/_memory_copy.py) is
  // checked before it is used in place of the file.
  bool is_saved_copy(const std::string& name, const Shape& offset, const Shape& shape,
                     const void* data, std::size_t bytes) const;

  // Names of the tensors saved as one shard that covers the whole tensor (replicated tensors,
  // and each rank's own), sorted.
  std::vector<std::string> whole_tensors() const;

  // Closes the rank files that reads opened (they reopen on the next read).
  void close_files() const;

  // The state rank `rank` saved.
  std::map<std::string, StateValue> state(int rank) const;

 private:
  struct OpenFiles;
  std::filesystem::path dir_;
  Manifest manifest_;
  // Rank files opened by reads, kept open for the next read; reads may run on several threads.
  std::shared_ptr<OpenFiles> open_files_;
};

// The full verification of <dir>: every problem, each naming its file (and dataset).
std::vector<std::string> verify_problems(const std::filesystem::path& dir, Verify verify);

struct Loaded {
  Checkpoint checkpoint;
  std::vector<std::string> skipped;  // "step-...: why", newest first
};

// The newest committed checkpoint under root that verifies (or the one of `step`), else
// nullopt; what was skipped and why is in `skipped`, also when nothing was found. A root that
// users other than this one can write is refused with Error (a step directory they can write is
// skipped), unless PRIMUS_CKPT_TRUST_SHARED is 1 (--primus-ckpt-trust-shared): a checkpoint is
// input as trusted as code. Checkpoint::open refuses the same.
std::optional<Loaded> load_latest(const std::filesystem::path& root, Verify verify = Verify::kQuick,
                                  std::vector<std::string>* skipped = nullptr);
std::optional<Loaded> load_step(const std::filesystem::path& root, std::int64_t step,
                                Verify verify = Verify::kQuick,
                                std::vector<std::string>* skipped = nullptr);

}  // namespace primus::ckpt

// One rank's half of a save: its tensors and state into rank-<r>.h5 in the step's temporary
// directory. Not thread-safe; one RankWriter per rank and step.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "primus/ckpt/dtype.hpp"

namespace primus::ckpt {

struct TensorRef {
  std::string name;
  DType dtype = DType::kFloat32;
  Shape shape;                 // this rank's part, C order
  const void* data = nullptr;  // element_count(shape) * dtype_size(dtype) bytes
  Shape global_shape;          // empty: the part is the whole tensor
  Shape offset;                // empty: zeros
};

struct WriteOptions {
  std::uint64_t chunk_bytes = std::uint64_t{4} << 20;  // target size of one HDF5 chunk
  // 0: no compression (the default); 1 to 3: ISA-L igzip's levels, stored as HDF5's standard
  // deflate, so that any HDF5 reader decompresses the data.
  int deflate_level = 0;
};

class RankWriter {
 public:
  // Creates <root>/.tmp-step-<step>/ (shared by the ranks) and this rank's file in it.
  RankWriter(const std::filesystem::path& root, std::int64_t step, int rank, int world_size,
             WriteOptions options = {});
  ~RankWriter();
  RankWriter(const RankWriter&) = delete;
  RankWriter& operator=(const RankWriter&) = delete;

  // Writes one tensor (or this rank's shard of it) now, with its CRC32C. A replicated tensor is
  // added by its owner only. Throws Error naming the tensor on a bad shape or a failed write.
  void add_tensor(const TensorRef& tensor);

  // Per-rank state: step, epoch, RNG state, data cursor, user metadata (JSON text)...
  void set_int(const std::string& key, std::int64_t value);
  void set_string(const std::string& key, const std::string& value);
  void set_bytes(const std::string& key, const std::vector<std::uint8_t>& value);

  // Writes the index, closes the file and fsyncs it. Returns the file's path.
  std::filesystem::path finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace primus::ckpt

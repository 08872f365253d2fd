// The tensor index and the manifest (docs/ckpt-format.md), as values and as JSON. Pure: no I/O.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "primus/ckpt/dtype.hpp"
#include "primus/common/error.hpp"

namespace primus::ckpt {

// A checkpoint that must not be used: the message names the file and what failed.
class CorruptCheckpoint : public Error {
 public:
  using Error::Error;
};

// One rank's part of one tensor, as its rank file indexes it.
struct TensorPart {
  std::string name;
  DType dtype = DType::kFloat32;
  Shape global_shape;
  Shape offset;         // of this part in the global tensor
  Shape shape;          // of this part
  std::string dataset;  // HDF5 path in the rank file, "/tensors/<escaped name>"
  std::uint32_t crc32c = 0;
};

// What a rank file says about itself (its "primus_index" attribute).
struct RankIndex {
  int version = 1;
  std::int64_t step = 0;
  int rank = 0;
  int world_size = 1;
  std::vector<TensorPart> parts;
  std::map<std::string, std::uint32_t> state;  // key -> CRC32C of its value's bytes
};

struct FileEntry {
  std::string name;  // "rank-00003.h5", relative to the checkpoint directory
  int rank = 0;
  std::uint64_t size = 0;
};

struct Shard {
  int rank = 0;
  std::string file;
  std::string dataset;
  Shape offset;
  Shape shape;
  std::uint32_t crc32c = 0;
};

struct TensorEntry {
  std::string name;
  DType dtype = DType::kFloat32;
  Shape global_shape;
  std::vector<Shard> shards;  // tile the global shape exactly
};

struct Manifest {
  int version = 1;
  std::int64_t step = 0;
  int world_size = 1;
  std::string created;  // UTC, ISO 8601
  std::vector<FileEntry> files;
  std::map<std::string, TensorEntry> tensors;
  std::uint64_t total_bytes() const;
};

std::string to_json(const RankIndex& index);
RankIndex parse_rank_index(std::string_view json, std::string_view where);

// The manifest file: {"manifest": {...}, "crc32c": "<8 hex digits of the manifest's text>"}.
std::string to_json(const Manifest& manifest);
Manifest parse_manifest(std::string_view text, std::string_view where);

// Rank 0's view at commit: checks that the ranks agree (step, world size, one file per rank,
// dtype and global shape per tensor, shards inside the global shape that cover it exactly, no
// tensor written twice) and returns the manifest. Throws CorruptCheckpoint naming the problem.
Manifest build_manifest(std::int64_t step, int world_size, const std::vector<RankIndex>& ranks,
                        const std::vector<FileEntry>& files, std::string created);

}  // namespace primus::ckpt

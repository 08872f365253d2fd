#include "primus/ckpt/checkpoint.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>

#include "box_copy.hpp"
#include "crc32c.hpp"
#include "fs.hpp"
#include "primus/ckpt/layout.hpp"
#include "primus/ckpt/store.hpp"
#include "rank_file.hpp"
#include "trust.hpp"

namespace primus::ckpt {
namespace {

bool is_origin(const Shape& offset) {
  return std::all_of(offset.begin(), offset.end(), [](std::uint64_t at) { return at == 0; });
}

// A manifest lists every shard of every tensor in about 200 bytes each: 64 MiB holds some 300,000
// shards (1,000 tensors, each sharded over 300 ranks) and bounds what a hostile file can make the
// reader parse.
constexpr std::uint64_t kMaxManifestBytes = std::uint64_t{64} << 20;

// A buffer for what the checkpoint claims; an allocation that fails (a claim this machine cannot
// hold) is reported like any other unusable checkpoint, so that callers fall back.
std::vector<std::uint8_t> allocate(std::uint64_t bytes, const std::string& what) {
  try {
    return std::vector<std::uint8_t>(static_cast<std::size_t>(bytes));
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  throw CorruptCheckpoint(what + ": cannot allocate " + std::to_string(bytes) + " bytes");
}

Manifest read_manifest(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / kManifestName;
  std::string text;
  try {
    text = fs::read_small_file(path, kMaxManifestBytes);
  } catch (const Error& e) {
    throw CorruptCheckpoint(e.what());
  }
  Manifest manifest = parse_manifest(text, path.string());
  const auto named = parse_step_dir_name(dir.filename().string());
  if (named && *named != manifest.step) {
    throw CorruptCheckpoint(path.string() + ": says step " + std::to_string(manifest.step) +
                            ", the directory step " + std::to_string(*named));
  }
  return manifest;
}

// The problems of one rank file against the manifest; stops at the first when `all` is false.
void check_file(const std::filesystem::path& dir, const Manifest& manifest, const FileEntry& file,
                Verify verify, std::vector<std::string>& problems, bool all) {
  const std::filesystem::path path = dir / file.name;
  const auto report = [&](const std::string& problem) {
    if (!all) throw CorruptCheckpoint(problem);
    problems.push_back(problem);
  };
  try {
    const std::uint64_t size = fs::file_size(path);
    if (size != file.size) {
      report(path.string() + ": " + std::to_string(size) + " bytes, the manifest says " +
             std::to_string(file.size) + (size < file.size ? " (truncated)" : ""));
      return;
    }
  } catch (const CorruptCheckpoint&) {
    throw;
  } catch (const Error& e) {
    report(e.what());
    return;
  }
  std::unique_ptr<RankFile> rank_file;
  try {
    rank_file = std::make_unique<RankFile>(path);
  } catch (const Error& e) {
    report(e.what());
    return;
  } catch (const std::exception& e) {  // std::bad_alloc from damaged metadata, say
    report(path.string() + ": " + e.what());
    return;
  }
  const RankIndex& index = rank_file->index();
  if (index.rank != file.rank || index.step != manifest.step ||
      index.world_size != manifest.world_size) {
    report(path.string() + ": holds rank " + std::to_string(index.rank) + " of step " +
           std::to_string(index.step) + ", not what the manifest lists");
    return;
  }
  std::map<std::string, const TensorPart*> parts;
  for (const TensorPart& part : index.parts)
    parts.emplace(part.name, &part);
  for (const auto& [name, tensor] : manifest.tensors) {
    for (const Shard& shard : tensor.shards) {
      if (shard.file != file.name) continue;
      const auto it = parts.find(name);
      if (it == parts.end() || it->second->crc32c != shard.crc32c ||
          it->second->shape != shard.shape || it->second->offset != shard.offset ||
          it->second->dataset != shard.dataset) {
        report(path.string() + ": " + shard.dataset +
               ": the rank file's index disagrees with "
               "the manifest");
        continue;
      }
      try {
        rank_file->check(shard.dataset, tensor.dtype, shard.shape);
      } catch (const Error& e) {
        report(e.what());
        continue;
      }
      if (verify == Verify::kFull) {
        try {
          rank_file->verify(shard.dataset, tensor.dtype, shard.shape, shard.crc32c);
        } catch (const Error& e) {
          report(e.what());
        } catch (const std::exception& e) {
          report(path.string() + ": " + shard.dataset + ": " + e.what());
        }
      }
    }
  }
  try {
    rank_file->check_state();
  } catch (const Error& e) {
    report(e.what());
    return;
  }
  if (verify == Verify::kFull) {
    try {
      rank_file->state();
    } catch (const Error& e) {
      report(e.what());
    } catch (const std::exception& e) {
      report(path.string() + ": /state: " + e.what());
    }
  }
}

}  // namespace

struct Checkpoint::OpenFiles {
  std::mutex mutex;  // reads of one Checkpoint may run on several threads
  std::map<std::string, std::unique_ptr<RankFile>> files;

  const RankFile& get(const std::filesystem::path& dir, const std::string& name) {
    const std::lock_guard<std::mutex> lock(mutex);
    auto& file = files[name];
    if (!file) {
      auto opened = std::make_unique<RankFile>(dir / name);
      opened->advise_reading_all();
      file = std::move(opened);
    }
    return *file;
  }
};

Checkpoint Checkpoint::open(const std::filesystem::path& dir, Verify verify) {
  require_private(dir.parent_path().empty() ? "." : dir.parent_path(), "the checkpoint root");
  if (!trust_shared_directories()) {
    if (const auto why = writable_by_others(dir)) {
      throw CorruptCheckpoint(dir.string() + ": refused: " + *why +
                              " (--primus-ckpt-trust-shared to load it anyway)");
    }
  }
  Checkpoint checkpoint;
  checkpoint.open_files_ = std::make_shared<OpenFiles>();
  checkpoint.dir_ = dir;
  checkpoint.manifest_ = read_manifest(dir);
  std::vector<std::string> unused;
  for (const FileEntry& file : checkpoint.manifest_.files) {
    check_file(dir, checkpoint.manifest_, file, verify, unused, false);
  }
  return checkpoint;
}

std::vector<std::string> verify_problems(const std::filesystem::path& dir, Verify verify) {
  std::vector<std::string> problems;
  Manifest manifest;
  try {
    manifest = read_manifest(dir);
  } catch (const Error& e) {
    problems.emplace_back(e.what());
    return problems;
  } catch (const std::exception& e) {
    problems.push_back((dir / kManifestName).string() + ": " + e.what());
    return problems;
  }
  for (const FileEntry& file : manifest.files)
    check_file(dir, manifest, file, verify, problems, true);
  return problems;
}

const TensorEntry& Checkpoint::tensor(const std::string& name) const {
  const auto it = manifest_.tensors.find(name);
  if (it == manifest_.tensors.end()) {
    throw Error("no tensor '" + name + "' in " + dir_.string());
  }
  return it->second;
}

std::vector<std::uint8_t> Checkpoint::read(const std::string& name, const Shape& offset,
                                           const Shape& shape) const {
  const TensorEntry& entry = tensor(name);
  const Shape& box_shape = offset.empty() && shape.empty() ? entry.global_shape : shape;
  std::vector<std::uint8_t> out = allocate(element_count(box_shape) * dtype_size(entry.dtype),
                                           dir_.string() + ": tensor '" + name + "'");
  read_into(name, offset, shape, out.data(), out.size());
  return out;
}

void Checkpoint::read_into(const std::string& name, const Shape& offset, const Shape& shape,
                           void* out, std::size_t out_bytes) const {
  if (!open_files_) throw Error("read from a Checkpoint that was moved from");
  const TensorEntry& entry = tensor(name);
  const bool whole = offset.empty() && shape.empty();
  const Shape box_offset = whole ? Shape(entry.global_shape.size(), 0) : offset;
  const Shape box_shape = whole ? entry.global_shape : shape;
  if (box_offset.size() != entry.global_shape.size() ||
      box_shape.size() != entry.global_shape.size()) {
    throw Error("tensor '" + name + "': the box needs " +
                std::to_string(entry.global_shape.size()) + " dimensions");
  }
  for (std::size_t d = 0; d < box_shape.size(); ++d) {
    if (box_offset[d] > entry.global_shape[d] ||
        box_shape[d] > entry.global_shape[d] - box_offset[d]) {
      throw Error("tensor '" + name + "': the box lies outside its global shape");
    }
  }
  const std::size_t element = dtype_size(entry.dtype);
  if (out_bytes != element_count(box_shape) * element) {
    throw Error("tensor '" + name + "': the destination holds " + std::to_string(out_bytes) +
                " bytes, the box " + std::to_string(element_count(box_shape) * element));
  }
  if (out_bytes == 0 && !box_shape.empty()) return;
  for (const Shard& shard : entry.shards) {
    if (!box_shape.empty() && !boxes_intersect(shard.offset, shard.shape, box_offset, box_shape)) {
      continue;
    }
    const RankFile& file = open_files_->get(dir_, shard.file);
    const std::size_t bytes = static_cast<std::size_t>(element_count(shard.shape) * element);
    if (shard.offset == box_offset && shard.shape == box_shape) {
      file.read(shard.dataset, entry.dtype, shard.shape, shard.crc32c, out, bytes);
      continue;
    }
    std::vector<std::uint8_t> part =
        allocate(bytes, (dir_ / shard.file).string() + ": " + shard.dataset);
    file.read(shard.dataset, entry.dtype, shard.shape, shard.crc32c, part.data(), bytes);
    copy_overlap(element, part.data(), shard.offset, shard.shape, out, box_offset, box_shape);
  }
}

void Checkpoint::read_whole(const std::vector<WholeRead>& reads) const {
  if (!open_files_) throw Error("read from a Checkpoint that was moved from");
  std::map<std::string, std::vector<RankFile::PartRead>> by_file;
  for (const WholeRead& r : reads) {
    const TensorEntry& entry = tensor(r.name);
    const std::size_t bytes = element_count(entry.global_shape) * dtype_size(entry.dtype);
    if (r.bytes != bytes) {
      throw Error("tensor '" + r.name + "': the destination holds " + std::to_string(r.bytes) +
                  " bytes, the tensor " + std::to_string(bytes));
    }
    const Shard* whole = entry.shards.size() == 1 ? &entry.shards.front() : nullptr;
    if (whole == nullptr || entry.global_shape.empty() || whole->shape != entry.global_shape ||
        !is_origin(whole->offset)) {
      read_into(r.name, {}, {}, r.out, r.bytes);  // assembled from its shards
      continue;
    }
    by_file[whole->file].push_back(
        {whole->dataset, entry.dtype, whole->shape, whole->crc32c, r.out, r.bytes});
  }
  for (const auto& [file, parts] : by_file)
    open_files_->get(dir_, file).read_all(parts);
}

bool Checkpoint::is_saved_copy(const std::string& name, const Shape& offset, const Shape& shape,
                               const void* data, std::size_t bytes) const {
  const auto it = manifest_.tensors.find(name);
  if (it == manifest_.tensors.end()) return false;
  const TensorEntry& entry = it->second;
  const bool whole = offset.empty() && shape.empty();
  for (const Shard& shard : entry.shards) {
    const bool same_box = whole ? entry.shards.size() == 1 && shard.shape == entry.global_shape &&
                                      is_origin(shard.offset)
                                : shard.offset == offset && shard.shape == shape;
    if (!same_box) continue;
    if (bytes != element_count(shard.shape) * dtype_size(entry.dtype)) return false;
    return crc32c(data, bytes) == shard.crc32c;
  }
  return false;
}

std::vector<std::string> Checkpoint::whole_tensors() const {
  std::vector<std::string> names;
  for (const auto& [name, entry] : manifest_.tensors) {
    if (entry.shards.size() == 1 && entry.shards.front().shape == entry.global_shape &&
        is_origin(entry.shards.front().offset)) {
      names.push_back(name);
    }
  }
  return names;  // the map's order: sorted
}

void Checkpoint::close_files() const {
  if (!open_files_) return;
  const std::lock_guard<std::mutex> lock(open_files_->mutex);
  open_files_->files.clear();
}

std::vector<std::uint8_t> Checkpoint::read_rows(const std::string& name, std::uint64_t begin,
                                                std::uint64_t end) const {
  const TensorEntry& entry = tensor(name);
  if (entry.global_shape.empty() || begin > end || end > entry.global_shape[0]) {
    throw Error("tensor '" + name + "': rows [" + std::to_string(begin) + ", " +
                std::to_string(end) + ") are outside its first dimension");
  }
  Shape offset(entry.global_shape.size(), 0);
  Shape shape = entry.global_shape;
  offset[0] = begin;
  shape[0] = end - begin;
  return read(name, offset, shape);
}

std::map<std::string, StateValue> Checkpoint::state(int rank) const {
  if (rank < 0 || rank >= manifest_.world_size) {
    throw Error("rank " + std::to_string(rank) + " is not in this checkpoint of " +
                std::to_string(manifest_.world_size) + " ranks");
  }
  return RankFile(dir_ / rank_file_name(rank)).state();
}

std::optional<Loaded> load_step(const std::filesystem::path& root, std::int64_t step, Verify verify,
                                std::vector<std::string>* skipped) {
  require_private(root, "the checkpoint root");
  const std::filesystem::path dir = root / step_dir_name(step);
  std::error_code error;
  if (std::filesystem::symlink_status(dir, error).type() != std::filesystem::file_type::directory) {
    if (skipped != nullptr) {
      skipped->push_back(dir.string() + ": no such committed checkpoint (not a directory)");
    }
    return std::nullopt;
  }
  try {
    return Loaded{Checkpoint::open(dir, verify), {}};
  } catch (const Error& e) {
    if (skipped != nullptr) skipped->emplace_back(e.what());
  } catch (const std::exception& e) {
    if (skipped != nullptr) skipped->push_back(dir.string() + ": " + e.what());
  }
  return std::nullopt;
}

std::optional<Loaded> load_latest(const std::filesystem::path& root, Verify verify,
                                  std::vector<std::string>* skipped) {
  require_private(root, "the checkpoint root");
  std::vector<std::string> reasons;
  for (const StepEntry& entry : list_steps(root)) {
    try {
      Loaded loaded{Checkpoint::open(entry.dir, verify), reasons};
      if (skipped != nullptr) *skipped = reasons;
      return loaded;
    } catch (const Error& e) {
      reasons.emplace_back(e.what());
    } catch (const std::exception& e) {  // std::bad_alloc from damaged metadata, say
      reasons.push_back(entry.dir.string() + ": " + e.what());
    }
  }
  if (skipped != nullptr) *skipped = reasons;
  return std::nullopt;
}

}  // namespace primus::ckpt

#include "primus/ckpt/writer.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <set>
#include <system_error>

#include "chunking.hpp"
#include "crc32c.hpp"
#include "direct_chunks.hpp"
#include "fs.hpp"
#include "hdf5.hpp"
#include "igzip_chunks.hpp"
#include "primus/ckpt/layout.hpp"
#include "primus/ckpt/manifest.hpp"
#include "primus/common/error.hpp"

namespace primus::ckpt {
namespace {

constexpr std::size_t kMaxDims = 32;

void check_tensor(const TensorRef& t, Shape& global, Shape& offset) {
  const std::string what = "tensor '" + t.name + "'";
  if (t.shape.size() > kMaxDims) throw Error(what + ": more than 32 dimensions");
  global = t.global_shape.empty() ? t.shape : t.global_shape;
  offset = t.offset.empty() ? Shape(t.shape.size(), 0) : t.offset;
  if (global.size() != t.shape.size() || offset.size() != t.shape.size()) {
    throw Error(what + ": shape, global shape and offset need the same number of dimensions");
  }
  for (std::size_t d = 0; d < t.shape.size(); ++d) {
    if (offset[d] > global[d] || t.shape[d] > global[d] - offset[d]) {
      throw Error(what + ": the part at offset " + std::to_string(offset[d]) + " of size " +
                  std::to_string(t.shape[d]) + " lies outside the global size " +
                  std::to_string(global[d]) + " in dimension " + std::to_string(d));
    }
  }
  if (t.data == nullptr && element_count(t.shape) != 0) throw Error(what + ": no data");
}

}  // namespace

struct RankWriter::Impl {
  std::filesystem::path path;
  WriteOptions options;
  RankIndex index;
  std::set<std::string> datasets;
  std::set<std::string> state_names;
  os::UniqueFd dir_fd;   // the temporary directory, marked in use while this writer lives
  os::UniqueFd file_fd;  // the rank file as created; HDF5 opened it through /proc/self/fd
  h5::Handle file;
  h5::Handle tensors;
  h5::Handle state;
  bool finished = false;

  void write_state(const std::string& key, hid_t type, const Shape& shape, const void* data,
                   std::size_t bytes) {
    const std::string name = dataset_name(key);
    if (!state_names.insert(name).second) throw Error("state '" + key + "' is set twice");
    const h5::Handle space = h5::dataspace(shape);
    h5::Handle dataset = h5::checked(H5Dcreate2(state.get(), name.c_str(), type, space.get(),
                                                H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                     H5Dclose, "state '" + key + "'");
    if (bytes > 0) {
      h5::check(H5Dwrite(dataset.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data),
                "writing state '" + key + "' to " + path.string());
    }
    // HDF5 may write cached chunks only here: a failure must not go unnoticed.
    dataset.close("writing state '" + key + "' to " + path.string());
    index.state[key] = crc32c(data, bytes);
  }
};

RankWriter::RankWriter(const std::filesystem::path& root, std::int64_t step, int rank,
                       int world_size, WriteOptions options)
    : impl_(std::make_unique<Impl>()) {
  if (options.deflate_level < 0 || options.deflate_level > kMaxCompressLevel) {
    throw Error("compression level " + std::to_string(options.deflate_level) +
                ": expected 0 (off) to " + std::to_string(kMaxCompressLevel) +
                " (ISA-L igzip levels)");
  }
  if (options.chunk_bytes == 0) throw Error("chunk size 0: expected at least one byte");
  if (world_size < 1 || world_size > kMaxWorldSize || rank < 0 || rank >= world_size) {
    throw Error("rank " + std::to_string(rank) + " of " + std::to_string(world_size) +
                ": expected 0 <= rank < world size <= " + std::to_string(kMaxWorldSize));
  }
  // A new root is the user's alone (0700), like everything below it; an existing one keeps its
  // mode (a group that shares checkpoints on purpose loads them with --primus-ckpt-trust-shared).
  std::error_code error;
  if (root.has_parent_path()) std::filesystem::create_directories(root.parent_path(), error);
  if (!error && ::mkdir(root.c_str(), 0700) != 0 && errno != EEXIST) {
    error = std::error_code(errno, std::generic_category());
  }
  if (error) throw Error("cannot create " + root.string() + ": " + error.message());
  // The temporary directory is this user's alone (0700, refused when someone else made the name
  // in a shared root), and the rank file is created new inside it through the directory's
  // descriptor, never through a link another user planted. HDF5 opens the very file that was
  // created, through /proc/self/fd.
  const std::filesystem::path dir = root / temporary_dir_name(step);
  impl_->dir_fd = fs::make_private_directory(dir);
  fs::mark_in_use(impl_->dir_fd.get());  // prune leaves the directory of a live writer alone
  impl_->path = dir / rank_file_name(rank);
  impl_->file_fd = fs::create_new_file(impl_->dir_fd.get(), dir, rank_file_name(rank));
  impl_->options = options;
  impl_->index.version = kFormatVersion;
  impl_->index.step = step;
  impl_->index.rank = rank;
  impl_->index.world_size = world_size;
  // Without /proc (some containers), the name: the file was just created new in a directory
  // only this user can write.
  const std::string through_fd = "/proc/self/fd/" + std::to_string(impl_->file_fd.get());
  impl_->file =
      h5::create_file(::access(through_fd.c_str(), W_OK) == 0 ? through_fd : impl_->path.string(),
                      impl_->path.string());
  h5::write_string_attribute(impl_->file.get(), "primus_format", "primus-ckpt-rank");
  impl_->tensors = h5::create_group(impl_->file.get(), "tensors");
  impl_->state = h5::create_group(impl_->file.get(), "state");
}

RankWriter::~RankWriter() = default;

void RankWriter::add_tensor(const TensorRef& t) {
  Impl& m = *impl_;
  if (m.finished) throw Error("tensor '" + t.name + "': the rank file is already finished");
  Shape global;
  Shape offset;
  check_tensor(t, global, offset);
  const std::string name = dataset_name(t.name);
  if (!m.datasets.insert(name).second) throw Error("tensor '" + t.name + "' is added twice");

  const std::size_t element = dtype_size(t.dtype);
  const std::uint64_t count = element_count(t.shape);
  const std::uint64_t bytes = count * element;
  const h5::Handle type = h5::file_type(t.dtype);
  const h5::Handle space = h5::dataspace(t.shape);
  const h5::Handle dcpl = h5::checked(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "properties");
  const bool compressed = m.options.deflate_level > 0 && !t.shape.empty() && count > 0;
  Shape chunk;
  if (!t.shape.empty() && count > 0) {
    chunk = chunk_shape(t.shape, element, m.options.chunk_bytes);
    const std::vector<hsize_t> dims(chunk.begin(), chunk.end());
    h5::check(H5Pset_chunk(dcpl.get(), static_cast<int>(dims.size()), dims.data()), "chunks");
    // Every chunk is written whole: a fill value would only be written to be overwritten.
    h5::check(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), "fill time");
    if (compressed) {
      // Declares HDF5's standard (optional) deflate filter, so that every reader inflates the
      // chunks; igzip writes them.
      h5::check(H5Pset_deflate(dcpl.get(), static_cast<unsigned>(m.options.deflate_level)),
                "compression");
    }
  }
  const std::string what = "writing tensor '" + t.name + "' to " + m.path.string();
  h5::Handle dataset = h5::checked(H5Dcreate2(m.tensors.get(), name.c_str(), type.get(),
                                              space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                                   H5Dclose, "tensor '" + t.name + "' in " + m.path.string());
  std::optional<std::uint32_t> crc;
  if (compressed) {
    write_deflated_chunks(dataset.get(), t.shape, chunk, element, t.data, m.options.deflate_level,
                          what);
  } else if (count > 0 && !t.shape.empty()) {
    crc = write_direct_chunks(dataset.get(), t.shape, chunk, element, t.data, what);
  }
  if (!compressed && !crc && count > 0) {
    // A scalar, or chunks HDF5 must assemble. The memory type is the file type: HDF5 copies
    // the bits, bfloat16 included.
    h5::check(H5Dwrite(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data), what);
  }
  TensorPart part;
  part.name = t.name;
  part.dtype = t.dtype;
  part.global_shape = global;
  part.offset = offset;
  part.shape = t.shape;
  part.dataset = "/tensors/" + name;
  part.crc32c = crc ? *crc : crc32c(t.data, static_cast<std::size_t>(bytes));
  // For readers without Primus (h5py, h5dump): what the index says, on the dataset itself.
  h5::write_string_attribute(dataset.get(), "dtype", std::string(to_string(t.dtype)));
  h5::write_u64_array_attribute(dataset.get(), "global_shape", global);
  h5::write_u64_array_attribute(dataset.get(), "offset", offset);
  h5::write_string_attribute(dataset.get(), "crc32c", crc_hex(part.crc32c));
  // Chunks that HDF5 still caches are written when the dataset closes: check that too (a full
  // disk shows here), rather than in a destructor that cannot report it.
  dataset.close("writing tensor '" + t.name + "' to " + m.path.string());
  m.index.parts.push_back(std::move(part));
}

void RankWriter::set_int(const std::string& key, std::int64_t value) {
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(value) >> (8 * i));
  impl_->write_state(key, H5T_STD_I64LE, {}, bytes, sizeof bytes);
}

void RankWriter::set_string(const std::string& key, const std::string& value) {
  if (value.find('\0') != std::string::npos) {
    throw Error("state '" + key + "': a string cannot hold NUL characters (use set_bytes)");
  }
  const h5::Handle type = h5::checked(H5Tcopy(H5T_C_S1), H5Tclose, "string type");
  h5::check(H5Tset_size(type.get(), value.empty() ? 1 : value.size()), "string size");
  h5::check(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), "string padding");
  const std::string stored = value.empty() ? std::string(1, '\0') : value;
  impl_->write_state(key, type.get(), {}, stored.data(), stored.size());
  impl_->index.state[key] = crc32c(value.data(), value.size());
}

void RankWriter::set_bytes(const std::string& key, const std::vector<std::uint8_t>& value) {
  impl_->write_state(key, H5T_STD_U8LE, {value.size()}, value.data(), value.size());
}

std::filesystem::path RankWriter::finish() {
  Impl& m = *impl_;
  if (m.finished) throw Error(m.path.string() + " is already finished");
  h5::write_string_dataset(m.file.get(), "primus_index", to_json(m.index));
  h5::check(H5Fflush(m.file.get(), H5F_SCOPE_LOCAL), "writing " + m.path.string());
  m.tensors.close("closing /tensors in " + m.path.string());
  m.state.close("closing /state in " + m.path.string());
  m.file.close("closing " + m.path.string());
  if (::fsync(m.file_fd.get()) != 0 || ::close(m.file_fd.release()) != 0) {
    throw Error("cannot fsync " + m.path.string() + ": " + std::strerror(errno));
  }
  m.finished = true;
  return m.path;
}

}  // namespace primus::ckpt

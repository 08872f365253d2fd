#include "rank_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <vector>

#include "chunking.hpp"

#include "crc32c.hpp"
#include "fs.hpp"
#include "pipelined_read.hpp"
#include "primus/ckpt/layout.hpp"

namespace primus::ckpt {
namespace {

// zlib's deflate never compresses better than 1032:1 (its documented limit).
constexpr std::uint64_t kMaxDeflateRatio = 1032;
constexpr std::size_t kVerifySlabBytes = std::size_t{64} << 20;
// One pread of a direct read: large enough to stream, small enough that the CRC32C computed
// beside the next one finds the bytes still in the CPU's cache.
constexpr std::size_t kDirectPieceBytes = std::size_t{8} << 20;

// Whether the page where the piece starts is in the page cache (mincore on a mapping of it:
// a probe that reads nothing and starts no readahead). Unsure counts as not.
bool in_page_cache(int fd, const ReadPiece& piece) {
  static const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::uint64_t start = piece.file_offset / page * page;
  void* const mapped = ::mmap(nullptr, page, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(start));
  if (mapped == MAP_FAILED) return false;
  unsigned char resident = 0;
  const bool known = ::mincore(mapped, page, &resident) == 0;
  ::munmap(mapped, page);
  return known && (resident & 1) != 0;
}

struct FileRun {
  std::uint64_t file_offset;
  std::uint64_t out_offset;
  std::uint64_t bytes;
};

}  // namespace

RankFile::RankFile(const std::filesystem::path& path) : path_(path) {
  try {
    size_ = fs::file_size(path);
    fd_.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd_) corrupt(std::string("cannot open: ") + std::strerror(errno));
    file_ = h5::open_file_readonly(path.string());
    const h5::Handle fcpl = h5::checked(H5Fget_create_plist(file_.get()), H5Pclose, "properties");
    hsize_t user_block = 0;
    direct_ok_ = H5Pget_userblock(fcpl.get(), &user_block) >= 0 && user_block == 0;
    if (h5::read_string_attribute(file_.get(), "primus_format") != "primus-ckpt-rank") {
      corrupt("not a Primus rank file");
    }
    const h5::Handle index = h5::open_dataset(file_.get(), "primus_index");
    const h5::Handle index_type = h5::checked(H5Dget_type(index.get()), H5Tclose, "type");
    check_plain("/primus_index", index.get(), H5Tget_size(index_type.get()));
    index_ = parse_rank_index(h5::read_string_dataset(index.get(), "primus_index"),
                              path.string() + ": primus_index");
  } catch (const CorruptCheckpoint&) {
    throw;
  } catch (const Error& e) {
    corrupt(e.what());
  }
}

void RankFile::advise_reading_all() const {
  ::posix_fadvise(fd_.get(), 0, 0, POSIX_FADV_WILLNEED);  // only a hint
}

void RankFile::corrupt(const std::string& what) const {
  throw CorruptCheckpoint(path_.string() + ": " + what);
}

// A dataset of this file that holds its own data: reached through hard links only (an external
// link would read another file), no external or virtual storage, and, unless filtered, at
// least `bytes` of storage (a dataspace that claims more than the file holds is damage, not a
// reason to allocate it).
void RankFile::check_plain(const std::string& dataset, hid_t handle, std::uint64_t bytes) const {
  std::string prefix;
  for (std::size_t at = 1; at <= dataset.size(); ++at) {
    if (at != dataset.size() && dataset[at] != '/') continue;
    prefix = dataset.substr(0, at);
    H5L_info_t link{};
    h5::check(H5Lget_info(file_.get(), prefix.c_str(), &link, H5P_DEFAULT), prefix);
    if (link.type != H5L_TYPE_HARD)
      corrupt(prefix + ": a soft or external link, not the data itself");
  }
  const h5::Handle dcpl = h5::checked(H5Dget_create_plist(handle), H5Pclose, dataset);
  if (H5Pget_external_count(dcpl.get()) != 0 || H5Pget_layout(dcpl.get()) == H5D_VIRTUAL) {
    corrupt(dataset + ": its data is stored outside the file");
  }
  const int filters = H5Pget_nfilters(dcpl.get());
  for (int i = 0; i < filters; ++i) {
    unsigned flags = 0;
    std::size_t count = 0;
    unsigned config = 0;
    const H5Z_filter_t filter = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &count,
                                               nullptr, 0, nullptr, &config);
    if (filter != H5Z_FILTER_DEFLATE) {
      corrupt(dataset + ": compressed with filter " + std::to_string(filter) +
              " (Primus reads deflate only)");
    }
  }
  const hsize_t stored = H5Dget_storage_size(handle);
  if (stored > size_) corrupt(dataset + ": claims more storage than the file has");
  // Deflate cannot shrink data more than about 1032:1 (zlib's bound), so a compressed dataset
  // that claims more is a compression bomb, refused before anything is allocated or inflated.
  const std::uint64_t most = filters == 0 ? stored : stored * kMaxDeflateRatio;
  if (most < bytes) {
    corrupt(dataset + ": holds " + std::to_string(stored) + " bytes" +
            (filters == 0 ? "" : " compressed") + " for " + std::to_string(bytes) + " bytes");
  }
}

h5::Handle RankFile::open_checked(const std::string& dataset, DType dtype,
                                  const Shape& shape) const {
  h5::Handle handle;
  try {
    handle = h5::open_dataset(file_.get(), dataset);
    check_plain(dataset, handle.get(), element_count(shape) * dtype_size(dtype));
    const h5::Handle type = h5::checked(H5Dget_type(handle.get()), H5Tclose, "type");
    if (!h5::type_matches(type.get(), dtype)) {
      corrupt(dataset + ": the stored type is not " + std::string(to_string(dtype)));
    }
    if (h5::dataset_shape(handle.get()) != shape) corrupt(dataset + ": the shape differs");
  } catch (const CorruptCheckpoint&) {
    throw;
  } catch (const Error& e) {
    corrupt(dataset + ": " + e.what());
  }
  return handle;
}

void RankFile::check(const std::string& dataset, DType dtype, const Shape& shape) const {
  open_checked(dataset, dtype, shape);
}

void RankFile::read(const std::string& dataset, DType dtype, const Shape& shape, std::uint32_t crc,
                    void* out, std::size_t bytes) const {
  if (bytes != element_count(shape) * dtype_size(dtype)) corrupt(dataset + ": size mismatch");
  const h5::Handle handle = open_checked(dataset, dtype, shape);
  const std::size_t element = dtype_size(dtype);
  if (const auto direct = read_direct(dataset, handle.get(), shape, element, out, bytes)) {
    if (*direct != crc) corrupt(dataset + ": checksum mismatch (CRC32C)");
    return;
  }
  if (bytes > 0) {
    try {
      const h5::Handle type = h5::file_type(dtype);
      h5::read_exact(handle.get(), type.get(), out, bytes, "read");
    } catch (const Error& e) {
      corrupt(dataset + ": " + e.what());
    }
  }
  if (crc32c(out, bytes) != crc) corrupt(dataset + ": checksum mismatch (CRC32C)");
}

std::optional<std::uint32_t> RankFile::read_direct(const std::string& dataset, hid_t handle,
                                                   const Shape& shape, std::size_t element,
                                                   void* out, std::size_t bytes) const {
  const auto pieces = direct_pieces(dataset, handle, shape, element, out, bytes);
  if (!pieces) return std::nullopt;
  // From the disk one stream (in order), from the page cache two copies at once.
  const int readers = !pieces->empty() && in_page_cache(fd_.get(), pieces->front()) ? 2 : 1;
  try {
    return read_with_checksum(fd_.get(), *pieces, readers);
  } catch (const PieceReadError& failure) {
    if (failure.error == 0) corrupt(dataset + ": the file ends inside its data");
    corrupt(dataset + ": cannot read: " + std::strerror(failure.error));
  }
}

void RankFile::read_all(const std::vector<PartRead>& parts) const {
  struct Planned {
    const PartRead* part;
    std::vector<ReadPiece> pieces;
  };
  std::vector<Planned> planned;
  for (const PartRead& part : parts) {
    if (part.bytes != element_count(part.shape) * dtype_size(part.dtype)) {
      corrupt(part.dataset + ": size mismatch");
    }
    const h5::Handle handle = open_checked(part.dataset, part.dtype, part.shape);
    auto pieces = direct_pieces(part.dataset, handle.get(), part.shape, dtype_size(part.dtype),
                                part.out, part.bytes);
    if (pieces && !pieces->empty()) {
      planned.push_back({&part, std::move(*pieces)});
    } else {
      read(part.dataset, part.dtype, part.shape, part.crc, part.out, part.bytes);
    }
  }
  if (planned.empty()) return;
  // In the file's order: one stream from the first tensor's bytes to the last one's.
  std::stable_sort(planned.begin(), planned.end(), [](const Planned& a, const Planned& b) {
    return a.pieces.front().file_offset < b.pieces.front().file_offset;
  });
  std::vector<ReadPiece> pieces;
  std::vector<std::size_t> ends;
  for (const Planned& p : planned) {
    pieces.insert(pieces.end(), p.pieces.begin(), p.pieces.end());
    ends.push_back(pieces.size());
  }
  const int readers = in_page_cache(fd_.get(), pieces.front()) ? 2 : 1;
  std::vector<std::uint32_t> sums;
  try {
    sums = read_with_checksums(fd_.get(), pieces, ends, readers);
  } catch (const PieceReadError&) {
    // Each again on its own: the one that cannot be read is named, and where all can be now,
    // each was verified as it was read.
    for (const Planned& p : planned)
      read(p.part->dataset, p.part->dtype, p.part->shape, p.part->crc, p.part->out, p.part->bytes);
    return;
  }
  for (std::size_t i = 0; i < planned.size(); ++i) {
    if (sums[i] != planned[i].part->crc) {
      corrupt(planned[i].part->dataset + ": checksum mismatch (CRC32C)");
    }
  }
}

std::optional<std::vector<ReadPiece>> RankFile::direct_pieces(const std::string& dataset,
                                                              hid_t handle, const Shape& shape,
                                                              std::size_t element, void* out,
                                                              std::size_t bytes) const {
  if (!direct_ok_ || shape.empty() || bytes == 0) return std::nullopt;
  std::vector<FileRun> runs;
  try {
    const h5::Handle dcpl = h5::checked(H5Dget_create_plist(handle), H5Pclose, dataset);
    if (H5Pget_nfilters(dcpl.get()) != 0) return std::nullopt;
    if (H5Pget_layout(dcpl.get()) != H5D_CHUNKED) return std::nullopt;
    std::vector<hsize_t> dims(shape.size());
    if (H5Pget_chunk(dcpl.get(), static_cast<int>(dims.size()), dims.data()) !=
        static_cast<int>(dims.size())) {
      return std::nullopt;
    }
    const auto spans = contiguous_chunks(shape, Shape(dims.begin(), dims.end()), element);
    if (!spans) return std::nullopt;
    for (const ChunkSpan& span : *spans) {
      const std::vector<hsize_t> coord(span.coord.begin(), span.coord.end());
      unsigned filters = 0;
      haddr_t address = HADDR_UNDEF;
      hsize_t stored = 0;
      if (H5Dget_chunk_info_by_coord(handle, coord.data(), &filters, &address, &stored) < 0 ||
          address == HADDR_UNDEF || filters != 0 || stored != span.stored_bytes) {
        return std::nullopt;  // HDF5's own read reports (or fills) what is odd here
      }
      FileRun* last = runs.empty() ? nullptr : &runs.back();
      if (last != nullptr && last->file_offset + last->bytes == address &&
          last->out_offset + last->bytes == span.out_offset) {
        last->bytes += span.bytes;
      } else {
        runs.push_back({address, span.out_offset, span.bytes});
      }
    }
  } catch (const Error&) {
    return std::nullopt;
  }
  for (const FileRun& run : runs) {
    if (run.file_offset > size_ || run.bytes > size_ - run.file_offset || run.out_offset > bytes ||
        run.bytes > bytes - run.out_offset) {
      corrupt(dataset + ": its data lies outside the file");
    }
  }
  std::vector<ReadPiece> pieces;
  auto* const base = static_cast<unsigned char*>(out);
  for (const FileRun& run : runs) {
    for (std::uint64_t done = 0; done < run.bytes;) {
      const std::size_t want =
          static_cast<std::size_t>(std::min<std::uint64_t>(kDirectPieceBytes, run.bytes - done));
      pieces.push_back({base + run.out_offset + done, want, run.file_offset + done});
      done += want;
    }
  }
  return pieces;
}

void RankFile::verify(const std::string& dataset, DType dtype, const Shape& shape,
                      std::uint32_t crc) const {
  const h5::Handle handle = open_checked(dataset, dtype, shape);
  const std::size_t element = dtype_size(dtype);
  Crc32c running;
  if (shape.empty()) {
    std::vector<unsigned char> value(element);
    read(dataset, dtype, shape, crc, value.data(), value.size());
    return;
  }
  const std::uint64_t rows = shape[0];
  const std::uint64_t row_bytes =
      element_count(shape) == 0 ? 0 : element_count(shape) / rows * element;
  if (row_bytes > 0) {
    const std::uint64_t rows_per_slab = std::max<std::uint64_t>(1, kVerifySlabBytes / row_bytes);
    std::vector<unsigned char> slab(
        static_cast<std::size_t>(std::min(rows, rows_per_slab) * row_bytes));
    try {
      const h5::Handle type = h5::file_type(dtype);
      const h5::Handle file_space = h5::checked(H5Dget_space(handle.get()), H5Sclose, "space");
      for (std::uint64_t row = 0; row < rows; row += rows_per_slab) {
        const std::uint64_t n = std::min(rows_per_slab, rows - row);
        std::vector<hsize_t> start(shape.size(), 0);
        std::vector<hsize_t> count(shape.begin(), shape.end());
        start[0] = row;
        count[0] = n;
        h5::check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr,
                                      count.data(), nullptr),
                  "selecting rows");
        const h5::Handle memory = h5::dataspace(Shape(count.begin(), count.end()));
        h5::read_exact(handle.get(), type.get(), memory.get(), file_space.get(), slab.data(),
                       static_cast<std::size_t>(n * row_bytes), "read");
        running.update(slab.data(), static_cast<std::size_t>(n * row_bytes));
      }
    } catch (const Error& e) {
      corrupt(dataset + ": " + e.what());
    }
  }
  if (running.value() != crc) corrupt(dataset + ": checksum mismatch (CRC32C)");
}

std::map<std::string, StateValue> RankFile::state() const {
  return read_state(true);
}

void RankFile::check_state() const {
  read_state(false);
}

std::map<std::string, StateValue> RankFile::read_state(bool read_values) const {
  std::map<std::string, StateValue> values;
  for (const auto& [key, crc] : index_.state) {
    const std::string dataset = "/state/" + dataset_name(key);
    try {
      const h5::Handle handle = h5::open_dataset(file_.get(), dataset);
      const h5::Handle type = h5::checked(H5Dget_type(handle.get()), H5Tclose, "type");
      const H5T_class_t kind = H5Tget_class(type.get());
      const Shape shape = h5::dataset_shape(handle.get());
      check_plain(dataset, handle.get(), element_count(shape) * H5Tget_size(type.get()));
      const std::size_t size = H5Tget_size(type.get());
      // A string and an integer are one value; bytes are one dimension.
      if ((kind == H5T_STRING || (kind == H5T_INTEGER && size == 8)) && element_count(shape) != 1) {
        corrupt(dataset + ": holds " + std::to_string(element_count(shape)) +
                " elements where one value was expected");
      }
      if (kind == H5T_INTEGER && size == 1 && shape.size() != 1) {
        corrupt(dataset + ": expected a byte string");
      }
      if (kind != H5T_STRING && !(kind == H5T_INTEGER && (size == 8 || size == 1))) {
        corrupt(dataset + ": not an integer, a string or bytes");
      }
      if (!read_values) continue;
      if (kind == H5T_STRING) {
        const std::string text = h5::read_string_dataset(handle.get(), dataset);
        if (crc32c(text.data(), text.size()) != crc) corrupt(dataset + ": checksum mismatch");
        values.emplace(key, text);
      } else if (kind == H5T_INTEGER && size == 8) {
        unsigned char bytes[8] = {};  // exactly one value: read_exact refuses any other count
        h5::read_exact(handle.get(), H5T_STD_I64LE, bytes, sizeof bytes, "an integer value");
        if (crc32c(bytes, sizeof bytes) != crc) corrupt(dataset + ": checksum mismatch");
        std::uint64_t value = 0;
        for (int i = 7; i >= 0; --i)
          value = (value << 8) | bytes[i];
        values.emplace(key, static_cast<std::int64_t>(value));
      } else if (kind == H5T_INTEGER && size == 1) {
        std::vector<std::uint8_t> bytes;
        try {
          bytes.resize(static_cast<std::size_t>(shape[0]));
        } catch (const std::bad_alloc&) {
          corrupt(dataset + ": cannot allocate " + std::to_string(shape[0]) + " bytes");
        }
        h5::read_exact(handle.get(), H5T_STD_U8LE, bytes.data(), bytes.size(), "a byte string");
        if (crc32c(bytes.data(), bytes.size()) != crc) corrupt(dataset + ": checksum mismatch");
        values.emplace(key, std::move(bytes));
      }
    } catch (const CorruptCheckpoint&) {
      throw;
    } catch (const Error& e) {
      corrupt(dataset + ": " + e.what());
    }
  }
  return values;
}

}  // namespace primus::ckpt

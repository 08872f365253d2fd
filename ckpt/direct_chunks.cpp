#include "direct_chunks.hpp"

#include <cstring>
#include <future>
#include <vector>

#include "chunking.hpp"
#include "crc32c.hpp"
#include "hdf5.hpp"

namespace primus::ckpt {
namespace {

// From this size on, the CRC runs on a second thread beside the writes (about 0.07 s a GiB
// with ISA-L here, a fifth of writing it to tmpfs); below it, a thread costs more than it saves.
constexpr std::uint64_t kCrcThreadBytes = std::uint64_t{16} << 20;

}  // namespace

std::optional<std::uint32_t> write_direct_chunks(hid_t dataset, const Shape& shape,
                                                 const Shape& chunk, std::size_t element,
                                                 const void* data, const std::string& what) {
  const auto spans = contiguous_chunks(shape, chunk, element);
  if (!spans) return std::nullopt;
  const auto* const base = static_cast<const unsigned char*>(data);
  std::uint64_t total = element;
  for (const std::uint64_t extent : shape)
    total *= extent;
  std::future<std::uint32_t> beside;
  if (total >= kCrcThreadBytes) {
    beside = std::async(std::launch::async,
                        [base, total] { return crc32c(base, static_cast<std::size_t>(total)); });
  }
  std::vector<unsigned char> edge;  // a whole chunk, for the one at the dataset's end
  Crc32c crc;  // chunk by chunk, while each is in the cache, when no thread computes it
  for (const ChunkSpan& span : *spans) {
    const unsigned char* from = base + span.out_offset;
    if (!beside.valid()) crc.update(from, static_cast<std::size_t>(span.bytes));
    if (span.bytes < span.stored_bytes) {
      edge.assign(static_cast<std::size_t>(span.stored_bytes), 0);
      std::memcpy(edge.data(), from, static_cast<std::size_t>(span.bytes));
      from = edge.data();
    }
    const std::vector<hsize_t> offset(span.coord.begin(), span.coord.end());
    h5::check(H5Dwrite_chunk(dataset, H5P_DEFAULT, 0, offset.data(),
                             static_cast<std::size_t>(span.stored_bytes), from),
              what);
  }
  return beside.valid() ? beside.get() : crc.value();
}

}  // namespace primus::ckpt

#include "igzip_chunks.hpp"

#include <isa-l/igzip_lib.h>

#include <cstring>
#include <vector>

#include "chunking.hpp"
#include "hdf5.hpp"
#include "primus/common/error.hpp"

namespace primus::ckpt {
namespace {

std::uint32_t level_buffer_bytes(int level) {
  switch (level) {
    case 1:
      return ISAL_DEF_LVL1_DEFAULT;
    case 2:
      return ISAL_DEF_LVL2_DEFAULT;
    default:
      return ISAL_DEF_LVL3_DEFAULT;
  }
}

// igzip's vector loads may read a little past the end of its input: the input buffer carries
// this many zero bytes beyond the chunk, so that what they read is always the same.
constexpr std::size_t kInputPadding = 64;

// One zlib stream of the first `size` bytes of `input` into `output` (resized to what was
// written); false when the stream would not be smaller than the chunk, which is then stored as
// it is. (A stream exactly as long as the chunk once counted as shrunk, and whether a 24-byte
// chunk compressed to 24 bytes varied from run to run.)
bool deflate_chunk(const std::vector<unsigned char>& input, std::size_t size, int level,
                   std::vector<std::uint8_t>& level_buffer, std::vector<unsigned char>& output) {
  if (size < 2) return false;
  isal_zstream stream{};
  isal_deflate_init(&stream);
  stream.level = static_cast<std::uint32_t>(level);
  stream.level_buf = level_buffer.data();
  stream.level_buf_size = static_cast<std::uint32_t>(level_buffer.size());
  stream.gzip_flag = IGZIP_ZLIB;
  stream.end_of_stream = 1;
  stream.flush = NO_FLUSH;
  stream.next_in = const_cast<std::uint8_t*>(input.data());  // igzip never writes its input
  stream.avail_in = static_cast<std::uint32_t>(size);
  output.resize(size - 1);  // room for a stream shorter than the chunk only
  stream.next_out = output.data();
  stream.avail_out = static_cast<std::uint32_t>(output.size());
  if (isal_deflate(&stream) != COMP_OK || stream.internal_state.state != ZSTATE_END) return false;
  output.resize(stream.total_out);
  return true;
}

}  // namespace

void write_deflated_chunks(hid_t dataset, const Shape& shape, const Shape& chunk,
                           std::size_t element, const void* data, int level,
                           const std::string& what) {
  if (level < 1 || level > kMaxCompressLevel) {
    throw Error(what + ": compression level " + std::to_string(level) + ", expected 1 to " +
                std::to_string(kMaxCompressLevel));
  }
  const auto spans = contiguous_chunks(shape, chunk, element);
  if (!spans || spans->empty() || spans->front().stored_bytes > UINT32_MAX) {
    throw Error(what + ": chunks that igzip cannot write one by one");
  }
  std::vector<std::uint8_t> level_buffer(level_buffer_bytes(level));
  const auto chunk_bytes = static_cast<std::size_t>(spans->front().stored_bytes);
  std::vector<unsigned char> input(chunk_bytes + kInputPadding, 0);
  std::vector<unsigned char> output;
  const auto* const base = static_cast<const unsigned char*>(data);
  for (const ChunkSpan& span : *spans) {
    // An edge chunk is stored whole: the part past the dataset's end is zeros.
    std::memcpy(input.data(), base + span.out_offset, static_cast<std::size_t>(span.bytes));
    std::memset(input.data() + span.bytes, 0,
                static_cast<std::size_t>(span.stored_bytes - span.bytes));
    const bool shrank = deflate_chunk(input, chunk_bytes, level, level_buffer, output);
    const unsigned char* stored = shrank ? output.data() : input.data();
    const std::size_t stored_size = shrank ? output.size() : chunk_bytes;
    const std::uint32_t skip_filters = shrank ? 0U : 1U;  // bit 0: the deflate filter skipped
    const std::vector<hsize_t> offset(span.coord.begin(), span.coord.end());
    h5::check(
        H5Dwrite_chunk(dataset, H5P_DEFAULT, skip_filters, offset.data(), stored_size, stored),
        what);
  }
}

}  // namespace primus::ckpt

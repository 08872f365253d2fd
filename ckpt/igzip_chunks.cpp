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

// One zlib stream of `input` into `output` (resized to what was written); false when it does
// not fit in input's size, i.e. the chunk does not shrink.
bool deflate_chunk(const std::vector<unsigned char>& input, int level,
                   std::vector<std::uint8_t>& level_buffer, std::vector<unsigned char>& output) {
  isal_zstream stream{};
  isal_deflate_init(&stream);
  stream.level = static_cast<std::uint32_t>(level);
  stream.level_buf = level_buffer.data();
  stream.level_buf_size = static_cast<std::uint32_t>(level_buffer.size());
  stream.gzip_flag = IGZIP_ZLIB;
  stream.end_of_stream = 1;
  stream.flush = NO_FLUSH;
  stream.next_in = const_cast<std::uint8_t*>(input.data());  // igzip never writes its input
  stream.avail_in = static_cast<std::uint32_t>(input.size());
  output.resize(input.size());
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
  std::vector<unsigned char> input(static_cast<std::size_t>(spans->front().stored_bytes));
  std::vector<unsigned char> output;
  const auto* const base = static_cast<const unsigned char*>(data);
  for (const ChunkSpan& span : *spans) {
    // An edge chunk is stored whole: the part past the dataset's end is zeros.
    std::memcpy(input.data(), base + span.out_offset, static_cast<std::size_t>(span.bytes));
    std::memset(input.data() + span.bytes, 0,
                static_cast<std::size_t>(span.stored_bytes - span.bytes));
    const bool shrank = deflate_chunk(input, level, level_buffer, output);
    const std::vector<unsigned char>& stored = shrank ? output : input;
    const std::uint32_t skip_filters = shrank ? 0U : 1U;  // bit 0: the deflate filter skipped
    const std::vector<hsize_t> offset(span.coord.begin(), span.coord.end());
    h5::check(H5Dwrite_chunk(dataset, H5P_DEFAULT, skip_filters, offset.data(), stored.size(),
                             stored.data()),
              what);
  }
}

}  // namespace primus::ckpt

#include "chunking.hpp"

#include <algorithm>

namespace primus::ckpt {

Shape chunk_shape(const Shape& shape, std::size_t element_size, std::uint64_t target_bytes) {
  constexpr std::uint64_t kHdf5MaxChunk = (std::uint64_t{1} << 32) - 1;
  const std::uint64_t target =
      std::max<std::uint64_t>(element_size, std::min(target_bytes, kHdf5MaxChunk));
  Shape chunk = shape;
  // From the first dimension on, cut each down to what fits with everything after it whole;
  // a dimension that cannot fit even once is cut to 1 and the next one is cut in turn.
  std::uint64_t inner = element_size;  // bytes of one step in dimension d, with d+1.. whole
  for (std::size_t d = chunk.size(); d-- > 1;)
    inner *= std::max<std::uint64_t>(chunk[d], 1);
  for (std::size_t d = 0; d < chunk.size(); ++d) {
    if (inner <= target) {
      chunk[d] = std::max<std::uint64_t>(1, std::min(chunk[d], target / inner));
      break;
    }
    chunk[d] = 1;
    if (d + 1 < chunk.size()) inner /= std::max<std::uint64_t>(chunk[d + 1], 1);
  }
  return chunk;
}

}  // namespace primus::ckpt

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

namespace primus::ckpt {

std::optional<std::vector<ChunkSpan>> contiguous_chunks(const Shape& shape, const Shape& chunk,
                                                        std::size_t element_size) {
  if (shape.empty() || chunk.size() != shape.size() || element_size == 0) return std::nullopt;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0 || chunk[d] == 0) return std::nullopt;
  }
  std::uint64_t total = element_size;  // the dataset's bytes; every figure below is at most this
  for (const std::uint64_t extent : shape) {
    if (extent > UINT64_MAX / total) return std::nullopt;
    total *= extent;
  }
  // cut: the first dimension the chunk is more than 1 wide in (the last when none is); before
  // it the chunk is 1 wide, after it the chunk must span the whole dimension.
  std::size_t cut = 0;
  while (cut + 1 < shape.size() && chunk[cut] == 1)
    ++cut;
  if (chunk[cut] > shape[cut]) return std::nullopt;
  for (std::size_t d = cut + 1; d < shape.size(); ++d) {
    if (chunk[d] != shape[d]) return std::nullopt;
  }
  std::uint64_t inner = element_size;  // bytes of one step along `cut`
  for (std::size_t d = cut + 1; d < shape.size(); ++d)
    inner *= shape[d];
  std::uint64_t outer = 1;  // how many positions the dimensions before `cut` take together
  for (std::size_t d = 0; d < cut; ++d)
    outer *= shape[d];
  const std::uint64_t stored = chunk[cut] * inner;
  const std::uint64_t per_outer = (shape[cut] + chunk[cut] - 1) / chunk[cut];
  constexpr std::uint64_t kMaxSpans = std::uint64_t{1} << 20;  // beyond: not worth planning
  if (outer > kMaxSpans / per_outer) return std::nullopt;
  std::vector<ChunkSpan> spans;
  spans.reserve(static_cast<std::size_t>(outer * per_outer));
  Shape coord(shape.size(), 0);
  for (std::uint64_t o = 0; o < outer; ++o) {
    std::uint64_t rest = o;  // o in row-major digits over the dimensions before `cut`
    for (std::size_t d = cut; d-- > 0;) {
      coord[d] = rest % shape[d];
      rest /= shape[d];
    }
    for (std::uint64_t at = 0; at < shape[cut]; at += chunk[cut]) {
      coord[cut] = at;
      const std::uint64_t rows = std::min(chunk[cut], shape[cut] - at);
      spans.push_back({coord, (o * shape[cut] + at) * inner, rows * inner, stored});
    }
  }
  return spans;
}

}  // namespace primus::ckpt

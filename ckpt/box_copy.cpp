#include "box_copy.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

namespace primus::ckpt {

bool boxes_intersect(const Shape& a_offset, const Shape& a_shape, const Shape& b_offset,
                     const Shape& b_shape) {
  for (std::size_t d = 0; d < a_shape.size(); ++d) {
    const std::uint64_t lo = std::max(a_offset[d], b_offset[d]);
    const std::uint64_t hi = std::min(a_offset[d] + a_shape[d], b_offset[d] + b_shape[d]);
    if (lo >= hi) return false;
  }
  return true;
}

void copy_overlap(std::size_t element_size, const void* src, const Shape& src_offset,
                  const Shape& src_shape, void* dst, const Shape& dst_offset,
                  const Shape& dst_shape) {
  const std::size_t n = src_shape.size();
  if (n == 0) {
    std::memcpy(dst, src, element_size);
    return;
  }
  if (!boxes_intersect(src_offset, src_shape, dst_offset, dst_shape)) return;
  std::vector<std::uint64_t> lo(n);
  std::vector<std::uint64_t> hi(n);
  for (std::size_t d = 0; d < n; ++d) {
    lo[d] = std::max(src_offset[d], dst_offset[d]);
    hi[d] = std::min(src_offset[d] + src_shape[d], dst_offset[d] + dst_shape[d]);
  }
  // Strides in elements.
  std::vector<std::uint64_t> src_stride(n, 1);
  std::vector<std::uint64_t> dst_stride(n, 1);
  for (std::size_t d = n - 1; d > 0; --d) {
    src_stride[d - 1] = src_stride[d] * src_shape[d];
    dst_stride[d - 1] = dst_stride[d] * dst_shape[d];
  }
  const std::size_t run = static_cast<std::size_t>(hi[n - 1] - lo[n - 1]) * element_size;
  const auto* from = static_cast<const unsigned char*>(src);
  auto* to = static_cast<unsigned char*>(dst);
  std::vector<std::uint64_t> index(lo.begin(), lo.end());  // odometer over dims 0..n-2
  while (true) {
    std::uint64_t s = 0;
    std::uint64_t t = 0;
    for (std::size_t d = 0; d < n; ++d) {
      s += (index[d] - src_offset[d]) * src_stride[d];
      t += (index[d] - dst_offset[d]) * dst_stride[d];
    }
    std::memcpy(to + t * element_size, from + s * element_size, run);
    std::size_t d = n - 1;
    while (d > 0) {
      --d;
      if (++index[d] < hi[d]) break;
      index[d] = lo[d];
      if (d == 0) return;
    }
    if (n == 1) return;
  }
}

}  // namespace primus::ckpt

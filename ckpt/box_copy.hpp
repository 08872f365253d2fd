// Copying between boxes of one N-dimensional tensor in C order: a shard read from a rank file
// into the part of the tensor a caller asked for. Pure.
#pragma once

#include <cstddef>

#include "primus/ckpt/dtype.hpp"

namespace primus::ckpt {

// Copies the elements that lie in both boxes, from src (the box at src_offset of src_shape) to
// dst (the box at dst_offset of dst_shape). The four shapes have the same number of dimensions
// (zero: one scalar element).
void copy_overlap(std::size_t element_size, const void* src, const Shape& src_offset,
                  const Shape& src_shape, void* dst, const Shape& dst_offset,
                  const Shape& dst_shape);

// Whether the boxes share at least one element.
bool boxes_intersect(const Shape& a_offset, const Shape& a_shape, const Shape& b_offset,
                     const Shape& b_shape);

}  // namespace primus::ckpt

// HDF5 chunk shapes for checkpointed tensors. Pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "primus/ckpt/dtype.hpp"

namespace primus::ckpt {

// The chunk of a tensor of `shape` (at least one dimension, no zero size): whole trailing
// dimensions and as many leading rows as fit in target_bytes, shrinking trailing dimensions
// too when one row is larger; never over HDF5's 4 GiB chunk limit, never under one element.
Shape chunk_shape(const Shape& shape, std::size_t element_size, std::uint64_t target_bytes);

// One chunk of a dataset whose every chunk is one contiguous range of the row-major array.
struct ChunkSpan {
  Shape coord;                 // the chunk's first element (what H5Dget_chunk_info_by_coord takes)
  std::uint64_t out_offset;    // where its elements start in the row-major array, in bytes
  std::uint64_t bytes;         // how many of its bytes lie inside the dataset (edge chunks: fewer)
  std::uint64_t stored_bytes;  // the size of a whole chunk as stored without filters
};

// The chunks of a dataset of `shape` in row-major order, when each one is a contiguous range of
// the array: dimensions before the first cut one are 1 in the chunk, those after it whole
// (what chunk_shape() makes). Empty optional otherwise (the caller reads through HDF5).
std::optional<std::vector<ChunkSpan>> contiguous_chunks(const Shape& shape, const Shape& chunk,
                                                        std::size_t element_size);

}  // namespace primus::ckpt

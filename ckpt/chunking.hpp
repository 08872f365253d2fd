// HDF5 chunk shapes for checkpointed tensors. Pure.
#pragma once

#include <cstddef>
#include <cstdint>

#include "primus/ckpt/dtype.hpp"

namespace primus::ckpt {

// The chunk of a tensor of `shape` (at least one dimension, no zero size): whole trailing
// dimensions and as many leading rows as fit in target_bytes, shrinking trailing dimensions
// too when one row is larger; never over HDF5's 4 GiB chunk limit, never under one element.
Shape chunk_shape(const Shape& shape, std::size_t element_size, std::uint64_t target_bytes);

}  // namespace primus::ckpt

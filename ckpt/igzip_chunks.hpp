// Compressed chunks written with Intel ISA-L's igzip instead of zlib. HDF5 adapter.
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <string>

#include "primus/ckpt/dtype.hpp"

namespace primus::ckpt {

constexpr int kMaxCompressLevel = 3;  // igzip's levels: 1 (fastest) to 3

// Writes every chunk of a dataset whose pipeline is HDF5's deflate filter, compressing each
// with igzip at `level` into the zlib stream that filter reads back: any HDF5 reader (h5py,
// h5dump) decompresses them, while saving runs at igzip's speed. A chunk that would not shrink
// is stored as it is, marked as skipping the (optional) filter, as HDF5 itself does. `data` is
// the whole dataset, row-major; `chunk` is its chunk shape. Throws primus::Error naming `what`.
void write_deflated_chunks(hid_t dataset, const Shape& shape, const Shape& chunk,
                           std::size_t element, const void* data, int level,
                           const std::string& what);

}  // namespace primus::ckpt

// Uncompressed chunks written straight from the caller's array. HDF5 adapter.
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "primus/ckpt/dtype.hpp"

namespace primus::ckpt {

// Writes every chunk of an unfiltered chunked dataset with H5Dwrite_chunk, each from where it
// lies in `data` (the whole dataset, row-major; `chunk` its chunk shape), and returns the
// CRC32C of `data`, computed on a second thread beside the writes for a large dataset, else
// chunk by chunk just before each is written, while it is in the cache. H5Dwrite would first fill a
// chunk buffer and copy every byte into it: two passes over the state that this skips (an edge
// chunk alone is copied, to pad it with zeros to a whole chunk, as HDF5 stores it). std::nullopt
// when the chunks are not contiguous ranges of the array (nothing is written then). Throws
// primus::Error naming `what`.
std::optional<std::uint32_t> write_direct_chunks(hid_t dataset, const Shape& shape,
                                                 const Shape& chunk, std::size_t element,
                                                 const void* data, const std::string& what);

}  // namespace primus::ckpt

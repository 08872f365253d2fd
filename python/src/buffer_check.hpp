// The one check of a Python buffer that crosses into Primus without a copy: C-contiguous, with
// the expected item size; a ValueError naming `what` otherwise. Shared by the extensions.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

namespace primus::python {

inline pybind11::buffer_info contiguous_buffer(const pybind11::buffer& buffer, std::size_t itemsize,
                                               const std::string& dtype, bool writable,
                                               const std::string& what) {
  pybind11::buffer_info info = buffer.request(writable);
  if (static_cast<std::size_t>(info.itemsize) != itemsize) {
    throw pybind11::value_error(what + ": items of " + std::to_string(info.itemsize) +
                                " bytes for dtype " + dtype);
  }
  pybind11::ssize_t expected = info.itemsize;
  for (pybind11::ssize_t d = info.ndim; d-- > 0;) {
    if (info.shape[d] > 1 && info.strides[d] != expected) {
      throw pybind11::value_error(what + " is not C-contiguous");
    }
    expected *= info.shape[d];
  }
  return info;
}

}  // namespace primus::python

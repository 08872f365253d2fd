// A thin RAII layer over the HDF5 C API (1.10): handles that close themselves, calls that throw
// primus::Error with HDF5's own message, and the few operations the checkpoint files need.
// HDF5's automatic error printing is turned off: errors are reported once, by the caller.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "primus/ckpt/dtype.hpp"

namespace primus::ckpt::h5 {

class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  ~Handle() { reset(); }
  Handle(Handle&& other) noexcept
      : id_(std::exchange(other.id_, H5I_INVALID_HID)), closer_(other.closer_) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
      closer_ = other.closer_;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  hid_t get() const { return id_; }
  // Closes now; throws Error when HDF5 reports a failure (a file's last write happens here).
  void close(const std::string& what);

 private:
  void reset() noexcept {
    if (id_ >= 0 && closer_ != nullptr) closer_(id_);
    id_ = H5I_INVALID_HID;
  }
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

// Throws Error("<what>: <HDF5's message>") when id < 0, else wraps it.
Handle checked(hid_t id, Handle::Closer closer, const std::string& what);
void check(herr_t rc, const std::string& what);

// Creates (truncates) the file at `path`; file locking off. `name` is what errors call it.
Handle create_file(const std::string& path, const std::string& name);
Handle open_file_readonly(const std::string& path);  // file locking off
Handle create_group(hid_t parent, const std::string& name);
Handle open_group(hid_t parent, const std::string& name);
Handle open_dataset(hid_t parent, const std::string& name);
bool link_exists(hid_t parent, const std::string& name);
std::vector<std::string> link_names(hid_t group);

// The file type of a dtype (a copy: the handle closes it). bfloat16 is a 16-bit float with
// sign bit 15, exponent bits 7-14 (bias 127) and mantissa bits 0-6; bool is uint8.
Handle file_type(DType dtype);
// The dtype whose file type matches `type` (class, size, sign, byte order, float fields).
bool type_matches(hid_t type, DType dtype);

// Dataspace of a shape (scalar for an empty shape).
Handle dataspace(const Shape& shape);
Shape dataset_shape(hid_t dataset);

// The largest string a file may hold in an attribute, and in a string dataset (the rank index
// and state strings): a file that claims more is refused before anything is allocated.
inline constexpr std::size_t kMaxAttributeBytes = std::size_t{64} << 10;
inline constexpr std::size_t kMaxStringBytes = std::size_t{64} << 20;

// The one way this library reads stored values: the whole of `dataset` (or attribute `attr`),
// or the elements `file_space` selects into `memory_space`, in `memory_type`, into `out`, which
// holds exactly `bytes`. Refused with Error("<what>: ...") unless the stored element count
// times the memory type's size is `bytes`, so that a file whose dataspace claims more elements
// than the caller expects can never write past `out`.
void read_exact(hid_t dataset, hid_t memory_type, void* out, std::size_t bytes,
                const std::string& what);
void read_exact(hid_t dataset, hid_t memory_type, hid_t memory_space, hid_t file_space, void* out,
                std::size_t bytes, const std::string& what);
void read_attribute_exact(hid_t attr, hid_t memory_type, void* out, std::size_t bytes,
                          const std::string& what);

void write_string_attribute(hid_t object, const std::string& name, const std::string& value);
// A fixed-length string attribute of exactly one element, at most kMaxAttributeBytes.
std::string read_string_attribute(hid_t object, const std::string& name);
void write_u64_array_attribute(hid_t object, const std::string& name, const Shape& values);

// A scalar fixed-length string dataset (h5py reads it as bytes).
void write_string_dataset(hid_t parent, const std::string& name, const std::string& value);
// A scalar fixed-length string dataset of at most kMaxStringBytes.
std::string read_string_dataset(hid_t dataset, const std::string& what);

}  // namespace primus::ckpt::h5

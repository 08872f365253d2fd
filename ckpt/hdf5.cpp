#include "hdf5.hpp"

#include <mutex>

#include "primus/common/error.hpp"

namespace primus::ckpt::h5 {
namespace {

void quiet_errors() {
  static std::once_flag once;
  std::call_once(once, [] {
    // HDF5 1.10.8 crashes at exit (H5_term_library) after a file failed to close, as on a full
    // disk: let the process end without that clean-up (it fails harmlessly when HDF5 is
    // already in use, e.g. by h5py).
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    // A checkpoint must not make HDF5 load code: filter plugins (HDF5_PLUGIN_PATH) stay off.
    H5PLset_loading_state(0);
  });
}

herr_t collect_message(unsigned n, const H5E_error2_t* error, void* data) {
  auto* message = static_cast<std::string*>(data);
  if (error->desc != nullptr && error->desc[0] != '\0') {
    if (!message->empty()) *message += "; ";
    *message += error->desc;
  }
  return n >= 1 ? -1 : 0;  // the two innermost frames: the system's reason, if any
}

std::string hdf5_message() {
  std::string message;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect_message, &message);
  H5Eclear2(H5E_DEFAULT);
  return message.empty() ? "HDF5 error" : message;
}

Handle file_access() {
  quiet_errors();  // before HDF5 initialises itself
  Handle fapl = checked(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "file access properties");
  // Parallel file systems often lack the locks HDF5 1.10 takes by default.
  check(H5Pset_file_locking(fapl.get(), 0, 1), "turning file locking off");
  return fapl;
}

Handle string_type(std::size_t size) {
  Handle type = checked(H5Tcopy(H5T_C_S1), H5Tclose, "string type");
  check(H5Tset_size(type.get(), size == 0 ? 1 : size), "string type size");
  check(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), "string type padding");
  return type;
}

hid_t predefined(DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
      return H5T_IEEE_F64LE;
    case DType::kFloat32:
      return H5T_IEEE_F32LE;
    case DType::kInt8:
      return H5T_STD_I8LE;
    case DType::kInt16:
      return H5T_STD_I16LE;
    case DType::kInt32:
      return H5T_STD_I32LE;
    case DType::kInt64:
      return H5T_STD_I64LE;
    case DType::kUInt8:
    case DType::kBool:
      return H5T_STD_U8LE;
    case DType::kFloat16:
    case DType::kBFloat16:
      break;
  }
  return H5I_INVALID_HID;
}

// A 16-bit little-endian IEEE-style float with the given field layout.
Handle half_type(std::size_t exponent_bits, std::size_t bias) {
  const std::size_t mantissa_bits = 15 - exponent_bits;
  Handle type = checked(H5Tcopy(H5T_IEEE_F32LE), H5Tclose, "16-bit float type");
  check(H5Tset_fields(type.get(), 15, mantissa_bits, exponent_bits, 0, mantissa_bits),
        "16-bit float fields");
  check(H5Tset_precision(type.get(), 16), "16-bit float precision");
  check(H5Tset_size(type.get(), 2), "16-bit float size");
  check(H5Tset_ebias(type.get(), bias), "16-bit float bias");
  return type;
}

std::uint64_t selected_elements(hid_t space, const std::string& what) {
  const hssize_t n = H5Sget_select_npoints(space);
  check(n < 0 ? -1 : 0, what + ": its dataspace");
  return static_cast<std::uint64_t>(n);
}

// Refuses unless `elements` of `memory_type` make exactly `bytes`.
void expect_bytes(std::uint64_t elements, hid_t memory_type, std::size_t bytes,
                  const std::string& what) {
  const std::size_t element = H5Tget_size(memory_type);
  if (element == 0) throw Error(what + ": a type of no size");
  if (elements > bytes / element || elements * element != bytes) {
    throw Error(what + ": holds " + std::to_string(elements) + " elements of " +
                std::to_string(element) + " bytes where " + std::to_string(bytes) +
                " bytes were expected");
  }
}

// The size of a fixed-length string type, refused above `limit`.
std::size_t string_size(hid_t type, std::size_t limit, const std::string& what) {
  if (H5Tget_class(type) != H5T_STRING || H5Tis_variable_str(type) != 0) {
    throw Error(what + " is not a fixed-length string");
  }
  const std::size_t size = H5Tget_size(type);
  if (size == 0 || size > limit) {
    throw Error(what + ": a string of " + std::to_string(size) + " bytes (at most " +
                std::to_string(limit) + ")");
  }
  return size;
}

std::string until_nul(std::string value) {
  const std::size_t end = value.find('\0');
  if (end != std::string::npos) value.resize(end);
  return value;
}

}  // namespace

void read_exact(hid_t dataset, hid_t memory_type, void* out, std::size_t bytes,
                const std::string& what) {
  const Handle space = checked(H5Dget_space(dataset), H5Sclose, what + ": its dataspace");
  expect_bytes(selected_elements(space.get(), what), memory_type, bytes, what);
  if (bytes == 0) return;
  check(H5Dread(dataset, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out), what);
}

void read_exact(hid_t dataset, hid_t memory_type, hid_t memory_space, hid_t file_space, void* out,
                std::size_t bytes, const std::string& what) {
  const std::uint64_t elements = selected_elements(file_space, what);
  if (selected_elements(memory_space, what) != elements) {
    throw Error(what + ": the memory and file selections differ in size");
  }
  expect_bytes(elements, memory_type, bytes, what);
  if (bytes == 0) return;
  check(H5Dread(dataset, memory_type, memory_space, file_space, H5P_DEFAULT, out), what);
}

void read_attribute_exact(hid_t attr, hid_t memory_type, void* out, std::size_t bytes,
                          const std::string& what) {
  const Handle space = checked(H5Aget_space(attr), H5Sclose, what + ": its dataspace");
  expect_bytes(selected_elements(space.get(), what), memory_type, bytes, what);
  if (bytes == 0) return;
  check(H5Aread(attr, memory_type, out), what);
}

void Handle::close(const std::string& what) {
  if (id_ < 0 || closer_ == nullptr) return;
  const hid_t id = std::exchange(id_, H5I_INVALID_HID);
  check(closer_(id), what);
}

Handle checked(hid_t id, Handle::Closer closer, const std::string& what) {
  quiet_errors();
  if (id < 0) throw Error(what + ": " + hdf5_message());
  return Handle(id, closer);
}

void check(herr_t rc, const std::string& what) {
  quiet_errors();
  if (rc < 0) throw Error(what + ": " + hdf5_message());
}

Handle create_file(const std::string& path, const std::string& name) {
  const Handle fapl = file_access();
  return checked(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose,
                 "cannot create " + name);
}

Handle open_file_readonly(const std::string& path) {
  const Handle fapl = file_access();
  return checked(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose,
                 "cannot open " + path + " as HDF5");
}

Handle create_group(hid_t parent, const std::string& name) {
  return checked(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
                 "cannot create group " + name);
}

Handle open_group(hid_t parent, const std::string& name) {
  return checked(H5Gopen2(parent, name.c_str(), H5P_DEFAULT), H5Gclose, "no group " + name);
}

Handle open_dataset(hid_t parent, const std::string& name) {
  return checked(H5Dopen2(parent, name.c_str(), H5P_DEFAULT), H5Dclose, "no dataset " + name);
}

bool link_exists(hid_t parent, const std::string& name) {
  const htri_t exists = H5Lexists(parent, name.c_str(), H5P_DEFAULT);
  check(exists, "looking up " + name);
  return exists > 0;
}

std::vector<std::string> link_names(hid_t group) {
  std::vector<std::string> names;
  H5G_info_t info{};
  check(H5Gget_info(group, &info), "reading a group");
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t size =
        H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    check(size < 0 ? -1 : 0, "reading a link name");
    std::string name(static_cast<std::size_t>(size) + 1, '\0');
    check(H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(),
                             H5P_DEFAULT) < 0
              ? -1
              : 0,
          "reading a link name");
    name.resize(static_cast<std::size_t>(size));
    names.push_back(std::move(name));
  }
  return names;
}

Handle file_type(DType dtype) {
  if (dtype == DType::kFloat16) return half_type(5, 15);
  if (dtype == DType::kBFloat16) return half_type(8, 127);
  return checked(H5Tcopy(predefined(dtype)), H5Tclose, "datatype");
}

bool type_matches(hid_t type, DType dtype) {
  const Handle expected = file_type(dtype);
  const htri_t equal = H5Tequal(type, expected.get());
  check(equal, "comparing datatypes");
  return equal > 0;
}

Handle dataspace(const Shape& shape) {
  if (shape.empty()) return checked(H5Screate(H5S_SCALAR), H5Sclose, "scalar dataspace");
  const std::vector<hsize_t> dims(shape.begin(), shape.end());
  return checked(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose,
                 "dataspace");
}

Shape dataset_shape(hid_t dataset) {
  const Handle space = checked(H5Dget_space(dataset), H5Sclose, "dataset space");
  const int rank = H5Sget_simple_extent_ndims(space.get());
  check(rank < 0 ? -1 : 0, "dataset rank");
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (rank > 0) check(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), "dims");
  return Shape(dims.begin(), dims.end());
}

void write_string_attribute(hid_t object, const std::string& name, const std::string& value) {
  const Handle type = string_type(value.size());
  const Handle space = dataspace({});
  const Handle attr =
      checked(H5Acreate2(object, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
              H5Aclose, "cannot create attribute " + name);
  check(H5Awrite(attr.get(), type.get(), value.data()), "cannot write attribute " + name);
}

std::string read_string_attribute(hid_t object, const std::string& name) {
  const Handle attr =
      checked(H5Aopen(object, name.c_str(), H5P_DEFAULT), H5Aclose, "no attribute " + name);
  const Handle type = checked(H5Aget_type(attr.get()), H5Tclose, "attribute type " + name);
  std::string value(string_size(type.get(), kMaxAttributeBytes, "attribute " + name), '\0');
  read_attribute_exact(attr.get(), type.get(), value.data(), value.size(), "attribute " + name);
  return until_nul(std::move(value));
}

void write_u64_array_attribute(hid_t object, const std::string& name, const Shape& values) {
  const std::vector<hsize_t> dims = {values.size()};
  const Handle space = values.empty() ? checked(H5Screate(H5S_NULL), H5Sclose, "empty dataspace")
                                      : checked(H5Screate_simple(1, dims.data(), nullptr), H5Sclose,
                                                "attribute dataspace");
  const Handle attr = checked(
      H5Acreate2(object, name.c_str(), H5T_STD_U64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
      H5Aclose, "cannot create attribute " + name);
  if (!values.empty()) {
    check(H5Awrite(attr.get(), H5T_NATIVE_UINT64, values.data()), "cannot write attribute " + name);
  }
}

void write_string_dataset(hid_t parent, const std::string& name, const std::string& value) {
  const Handle type = string_type(value.size());
  const Handle space = dataspace({});
  Handle dataset = checked(H5Dcreate2(parent, name.c_str(), type.get(), space.get(), H5P_DEFAULT,
                                      H5P_DEFAULT, H5P_DEFAULT),
                           H5Dclose, "cannot create dataset " + name);
  check(H5Dwrite(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, value.data()),
        "cannot write dataset " + name);
  dataset.close("cannot write dataset " + name);
}

std::string read_string_dataset(hid_t dataset, const std::string& what) {
  const Handle type = checked(H5Dget_type(dataset), H5Tclose, what);
  const std::size_t size = string_size(type.get(), kMaxStringBytes, what);
  const Handle space = checked(H5Dget_space(dataset), H5Sclose, what);
  if (H5Sget_simple_extent_type(space.get()) != H5S_SCALAR) throw Error(what + " is not scalar");
  std::string value(size, '\0');
  read_exact(dataset, type.get(), value.data(), value.size(), what);
  return until_nul(std::move(value));
}

}  // namespace primus::ckpt::h5

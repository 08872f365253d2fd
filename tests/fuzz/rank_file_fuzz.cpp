// Fuzz target for the rank-file reader (ckpt/rank_file.cpp; libFuzzer, or standalone_main.cpp
// to replay inputs without it). Each input is a program of edits made through the HDF5 API to a
// genuine rank file (written by RankWriter at start-up): replace the format attribute, the index
// or any tensor or state dataset by one of another type, dataspace, layout or filter, by a link,
// a group or nothing; splice text into the index. The edited file is valid HDF5 with hostile
// content, which is what Primus's own reading code must survive: it is opened, every part its
// index names is checked, verified and read, and its state is checked and read. Any input either
// reads or throws primus::Error; anything else (another exception, a sanitizer report, a crash)
// is a bug. Inputs that reproduce bugs found so far are kept in tests/fuzz/corpus/rank-file.
//
// Why not raw bytes: libhdf5 1.10's own parser is not memory-safe against crafted files (a raw
// byte fuzzer finds heap overflows inside libhdf5 within seconds, see docs/ckpt-format.md,
// "Trust"); this target fuzzes what Primus does with what HDF5 returns.
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "../../ckpt/rank_file.hpp"
#include "primus/ckpt/dtype.hpp"
#include "primus/ckpt/layout.hpp"
#include "primus/ckpt/writer.hpp"
#include "primus/common/error.hpp"

namespace {

namespace fs = std::filesystem;
using primus::ckpt::DType;

// Parts larger than this are not read whole (verify still streams them).
constexpr std::uint64_t kMaxReadBytes = std::uint64_t{16} << 20;
// Data written into a new dataset or attribute, at most.
constexpr std::uint64_t kMaxWriteBytes = std::uint64_t{64} << 10;
constexpr int kMaxEdits = 6;

// Reads the input front to back; past its end every value is 0.
class Input {
 public:
  Input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  std::uint64_t u16() { return byte() | (std::uint64_t{byte()} << 8); }
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : u16() % n; }
  std::string text(std::size_t most) {
    const std::size_t n = std::min<std::size_t>(below(most + 1), size_ - std::min(at_, size_));
    std::string out(reinterpret_cast<const char*>(data_ + at_), n);
    at_ += n;
    return out;
  }
  bool done() const { return at_ >= size_; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

// A private directory (on /dev/shm where there is one), removed at exit, holding the genuine
// rank file and the edited copy under test.
class Scratch {
 public:
  Scratch() {
    const fs::path base =
        fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    std::string pattern = (base / "primus-fuzz-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) std::abort();
    dir_ = pattern;
    write_genuine();
  }
  ~Scratch() {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  const fs::path& genuine() const { return genuine_; }
  fs::path work() const { return dir_ / "work" / primus::ckpt::rank_file_name(0); }
  const std::vector<std::string>& datasets() const { return datasets_; }

 private:
  void write_genuine() {
    primus::ckpt::WriteOptions options;
    options.chunk_bytes = 64;
    primus::ckpt::RankWriter writer(dir_ / "root", 1, 0, 1, options);
    std::vector<float> weights(8 * 6);
    for (std::size_t i = 0; i < weights.size(); ++i)
      weights[i] = static_cast<float>(i) * 0.5F;
    const std::vector<std::uint16_t> halves = {0x3F80, 0x4000, 0xBF80};
    const std::vector<std::int64_t> counts = {1, 2, 3, 4};
    writer.add_tensor({"w", DType::kFloat32, {8, 6}, weights.data(), {}, {}});
    writer.add_tensor({"b", DType::kBFloat16, {3}, halves.data(), {}, {}});
    writer.add_tensor({"n", DType::kInt64, {4}, counts.data(), {}, {}});
    writer.set_int("step", 1);
    writer.set_string("meta", "{\"k\": \"v\"}");
    writer.set_bytes("rng", {1, 2, 3, 4, 5, 6, 7, 8});
    genuine_ = writer.finish();
    datasets_ = {"/primus_index",
                 "/tensors/" + primus::ckpt::dataset_name("w"),
                 "/tensors/" + primus::ckpt::dataset_name("b"),
                 "/tensors/" + primus::ckpt::dataset_name("n"),
                 "/state/" + primus::ckpt::dataset_name("step"),
                 "/state/" + primus::ckpt::dataset_name("meta"),
                 "/state/" + primus::ckpt::dataset_name("rng")};
    fs::create_directories(work().parent_path());
  }

  fs::path dir_;
  fs::path genuine_;
  std::vector<std::string> datasets_;
};

// Closes an HDF5 identifier at the end of a scope (negative ones are ignored).
class Id {
 public:
  Id(hid_t id, herr_t (*closer)(hid_t)) : id_(id), closer_(closer) {}
  ~Id() {
    if (id_ >= 0) closer_(id_);
  }
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  hid_t get() const { return id_; }

 private:
  hid_t id_;
  herr_t (*closer_)(hid_t);
};

// A datatype of the input's choice (a copy, to be closed).
hid_t make_type(Input& in) {
  switch (in.below(14)) {
    case 0:
      return H5Tcopy(H5T_STD_U8LE);
    case 1:
      return H5Tcopy(H5T_STD_I8LE);
    case 2:
      return H5Tcopy(H5T_STD_I16LE);
    case 3:
      return H5Tcopy(H5T_STD_I32LE);
    case 4:
      return H5Tcopy(H5T_STD_I64LE);
    case 5:
      return H5Tcopy(H5T_STD_I64BE);
    case 6:
      return H5Tcopy(H5T_IEEE_F32LE);
    case 7:
      return H5Tcopy(H5T_IEEE_F64BE);
    case 8: {
      const hid_t t = H5Tcopy(H5T_C_S1);
      H5Tset_size(t, 1 + in.below(300));
      return t;
    }
    case 9: {
      const hid_t t = H5Tcopy(H5T_C_S1);
      H5Tset_size(t, H5T_VARIABLE);
      return t;
    }
    case 10: {
      const hid_t t = H5Tcreate(H5T_COMPOUND, 12);
      H5Tinsert(t, "a", 0, H5T_STD_I64LE);
      H5Tinsert(t, "b", 8, H5T_IEEE_F32LE);
      return t;
    }
    case 11: {
      const hsize_t dims[1] = {1 + in.below(16)};
      return H5Tarray_create2(H5T_STD_U8LE, 1, dims);
    }
    case 12: {
      const hid_t t = H5Tcopy(H5T_IEEE_F32LE);  // a 16-bit float of some field layout
      const std::size_t exponent = 1 + in.below(12);
      H5Tset_fields(t, 15, 15 - exponent, exponent, 0, 15 - exponent);
      H5Tset_precision(t, 16);
      H5Tset_size(t, 2);
      return t;
    }
    default:
      return H5Tcreate(H5T_OPAQUE, 1 + in.below(64));
  }
}

// A dataspace of the input's choice: scalar, null, or up to 4 dimensions, some of them huge.
hid_t make_space(Input& in) {
  const std::uint64_t kind = in.below(4);
  if (kind == 0) return H5Screate(H5S_SCALAR);
  if (kind == 1) return H5Screate(H5S_NULL);
  const int rank = 1 + static_cast<int>(in.below(4));
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  for (hsize_t& d : dims) {
    const std::uint64_t pick = in.byte();
    d = pick < 200 ? pick : hsize_t{1} << (pick - 200 + 8);  // up to 2^63
  }
  return H5Screate_simple(rank, dims.data(), nullptr);
}

std::uint64_t space_bytes(hid_t space, hid_t type) {
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  const std::size_t size = H5Tget_size(type);
  if (n < 0 || size == 0 || H5Tis_variable_str(type) > 0) return kMaxWriteBytes + 1;
  if (static_cast<std::uint64_t>(n) > kMaxWriteBytes / size) return kMaxWriteBytes + 1;
  return static_cast<std::uint64_t>(n) * size;
}

std::vector<unsigned char> payload(Input& in, std::uint64_t bytes) {
  std::vector<unsigned char> data(static_cast<std::size_t>(bytes));
  const std::uint8_t seed = in.byte();
  for (std::size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<unsigned char>(seed + i * 37);
  return data;
}

void replace_format_attribute(hid_t file, Input& in) {
  H5Adelete(file, "primus_format");
  if (in.below(4) == 0) return;  // no attribute at all
  const Id type(make_type(in), H5Tclose);
  const Id space(make_space(in), H5Sclose);
  const Id attr(
      H5Acreate2(file, "primus_format", type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
      H5Aclose);
  if (attr.get() < 0) return;
  const std::uint64_t bytes = space_bytes(space.get(), type.get());
  if (bytes <= kMaxWriteBytes && bytes > 0) {
    std::vector<unsigned char> data = payload(in, bytes);
    const char genuine[] = "primus-ckpt-rank";
    std::copy(genuine, genuine + std::min<std::size_t>(sizeof genuine - 1, data.size()),
              data.begin());
    H5Awrite(attr.get(), type.get(), data.data());
  }
}

// A new dataset at `name` of the input's type, dataspace, layout and filters.
void create_dataset(hid_t file, const std::string& name, Input& in) {
  const Id type(make_type(in), H5Tclose);
  const Id space(make_space(in), H5Sclose);
  const Id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank > 0 && in.below(3) != 0) {
    std::vector<hsize_t> chunk(static_cast<std::size_t>(rank));
    for (hsize_t& c : chunk)
      c = 1 + in.below(64);
    H5Pset_chunk(dcpl.get(), rank, chunk.data());
    switch (in.below(5)) {
      case 1:
        H5Pset_deflate(dcpl.get(), static_cast<unsigned>(in.below(10)));
        break;
      case 2:
        H5Pset_shuffle(dcpl.get());
        break;
      case 3:
        H5Pset_fletcher32(dcpl.get());
        break;
      case 4:
        H5Pset_nbit(dcpl.get());
        break;
      default:
        break;
    }
  }
  const Id dataset(
      H5Dcreate2(file, name.c_str(), type.get(), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
      H5Dclose);
  if (dataset.get() < 0 || in.below(4) == 0) return;  // sometimes left unwritten
  const std::uint64_t bytes = space_bytes(space.get(), type.get());
  if (bytes > 0 && bytes <= kMaxWriteBytes) {
    const std::vector<unsigned char> data = payload(in, bytes);
    H5Dwrite(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data());
  }
}

// The genuine index with input text spliced in at an input position.
void splice_index(hid_t file, Input& in) {
  std::string text;
  {
    const Id dataset(H5Dopen2(file, "/primus_index", H5P_DEFAULT), H5Dclose);
    if (dataset.get() < 0) return;
    const Id type(H5Dget_type(dataset.get()), H5Tclose);
    if (H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) > 0) return;
    const Id space(H5Dget_space(dataset.get()), H5Sclose);
    if (H5Sget_simple_extent_type(space.get()) != H5S_SCALAR) return;  // one string only
    text.resize(H5Tget_size(type.get()));
    if (H5Dread(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data()) < 0) return;
  }
  const std::size_t at = static_cast<std::size_t>(in.below(text.size() + 1));
  const std::size_t cut = static_cast<std::size_t>(in.below(text.size() - at + 1));
  text.replace(at, cut, in.text(64));
  H5Ldelete(file, "/primus_index", H5P_DEFAULT);
  const Id type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), std::max<std::size_t>(1, text.size()));
  const Id space(H5Screate(H5S_SCALAR), H5Sclose);
  const Id dataset(H5Dcreate2(file, "/primus_index", type.get(), space.get(), H5P_DEFAULT,
                              H5P_DEFAULT, H5P_DEFAULT),
                   H5Dclose);
  if (dataset.get() >= 0 && !text.empty()) {
    H5Dwrite(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data());
  }
}

void replace_dataset(hid_t file, const Scratch& scratch, Input& in) {
  const std::vector<std::string>& names = scratch.datasets();
  const std::string& name = names[static_cast<std::size_t>(in.below(names.size()))];
  const std::uint64_t action = in.below(8);
  if (action == 0 && name == "/primus_index") {
    splice_index(file, in);
    return;
  }
  H5Ldelete(file, name.c_str(), H5P_DEFAULT);
  switch (action) {
    case 1:  // nothing there
      break;
    case 2: {  // a soft link to another of the file's datasets
      const std::string& other = names[static_cast<std::size_t>(in.below(names.size()))];
      H5Lcreate_soft(other.c_str(), file, name.c_str(), H5P_DEFAULT, H5P_DEFAULT);
      break;
    }
    case 3:  // an external link to the genuine file
      H5Lcreate_external(scratch.genuine().c_str(), name.c_str(), file, name.c_str(), H5P_DEFAULT,
                         H5P_DEFAULT);
      break;
    case 4: {  // a group
      const Id group(H5Gcreate2(file, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                     H5Gclose);
      break;
    }
    default:
      create_dataset(file, name, in);
      break;
  }
}

// The genuine file, edited as the input says.
bool make_file(const Scratch& scratch, Input& in) {
  std::error_code error;
  fs::copy_file(scratch.genuine(), scratch.work(), fs::copy_options::overwrite_existing, error);
  if (error) std::abort();
  const hid_t file = H5Fopen(scratch.work().c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (file < 0) std::abort();
  for (int edit = 0; edit < kMaxEdits && !in.done(); ++edit) {
    if (in.below(5) == 0) {
      replace_format_attribute(file, in);
    } else {
      replace_dataset(file, scratch, in);
    }
  }
  return H5Fclose(file) >= 0;
}

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "rank-file fuzz: unexpected exception: %s\n", what);
  std::abort();
}

template <typename F>
void allow_errors(F&& f) {
  try {
    f();
  } catch (const primus::Error&) {
  } catch (const std::exception& e) {
    fail(e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Scratch scratch;
  static const bool quiet = [] { return H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr) >= 0; }();
  (void)quiet;
  Input in(data, size);
  if (!make_file(scratch, in)) return 0;
  allow_errors([&] {
    const primus::ckpt::RankFile file(scratch.work());
    for (const primus::ckpt::TensorPart& part : file.index().parts) {
      allow_errors([&] { file.check(part.dataset, part.dtype, part.shape); });
      allow_errors([&] { file.verify(part.dataset, part.dtype, part.shape, part.crc32c); });
      allow_errors([&] {
        const std::uint64_t bytes =
            primus::ckpt::element_count(part.shape) * primus::ckpt::dtype_size(part.dtype);
        if (bytes > kMaxReadBytes) return;
        std::vector<unsigned char> out(static_cast<std::size_t>(bytes));
        file.read(part.dataset, part.dtype, part.shape, part.crc32c, out.data(), out.size());
      });
    }
    allow_errors([&] { file.check_state(); });
    allow_errors([&] { file.state(); });
  });
  return 0;
}

// Hostile dataspaces make libhdf5 ask malloc for absurd sizes, which glibc refuses with NULL and
// HDF5 reports as an error: under ASan too (libFuzzer runs get -malloc_limit_mb high enough not
// to stop at them). libhdf5 1.10 leaks on some of its own error paths: not ours.
extern "C" const char* __asan_default_options() {
  return "allocator_may_return_null=1";
}
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libhdf5\n";
}

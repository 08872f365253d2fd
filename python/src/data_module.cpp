// primus._data: libprimus-data for primus.data (the Dataset, the plan of an epoch, the reader).
// A batch is read in C++ with the GIL released; Python builds only the records' objects.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "primus/common/error.hpp"
#include "primus/data.hpp"
#include "released_gil.hpp"

namespace py = pybind11;
using primus::data::Dataset;
using primus::data::EpochPlan;
using primus::data::PlanSettings;
using primus::data::RecordReader;
using primus::python::ReleasedGil;

namespace {

// Batches of records over 512 bytes are allocated by malloc record by record and freed a batch
// at a time. With glibc's initial thresholds every freed batch is given back to the kernel (the
// heap is trimmed past 128 KiB) and the next one faults it in again: measured here, a third of
// the reader's time. glibc raises both thresholds by itself once a process frees a large
// mmapped block (importing torch does); this sets them to where that adjustment ends (32 MiB,
// trim at twice that), unless the user set them (MALLOC_*_THRESHOLD_).
void settle_malloc_thresholds() {
  static const bool once = [] {
    if (std::getenv("MALLOC_TRIM_THRESHOLD_") == nullptr &&
        std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr &&
        std::getenv("GLIBC_TUNABLES") == nullptr) {
      ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
      ::mallopt(M_TRIM_THRESHOLD, 64 << 20);
    }
    return true;
  }();
  (void)once;
}

PlanSettings plan_settings(const std::string& fingerprint, std::uint64_t records,
                           std::uint64_t global_batch_size, const std::string& shuffle,
                           std::uint64_t shuffle_block, std::uint64_t seed, bool drop_last) {
  const auto mode = primus::data::parse_shuffle(shuffle);
  if (!mode)
    throw primus::Error("shuffle: expected one of none, records, blocks, got '" + shuffle + "'");
  PlanSettings settings;
  settings.fingerprint = fingerprint;
  settings.records = records;
  settings.global_batch_size = global_batch_size;
  settings.shuffle = *mode;
  settings.shuffle_block = shuffle_block;
  settings.seed = seed;
  settings.drop_last = drop_last;
  return settings;
}

PlanSettings settings_from(const Dataset& dataset, std::uint64_t global_batch_size,
                           const std::string& shuffle, std::uint64_t shuffle_block,
                           std::uint64_t seed, bool drop_last) {
  return plan_settings(dataset.fingerprint(), dataset.records(), global_batch_size, shuffle,
                       shuffle_block, seed, drop_last);
}

PlanSettings settings_from_dict(const py::dict& d) {
  PlanSettings settings;
  settings.fingerprint = py::cast<std::string>(d["fingerprint"]);
  settings.records = py::cast<std::uint64_t>(d["records"]);
  settings.global_batch_size = py::cast<std::uint64_t>(d["global_batch_size"]);
  const auto mode = primus::data::parse_shuffle(py::cast<std::string>(d["shuffle"]));
  if (!mode) throw primus::Error("the cursor's shuffle is not none, records or blocks");
  settings.shuffle = *mode;
  settings.shuffle_block = py::cast<std::uint64_t>(d["shuffle_block"]);
  settings.seed = py::cast<std::uint64_t>(d["seed"]);
  settings.drop_last = py::cast<bool>(d["drop_last"]);
  return settings;
}

// A bytes object caches its hash; one written again must forget it.
void forget_hash(PyObject* bytes) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  reinterpret_cast<PyBytesObject*>(bytes)->ob_shash = -1;
#pragma GCC diagnostic pop
}

// The lists of bytes handed out by the last two reads, so that the next read can write its
// records into them again once nobody else holds them: a loop `for batch in epoch` drops batch
// k when batch k+1 is assigned, so batch k-1 is free when batch k+1 is read. A list is reused
// only when this holds its only reference, and each of its bytes objects only when the list
// holds that one's only reference and it has the new record's length: nothing that anyone can
// still see ever changes (CPython itself writes into objects it alone holds, as in
// _PyBytes_Resize). It saves a malloc and a free per record (a third of the reader's time on 1 KiB
// records); batches over kMaxRecycled bytes are not kept.
class Recycler {
 public:
  static constexpr std::uint64_t kMaxRecycled = std::uint64_t{16} << 20;

  // The list from two reads ago when only this holds it, else null (a new reference).
  PyObject* take() {
    PyObject* list = older_.release().ptr();
    if (list != nullptr && Py_REFCNT(list) != 1) {
      Py_DECREF(list);
      return nullptr;
    }
    return list;
  }
  // Keeps `batch` (of `bytes` in all) for a later read.
  void keep(const py::object& batch, std::uint64_t bytes) {
    older_ = std::move(previous_);
    previous_ = bytes <= kMaxRecycled ? batch : py::object();
  }

 private:
  py::object older_;
  py::object previous_;
};

// Records ids[0..count) as Python objects: a list of bytes, or for fixed-size records one
// (n, size) uint8 array. The reader writes each record straight into its object, with the GIL
// released; its threads start on the first records while this thread still makes the bytes
// objects of the later ones (which needs the GIL).
py::object read_records(RecordReader& reader, const std::uint64_t* ids, std::size_t count,
                        std::vector<std::uint8_t*>& dest, Recycler& recycler) {
  const std::vector<std::uint64_t>* lengths = nullptr;
  {
    ReleasedGil release;
    lengths = &reader.locate(ids, count);
  }
  dest.assign(count, nullptr);
  const auto& format = reader.dataset().format();
  if (const std::uint64_t size = primus::data::fixed_record_size(format); size != 0) {
    const auto width = static_cast<py::ssize_t>(size);
    py::array_t<std::uint8_t> rows({static_cast<py::ssize_t>(count), width});
    std::uint8_t* const out = rows.mutable_data();
    for (std::size_t i = 0; i < count; ++i)
      dest[i] = out + i * size;
    ReleasedGil release;
    reader.read_into(dest.data());
    return std::move(rows);
  }
  std::atomic<std::size_t> ready{0};
  PyObject* reused = recycler.take();
  if (reused != nullptr && PyList_GET_SIZE(reused) != static_cast<Py_ssize_t>(count)) {
    Py_DECREF(reused);
    reused = nullptr;
  }
  py::list records = reused != nullptr ? py::reinterpret_steal<py::list>(reused) : py::list(count);
  std::uint64_t total = 0;
  reader.start_read(dest.data(), &ready);
  try {
    for (std::size_t i = 0; i < count; ++i) {
      const auto length = static_cast<Py_ssize_t>((*lengths)[i]);
      total += (*lengths)[i];
      PyObject* old =
          reused != nullptr ? PyList_GET_ITEM(reused, static_cast<Py_ssize_t>(i)) : nullptr;
      if (old != nullptr && Py_REFCNT(old) == 1 && PyBytes_GET_SIZE(old) == length) {
        forget_hash(old);
        dest[i] = reinterpret_cast<std::uint8_t*>(PyBytes_AS_STRING(old));
      } else {
        PyObject* bytes = PyBytes_FromStringAndSize(nullptr, length);
        if (bytes == nullptr) throw py::error_already_set();
        dest[i] = reinterpret_cast<std::uint8_t*>(PyBytes_AS_STRING(bytes));
        PyList_SET_ITEM(records.ptr(), static_cast<Py_ssize_t>(i), bytes);
        Py_XDECREF(old);
      }
      if ((i & 63) == 63) ready.store(i + 1, std::memory_order_release);
    }
  } catch (...) {
    ReleasedGil release;
    reader.abandon_read();
    throw;
  }
  ready.store(count, std::memory_order_release);
  {
    ReleasedGil release;
    reader.finish_read();
  }
  recycler.keep(records, total);
  return std::move(records);
}

// A reader per process: after a fork (a DataLoader worker) the child makes its own.
class ProcessReader {
 public:
  explicit ProcessReader(std::shared_ptr<const Dataset> dataset) : dataset_(std::move(dataset)) {}
  RecordReader& get() {
    if (!reader_ || pid_ != ::getpid()) {
      // The parent's reader is left as it is, never destroyed here: its threads are not in
      // this process, and joining them would wait forever.
      if (reader_) (void)reader_.release();
      reader_ = std::make_unique<RecordReader>(dataset_);
      pid_ = ::getpid();
    }
    return *reader_;
  }

 private:
  std::shared_ptr<const Dataset> dataset_;
  std::unique_ptr<RecordReader> reader_;
  pid_t pid_ = 0;
};

// Records by number, for the dynamic mode (and the tests).
class Reader {
 public:
  explicit Reader(std::shared_ptr<const Dataset> dataset) : reader_(std::move(dataset)) {}
  py::object read(const std::vector<std::uint64_t>& ids) {
    return read_records(reader_.get(), ids.data(), ids.size(), dest_, recycler_);
  }

 private:
  ProcessReader reader_;
  std::vector<std::uint8_t*> dest_;
  Recycler recycler_;
};

// One epoch's plan over a dataset, and a reader of its own (each DataLoader worker copies the
// Python object, then makes its own reader on first use after the fork).
class Plan {
 public:
  Plan(std::shared_ptr<const Dataset> dataset, const PlanSettings& settings, std::uint64_t epoch,
       std::uint32_t world_size)
      : reader_(std::move(dataset)), plan_(settings, epoch, world_size) {}

  const EpochPlan& plan() const { return plan_; }

  py::array_t<std::uint64_t> share(std::uint64_t step, std::uint32_t rank) const {
    std::vector<std::uint64_t> ids;
    plan_.share(step, rank, ids);
    return py::array_t<std::uint64_t>(static_cast<py::ssize_t>(ids.size()), ids.data());
  }

  // Rank `rank`'s share of global batch `step`: a list of bytes, or for fixed-size records one
  // (n, size) uint8 array. `prefetch` names the step to announce to the kernel (-1: none).
  py::object read_share(std::uint64_t step, std::uint32_t rank, std::int64_t prefetch) {
    RecordReader& reader = reader_.get();
    {
      ReleasedGil release;
      plan_.share(step, rank, ids_);
    }
    py::object batch = read_records(reader, ids_.data(), ids_.size(), dest_, recycler_);
    if (prefetch >= 0 && static_cast<std::uint64_t>(prefetch) < plan_.steps()) {
      ReleasedGil release;
      plan_.share(static_cast<std::uint64_t>(prefetch), rank, next_ids_);
      // A share that continues where this one ended is the kernel's own readahead.
      const bool sequential =
          !ids_.empty() && !next_ids_.empty() && next_ids_.front() == ids_.back() + 1;
      if (!sequential) reader.prefetch(next_ids_.data(), next_ids_.size());
    }
    return batch;
  }

 private:
  ProcessReader reader_;
  EpochPlan plan_;
  std::vector<std::uint64_t> ids_;
  std::vector<std::uint64_t> next_ids_;
  std::vector<std::uint8_t*> dest_;
  Recycler recycler_;
};

}  // namespace

PYBIND11_MODULE(_data, m) {
  primus::python::note_main_thread();
  m.doc() = "libprimus-data: datasets, their indexes, the order and split of every epoch";
  static py::exception<primus::Error> data_error(m, "DataError", PyExc_RuntimeError);
  // Local: only what this module raises (libprimus-ckpt's errors are primus::Error too).
  // NOLINTNEXTLINE(performance-unnecessary-value-param): pybind11's translator signature
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const primus::Error& e) {
      data_error(e.what());
    }
  });

  py::class_<Dataset, std::shared_ptr<Dataset>>(m, "Dataset")
      .def(py::init([](const std::string& spec, const std::string& format,
                       const std::string& cache_dir, const std::string& what) {
             const auto parsed = primus::parse_format(format);
             if (!parsed) {
               throw primus::Error("format: expected " + std::string(primus::kFormatExpected) +
                                   ", got '" + format + "'");
             }
             settle_malloc_thresholds();
             primus::data::OpenOptions options;
             options.format = *parsed;
             options.cache_dir = cache_dir;
             options.what = what;
             ReleasedGil release;
             return std::const_pointer_cast<Dataset>(Dataset::open(spec, options));
           }),
           py::arg("spec"), py::arg("format"), py::arg("cache_dir"), py::arg("what"))
      .def_property_readonly("records", &Dataset::records)
      .def_property_readonly("bytes", &Dataset::bytes)
      .def_property_readonly("fingerprint", &Dataset::fingerprint)
      .def_property_readonly("format",
                             [](const Dataset& d) { return primus::to_string(d.format()); })
      .def_property_readonly("record_size", [](const Dataset& d) { return d.format().record_size; })
      .def_property_readonly("files", [](const Dataset& d) {
        py::list files;
        for (const auto& file : d.files())
          files.append(py::make_tuple(file.path, file.records, file.size, file.index_path));
        return files;
      });

  py::class_<Plan>(m, "Plan")
      .def(py::init([](const std::shared_ptr<Dataset>& dataset, std::uint64_t global_batch_size,
                       const std::string& shuffle, std::uint64_t shuffle_block, std::uint64_t seed,
                       bool drop_last, std::uint64_t epoch, std::uint32_t world_size) {
             return std::make_unique<Plan>(dataset,
                                           settings_from(*dataset, global_batch_size, shuffle,
                                                         shuffle_block, seed, drop_last),
                                           epoch, world_size);
           }),
           py::arg("dataset"), py::arg("global_batch_size"), py::arg("shuffle"),
           py::arg("shuffle_block"), py::arg("seed"), py::arg("drop_last"), py::arg("epoch"),
           py::arg("world_size"))
      .def_property_readonly("steps", [](const Plan& p) { return p.plan().steps(); })
      .def_property_readonly("used_records", [](const Plan& p) { return p.plan().used_records(); })
      .def("step_at",
           [](const Plan& p, std::uint64_t consumed) { return p.plan().step_at(consumed); })
      .def("consumed_after",
           [](const Plan& p, std::uint64_t step) { return p.plan().consumed_after(step); })
      .def("share", &Plan::share, py::arg("step"), py::arg("rank"))
      .def("read_share", &Plan::read_share, py::arg("step"), py::arg("rank"),
           py::arg("prefetch") = -1);

  // The same global order and split over `records` items that are not files (a torch map-style
  // dataset's indexes): no reading, only the ids of each share.
  py::class_<EpochPlan>(m, "IndexPlan")
      .def(py::init([](std::uint64_t records, const std::string& fingerprint,
                       std::uint64_t global_batch_size, const std::string& shuffle,
                       std::uint64_t shuffle_block, std::uint64_t seed, bool drop_last,
                       std::uint64_t epoch, std::uint32_t world_size) {
             return std::make_unique<EpochPlan>(
                 plan_settings(fingerprint, records, global_batch_size, shuffle, shuffle_block,
                               seed, drop_last),
                 epoch, world_size);
           }),
           py::arg("records"), py::arg("fingerprint"), py::arg("global_batch_size"),
           py::arg("shuffle"), py::arg("shuffle_block"), py::arg("seed"), py::arg("drop_last"),
           py::arg("epoch"), py::arg("world_size"))
      .def_property_readonly("steps", &EpochPlan::steps)
      .def_property_readonly("used_records", &EpochPlan::used_records)
      .def("step_at", &EpochPlan::step_at, py::arg("consumed"))
      .def("consumed_after", &EpochPlan::consumed_after, py::arg("step"))
      .def(
          "share",
          [](const EpochPlan& plan, std::uint64_t step, std::uint32_t rank) {
            std::vector<std::uint64_t> ids;
            plan.share(step, rank, ids);
            return py::array_t<std::uint64_t>(static_cast<py::ssize_t>(ids.size()), ids.data());
          },
          py::arg("step"), py::arg("rank"));

  py::class_<Reader>(m, "Reader")
      .def(py::init<const std::shared_ptr<Dataset>&>(), py::arg("dataset"))
      .def("read", &Reader::read, py::arg("ids"));

  // The dynamic mode's splits: [(begin, end)] record ranges, within files, in dataset order.
  m.def("cut_splits", [](const std::shared_ptr<Dataset>& dataset, std::uint64_t split_records) {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
    for (const auto& split : primus::data::cut_splits(*dataset, split_records))
      out.emplace_back(split.begin, split.end);
    return out;
  });
  m.def("default_split_records", &primus::data::default_split_records);

  // None when a cursor saved with `saved` continues under `now` (dicts of primus.data's
  // state_dict), else the difference.
  m.def("cursor_mismatch",
        [](const py::dict& saved, const py::dict& now) -> std::optional<std::string> {
          return primus::data::cursor_mismatch(settings_from_dict(saved), settings_from_dict(now));
        });

  m.def("default_index_cache_dir", &primus::data::default_index_cache_dir);

  // Unmaps the data files that no reader holds (the benchmark's first epoch in a process).
  m.def("_drop_idle_mappings", &primus::data::drop_idle_mappings);

  // One TFRecord frame around `data` (for tests and for writing datasets).
  m.def("tfrecord_frame", [](const py::bytes& data) {
    const std::string payload = data;
    std::string frame(payload.size() + primus::data::kTfrecordOverhead, '\0');
    const std::uint64_t length = payload.size();
    for (std::size_t i = 0; i < 8; ++i)
      frame[i] = static_cast<char>(length >> (8 * i));
    const std::uint32_t length_crc = primus::data::masked_crc32c(frame.data(), 8);
    const std::uint32_t data_crc = primus::data::masked_crc32c(payload.data(), payload.size());
    for (std::size_t i = 0; i < 4; ++i) {
      frame[8 + i] = static_cast<char>(length_crc >> (8 * i));
      frame[payload.size() + 12 + i] = static_cast<char>(data_crc >> (8 * i));
    }
    std::copy(payload.begin(), payload.end(), frame.begin() + 12);
    return py::bytes(frame);
  });
}

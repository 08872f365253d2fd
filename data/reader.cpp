#include "primus/data/reader.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <thread>

#include "formats/format_ops.hpp"
#include "mapped_file.hpp"
#include "mapping_cache.hpp"
#include "primus/common/error.hpp"
#include "primus/data/format.hpp"
#include "worker_pool.hpp"

namespace primus::data {
namespace {

// At most this many files open at once (a dataset of many small files stays under the limit
// of descriptors); beyond it the oldest is closed.
constexpr std::size_t kMaxOpenFiles = 128;
// A run of neighbouring records is read with one pread up to this size.
constexpr std::uint64_t kMaxRun = std::uint64_t{8} << 20;
// With threads to share a batch, the share of one task (one thread at a time).
constexpr std::uint64_t kPiece = std::uint64_t{128} << 10;
// A run at least this long is read with pread() even where the page cache holds it: mapping a
// page of the cache into the process costs more than copying it twice. Measured on this VM
// (2026-12-07, 256 MiB warm): through a fresh mapping 140 ms, pread() into a buffer and a copy
// out of it 31 ms, the same mapping read again 15 ms; a page mapped costs about 1.9 us, so a
// process's first epoch through the mapping ran at a third of the speed of later ones. Shorter
// runs (records in a random order) keep the mapping: a pread() per record costs more there.
constexpr std::uint64_t kMappedRunMax = std::uint64_t{64} << 10;

}  // namespace

RecordReader::RecordReader(std::shared_ptr<const Dataset> dataset, std::size_t threads)
    : dataset_(std::move(dataset)),
      threads_(threads != 0 ? threads : reader_threads()),
      task_([this](std::size_t t) { read_task(t); }),
      fds_(dataset_->files().size(), -1),
      maps_(dataset_->files().size()) {}

RecordReader::~RecordReader() {
  abandon_read();
  pool_.reset();
  for (const int fd : fds_) {
    if (fd >= 0) ::close(fd);
  }
}

int RecordReader::descriptor(std::uint32_t file) {
  if (fds_[file] >= 0) return fds_[file];
  if (open_order_.size() >= kMaxOpenFiles) {
    const std::uint32_t oldest = open_order_.front();
    open_order_.erase(open_order_.begin());
    ::close(fds_[oldest]);
    fds_[oldest] = -1;
    maps_[oldest].reset();
  }
  const std::string& path = dataset_->files()[file].path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
  fds_[file] = fd;
  // The bytes it has now; a run past them is read with pread(), which reports the change.
  maps_[file] = shared_mapping(fd);
  open_order_.push_back(file);
  return fd;
}

std::uint8_t* RecordBatch::reserve(std::size_t bytes) {
  if (bytes > capacity_) {
    const std::size_t grown = std::max(bytes, capacity_ + capacity_ / 2);
    storage_.reset(new std::uint8_t[grown]);  // default-initialised: not zeroed
    capacity_ = grown;
  }
  return storage_.get();
}

void RecordReader::plan_runs(const std::uint64_t* ids, std::size_t count, std::uint64_t max_run) {
  const Dataset& dataset = *dataset_;
  where_.resize(count);
  runs_.clear();
  std::uint32_t file_hint = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t id = ids[i];
    if (id >= dataset.records()) {
      throw Error("record " + std::to_string(id) + " is past the dataset's " +
                  std::to_string(dataset.records()));
    }
    const DataFile& hinted = dataset.files()[file_hint];
    if (id < hinted.first_record || id - hinted.first_record >= hinted.records) {
      file_hint = dataset.file_of(id);
    }
    where_[i] = dataset.locate(file_hint, id);
    const RecordLocation& at = where_[i];
    Run* run = runs_.empty() ? nullptr : &runs_.back();
    if (run != nullptr && run->file == at.file && run->end == at.frame_offset &&
        run->end - run->begin + at.frame_length <= max_run) {
      run->end += at.frame_length;
      run->last = i + 1;
    } else {
      runs_.push_back({at.file, at.frame_offset, at.frame_offset + at.frame_length, i, i + 1});
    }
  }
}

const std::vector<std::uint64_t>& RecordReader::locate(const std::uint64_t* ids,
                                                       std::size_t count) {
  // With threads to share a batch, runs are cut into pieces a thread takes at a time.
  plan_runs(ids, count, threads_ > 1 ? kPiece : kMaxRun);
  lengths_.resize(count);
  for (std::size_t i = 0; i < count; ++i)
    lengths_[i] = where_[i].length;
  return lengths_;
}

void RecordReader::read(const std::uint64_t* ids, std::size_t count, RecordBatch& out) {
  locate(ids, count);
  std::uint64_t total = 0;
  for (const std::uint64_t length : lengths_)
    total += length;
  std::uint8_t* const storage = out.reserve(total);
  out.offsets_.resize(count);
  out.lengths_.assign(lengths_.begin(), lengths_.end());
  destinations_.resize(count);
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < count; ++i) {
    out.offsets_[i] = at;
    destinations_[i] = storage + at;
    at += lengths_[i];
  }
  read_into(destinations_.data());
}

void RecordReader::read_into(std::uint8_t* const* dest) {
  start_read(dest, nullptr);
  finish_read();
}

void RecordReader::start_read(std::uint8_t* const* dest, const std::atomic<std::size_t>* ready) {
  dest_ = dest;
  ready_ = ready;
  abandoned_.store(false);
  std::uint64_t bytes = 0;
  for (const Run& run : runs_)
    bytes += run.end - run.begin;

  // Consecutive runs grouped into tasks of at least kPiece bytes.
  tasks_.clear();
  std::uint64_t in_task = 0;
  for (std::size_t r = 0; r < runs_.size(); ++r) {
    if (tasks_.empty() || in_task >= kPiece) {
      tasks_.emplace_back(r, r);
      in_task = 0;
    }
    tasks_.back().second = r + 1;
    in_task += runs_[r].end - runs_[r].begin;
  }
  shared_ = tasks_.size() > 1 && bytes >= 2 * kPiece && threads_ > 1 && open_for_runs();
  if (!shared_) return;  // finish_read() reads it all on the caller's thread
  if (!pool_) pool_ = std::make_unique<WorkerPool>(threads_ - 1);
  errors_.assign(tasks_.size(), nullptr);
  pool_->start(tasks_.size(), task_);
}

void RecordReader::read_task(std::size_t t) {
  try {
    const std::size_t needed = runs_[tasks_[t].second - 1].last;
    if (ready_ != nullptr) {
      // The caller is still making the records' memory: wait for this task's.
      while (ready_->load(std::memory_order_acquire) < needed) {
        if (abandoned_.load(std::memory_order_acquire)) return;
        std::this_thread::yield();
      }
    }
    for (std::size_t r = tasks_[t].first; r < tasks_[t].second; ++r)
      read_run(runs_[r], dest_);
  } catch (...) {
    errors_[t] = std::current_exception();
  }
}

void RecordReader::finish_read() {
  if (!shared_) {
    for (Run& run : runs_) {
      run.fd = descriptor(run.file);
      read_run(run, dest_);
    }
    return;
  }
  shared_ = false;
  pool_->finish();
  // The first failure in the batch's order, whichever thread met it first.
  for (const std::exception_ptr& error : errors_) {
    if (error) std::rethrow_exception(error);
  }
}

void RecordReader::abandon_read() {
  if (!shared_) return;
  shared_ = false;
  abandoned_.store(true, std::memory_order_release);
  pool_->finish();
}

bool RecordReader::open_for_runs() {
  // The threads use descriptors opened here; a batch over more files than stay open at once
  // is read by this thread alone, opening them as it goes.
  std::size_t files = 0;
  for (std::size_t r = 0; r < runs_.size(); ++r) {
    if (r == 0 || runs_[r].file != runs_[r - 1].file) ++files;
  }
  if (files > kMaxOpenFiles / 2) return false;
  for (Run& run : runs_)
    run.fd = descriptor(run.file);
  // Opening may have closed an earlier run's file (the oldest): check them all again.
  for (Run& run : runs_) {
    if (fds_[run.file] != run.fd) return false;
  }
  return true;
}

void RecordReader::read_run(const Run& run, std::uint8_t* const* dest) {
  const MappedFile* map = maps_[run.file].get();
  if (map != nullptr && run.end - run.begin < kMappedRunMax && map->resident(run.begin, run.end)) {
    std::exception_ptr error;  // copy_run's Error (a damaged record), thrown here
    auto copy = [&] {
      try {
        copy_run(run, map->data() + run.begin, dest);
      } catch (...) {
        error = std::current_exception();
      }
    };
    const bool whole = guard_bus(copy);
    if (!whole) {
      throw Error(dataset_->files()[run.file].path + ": the file shrank while it was read " +
                  "(byte offsets " + std::to_string(run.begin) + " to " + std::to_string(run.end) +
                  " are gone): it changed after it was indexed");
    }
    if (error) std::rethrow_exception(error);
    return;
  }
  // Not all in the page cache: one contiguous pread() into this thread's staging buffer (the
  // kernel reads ahead from the disk for it), the CRCs checked there, and each record copied
  // into its place.
  thread_local std::unique_ptr<std::uint8_t[]> staging;
  thread_local std::size_t capacity = 0;
  const std::size_t size = run.end - run.begin;
  if (size > capacity) {
    staging.reset(new std::uint8_t[size]);  // default-initialised: not zeroed
    capacity = size;
  }
  read_exactly(run, staging.get(), size);
  copy_run(run, staging.get(), dest);
}

void RecordReader::copy_run(const Run& run, const std::uint8_t* base,
                            std::uint8_t* const* dest) const {
  const auto check = format_ops(dataset_->format().kind).check;
  for (std::size_t i = run.first; i < run.last; ++i) {
    const RecordLocation& at = where_[i];
    const std::uint8_t* frame = base + (at.frame_offset - run.begin);
    if (check != nullptr) {
      if (const auto fault = check(frame, at.frame_length)) {
        throw Error(dataset_->files()[run.file].path + ": byte offset " +
                    std::to_string(at.frame_offset) + ": " + *fault);
      }
    }
    std::memcpy(dest[i], frame + (at.offset - at.frame_offset), at.length);
  }
}

void RecordReader::read_exactly(const Run& run, std::uint8_t* to, std::size_t size) const {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t got =
        ::pread(run.fd, to + done, size - done, static_cast<off_t>(run.begin + done));
    if (got < 0 && errno == EINTR) continue;
    const std::string& path = dataset_->files()[run.file].path;
    if (got < 0) {
      throw Error(path + ": read error at byte offset " + std::to_string(run.begin + done) + ": " +
                  std::strerror(errno));
    }
    if (got == 0) {
      throw Error(path + ": byte offset " + std::to_string(run.begin + done) +
                  ": the file is shorter than when it was indexed (it changed)");
    }
    done += static_cast<std::size_t>(got);
  }
}

void RecordReader::prefetch(const std::uint64_t* ids, std::size_t count) {
  try {
    plan_runs(ids, count, ~std::uint64_t{0});
    for (const Run& run : runs_) {
      ::posix_fadvise(descriptor(run.file), static_cast<off_t>(run.begin),
                      static_cast<off_t>(run.end - run.begin), POSIX_FADV_WILLNEED);
    }
  } catch (const Error&) {
    // A record that cannot be located or a file that cannot be opened now is reported when it
    // is read.
  }
}

}  // namespace primus::data

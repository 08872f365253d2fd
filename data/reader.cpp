#include "primus/data/reader.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "primus/common/error.hpp"

namespace primus::data {
namespace {

// At most this many files open at once (a dataset of many small files stays under the limit
// of descriptors); beyond it the oldest is closed.
constexpr std::size_t kMaxOpenFiles = 128;
// A run of neighbouring records is read with one pread up to this size.
constexpr std::uint64_t kMaxRun = std::uint64_t{8} << 20;

}  // namespace

RecordReader::RecordReader(std::shared_ptr<const Dataset> dataset)
    : dataset_(std::move(dataset)), fds_(dataset_->files().size(), -1) {}

RecordReader::~RecordReader() {
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
  }
  const std::string& path = dataset_->files()[file].path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
  fds_[file] = fd;
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

void RecordReader::read(const std::uint64_t* ids, std::size_t count, RecordBatch& out) {
  const Dataset& dataset = *dataset_;
  plan_runs(ids, count, kMaxRun);
  std::uint64_t total = 0;
  for (const Run& run : runs_)
    total += run.end - run.begin;
  std::uint8_t* const storage = out.reserve(total);
  out.offsets_.resize(count);
  out.lengths_.resize(count);
  std::uint64_t at_storage = 0;
  const bool tfrecord = dataset.format().kind == FormatKind::kTfrecord;
  for (const Run& run : runs_) {
    const int fd = descriptor(run.file);
    std::uint8_t* const base = storage + at_storage;
    const std::uint64_t size = run.end - run.begin;
    std::uint64_t done = 0;
    while (done < size) {
      const ssize_t got =
          ::pread(fd, base + done, size - done, static_cast<off_t>(run.begin + done));
      if (got < 0 && errno == EINTR) continue;
      const std::string& path = dataset.files()[run.file].path;
      if (got < 0) {
        throw Error(path + ": read error at byte offset " + std::to_string(run.begin + done) +
                    ": " + std::strerror(errno));
      }
      if (got == 0) {
        throw Error(path + ": byte offset " + std::to_string(run.begin + done) +
                    ": the file is shorter than when it was indexed (it changed)");
      }
      done += static_cast<std::uint64_t>(got);
    }
    for (std::size_t i = run.first; i < run.last; ++i) {
      const RecordLocation& at = where_[i];
      const std::uint64_t frame = at_storage + (at.frame_offset - run.begin);
      if (tfrecord) {
        if (const auto fault = check_tfrecord_frame(storage + frame, at.frame_length)) {
          throw Error(dataset.files()[run.file].path + ": byte offset " +
                      std::to_string(at.frame_offset) + ": " + *fault);
        }
      }
      out.offsets_[i] = frame + (at.offset - at.frame_offset);
      out.lengths_[i] = at.length;
    }
    at_storage += size;
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

// Reads records of a dataset by number, in the order asked (the order of a rank's share): the
// records of a batch that lie next to each other in a file are read with one pread (into a
// staging buffer, where every TFRecord frame's two CRCs are checked, then each record is copied
// to its place), and the next batch can be announced to the kernel ahead of time (readahead). A
// batch of more than 256 KiB is shared among up to four threads (as many as the CPUs the process
// may run on), each taking pieces of 128 KiB. Thread-compatible: one reader per thread. After
// fork() the child must not use or destroy the parent's reader (its threads are not in the
// child): make a new one and leave the old one be.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "primus/data/dataset.hpp"

namespace primus::data {

class WorkerPool;
class MappedFile;

// The records of one read: record i is `length(i)` bytes at `data(i)`. Reused from read to
// read, its buffer only grows (and is never zeroed): keep one per reader loop.
class RecordBatch {
 public:
  std::size_t size() const { return offsets_.size(); }
  const std::uint8_t* data(std::size_t i) const { return storage_.get() + offsets_[i]; }
  std::uint64_t length(std::size_t i) const { return lengths_[i]; }

 private:
  friend class RecordReader;
  std::uint8_t* reserve(std::size_t bytes);
  std::unique_ptr<std::uint8_t[]> storage_;
  std::size_t capacity_ = 0;
  std::vector<std::uint64_t> offsets_;
  std::vector<std::uint64_t> lengths_;
};

class RecordReader {
 public:
  // `threads`: how many threads read a large batch, the caller's included (0: reader_threads(),
  // the CPUs this process may run on, at most 4).
  explicit RecordReader(std::shared_ptr<const Dataset> dataset, std::size_t threads = 0);
  ~RecordReader();
  RecordReader(const RecordReader&) = delete;
  RecordReader& operator=(const RecordReader&) = delete;

  // Reads records ids[0..count) into `out` (replacing what it held). Throws Error naming the
  // file and byte offset of a record that cannot be read or fails its CRCs.
  void read(const std::uint64_t* ids, std::size_t count, RecordBatch& out);
  // The same in two halves, for a caller that owns the records' memory (Python's bytes objects,
  // a numpy array): locate() says how long each record is (Error for an id past the dataset);
  // read_into() then reads record i into dest[i], exactly that many bytes (Error as read()).
  const std::vector<std::uint64_t>& locate(const std::uint64_t* ids, std::size_t count);
  void read_into(std::uint8_t* const* dest);
  // read_into() in two halves, for a caller that makes the records' memory while the reader's
  // threads already read: start_read() returns at once; dest[i] may be set later, as long as
  // `ready` (when not null) counts the records whose dest is set, in order (a release store);
  // finish_read() reads what is left and returns when all is read and checked (Error as
  // read()). A caller that cannot set them all calls abandon_read() instead.
  void start_read(std::uint8_t* const* dest, const std::atomic<std::size_t>* ready);
  void finish_read();
  void abandon_read();
  // Tells the kernel these records will be read soon (posix_fadvise WILLNEED); never fails.
  void prefetch(const std::uint64_t* ids, std::size_t count);

  const Dataset& dataset() const { return *dataset_; }

 private:
  struct Run {
    std::uint32_t file = 0;
    std::uint64_t begin = 0;  // byte range of the file
    std::uint64_t end = 0;
    std::size_t first = 0;  // the records ids[first, last) lie in it
    std::size_t last = 0;
    int fd = -1;  // the file's descriptor, once opened for the read
  };
  int descriptor(std::uint32_t file);
  // Where each record lies and the runs of neighbours, for ids[0..count).
  void plan_runs(const std::uint64_t* ids, std::size_t count, std::uint64_t max_run);
  // Opens the files of runs_ for threads to share; false when the batch spans too many files.
  bool open_for_runs();
  // Reads one run, checks its CRCs and copies each record to dest: from the file's mapping when
  // the run is in the page cache, else through a staging buffer filled by pread().
  void read_run(const Run& run, std::uint8_t* const* dest);
  // Checks and copies the records of `run` from `base`, its first byte; Error for a bad one.
  void copy_run(const Run& run, const std::uint8_t* base, std::uint8_t* const* dest) const;
  // Reads the run's first `size` bytes to `to`; Error when the file ends first.
  void read_exactly(const Run& run, std::uint8_t* to, std::size_t size) const;
  // One task of a shared read: runs tasks_[t] (once their memory is ready).
  void read_task(std::size_t t);

  std::shared_ptr<const Dataset> dataset_;
  std::vector<RecordLocation> where_;
  std::vector<Run> runs_;
  std::vector<std::uint64_t> lengths_;                      // of the records last located
  std::vector<std::pair<std::size_t, std::size_t>> tasks_;  // runs [first, second) each
  std::vector<std::uint8_t*> destinations_;                 // read()'s, into its RecordBatch
  std::size_t threads_;               // that read a large batch together (the caller's too)
  std::unique_ptr<WorkerPool> pool_;  // made on the first batch large enough to share
  std::function<void(std::size_t)> task_;
  // The read under way.
  std::uint8_t* const* dest_ = nullptr;
  const std::atomic<std::size_t>* ready_ = nullptr;
  std::atomic<bool> abandoned_{false};
  bool shared_ = false;  // its tasks were handed to the pool
  std::vector<std::exception_ptr> errors_;
  std::vector<int> fds_;  // per file, -1 until opened
  // Per file, while its descriptor is open: its mapping, shared with the process's other readers.
  std::vector<std::shared_ptr<const MappedFile>> maps_;
  std::vector<std::uint32_t> open_order_;  // files with an open descriptor, oldest first
};

// Readers of the same file share its mapping, and the process keeps a file mapped after its
// last reader is gone (up to 8 GiB of idle mappings), so that the next epoch or a dataset
// opened again finds its page tables filled (data/mapping_cache.hpp). This unmaps every
// mapping no reader holds now: a benchmark's first epoch, or memory given back.
void drop_idle_mappings();

}  // namespace primus::data

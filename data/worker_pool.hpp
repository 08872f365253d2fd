// A few threads that run the parts of one job together with the calling thread: the reader
// hands them the pieces of a large batch (each a read and its CRCs), so that the kernel's copy
// and the CRCs of one batch use more than one core. Threads start with the pool and wait; one
// job at a time. A thread done with a job, and the caller waiting for the others, spin a little
// before they sleep: a batch is read in a few hundred microseconds, and waking a sleeping thread
// takes tens of them on a virtual machine.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace primus::data {

class WorkerPool {
 public:
  // `threads` threads besides the caller's (0: run() does everything on the caller).
  explicit WorkerPool(std::size_t threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Runs task(0), ..., task(count - 1), each once, on the pool's threads and the caller's;
  // returns when all have returned. `task` must not throw.
  void run(std::size_t count, const std::function<void(std::size_t)>& task);
  // The same in two halves: start() sets the pool's threads on the tasks and returns at once,
  // so that the caller can do something else meanwhile; finish() has the caller take what is
  // left and returns when all have returned. `task` must live until then.
  void start(std::size_t count, const std::function<void(std::size_t)>& task);
  void finish();

  std::size_t threads() const { return threads_.size(); }

 private:
  void work();
  void take_tasks();
  // Spins up to kSpin while `waiting()` holds; false when it still holds then.
  template <typename Waiting>
  static bool spin_while(Waiting waiting);

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(std::size_t)>* task_ = nullptr;
  std::size_t count_ = 0;
  std::atomic<std::size_t> next_{0};
  std::atomic<std::size_t> busy_{0};          // pool threads not yet done with this job
  std::atomic<std::uint64_t> generation_{0};  // one per job
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// How many threads a reader uses for one batch, the caller's included: the CPUs this process
// may run on (Slurm's binding), at most 4.
std::size_t reader_threads();

}  // namespace primus::data

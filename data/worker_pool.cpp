#include "worker_pool.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>

namespace primus::data {
namespace {

// How long a thread spins for the next job, or the caller for the pool's threads, before it
// sleeps. Only pools of more than one thread spin, and the reader makes those only where this
// process has more than one CPU.
constexpr auto kSpin = std::chrono::microseconds(50);

}  // namespace

template <typename Waiting>
bool WorkerPool::spin_while(Waiting waiting) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (unsigned i = 0; waiting(); ++i) {
    if ((i & 15U) == 15U && std::chrono::steady_clock::now() >= until) return false;
  }
  return true;
}

WorkerPool::WorkerPool(std::size_t threads) {
  threads_.reserve(threads);
  for (std::size_t i = 0; i < threads; ++i)
    threads_.emplace_back([this] { work(); });
}

WorkerPool::~WorkerPool() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& thread : threads_)
    thread.join();
}

void WorkerPool::take_tasks() {
  for (std::size_t i = next_.fetch_add(1); i < count_; i = next_.fetch_add(1))
    (*task_)(i);
}

void WorkerPool::run(std::size_t count, const std::function<void(std::size_t)>& task) {
  start(count, task);
  finish();
}

void WorkerPool::start(std::size_t count, const std::function<void(std::size_t)>& task) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    task_ = &task;
    count_ = count;
    next_.store(0);
    busy_.store(threads_.size());
    generation_.fetch_add(1);
  }
  wake_.notify_all();
}

void WorkerPool::finish() {
  if (task_ == nullptr) return;
  take_tasks();
  // Every pool thread reports for this job before finish() returns, so none still holds the
  // task.
  if (!spin_while([this] { return busy_.load(std::memory_order_acquire) != 0; })) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return busy_.load() == 0; });
  }
  task_ = nullptr;
}

void WorkerPool::work() {
  std::uint64_t seen = 0;
  for (;;) {
    spin_while([&] { return generation_.load(std::memory_order_acquire) == seen; });
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_.load() != seen; });
      if (stop_) return;
      seen = generation_.load();
    }
    take_tasks();
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      busy_.fetch_sub(1, std::memory_order_release);
    }
    done_.notify_one();
  }
}

std::size_t reader_threads() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  std::size_t usable = 1;
  if (::sched_getaffinity(0, sizeof cpus, &cpus) == 0) {
    usable = static_cast<std::size_t>(CPU_COUNT(&cpus));
  } else {
    usable = std::thread::hardware_concurrency();
  }
  return std::clamp<std::size_t>(usable, 1, 4);
}

}  // namespace primus::data

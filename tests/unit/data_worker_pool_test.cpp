// The reader's worker pool: every task of every job runs exactly once, on the pool's threads and
// the caller's, and start()/finish() let the caller work in between.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "../../data/worker_pool.hpp"

namespace primus::data {
namespace {

TEST(DataWorkerPool, EveryTaskOfEveryJobRunsOnce) {
  for (const std::size_t threads : {0, 1, 3}) {
    WorkerPool pool(threads);
    for (std::size_t count = 0; count < 200; count += 7) {
      std::vector<std::atomic<int>> runs(count);
      pool.run(count, [&](std::size_t t) { runs[t].fetch_add(1); });
      for (std::size_t t = 0; t < count; ++t)
        ASSERT_EQ(runs[t].load(), 1) << threads << " threads, job of " << count << ", task " << t;
    }
  }
}

TEST(DataWorkerPool, ThePoolsThreadsShareTheTasks) {
  WorkerPool pool(3);
  std::mutex mutex;
  std::set<std::thread::id> seen;
  pool.run(64, [&](std::size_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const std::lock_guard<std::mutex> lock(mutex);
    seen.insert(std::this_thread::get_id());
  });
  EXPECT_GT(seen.size(), 1U) << "64 tasks of 2 ms ran on one thread";
}

TEST(DataWorkerPool, TheCallerWorksBetweenStartAndFinish) {
  WorkerPool pool(2);
  std::atomic<bool> go{false};
  std::atomic<int> done{0};
  const std::function<void(std::size_t)> task = [&](std::size_t) {
    while (!go.load())
      std::this_thread::yield();
    done.fetch_add(1);
  };
  pool.start(10, task);
  // The tasks wait for this thread: start() returned before any of them could finish.
  EXPECT_EQ(done.load(), 0);
  go.store(true);
  pool.finish();
  EXPECT_EQ(done.load(), 10);
  pool.finish();  // nothing under way: returns at once
}

}  // namespace
}  // namespace primus::data

// The reduction half of the "ceiling plus reduction" bound (compare_collectives.py): the time two
// processes, one per core as two ranks are, take to sum S/2 bytes of float32 into S/2 bytes at
// once (a 2-rank allreduce of S bytes reduces S/2 bytes on each rank), the buffers reused as an
// allreduce benchmark reuses its buffer. Prints "S seconds" per size, the best of RUNS runs of
// the slower process; exits non-zero (printing nothing) when a process failed.
// Usage: sum_rate MIN_BYTES MAX_BYTES RUNS
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

// Seconds per sum of `floats` elements, the best of `runs`, each run long enough to time.
double seconds_per_sum(std::size_t floats, int runs) {
  std::vector<float> into(floats, 1.0F);
  std::vector<float> from(floats, 0.5F);
  const std::size_t per_run =
      std::max<std::size_t>(1, (std::size_t{64} << 20) / std::max<std::size_t>(floats * 4, 1));
  double best = 1e30;
  for (int r = 0; r < runs; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t k = 0; k < per_run; ++k) {
      float* a = into.data();
      const float* b = from.data();
      for (std::size_t i = 0; i < floats; ++i)
        a[i] += b[i];
    }
    const double t =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::min(best, t / static_cast<double>(per_run));
  }
  volatile float sink = into[floats / 2];
  (void)sink;
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: sum_rate MIN_BYTES MAX_BYTES RUNS\n");
    return 2;
  }
  const std::size_t min_bytes = std::strtoull(argv[1], nullptr, 10);
  const std::size_t max_bytes = std::strtoull(argv[2], nullptr, 10);
  const int runs = std::atoi(argv[3]);
  if (min_bytes < 8 || max_bytes < min_bytes || runs < 1) {
    std::fprintf(stderr, "sum_rate: MIN_BYTES >= 8, MAX_BYTES >= MIN_BYTES, RUNS >= 1\n");
    return 2;
  }
  // Both processes run every size at once; each writes its times to a pipe.
  int fds[2][2];
  pid_t pids[2];
  for (int p = 0; p < 2; ++p) {
    if (::pipe(fds[p]) != 0) return 1;
    pids[p] = ::fork();
    if (pids[p] < 0) return 1;
    if (pids[p] == 0) {
      ::close(fds[p][0]);
      for (std::size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
        const double t = seconds_per_sum(bytes / 8, runs);  // S/2 bytes of float32
        if (::write(fds[p][1], &t, sizeof t) != sizeof t) ::_exit(1);
      }
      ::_exit(0);
    }
    ::close(fds[p][1]);
  }
  std::vector<std::vector<double>> times(2);
  for (int p = 0; p < 2; ++p) {
    double t = 0;
    while (::read(fds[p][0], &t, sizeof t) == sizeof t)
      times[p].push_back(t);
    int status = 0;
    if (::waitpid(pids[p], &status, 0) != pids[p] || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "sum_rate: a summing process failed\n");
      return 1;
    }
  }
  std::size_t i = 0;
  for (std::size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2, ++i) {
    if (i >= times[0].size() || i >= times[1].size()) return 1;
    std::printf("%zu %.9f\n", bytes, std::max(times[0][i], times[1][i]));
  }
  return 0;
}

// Baseline: Gloo's allreduce (float32 sum, its default algorithm) over its TCP transport, with
// a file store for the rendezvous. Rank 0 prints: size(B) time(us) algbw busbw.
// Usage: gloo_allreduce RANK SIZE STORE_DIR MIN MAX
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 6) return 2;
  const int rank = std::atoi(argv[1]);
  const int size = std::atoi(argv[2]);
  const std::size_t min_bytes = std::strtoull(argv[4], nullptr, 10);
  const std::size_t max_bytes = std::strtoull(argv[5], nullptr, 10);
  gloo::transport::tcp::attr attr("127.0.0.1");
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(argv[3]);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->connectFullMesh(store, device);
  std::vector<float> data(max_bytes / 4 + 1);
  for (std::size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<float>(i % 7);
  std::vector<double> times(1);
  for (std::size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    const std::size_t count = std::max<std::size_t>(1, bytes / 4);
    long iters = static_cast<long>(std::clamp<std::size_t>(
        (std::size_t{512} << 20) / std::max<std::size_t>(bytes, 1), 5, 1000));
    gloo::AllreduceOptions opts(context);
    opts.setOutput(data.data(), count);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts.setTag(0);
    for (int i = 0; i < 2; ++i)
      gloo::allreduce(opts);
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < iters; ++i)
      gloo::allreduce(opts);
    double t =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iters;
    // The slowest rank's time, through Gloo itself.
    gloo::AllreduceOptions max_opts(context);
    max_opts.setOutput(&t, 1);
    max_opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<double>));
    gloo::allreduce(max_opts);
    if (rank == 0) {
      const double algbw = static_cast<double>(count * 4) / t / 1e9;
      std::printf("%zu %.2f %.3f %.3f\n", count * 4, t * 1e6, algbw,
                  algbw * 2.0 * (size - 1) / size);
      std::fflush(stdout);
    }
  }
  return 0;
}

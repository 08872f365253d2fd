// The NCCL backend on a real GPU (scripts/device/nccl-check.sh builds and runs it on a machine
// with one GPU). Each step prints "PASS <step>: ..." or "FAIL <step>: ..." and exits non-zero on
// failure:
//   collectives             a 1-rank communicator on device 0: allreduce (sum, float32, 1M
//                           elements, copied back and checked), broadcast, allgather and
//                           reduce_scatter of every dtype, barrier
//   init-timeout MS         a 2-rank NCCL communicator whose rank 1 never comes: the watchdog
//                           aborts its initialization after MS
//   op-timeout MS           a collective held back on the GPU (a host function on the legacy
//                           default stream): the watchdog aborts it after MS; later calls throw
//                           (MS must also cover a warm 1-rank initialization: 2000 will do)
//   exchange-tcp RANK PORT  exchange_nccl_unique_id over a 2-rank TCP store on 127.0.0.1:PORT
//                           (secret: PRIMUS_JOB_SECRET); rank 0 makes a real NCCL unique id
//   exchange-fork           the same between two processes over a socketpair (no TCP store)
#include <cuda_runtime.h>
#include <nccl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "nccl/nccl_api.hpp"
#include "nccl/nccl_communicator.hpp"
#include "primus/collectives.hpp"
#include "primus/collectives/nccl.hpp"

namespace {

using namespace std::chrono_literals;
using primus::coll::Bootstrap;
using primus::coll::CollectiveError;
using primus::coll::DType;
using primus::coll::NcclOptions;
using primus::coll::PeerFailure;
using primus::coll::ReduceOp;
using Clock = std::chrono::steady_clock;

int failures = 0;

void pass(const std::string& step, const std::string& what) {
  std::cout << "PASS " << step << ": " << what << std::endl;
}
void fail(const std::string& step, const std::string& what) {
  std::cout << "FAIL " << step << ": " << what << std::endl;
  ++failures;
}

void cuda_ok(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(error));
  }
}

double seconds_since(Clock::time_point started) {
  return std::chrono::duration<double>(Clock::now() - started).count();
}

// One rank, or rank 0 of `size` whose other ranks contribute empty strings without being
// there (to start an NCCL communicator that waits for ranks that never come).
class LocalBootstrap final : public Bootstrap {
 public:
  explicit LocalBootstrap(int size = 1) : size_(size) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  std::vector<std::string> allgather(const std::string& mine,
                                     std::chrono::milliseconds /*timeout*/) override {
    std::vector<std::string> all(static_cast<std::size_t>(size_));
    all[0] = mine;
    return all;
  }
  std::string local_address() const override { return "127.0.0.1"; }

 private:
  int size_;
};

class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) {
    cuda_ok(cudaMalloc(&pointer_, bytes == 0 ? 1 : bytes), "cudaMalloc");
  }
  ~DeviceBuffer() { cudaFree(pointer_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return pointer_; }

 private:
  void* pointer_ = nullptr;
};

// Bitwise equality (the results are checked bit for bit, NaN patterns included).
bool same_bytes(const void* a, const void* b, std::size_t bytes) {
  return std::memcmp(a, b, bytes) == 0;
}

std::vector<std::uint8_t> pattern(std::size_t bytes, unsigned seed) {
  std::vector<std::uint8_t> out(bytes);
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& b : out) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<std::uint8_t>(x);
  }
  return out;
}

void upload(const DeviceBuffer& to, const std::vector<std::uint8_t>& from) {
  cuda_ok(cudaMemcpy(to.get(), from.data(), from.size(), cudaMemcpyHostToDevice), "upload");
}
std::vector<std::uint8_t> download(const DeviceBuffer& from, std::size_t bytes) {
  std::vector<std::uint8_t> out(bytes);
  cuda_ok(cudaMemcpy(out.data(), from.get(), bytes, cudaMemcpyDeviceToHost), "download");
  return out;
}

int step_collectives() {
  const std::string step = "collectives";
  int version = 0;
  ncclGetVersion(&version);
  cudaDeviceProp prop{};
  cuda_ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::cout << "info: NCCL " << version << ", device 0: " << prop.name
            << ", nccl_available()=" << primus::coll::nccl_available() << std::endl;
  LocalBootstrap bootstrap;
  NcclOptions options;
  options.timeout = 60s;
  auto started = Clock::now();
  auto comm = primus::coll::nccl::make_nccl_communicator(primus::coll::nccl::real_nccl_api(),
                                                         bootstrap, 0, options);
  if (comm->backend() != "nccl" || comm->rank() != 0 || comm->size() != 1) {
    fail(step, "backend/rank/size: " + comm->backend());
  } else {
    pass(step + "-init", "1-rank communicator in " + std::to_string(seconds_since(started)) + " s");
  }

  // allreduce, sum, float32, 1M elements: with one rank the sum is the input, bit for bit.
  constexpr std::size_t kCount = std::size_t{1} << 20;
  std::vector<float> host(kCount);
  for (std::size_t i = 0; i < kCount; ++i)
    host[i] = static_cast<float>(i % 1000) * 0.5f - 17.25f;
  DeviceBuffer data(kCount * sizeof(float));
  cuda_ok(cudaMemcpy(data.get(), host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice),
          "upload");
  comm->allreduce(data.get(), kCount, DType::kFloat32, ReduceOp::kSum);
  started = Clock::now();
  constexpr int kRepeats = 20;
  for (int i = 0; i < kRepeats; ++i)
    comm->allreduce(data.get(), kCount, DType::kFloat32, ReduceOp::kSum);
  const double each_us = seconds_since(started) / kRepeats * 1e6;
  std::vector<float> back(kCount);
  cuda_ok(cudaMemcpy(back.data(), data.get(), kCount * sizeof(float), cudaMemcpyDeviceToHost),
          "download");
  if (!same_bytes(back.data(), host.data(), kCount * sizeof(float))) {
    fail(step + "-allreduce", "the 1M-element float32 sum differs from the input");
  } else {
    pass(step + "-allreduce", "sum float32 1M elements correct; " + std::to_string(each_us) +
                                  " us per call (1 rank, watchdog wait included)");
  }

  // broadcast from root 0 leaves the data as it was.
  comm->broadcast(data.get(), kCount, DType::kFloat32, 0);
  cuda_ok(cudaMemcpy(back.data(), data.get(), kCount * sizeof(float), cudaMemcpyDeviceToHost),
          "download");
  if (!same_bytes(back.data(), host.data(), kCount * sizeof(float))) {
    fail(step + "-broadcast", "data changed");
  } else {
    pass(step + "-broadcast", "float32 1M elements from root 0");
  }

  // Out of place, every dtype: recv must be exactly send (a wrong dtype mapping copies the
  // wrong number of bytes, which the sentinel after the block shows).
  const DType dtypes[] = {DType::kFloat64, DType::kFloat32, DType::kFloat16, DType::kBFloat16,
                          DType::kInt32,   DType::kInt64,   DType::kUInt8};
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kProd};
  constexpr std::size_t kSmall = 1000;
  bool all_good = true;
  for (const DType dtype : dtypes) {
    const std::size_t bytes = kSmall * primus::coll::dtype_size(dtype);
    const auto input = pattern(bytes, static_cast<unsigned>(dtype) + 1);
    auto sentinel = pattern(bytes * 2, 99);
    DeviceBuffer send(bytes);
    DeviceBuffer recv(bytes * 2);
    upload(send, input);
    upload(recv, sentinel);
    comm->allgather(send.get(), recv.get(), kSmall, dtype);
    auto got = download(recv, bytes * 2);
    const bool gathered = std::memcmp(got.data(), input.data(), bytes) == 0 &&
                          std::memcmp(got.data() + bytes, sentinel.data() + bytes, bytes) == 0;
    bool scattered = true;
    for (const ReduceOp op : ops) {
      upload(recv, sentinel);
      comm->reduce_scatter(send.get(), recv.get(), kSmall, dtype, op);
      got = download(recv, bytes * 2);
      // Floating-point NaN patterns may be canonicalized by max/min: compare sum and prod only
      // for floats, every op for integers.
      const bool is_float = dtype == DType::kFloat64 || dtype == DType::kFloat32 ||
                            dtype == DType::kFloat16 || dtype == DType::kBFloat16;
      if (is_float && (op == ReduceOp::kMax || op == ReduceOp::kMin)) continue;
      scattered = scattered && std::memcmp(got.data() + bytes, sentinel.data() + bytes, bytes) == 0;
      if (!is_float) scattered = scattered && std::memcmp(got.data(), input.data(), bytes) == 0;
    }
    if (!gathered || !scattered) {
      all_good = false;
      fail(step + "-dtypes", std::string(primus::coll::to_string(dtype)) +
                                 (gathered ? "" : ": allgather wrong") +
                                 (scattered ? "" : ": reduce_scatter wrong"));
    }
  }
  if (all_good) pass(step + "-dtypes", "allgather and reduce_scatter of every dtype and op");
  comm->barrier();
  pass(step + "-barrier", "returned");
  started = Clock::now();
  comm.reset();
  pass(step + "-destroy", "finalized in " + std::to_string(seconds_since(started)) + " s");
  return failures == 0 ? 0 : 1;
}

int step_init_timeout(int ms) {
  const std::string step = "init-timeout";
  LocalBootstrap bootstrap(2);  // rank 1 never comes
  NcclOptions options;
  options.timeout = std::chrono::milliseconds(ms);
  const auto started = Clock::now();
  try {
    auto comm = primus::coll::nccl::make_nccl_communicator(primus::coll::nccl::real_nccl_api(),
                                                           bootstrap, 0, options);
    fail(step, "a 2-rank communicator without rank 1 initialized");
  } catch (const PeerFailure& e) {
    const double took = seconds_since(started);
    const std::string message = e.what();
    const double limit = ms / 1000.0 + 10.0;
    if (message.find("did not complete within") == std::string::npos || took > limit ||
        took < ms / 1000.0) {
      fail(step, "after " + std::to_string(took) + " s: " + message);
    } else {
      pass(step, "aborted after " + std::to_string(took) + " s (timeout " + std::to_string(ms) +
                     " ms): " + message);
    }
  } catch (const std::exception& e) {
    fail(step, std::string("unexpected error: ") + e.what());
  }
  return failures == 0 ? 0 : 1;
}

std::atomic<bool> release_stream{false};

// Holds the legacy default stream (and so the communicator's stream) for up to 30 s.
void CUDART_CB hold_stream(void* /*data*/) {
  const auto until = Clock::now() + 30s;
  while (!release_stream.load() && Clock::now() < until)
    std::this_thread::sleep_for(1ms);
}

int step_op_timeout(int ms) {
  const std::string step = "op-timeout";
  LocalBootstrap bootstrap;
  NcclOptions options;
  // The timeout covers the initialization too: a first communicator with a long one pays
  // NCCL's one-time costs, so that the second one initializes within `ms`.
  options.timeout = 60s;
  primus::coll::nccl::make_nccl_communicator(primus::coll::nccl::real_nccl_api(), bootstrap, 0,
                                             options)
      .reset();
  options.timeout = std::chrono::milliseconds(ms);
  std::unique_ptr<primus::coll::Communicator> comm;
  try {
    comm = primus::coll::nccl::make_nccl_communicator(primus::coll::nccl::real_nccl_api(),
                                                      bootstrap, 0, options);
  } catch (const std::exception& e) {
    fail(step, "init within " + std::to_string(ms) + " ms failed (raise MS): " + e.what());
    return 1;
  }
  // Out of place, so that NCCL has work to enqueue even with one rank (an in-place 1-rank
  // collective may enqueue nothing).
  constexpr std::size_t kCount = 1024;
  DeviceBuffer send(kCount * sizeof(float));
  DeviceBuffer recv(kCount * sizeof(float));
  cuda_ok(cudaMemset(send.get(), 0, kCount * sizeof(float)), "cudaMemset");
  cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  // The communicator's stream waits for the legacy default stream, which this host function
  // holds.
  cuda_ok(cudaLaunchHostFunc(nullptr, hold_stream, nullptr), "cudaLaunchHostFunc");
  const auto started = Clock::now();
  try {
    comm->allgather(send.get(), recv.get(), kCount, DType::kFloat32);
    fail(step, "the held-back allgather completed");
  } catch (const PeerFailure& e) {
    const double took = seconds_since(started);
    const std::string message = e.what();
    if (message.find("NCCL allgather did not complete within") == std::string::npos ||
        took < ms / 1000.0 || took > ms / 1000.0 + 10.0) {
      fail(step, "after " + std::to_string(took) + " s: " + message);
    } else {
      pass(step, "aborted after " + std::to_string(took) + " s: " + message);
    }
  } catch (const std::exception& e) {
    fail(step, std::string("unexpected error: ") + e.what());
  }
  try {
    comm->barrier();
    fail(step + "-after", "a call after the abort succeeded");
  } catch (const CollectiveError& e) {
    const std::string message = e.what();
    if (message.find("communicator aborted") != std::string::npos) {
      pass(step + "-after", message);
    } else {
      fail(step + "-after", message);
    }
  }
  release_stream = true;
  cudaDeviceSynchronize();
  comm.reset();
  pass(step + "-destroy", "the aborted communicator was released");
  return failures == 0 ? 0 : 1;
}

// Every rank checks that every other rank holds the same id (a second allgather round).
int check_exchange(Bootstrap& bootstrap, const std::string& step) {
  const std::string id = primus::coll::exchange_nccl_unique_id(
      bootstrap, [] { return primus::coll::nccl::real_nccl_api()->get_unique_id(); }, 60s);
  const std::vector<std::string> held = bootstrap.allgather(id, 60s);
  for (std::size_t r = 0; r < held.size(); ++r) {
    if (held[r] != id || held[r].size() != NCCL_UNIQUE_ID_BYTES) {
      fail(step, "rank " + std::to_string(bootstrap.rank()) + ": rank " + std::to_string(r) +
                     " holds a different id (" + std::to_string(held[r].size()) + " bytes)");
      return 1;
    }
  }
  pass(step, "rank " + std::to_string(bootstrap.rank()) + " of " +
                 std::to_string(bootstrap.size()) + " holds rank 0's " + std::to_string(id.size()) +
                 "-byte id");
  return 0;
}

#ifndef NCCL_CHECK_NO_TCP_STORE
int step_exchange_tcp(int rank, int port) {
  const char* secret = std::getenv("PRIMUS_JOB_SECRET");
  if (secret == nullptr || *secret == '\0') {
    fail("exchange-tcp", "PRIMUS_JOB_SECRET is not set");
    return 1;
  }
  auto bootstrap = primus::coll::tcp_store_bootstrap(rank, 2, "127.0.0.1",
                                                     static_cast<std::uint16_t>(port), secret, 60s);
  return check_exchange(*bootstrap, "exchange-tcp");
}
#endif

// Two processes over a socketpair: each value is sent as a u64 length and bytes.
class PairBootstrap final : public Bootstrap {
 public:
  PairBootstrap(int rank, int fd) : rank_(rank), fd_(fd) {}
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  std::vector<std::string> allgather(const std::string& mine,
                                     std::chrono::milliseconds /*timeout*/) override {
    const std::uint64_t length = mine.size();
    write_all(&length, sizeof length);
    write_all(mine.data(), mine.size());
    std::uint64_t theirs_length = 0;
    read_all(&theirs_length, sizeof theirs_length);
    std::string theirs(static_cast<std::size_t>(theirs_length), '\0');
    read_all(theirs.data(), theirs.size());
    return rank_ == 0 ? std::vector<std::string>{mine, theirs}
                      : std::vector<std::string>{theirs, mine};
  }
  std::string local_address() const override { return "127.0.0.1"; }

 private:
  void write_all(const void* data, std::size_t bytes) const {
    const auto* p = static_cast<const char*>(data);
    while (bytes > 0) {
      const ssize_t n = ::write(fd_, p, bytes);
      if (n <= 0) throw std::runtime_error("socketpair write failed");
      p += n;
      bytes -= static_cast<std::size_t>(n);
    }
  }
  void read_all(void* data, std::size_t bytes) const {
    auto* p = static_cast<char*>(data);
    while (bytes > 0) {
      const ssize_t n = ::read(fd_, p, bytes);
      if (n <= 0) throw std::runtime_error("socketpair read failed");
      p += n;
      bytes -= static_cast<std::size_t>(n);
    }
  }
  int rank_;
  int fd_;
};

int step_exchange_fork() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) {
    fail("exchange-fork", "socketpair failed");
    return 1;
  }
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    int rc = 1;
    try {
      PairBootstrap bootstrap(1, fds[1]);
      rc = check_exchange(bootstrap, "exchange-fork");
    } catch (const std::exception& e) {
      fail("exchange-fork", std::string("rank 1: ") + e.what());
    }
    std::cout.flush();
    ::_exit(rc);
  }
  ::close(fds[1]);
  int rc = 1;
  try {
    PairBootstrap bootstrap(0, fds[0]);
    rc = check_exchange(bootstrap, "exchange-fork");
  } catch (const std::exception& e) {
    fail("exchange-fork", std::string("rank 0: ") + e.what());
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return rc == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string step = argc > 1 ? argv[1] : "";
  try {
    if (step == "collectives") return step_collectives();
    if (step == "init-timeout" && argc > 2) return step_init_timeout(std::atoi(argv[2]));
    if (step == "op-timeout" && argc > 2) return step_op_timeout(std::atoi(argv[2]));
#ifndef NCCL_CHECK_NO_TCP_STORE
    if (step == "exchange-tcp" && argc > 3) {
      return step_exchange_tcp(std::atoi(argv[2]), std::atoi(argv[3]));
    }
#endif
    if (step == "exchange-fork") return step_exchange_fork();
  } catch (const std::exception& e) {
    fail(step, std::string("error: ") + e.what());
    return 1;
  }
  std::cerr << "usage: nccl_check collectives | init-timeout MS | op-timeout MS | exchange-tcp "
               "RANK PORT | exchange-fork\n";
  return 2;
}

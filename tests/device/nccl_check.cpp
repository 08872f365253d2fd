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
//   two-ranks               a 2-rank NCCL communicator in two processes (joined by a
//                           socketpair): allreduce and reduce_scatter of every dtype with every
//                           op, broadcast from rank 1 and allgather, each result compared bit
//                           for bit with a reference computed on the host, with inputs that make
//                           a float16/bfloat16, int32/float32 or int8/uint8 confusion or a wrong
//                           op show. One GPU per rank where there are two; on a one-GPU machine
//                           both ranks on device 0 as two NCCL hosts (NCCL_HOSTID per rank,
//                           NCCL_P2P_DISABLE=1, NCCL_SHM_DISABLE=1: NCCL refuses two ranks on one
//                           GPU of one host); where that fails too, the FAIL line says so
//   two-ranks-tcp           no GPU: the same check over the TCP backend (the host reference
//                           agrees with it), and against backends that confuse float16 with
//                           bfloat16, float32 with int32 or max with sum (the check notices)
#include <cuda_runtime.h>
#include <nccl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "nccl/nccl_api.hpp"
#include "nccl/nccl_communicator.hpp"
#include "primus/collectives.hpp"
#include "primus/collectives/nccl.hpp"
#include "reduce.hpp"

namespace {

using namespace std::chrono_literals;
using primus::coll::Bootstrap;
using primus::coll::CollectiveError;
using primus::coll::Communicator;
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

// ---------------------------------------------------------------- two ranks, host reference

const DType kDtypes[] = {DType::kFloat64, DType::kFloat32, DType::kFloat16, DType::kBFloat16,
                         DType::kInt32,   DType::kInt64,   DType::kUInt8};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kProd};

std::uint64_t mix(std::uint64_t x) {  // splitmix64
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

template <typename T>
void put(std::uint8_t* at, T value) {
  std::memcpy(at, &value, sizeof value);
}
template <typename T>
T take(const std::uint8_t* at) {
  T value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

// `count` elements of rank `rank`'s input, as bytes. Floats are +-(1 + j/8) * 2^e, j in
// [0, 8), e in [-3, 3]: exact in every float dtype, never zero or NaN, the product of two exact
// even in bfloat16, the sum of two rounded at most once. Integers are random bits: mixed signs
// (so that max and min of an int32 read as float32 differ), wrapping sums and products, uint8
// values above 127 (an int8 would order them otherwise).
std::vector<std::uint8_t> inputs(DType dtype, int rank, std::size_t count) {
  const std::size_t size = primus::coll::dtype_size(dtype);
  std::vector<std::uint8_t> out(count * size);
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t bits = mix((static_cast<std::uint64_t>(dtype) << 48) ^
                                   (static_cast<std::uint64_t>(rank) << 40) ^ i);
    const double magnitude = std::ldexp(1.0 + static_cast<double>(bits & 7) / 8.0,
                                        static_cast<int>((bits >> 3) % 7) - 3);
    const double value = ((bits >> 6) & 1) != 0 ? -magnitude : magnitude;
    std::uint8_t* at = out.data() + i * size;
    switch (dtype) {
      case DType::kFloat64:
        put(at, value);
        break;
      case DType::kFloat32:
        put(at, static_cast<float>(value));
        break;
      case DType::kFloat16:
        put(at, primus::coll::float_to_half(static_cast<float>(value)));
        break;
      case DType::kBFloat16:
        put(at, primus::coll::float_to_bfloat16(static_cast<float>(value)));
        break;
      case DType::kInt32:
        put(at, static_cast<std::uint32_t>(bits >> 8));
        break;
      case DType::kInt64:
        put(at, bits);
        break;
      case DType::kUInt8:
        put(at, static_cast<std::uint8_t>(bits >> 16));
        break;
    }
  }
  return out;
}

template <typename T>
T apply(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::kSum:
      return static_cast<T>(a + b);
    case ReduceOp::kProd:
      return static_cast<T>(a * b);
    case ReduceOp::kMax:
      return a < b ? b : a;
    case ReduceOp::kMin:
      return b < a ? b : a;
  }
  return a;
}

// Integers: sums and products wrap (computed unsigned), max and min compare as `Signed`.
template <typename Signed, typename Unsigned>
void apply_integer(ReduceOp op, const std::uint8_t* a, const std::uint8_t* b, std::uint8_t* out) {
  if (op == ReduceOp::kSum || op == ReduceOp::kProd) {
    put(out, apply(op, take<Unsigned>(a), take<Unsigned>(b)));
  } else {
    put(out, apply(op, take<Signed>(a), take<Signed>(b)));
  }
}

// The reduction of one element of two ranks as NCCL computes it: float32 and float64 in their
// own precision; float16 and bfloat16 through float32, rounded to nearest even (the exact
// result rounded once, which the inputs above make the same in any way of computing it).
void reference(DType dtype, ReduceOp op, const std::uint8_t* a, const std::uint8_t* b,
               std::uint8_t* out) {
  using primus::coll::bfloat16_to_float;
  using primus::coll::float_to_bfloat16;
  using primus::coll::float_to_half;
  using primus::coll::half_to_float;
  switch (dtype) {
    case DType::kFloat64:
      put(out, apply(op, take<double>(a), take<double>(b)));
      break;
    case DType::kFloat32:
      put(out, apply(op, take<float>(a), take<float>(b)));
      break;
    case DType::kFloat16:
      put(out, float_to_half(apply(op, half_to_float(take<std::uint16_t>(a)),
                                   half_to_float(take<std::uint16_t>(b)))));
      break;
    case DType::kBFloat16:
      put(out, float_to_bfloat16(apply(op, bfloat16_to_float(take<std::uint16_t>(a)),
                                       bfloat16_to_float(take<std::uint16_t>(b)))));
      break;
    case DType::kInt32:
      apply_integer<std::int32_t, std::uint32_t>(op, a, b, out);
      break;
    case DType::kInt64:
      apply_integer<std::int64_t, std::uint64_t>(op, a, b, out);
      break;
    case DType::kUInt8:
      apply_integer<std::uint8_t, std::uint8_t>(op, a, b, out);
      break;
  }
}

std::string hex(const std::uint8_t* at, std::size_t bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string text = "0x";
  for (std::size_t k = bytes; k > 0; --k) {  // little-endian: most significant byte last
    text += digits[at[k - 1] >> 4];
    text += digits[at[k - 1] & 15];
  }
  return text;
}

// Where the collectives' buffers live: device memory for NCCL, host memory for the TCP
// backend.
class Memory {
 public:
  virtual ~Memory() = default;
  virtual std::shared_ptr<void> make(std::size_t bytes) = 0;
  virtual void upload(void* to, const std::vector<std::uint8_t>& from) = 0;
  virtual std::vector<std::uint8_t> download(const void* from, std::size_t bytes) = 0;
};

class DeviceMemory final : public Memory {
 public:
  std::shared_ptr<void> make(std::size_t bytes) override {
    void* pointer = nullptr;
    cuda_ok(cudaMalloc(&pointer, bytes == 0 ? 1 : bytes), "cudaMalloc");
    return {pointer, [](void* p) { cudaFree(p); }};
  }
  void upload(void* to, const std::vector<std::uint8_t>& from) override {
    cuda_ok(cudaMemcpy(to, from.data(), from.size(), cudaMemcpyHostToDevice), "upload");
  }
  std::vector<std::uint8_t> download(const void* from, std::size_t bytes) override {
    std::vector<std::uint8_t> out(bytes);
    cuda_ok(cudaMemcpy(out.data(), from, bytes, cudaMemcpyDeviceToHost), "download");
    return out;
  }
};

class HostMemory final : public Memory {
 public:
  std::shared_ptr<void> make(std::size_t bytes) override {
    return {new std::uint8_t[bytes == 0 ? 1 : bytes](),
            [](void* p) { delete[] static_cast<std::uint8_t*>(p); }};
  }
  void upload(void* to, const std::vector<std::uint8_t>& from) override {
    std::memcpy(to, from.data(), from.size());
  }
  std::vector<std::uint8_t> download(const void* from, std::size_t bytes) override {
    const auto* p = static_cast<const std::uint8_t*>(from);
    return {p, p + bytes};
  }
};

std::string name_of(const char* collective, DType dtype, std::optional<ReduceOp> op) {
  std::string name = std::string(collective) + " " + std::string(primus::coll::to_string(dtype));
  if (op) name += " " + std::string(primus::coll::to_string(*op));
  return name;
}

// Every collective of `comm` (2 ranks) against the host reference; the wrong ones, each as
// "allreduce float16 sum: element 3 is 0x..., expected 0x..." (empty: all right).
std::vector<std::string> check_against_reference(Communicator& comm, Memory& memory) {
  constexpr std::size_t kCount = 1000;  // elements per rank's block
  const int rank = comm.rank();
  std::vector<std::string> wrong;
  auto compare = [&](const std::string& what, const std::vector<std::uint8_t>& got,
                     const std::vector<std::uint8_t>& want, std::size_t size) {
    for (std::size_t i = 0; i * size < want.size(); ++i) {
      if (std::memcmp(got.data() + i * size, want.data() + i * size, size) != 0) {
        wrong.push_back(what + ": element " + std::to_string(i) + " is " +
                        hex(got.data() + i * size, size) + ", expected " +
                        hex(want.data() + i * size, size));
        return;
      }
    }
  };
  for (const DType dtype : kDtypes) {
    const std::size_t size = primus::coll::dtype_size(dtype);
    const std::vector<std::uint8_t> in[2] = {inputs(dtype, 0, 2 * kCount),
                                             inputs(dtype, 1, 2 * kCount)};
    const std::vector<std::uint8_t>& mine = in[rank];
    const std::size_t block = kCount * size;
    // A rank's first block (its input to allreduce, broadcast and allgather).
    const std::vector<std::uint8_t> firsts[2] = {{in[0].data(), in[0].data() + block},
                                                 {in[1].data(), in[1].data() + block}};
    const std::vector<std::uint8_t>& first = firsts[rank];
    for (const ReduceOp op : kOps) {
      // allreduce, in place, over kCount elements.
      std::vector<std::uint8_t> want(kCount * size);
      for (std::size_t i = 0; i < kCount; ++i)
        reference(dtype, op, &in[0][i * size], &in[1][i * size], &want[i * size]);
      auto data = memory.make(kCount * size);
      memory.upload(data.get(), first);
      comm.allreduce(data.get(), kCount, dtype, op);
      compare(name_of("allreduce", dtype, op), memory.download(data.get(), want.size()), want,
              size);
      // reduce_scatter: rank r ends with the reduction of both ranks' block r.
      const std::size_t base = static_cast<std::size_t>(rank) * kCount;
      for (std::size_t i = 0; i < kCount; ++i) {
        reference(dtype, op, &in[0][(base + i) * size], &in[1][(base + i) * size], &want[i * size]);
      }
      auto send = memory.make(2 * kCount * size);
      auto recv = memory.make(kCount * size);
      memory.upload(send.get(), mine);
      comm.reduce_scatter(send.get(), recv.get(), kCount, dtype, op);
      compare(name_of("reduce_scatter", dtype, op), memory.download(recv.get(), want.size()), want,
              size);
    }
    // broadcast from rank 1: every rank ends with rank 1's first block.
    auto data = memory.make(kCount * size);
    memory.upload(data.get(), first);
    comm.broadcast(data.get(), kCount, dtype, 1);
    compare(name_of("broadcast", dtype, std::nullopt), memory.download(data.get(), block),
            firsts[1], size);
    // allgather of each rank's first block: rank 0's, then rank 1's.
    auto gathered = memory.make(2 * kCount * size);
    memory.upload(data.get(), first);
    comm.allgather(data.get(), gathered.get(), kCount, dtype);
    std::vector<std::uint8_t> want = firsts[0];
    want.insert(want.end(), firsts[1].begin(), firsts[1].end());
    compare(name_of("allgather", dtype, std::nullopt),
            memory.download(gathered.get(), 2 * kCount * size), want, size);
  }
  comm.barrier();
  return wrong;
}

// Runs body(rank, bootstrap) in two processes joined by a socketpair (PairBootstrap), each
// printing its own PASS/FAIL lines; 0 when both exit with 0. Nothing here touches CUDA before
// the fork: each process initializes its own.
int on_two_processes(const std::string& step, const std::function<int(int, Bootstrap&)>& body) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) {
    fail(step, "socketpair failed");
    return 1;
  }
  std::cout.flush();
  pid_t children[2] = {-1, -1};
  for (int rank = 0; rank < 2; ++rank) {
    children[rank] = ::fork();
    if (children[rank] < 0) {
      fail(step, "fork failed");
      return 1;
    }
    if (children[rank] == 0) {
      ::close(fds[1 - rank]);
      int rc = 1;
      try {
        PairBootstrap bootstrap(rank, fds[rank]);
        rc = body(rank, bootstrap);
      } catch (const std::exception& e) {
        fail(step, "rank " + std::to_string(rank) + ": " + e.what());
      }
      std::cout.flush();
      ::_exit(rc);
    }
  }
  ::close(fds[0]);
  ::close(fds[1]);
  bool ok = true;
  for (const pid_t child : children) {
    int status = 0;
    ::waitpid(child, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return ok ? 0 : 1;
}

int report_check(const std::string& step, int rank, const std::vector<std::string>& wrong,
                 const std::string& how) {
  for (const auto& what : wrong)
    fail(step, "rank " + std::to_string(rank) + ": " + what);
  if (!wrong.empty()) return 1;
  pass(step, "rank " + std::to_string(rank) +
                 ": every collective, dtype and op equals the host "
                 "reference bit for bit (" +
                 how + ")");
  return 0;
}

int step_two_ranks() {
  const std::string step = "two-ranks";
  return on_two_processes(step, [&](int rank, Bootstrap& bootstrap) {
    int devices = 0;
    const cudaError_t counted = cudaGetDeviceCount(&devices);
    if (counted != cudaSuccess || devices < 1) {
      fail(step, "rank " + std::to_string(rank) + ": no CUDA device (" +
                     (counted != cudaSuccess ? cudaGetErrorString(counted) : "none") + ")");
      return 1;
    }
    int device = 0;
    std::string how;
    if (devices >= 2) {
      device = rank;
      how = "one GPU per rank, device " + std::to_string(device);
    } else {
      // NCCL refuses two ranks on one GPU of one host: here they are two hosts to NCCL, which
      // talk through its network transport.
      ::setenv("NCCL_HOSTID", ("primus-nccl-check-rank-" + std::to_string(rank)).c_str(), 1);
      ::setenv("NCCL_P2P_DISABLE", "1", 1);
      ::setenv("NCCL_SHM_DISABLE", "1", 1);
      how =
          "one GPU: both ranks on device 0 as two NCCL hosts (NCCL_HOSTID per rank, "
          "NCCL_P2P_DISABLE=1, NCCL_SHM_DISABLE=1)";
    }
    std::cout << "info: " << step << ": rank " << rank << ": " << how << std::endl;
    NcclOptions options;
    options.timeout = 120s;
    std::unique_ptr<Communicator> comm;
    try {
      comm = primus::coll::nccl::make_nccl_communicator(primus::coll::nccl::real_nccl_api(),
                                                        bootstrap, device, options);
    } catch (const std::exception& e) {
      fail(step, "rank " + std::to_string(rank) + ": " +
                     (devices >= 2 ? std::string("two GPUs, ")
                                   : std::string("one GPU, and NCCL would not run two ranks on "
                                                 "it as two hosts either, so two ranks cannot "
                                                 "be checked on this machine: ")) +
                     e.what() + " (" + how + ")");
      return 1;
    }
    DeviceMemory memory;
    const auto wrong = check_against_reference(*comm, memory);
    comm.reset();
    return report_check(step, rank, wrong, "NCCL, " + how);
  });
}

#ifndef NCCL_CHECK_NO_TCP_STORE
// A backend that hands the collectives it is given on with another dtype or op: what the
// check must notice.
class Confused final : public Communicator {
 public:
  Confused(Communicator& inner, DType from, DType to, ReduceOp op_from, ReduceOp op_to)
      : inner_(inner), from_(from), to_(to), op_from_(op_from), op_to_(op_to) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string backend() const override { return "confused " + inner_.backend(); }
  void allreduce(void* data, std::size_t count, DType dtype, ReduceOp op) override {
    inner_.allreduce(data, count, dtype_of(dtype), op_of(op));
  }
  void broadcast(void* data, std::size_t count, DType dtype, int root) override {
    inner_.broadcast(data, count, dtype_of(dtype), root);
  }
  void allgather(const void* send, void* recv, std::size_t count, DType dtype) override {
    inner_.allgather(send, recv, count, dtype_of(dtype));
  }
  void reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype,
                      ReduceOp op) override {
    inner_.reduce_scatter(send, recv, count, dtype_of(dtype), op_of(op));
  }
  void barrier() override { inner_.barrier(); }
  void abort(const std::string& reason) noexcept override { inner_.abort(reason); }
  bool aborted() const noexcept override { return inner_.aborted(); }

 private:
  DType dtype_of(DType dtype) const { return dtype == from_ ? to_ : dtype; }
  ReduceOp op_of(ReduceOp op) const { return op == op_from_ ? op_to_ : op; }
  Communicator& inner_;
  DType from_;
  DType to_;
  ReduceOp op_from_;
  ReduceOp op_to_;
};

int step_two_ranks_tcp() {
  const std::string step = "two-ranks-tcp";
  return on_two_processes(step, [&](int rank, Bootstrap& bootstrap) {
    primus::coll::Options options;
    options.timeout = 60s;
    auto comm = primus::coll::tcp_communicator(bootstrap, "nccl-check-two-ranks", options);
    HostMemory memory;
    int rc = report_check(step, rank, check_against_reference(*comm, memory), "TCP backend");
    struct Case {
      const char* what;
      DType from, to;
      ReduceOp op_from, op_to;
      std::vector<std::string> must_fail;
    };
    const Case cases[] = {
        {"bfloat16 handed on as float16",
         DType::kBFloat16,
         DType::kFloat16,
         ReduceOp::kSum,
         ReduceOp::kSum,
         {"allreduce bfloat16 sum", "reduce_scatter bfloat16 prod"}},
        {"float16 handed on as bfloat16",
         DType::kFloat16,
         DType::kBFloat16,
         ReduceOp::kSum,
         ReduceOp::kSum,
         {"allreduce float16 sum", "allreduce float16 prod"}},
        {"int32 handed on as float32",
         DType::kInt32,
         DType::kFloat32,
         ReduceOp::kSum,
         ReduceOp::kSum,
         {"allreduce int32 sum", "allreduce int32 max", "reduce_scatter int32 min"}},
        {"float32 handed on as int32",
         DType::kFloat32,
         DType::kInt32,
         ReduceOp::kSum,
         ReduceOp::kSum,
         {"allreduce float32 sum", "allreduce float32 max"}},
        {"max handed on as sum",
         DType::kFloat32,
         DType::kFloat32,
         ReduceOp::kMax,
         ReduceOp::kSum,
         {"allreduce float32 max", "allreduce uint8 max", "reduce_scatter int64 max"}},
    };
    for (const Case& c : cases) {
      Confused confused(*comm, c.from, c.to, c.op_from, c.op_to);
      const auto wrong = check_against_reference(confused, memory);
      std::string missed;
      for (const auto& name : c.must_fail) {
        bool seen = false;
        for (const auto& what : wrong)
          seen = seen || what.rfind(name + ":", 0) == 0;
        if (!seen) missed += (missed.empty() ? "" : ", ") + name;
      }
      if (missed.empty()) {
        pass(step + "-notices", "rank " + std::to_string(rank) + ": " + c.what + " (" +
                                    std::to_string(wrong.size()) + " wrong collectives)");
      } else {
        fail(step + "-notices",
             "rank " + std::to_string(rank) + ": " + c.what + " went unnoticed in " + missed);
        rc = 1;
      }
    }
    return rc;
  });
}
#endif

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
    if (step == "two-ranks") return step_two_ranks();
#ifndef NCCL_CHECK_NO_TCP_STORE
    if (step == "two-ranks-tcp") return step_two_ranks_tcp();
#endif
  } catch (const std::exception& e) {
    fail(step, std::string("error: ") + e.what());
    return 1;
  }
  std::cerr << "usage: nccl_check collectives | init-timeout MS | op-timeout MS | exchange-tcp "
               "RANK PORT | exchange-fork | two-ranks | two-ranks-tcp\n";
  return 2;
}

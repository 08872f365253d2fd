// libprimus-coll's TCP backend with real processes and sockets on this machine: every op and
// dtype at 1 to 8 ranks against an exact reference, bitwise equal results across ranks and
// runs, with and without integrity and the wait's spin, and 100 MiB allreduces.
// (coll_tcp_failure_test.cpp: failures and intruders.)
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "../../collectives/authenticated.hpp"
#include "../../collectives/reduce.hpp"
#include "coll_test_util.hpp"

namespace primus::coll {
namespace {

using testing::Job;
using testing::run_ranks;

std::uint64_t mix(std::uint64_t x) {  // splitmix64
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Input element i of `rank` for test case `c`, as a double that the dtype holds exactly.
double input(DType dtype, ReduceOp op, int rank, int c, std::size_t i) {
  const std::uint64_t bits =
      mix((static_cast<std::uint64_t>(c) << 40) ^ (static_cast<std::uint64_t>(rank) << 32) ^ i);
  const double unit = static_cast<double>(bits >> 11) / 9007199254740992.0;  // [0, 1)
  switch (dtype) {
    case DType::kFloat64:
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kBFloat16: {
      double value = op == ReduceOp::kProd ? 0.75 + unit * 0.5 : unit * 2 - 1;
      if (dtype == DType::kFloat32) value = static_cast<float>(value);
      if (dtype == DType::kFloat16) value = half_to_float(float_to_half(static_cast<float>(value)));
      if (dtype == DType::kBFloat16) {
        value = bfloat16_to_float(float_to_bfloat16(static_cast<float>(value)));
      }
      return value;
    }
    case DType::kUInt8:
      return op == ReduceOp::kProd ? 1 + static_cast<double>(bits % 3)
                                   : static_cast<double>(bits % 256);
    default:
      return op == ReduceOp::kProd
                 ? 1 + static_cast<double>(bits % 3)
                 : static_cast<double>(static_cast<std::int64_t>(bits % 2001) - 1000);
  }
}

void store(DType dtype, void* buffer, std::size_t i, double value) {
  auto* at = static_cast<std::uint8_t*>(buffer) + i * dtype_size(dtype);
  switch (dtype) {
    case DType::kFloat64:
      std::memcpy(at, &value, 8);
      break;
    case DType::kFloat32: {
      const float f = static_cast<float>(value);
      std::memcpy(at, &f, 4);
      break;
    }
    case DType::kFloat16: {
      const auto h = float_to_half(static_cast<float>(value));
      std::memcpy(at, &h, 2);
      break;
    }
    case DType::kBFloat16: {
      const auto h = float_to_bfloat16(static_cast<float>(value));
      std::memcpy(at, &h, 2);
      break;
    }
    case DType::kInt32: {
      const auto v = static_cast<std::int32_t>(value);
      std::memcpy(at, &v, 4);
      break;
    }
    case DType::kInt64: {
      const auto v = static_cast<std::int64_t>(value);
      std::memcpy(at, &v, 8);
      break;
    }
    case DType::kUInt8: {
      const auto v = static_cast<std::uint8_t>(value);
      std::memcpy(at, &v, 1);
      break;
    }
  }
}

double load(DType dtype, const void* buffer, std::size_t i) {
  const auto* at = static_cast<const std::uint8_t*>(buffer) + i * dtype_size(dtype);
  switch (dtype) {
    case DType::kFloat64: {
      double v;
      std::memcpy(&v, at, 8);
      return v;
    }
    case DType::kFloat32: {
      float v;
      std::memcpy(&v, at, 4);
      return v;
    }
    case DType::kFloat16: {
      std::uint16_t v;
      std::memcpy(&v, at, 2);
      return half_to_float(v);
    }
    case DType::kBFloat16: {
      std::uint16_t v;
      std::memcpy(&v, at, 2);
      return bfloat16_to_float(v);
    }
    case DType::kInt32: {
      std::int32_t v;
      std::memcpy(&v, at, 4);
      return v;
    }
    case DType::kInt64: {
      std::int64_t v;
      std::memcpy(&v, at, 8);
      return static_cast<double>(v);
    }
    case DType::kUInt8:
      return *at;
  }
  return 0;
}

// The reduction of every rank's input, and how far the result may be from it.
struct Expected {
  long double value = 0;  // exact (long double: 64 significant bits; sums of <= 8 float64)
  // Sums and products of floats: the result's distance from `value` is at most this. Max,
  // min and every integer op: exactly `value` (integers wrapped to the dtype's width).
  long double tolerance = 0;
  bool exact = true;
};

// What one combination may add, for a float dtype: `unit` relative (the unit roundoff, half
// the machine epsilon; float16 and bfloat16 are combined in float32 and rounded back, two
// roundings) and `tiny` absolute (half the dtype's smallest subnormal, near zero).
struct Rounding {
  long double unit = 0;
  long double tiny = 0;
};

Rounding rounding_of(DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
      return {0x1p-53L, 0x1p-1075L};
    case DType::kFloat32:
      return {0x1p-24L, 0x1p-150L};
    case DType::kFloat16:
      return {0x1p-11L + 0x1p-24L, 0x1p-25L};
    case DType::kBFloat16:
      return {0x1p-8L + 0x1p-24L, 0x1p-134L};
    default:
      return {};
  }
}

// Any order of the size-1 combinations (the ring's chain, recursive doubling's tree) rounds
// size-1 times, each time by at most unit * |partial result| + tiny, and no partial sum
// exceeds the sum of magnitudes M: |error| <= (size-1)(unit M + tiny) / (1 - (size-1) unit).
// A product rounds size-1 times relative to itself (no underflow: factors in [0.75, 1.25]).
// The 2^-10 slack covers the reference's own rounding in long double.
Expected reference(DType dtype, ReduceOp op, int size, int c, std::size_t i) {
  Expected expected;
  long double value = input(dtype, op, 0, c, i);
  long double magnitude = std::fabs(value);
  for (int r = 1; r < size; ++r) {
    const long double x = input(dtype, op, r, c, i);
    magnitude += std::fabs(x);
    switch (op) {
      case ReduceOp::kSum:
        value += x;
        break;
      case ReduceOp::kProd:
        value *= x;
        break;
      case ReduceOp::kMax:
        value = std::max(value, x);
        break;
      case ReduceOp::kMin:
        value = std::min(value, x);
        break;
    }
  }
  const Rounding rounding = rounding_of(dtype);
  const bool floating = rounding.unit > 0;
  if (floating && (op == ReduceOp::kSum || op == ReduceOp::kProd)) {
    const long double steps = size - 1;
    const long double growth = 1 / (1 - steps * rounding.unit) * (1 + 0x1p-10L);
    expected.exact = false;
    expected.tolerance = op == ReduceOp::kSum
                             ? steps * (rounding.unit * magnitude + rounding.tiny) * growth
                             : steps * rounding.unit * std::fabs(value) * growth;
  }
  if (dtype == DType::kUInt8) value = std::fmod(value, 256.0L);
  // int32/int64: products of up to 8 values of 1..3 and sums of +-1000 never wrap here.
  expected.value = value;
  return expected;
}

bool matches(const Expected& expected, double got) {
  if (expected.exact) return static_cast<long double>(got) == expected.value;
  return std::fabs(static_cast<long double>(got) - expected.value) <= expected.tolerance;
}

std::string describe(const Expected& expected, double got) {
  std::ostringstream text;
  text.precision(21);
  text << got << (expected.exact ? " != " : " is not within ") << expected.value;
  if (!expected.exact) text << " +- " << expected.tolerance;
  return text.str();
}

std::uint64_t digest(const void* data, std::size_t bytes, std::uint64_t h) {
  const auto* at = static_cast<const std::uint8_t*>(data);
  for (std::size_t i = 0; i < bytes; ++i)
    h = (h ^ at[i]) * 0x100000001B3ULL;
  return h;
}

const DType kDtypes[] = {DType::kFloat64, DType::kFloat32, DType::kFloat16, DType::kBFloat16,
                         DType::kInt32,   DType::kInt64,   DType::kUInt8};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kProd};

// Runs every op on every dtype; reports "bad ..." for each wrong element and "digest N".
void every_op(Communicator& comm, const std::function<void(const std::string&)>& report,
              const std::vector<std::size_t>& counts) {
  const int size = comm.size();
  std::uint64_t h = 0xCBF29CE484222325ULL;
  int c = 0;
  int bad = 0;
  auto fail = [&](const std::string& what) {
    if (++bad <= 20) report("bad " + what);
  };
  for (const std::size_t count : counts) {
    for (const DType dtype : kDtypes) {
      const std::size_t element = dtype_size(dtype);
      for (const ReduceOp op : kOps) {
        ++c;
        std::vector<std::uint8_t> data(count * element);
        for (std::size_t i = 0; i < count; ++i)
          store(dtype, data.data(), i, input(dtype, op, comm.rank(), c, i));
        comm.allreduce(data.data(), count, dtype, op);
        for (std::size_t i = 0; i < count; ++i) {
          const Expected want = reference(dtype, op, size, c, i);
          const double got = load(dtype, data.data(), i);
          if (!matches(want, got)) {
            std::ostringstream what;
            what << "allreduce " << to_string(op) << " " << to_string(dtype) << " count " << count
                 << " [" << i << "] " << describe(want, got);
            fail(what.str());
            break;
          }
        }
        h = digest(data.data(), data.size(), h);

        // reduce_scatter: every rank's blocks of `block` elements (the same total as above).
        ++c;
        const std::size_t block = std::max<std::size_t>(1, count / static_cast<std::size_t>(size));
        std::vector<std::uint8_t> send(block * element * static_cast<std::size_t>(size));
        for (std::size_t i = 0; i < block * static_cast<std::size_t>(size); ++i)
          store(dtype, send.data(), i, input(dtype, op, comm.rank(), c, i));
        std::vector<std::uint8_t> recv(block * element);
        comm.reduce_scatter(send.data(), recv.data(), block, dtype, op);
        for (std::size_t i = 0; i < block; ++i) {
          const Expected want =
              reference(dtype, op, size, c, static_cast<std::size_t>(comm.rank()) * block + i);
          const double got = load(dtype, recv.data(), i);
          if (!matches(want, got)) {
            fail("reduce_scatter " + std::string(to_string(op)) + " " +
                 std::string(to_string(dtype)) + " count " + std::to_string(block) + " [" +
                 std::to_string(i) + "] " + describe(want, got));
            break;
          }
        }
        // (Each rank holds another block: not part of the digest that must agree.)
      }
      // broadcast from a root that moves with the case; allgather.
      ++c;
      const int root = c % size;
      std::vector<std::uint8_t> data(count * element);
      for (std::size_t i = 0; i < count; ++i)
        store(dtype, data.data(), i, input(dtype, ReduceOp::kSum, comm.rank(), c, i));
      comm.broadcast(data.data(), count, dtype, root);
      for (std::size_t i = 0; i < count; ++i) {
        if (load(dtype, data.data(), i) != input(dtype, ReduceOp::kSum, root, c, i)) {
          fail("broadcast " + std::string(to_string(dtype)) + " count " + std::to_string(count));
          break;
        }
      }
      ++c;
      std::vector<std::uint8_t> mine(count * element);
      for (std::size_t i = 0; i < count; ++i)
        store(dtype, mine.data(), i, input(dtype, ReduceOp::kSum, comm.rank(), c, i));
      std::vector<std::uint8_t> all(count * element * static_cast<std::size_t>(size));
      comm.allgather(mine.data(), all.data(), count, dtype);
      for (int r = 0; r < size; ++r) {
        for (std::size_t i = 0; i < count; ++i) {
          if (load(dtype, all.data(), static_cast<std::size_t>(r) * count + i) !=
              input(dtype, ReduceOp::kSum, r, c, i)) {
            fail("allgather " + std::string(to_string(dtype)) + " count " + std::to_string(count));
            r = size;
            break;
          }
        }
      }
    }
  }
  comm.barrier();
  report("digest " + std::to_string(h));
}

std::string digest_of(const std::string& output) {
  const auto at = output.find("digest ");
  return at == std::string::npos ? "" : output.substr(at, output.find('\n', at) - at);
}

void expect_clean(const std::vector<testing::RankOutcome>& outcomes) {
  for (std::size_t r = 0; r < outcomes.size(); ++r) {
    EXPECT_TRUE(WIFEXITED(outcomes[r].status) && WEXITSTATUS(outcomes[r].status) == 0)
        << "rank " << r << ": " << outcomes[r].output;
    EXPECT_EQ(outcomes[r].output.find("bad "), std::string::npos)
        << "rank " << r << ": " << outcomes[r].output;
  }
}

TEST(CollTcp, EveryOpAndDtypeAtOneToEightRanksMatchesTheReferenceBitwiseEqualEverywhere) {
  // Sizes: one element, fewer than the ranks, not divisible by them, and 1 MiB of float64
  // (the ring, with several 16 KiB segments per block; 100 MiB comes below).
  const std::vector<std::size_t> counts = {1, 3, 1001, (std::size_t{1} << 17) + 5};
  for (int size = 1; size <= 8; ++size) {
    Job job;
    job.size = size;
    job.options.segment_bytes = 16 << 10;
    std::string first;
    for (int run = 0; run < 2; ++run) {
      const auto outcomes = run_ranks(
          job, [&](Communicator& comm, const auto& report) { every_op(comm, report, counts); });
      expect_clean(outcomes);
      std::set<std::string> digests;
      for (const auto& outcome : outcomes)
        digests.insert(digest_of(outcome.output));
      EXPECT_EQ(digests.size(), 1U) << size << " ranks: the results differ between ranks";
      if (run == 0) first = *digests.begin();
      EXPECT_EQ(*digests.begin(), first) << size << " ranks: the second run differs";
      EXPECT_NE(first, "");
    }
  }
}

// Spinning before a wait (Options::spin) changes when a rank sleeps, never the results: every
// op and dtype gives the same bits with it as without, here with more ranks than CPUs too.
TEST(CollTcp, SpinningBeforeAWaitGivesTheSameBitsAsSleepingAtOnce) {
  const std::vector<std::size_t> counts = {1, 1001, (std::size_t{1} << 17) + 5};
  for (const int size : {2, 5}) {
    std::string digest[2];
    for (const int spin : {0, 50}) {
      Job job;
      job.size = size;
      job.options.segment_bytes = 16 << 10;
      job.options.spin = std::chrono::microseconds(spin);
      const auto outcomes = run_ranks(
          job, [&](Communicator& comm, const auto& report) { every_op(comm, report, counts); });
      expect_clean(outcomes);
      std::set<std::string> digests;
      for (const auto& outcome : outcomes)
        digests.insert(digest_of(outcome.output));
      EXPECT_EQ(digests.size(), 1U) << size << " ranks, spin " << spin;
      digest[spin != 0] = *digests.begin();
    }
    EXPECT_NE(digest[0], "");
    EXPECT_EQ(digest[1], digest[0]) << size << " ranks: spinning changed a result";
  }
}

// The reduce-scatter receives each block piece by piece (Options::chunk_bytes), cut at the same
// offsets on both sides: pieces of 3 segments, blocks that are not whole pieces and that
// differ by an element between ranks give the same bits as whole blocks, with integrity too.
TEST(CollTcp, ReceivingBlocksPieceByPieceGivesTheSameBitsAsWhole) {
  const std::vector<std::size_t> counts = {1, 1001, (std::size_t{1} << 17) + 5};
  for (const int size : {2, 3, 5}) {
    std::string digest[3];
    for (int run = 0; run < 3; ++run) {
      Job job;
      job.size = size;
      job.options.segment_bytes = 16 << 10;
      job.options.chunk_bytes = run == 0 ? std::size_t{1} << 30 : 48 << 10;
      job.options.integrity = run == 2;
      const auto outcomes = run_ranks(
          job, [&](Communicator& comm, const auto& report) { every_op(comm, report, counts); });
      expect_clean(outcomes);
      std::set<std::string> digests;
      for (const auto& outcome : outcomes)
        digests.insert(digest_of(outcome.output));
      EXPECT_EQ(digests.size(), 1U) << size << " ranks, run " << run;
      digest[run] = *digests.begin();
    }
    EXPECT_NE(digest[0], "");
    EXPECT_EQ(digest[1], digest[0]) << size << " ranks: pieces changed a result";
    EXPECT_EQ(digest[2], digest[0]) << size << " ranks: pieces with integrity changed a result";
  }
}

// --primus-coll-integrity changes how the bytes travel, never the results: every op and dtype
// gives the same bits as without it, at sizes that end in a partial frame and that the ring
// reduces segment by segment while the rest (and its tags) is in flight.
TEST(CollTcp, WithIntegrityEveryOpGivesTheSameBitsAsWithout) {
  const std::vector<std::size_t> counts = {1, 1001, (std::size_t{1} << 17) + 5};
  for (const int size : {2, 3, 5}) {
    std::string digest[2];
    for (const bool integrity : {false, true}) {
      Job job;
      job.size = size;
      job.options.segment_bytes = 16 << 10;
      job.options.integrity = integrity;
      const auto outcomes = run_ranks(
          job, [&](Communicator& comm, const auto& report) { every_op(comm, report, counts); });
      expect_clean(outcomes);
      std::set<std::string> digests;
      for (const auto& outcome : outcomes)
        digests.insert(digest_of(outcome.output));
      EXPECT_EQ(digests.size(), 1U) << size << " ranks, integrity " << integrity;
      digest[integrity] = *digests.begin();
    }
    EXPECT_NE(digest[0], "");
    EXPECT_EQ(digest[1], digest[0]) << size << " ranks: integrity changed a result";
  }
}

// 100 MiB of float32 summed at 2 and 8 ranks: integers below 2^24 so that the sum is exact.
TEST(CollTcp, HundredMebibyteFloat32SumAtTwoAndEightRanks) {
  for (const int size : {2, 8}) {
    Job job;
    job.size = size;
    const auto outcomes = run_ranks(job, [](Communicator& comm, const auto& report) {
      const std::size_t count = std::size_t{25} << 20;
      std::vector<float> data(count);
      for (std::size_t i = 0; i < count; ++i)
        data[i] = static_cast<float>((i * 7 + static_cast<std::size_t>(comm.rank())) % 1024);
      comm.allreduce(data.data(), count, DType::kFloat32, ReduceOp::kSum);
      for (std::size_t i = 0; i < count; ++i) {
        double want = 0;
        for (int r = 0; r < comm.size(); ++r)
          want += static_cast<double>((i * 7 + static_cast<std::size_t>(r)) % 1024);
        if (data[i] != want) {
          report("bad element " + std::to_string(i));
          return;
        }
      }
      report("ok");
    });
    expect_clean(outcomes);
    for (const auto& outcome : outcomes)
      EXPECT_NE(outcome.output.find("ok"), std::string::npos) << outcome.output;
  }
}

// Point to point: rank 0 sends 12 MiB (more than the sockets hold) and then 3 int64 to rank 2,
// and 4 doubles to rank 1, with and without integrity; rank 3 takes no part; an allreduce after
// them sums as before; a send to itself or beyond the world is refused.
TEST(CollTcp, PointToPointMessagesArriveWholeInOrderAndMixWithCollectives) {
  for (const bool integrity : {false, true}) {
    Job job;
    job.size = 4;
    job.options.integrity = integrity;
    const auto outcomes = run_ranks(job, [](Communicator& comm, const auto& report) {
      std::vector<float> big(std::size_t{3} << 20);
      for (std::size_t i = 0; i < big.size(); ++i)
        big[i] = static_cast<float>(i % 100003);
      std::vector<std::int64_t> small = {7, 8, 9};
      std::vector<double> doubles(4, 5.0);
      bool right = true;
      if (comm.rank() == 0) {
        comm.send(big.data(), big.size(), DType::kFloat32, 2);
        comm.send(small.data(), small.size(), DType::kInt64, 2);
        comm.send(doubles.data(), doubles.size(), DType::kFloat64, 1);
      } else if (comm.rank() == 2) {
        std::vector<float> got(big.size());
        std::vector<std::int64_t> got_small(3);
        comm.recv(got.data(), got.size(), DType::kFloat32, 0);
        comm.recv(got_small.data(), got_small.size(), DType::kInt64, 0);
        right = got == big && got_small == small;
      } else if (comm.rank() == 1) {
        std::vector<double> got(4);
        comm.recv(got.data(), got.size(), DType::kFloat64, 0);
        right = got == doubles;
      }
      std::int32_t one = 1;
      comm.allreduce(&one, 1, DType::kInt32, ReduceOp::kSum);
      int refused = 0;
      for (const int bad : {comm.rank(), comm.size(), -1}) {
        try {
          comm.send(&one, 1, DType::kInt32, bad);
        } catch (const CollectiveError&) {
          ++refused;
        }
      }
      report(right && one == 4 && refused == 3 ? "ok" : "wrong");
    });
    expect_clean(outcomes);
    for (const auto& outcome : outcomes)
      EXPECT_NE(outcome.output.find("ok"), std::string::npos) << integrity << outcome.output;
  }
}

}  // namespace
}  // namespace primus::coll

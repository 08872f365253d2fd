// primus-bench-collectives: an nccl-tests-style sweep of one collective over message sizes
// (size, count, time, algbw, busbw, wrong elements), with libprimus-coll's TCP backend; every
// rank runs it, bootstrapped from the environment (srun --primus --mpi=pmix, mpirun, or
// RANK/WORLD_SIZE/MASTER_ADDR/PRIMUS_PORT with PRIMUS_JOB_SECRET). Rank 0 prints.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "../../common/cli/command_line.hpp"
#include "primus/collectives.hpp"
#include "reduce.hpp"

namespace {

using primus::coll::Communicator;
using primus::coll::DType;
using primus::coll::ReduceOp;

constexpr const char* kUsage =
    "usage: primus-bench-collectives [options]\n"
    "Every rank runs it; rank 0 prints one line per message size.\n"
    "  -o, --op NAME        allreduce (default), broadcast, allgather, reduce_scatter, barrier\n"
    "  -d, --dtype NAME     float32 (default), float64, float16, bfloat16, int32, int64, uint8\n"
    "  -r, --redop NAME     sum (default), max, min, prod\n"
    "  -b, --min-bytes N    smallest message (default 8; suffixes K, M, G)\n"
    "  -e, --max-bytes N    largest message (default 256M)\n"
    "  -f, --factor N       size multiplier between lines (default 2)\n"
    "  -n, --iters N        timed iterations per size (default: by size, 5 to 1000)\n"
    "  -w, --warmup N       untimed iterations per size (default 2)\n"
    "  -c, --check          check every result against its expected value (#wrong column);\n"
    "                       exit 1 if any is wrong\n"
    "  -h, --help           this text\n"
    "Bootstrap and authentication come from the environment: PRIMUS_JOB_SECRET, PRIMUS_BOOTSTRAP\n"
    "(pmix or tcp; tcp needs RANK, WORLD_SIZE, MASTER_ADDR, PRIMUS_PORT), PRIMUS_COLL_TIMEOUT,\n"
    "PRIMUS_COLL_INTEGRITY (1: authenticate every message, --primus-coll-integrity).\n"
    "busbw = algbw x 2(n-1)/n for allreduce, (n-1)/n for allgather and reduce_scatter, 1 for\n"
    "broadcast: the bandwidth each link carries, comparable across rank counts.\n";

struct Settings {
  std::string op = "allreduce";
  DType dtype = DType::kFloat32;
  ReduceOp redop = ReduceOp::kSum;
  std::size_t min_bytes = 8;
  std::size_t max_bytes = std::size_t{256} << 20;
  std::size_t factor = 2;
  long iters = 0;
  long warmup = 2;
  bool check = false;
};

[[noreturn]] void usage_error(const std::string& what) {
  std::cerr << "primus-bench-collectives: " << what << "\n(see --help)\n";
  std::exit(2);
}

std::size_t parse_size(const std::string& option, const std::string& text) {
  std::size_t used = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &used);
  } catch (const std::exception&) {
    usage_error(option + " '" + text + "': expected a number of bytes such as 8, 64K or 1M");
  }
  std::string suffix = text.substr(used);
  int shift = 0;
  if (suffix == "K" || suffix == "k")
    shift = 10;
  else if (suffix == "M" || suffix == "m")
    shift = 20;
  else if (suffix == "G" || suffix == "g")
    shift = 30;
  else if (!suffix.empty())
    usage_error(option + " '" + text + "': unknown suffix '" + suffix + "' (K, M, G)");
  if (value > (std::size_t{1} << 40) >> shift) usage_error(option + " '" + text + "': too large");
  return static_cast<std::size_t>(value) << shift;
}

long parse_count(const std::string& option, const std::string& text, long low) {
  try {
    std::size_t used = 0;
    const long value = std::stol(text, &used);
    if (used == text.size() && value >= low) return value;
  } catch (const std::exception&) {
  }
  usage_error(option + " '" + text + "': expected a whole number of at least " +
              std::to_string(low));
}

Settings parse(int argc, char** argv) {
  using primus::cli::Arg;
  primus::cli::Parser parser(" (see --help)");
  parser.add({"op", Arg::kRequired, "NAME", "a collective", "", nullptr, 'o'})
      .add({"dtype", Arg::kRequired, "NAME", "a dtype", "", nullptr, 'd'})
      .add({"redop", Arg::kRequired, "NAME", "a reduction", "", nullptr, 'r'})
      .add({"min-bytes", Arg::kRequired, "N", "a number of bytes", "", nullptr, 'b'})
      .add({"max-bytes", Arg::kRequired, "N", "a number of bytes", "", nullptr, 'e'})
      .add({"factor", Arg::kRequired, "N", "a whole number", "", nullptr, 'f'})
      .add({"iters", Arg::kRequired, "N", "a whole number", "", nullptr, 'n'})
      .add({"warmup", Arg::kRequired, "N", "a whole number", "", nullptr, 'w'})
      .add({"check", Arg::kNone, "", "", "", nullptr, 'c'});
  primus::cli::Parsed args;
  try {
    args = parser.parse(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const primus::cli::UsageError& e) {
    std::cerr << "primus-bench-collectives: " << e.what() << "\n";
    std::exit(2);
  }
  if (args.help) {
    std::cout << kUsage;
    std::exit(0);
  }
  Settings s;
  if (const auto op = args.value("op")) {
    s.op = *op;
    if (s.op != "allreduce" && s.op != "broadcast" && s.op != "allgather" &&
        s.op != "reduce_scatter" && s.op != "barrier") {
      usage_error("--op '" + s.op +
                  "': expected allreduce, broadcast, allgather, reduce_scatter or barrier");
    }
  }
  if (const auto name = args.value("dtype")) {
    const auto dtype = primus::coll::parse_dtype(*name);
    if (!dtype) {
      usage_error("--dtype '" + *name +
                  "': expected float64, float32, float16, bfloat16, int32, int64 or uint8");
    }
    s.dtype = *dtype;
  }
  if (const auto name = args.value("redop")) {
    const auto op = primus::coll::parse_reduce_op(*name);
    if (!op) usage_error("--redop '" + *name + "': expected sum, max, min or prod");
    s.redop = *op;
  }
  if (const auto v = args.value("min-bytes")) s.min_bytes = parse_size("--min-bytes", *v);
  if (const auto v = args.value("max-bytes")) s.max_bytes = parse_size("--max-bytes", *v);
  if (const auto v = args.value("factor")) {
    s.factor = static_cast<std::size_t>(parse_count("--factor", *v, 2));
  }
  if (const auto v = args.value("iters")) s.iters = parse_count("--iters", *v, 1);
  if (const auto v = args.value("warmup")) s.warmup = parse_count("--warmup", *v, 0);
  s.check = args.has("check");
  if (s.min_bytes > s.max_bytes) usage_error("--min-bytes is larger than --max-bytes");
  return s;
}

// The largest L such that every integer from 0 to L is exact in the dtype (int64: in the
// double that the check computes with).
double exact_limit(DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
    case DType::kInt64:
      return 0x1p53;
    case DType::kFloat32:
      return 0x1p24;
    case DType::kFloat16:
      return 2048;
    case DType::kBFloat16:
      return 256;
    case DType::kInt32:
      return 2147483647.0;
    case DType::kUInt8:
      return 255;
  }
  return 0;
}

// The input values, which every rank can predict and which differ from rank to rank: element
// i of a rank is the digit (i mod digits) of the rank in base `base`, plus i, modulo base, so
// that two ranks differ in every element where their digits differ; with base >= ranks (all
// but a sum of bfloat16 over more than 16 ranks) in every element. The base keeps every result
// exact in any order of the reduction: a sum of n values below base is at most the dtype's
// exact limit (uint8 wraps as the reduction does); a product multiplies 1s and 2s (powers of
// two); max, min, broadcast and allgather only need values the dtype holds.
struct Pattern {
  std::uint64_t base = 2;
  std::size_t digits = 1;
  bool powers_of_two = false;

  Pattern(const std::string& op, DType dtype, ReduceOp redop, int ranks) {
    const bool reduces = op == "allreduce" || op == "reduce_scatter";
    const double limit = exact_limit(dtype);
    if (reduces && redop == ReduceOp::kProd) {
      powers_of_two = true;
    } else if (reduces && redop == ReduceOp::kSum && dtype != DType::kUInt8) {
      base = std::max<std::uint64_t>(
          2, static_cast<std::uint64_t>(std::floor(limit / static_cast<double>(ranks))) + 1);
    } else {
      base = static_cast<std::uint64_t>(std::min(limit, 0x1p20)) + 1;
    }
    for (auto largest = static_cast<std::uint64_t>(std::max(ranks - 1, 0)); largest >= base;
         largest /= base)
      ++digits;
  }

  double operator()(int rank, std::size_t i) const {
    auto digit = static_cast<std::uint64_t>(rank);
    for (std::size_t position = i % digits; position > 0; --position)
      digit /= base;
    const std::uint64_t value = (digit % base + i % base) % base;
    return powers_of_two ? 1.0 + static_cast<double>(value) : static_cast<double>(value);
  }
};

void put(DType dtype, std::vector<std::uint8_t>& buffer, std::size_t i, double value) {
  std::uint8_t* at = buffer.data() + i * primus::coll::dtype_size(dtype);
  auto store = [at](auto v) { std::memcpy(at, &v, sizeof v); };
  switch (dtype) {
    case DType::kFloat64:
      store(value);
      break;
    case DType::kFloat32:
      store(static_cast<float>(value));
      break;
    case DType::kFloat16:
      store(primus::coll::float_to_half(static_cast<float>(value)));
      break;
    case DType::kBFloat16:
      store(primus::coll::float_to_bfloat16(static_cast<float>(value)));
      break;
    case DType::kInt32:
      store(static_cast<std::int32_t>(value));
      break;
    case DType::kInt64:
      store(static_cast<std::int64_t>(value));
      break;
    case DType::kUInt8:
      store(static_cast<std::uint8_t>(std::fmod(value, 256.0)));
      break;
  }
}

double get(DType dtype, const std::vector<std::uint8_t>& buffer, std::size_t i) {
  const std::uint8_t* at = buffer.data() + i * primus::coll::dtype_size(dtype);
  auto load = [at](auto v) {
    std::memcpy(&v, at, sizeof v);
    return v;
  };
  switch (dtype) {
    case DType::kFloat64:
      return load(0.0);
    case DType::kFloat32:
      return load(0.0F);
    case DType::kFloat16:
      return primus::coll::half_to_float(load(std::uint16_t{}));
    case DType::kBFloat16:
      return primus::coll::bfloat16_to_float(load(std::uint16_t{}));
    case DType::kInt32:
      return load(std::int32_t{});
    case DType::kInt64:
      return static_cast<double>(load(std::int64_t{}));
    case DType::kUInt8:
      return load(std::uint8_t{});
  }
  return 0;
}

double expected_reduction(const Pattern& pattern, ReduceOp op, int size, std::size_t i) {
  double value = pattern(0, i);
  for (int r = 1; r < size; ++r) {
    const double x = pattern(r, i);
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
  return value;
}

struct Result {
  double seconds = 0;
  long wrong = 0;
};

Result run_size(Communicator& comm, const Settings& s, const Pattern& pattern, std::size_t count) {
  const int n = comm.size();
  const std::size_t element = primus::coll::dtype_size(s.dtype);
  std::vector<std::uint8_t> in(count * element *
                               (s.op == "reduce_scatter" ? static_cast<std::size_t>(n) : 1));
  std::vector<std::uint8_t> out(s.op == "allgather" ? count * element * static_cast<std::size_t>(n)
                                                    : count * element);
  auto fill = [&] {
    const std::size_t elements = in.size() / element;
    for (std::size_t i = 0; i < elements; ++i)
      put(s.dtype, in, i, pattern(comm.rank(), i));
  };
  auto once = [&] {
    if (s.op == "allreduce") {
      comm.allreduce(in.data(), count, s.dtype, s.redop);
    } else if (s.op == "broadcast") {
      comm.broadcast(in.data(), count, s.dtype, 0);
    } else if (s.op == "allgather") {
      comm.allgather(in.data(), out.data(), count, s.dtype);
    } else if (s.op == "reduce_scatter") {
      comm.reduce_scatter(in.data(), out.data(), count, s.dtype, s.redop);
    } else {
      comm.barrier();
    }
  };
  Result result;
  long iters = s.iters;
  if (iters == 0) {
    const std::size_t bytes = std::max<std::size_t>(count * element, 1);
    iters = static_cast<long>(std::clamp<std::size_t>((std::size_t{512} << 20) / bytes, 5, 1000));
  }
  for (long i = 0; i < s.warmup; ++i) {
    fill();
    once();
  }
  if (s.check) {
    fill();
    once();
    for (std::size_t i = 0; i < count; ++i) {
      double want = 0;
      double got = 0;
      if (s.op == "allreduce") {
        want = expected_reduction(pattern, s.redop, n, i);
        got = get(s.dtype, in, i);
      } else if (s.op == "broadcast") {
        want = pattern(0, i);
        got = get(s.dtype, in, i);
      } else if (s.op == "reduce_scatter") {
        want = expected_reduction(pattern, s.redop, n,
                                  static_cast<std::size_t>(comm.rank()) * count + i);
        got = get(s.dtype, out, i);
      } else if (s.op == "allgather") {
        for (int r = 0; r < n; ++r) {
          if (get(s.dtype, out, static_cast<std::size_t>(r) * count + i) != pattern(r, i))
            ++result.wrong;
        }
        continue;
      } else {
        break;
      }
      // Integers and the dtype's rounding of a small integer result.
      if (get(
              s.dtype,
              [&] {
                std::vector<std::uint8_t> b(element);
                put(s.dtype, b, 0, want);
                return b;
              }(),
              0) != got) {
        ++result.wrong;
      }
    }
  }
  fill();
  comm.barrier();
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < iters; ++i)
    once();
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
                   static_cast<double>(iters);
  comm.allreduce(&elapsed, 1, DType::kFloat64, ReduceOp::kMax);
  long long wrong = result.wrong;
  comm.allreduce(&wrong, 1, DType::kInt64, ReduceOp::kSum);
  result.seconds = elapsed;
  result.wrong = static_cast<long>(wrong);
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  const Settings s = parse(argc, argv);
  try {
    const auto comm = primus::coll::connect_from_environment();
    const int n = comm->size();
    const std::size_t element = primus::coll::dtype_size(s.dtype);
    if (comm->rank() == 0) {
      std::printf("# primus-bench-collectives: %s, %d ranks, backend %s%s, dtype %s, redop %s\n",
                  s.op.c_str(), n, comm->backend().c_str(),
                  comm->integrity() ? " (every message authenticated)" : "",
                  std::string(primus::coll::to_string(s.dtype)).c_str(),
                  std::string(primus::coll::to_string(s.redop)).c_str());
      std::printf("# %12s %12s %8s %8s %12s %12s %12s %8s\n", "size(B)", "count", "type", "redop",
                  "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
    }
    double factor = 1;
    if (s.op == "allreduce")
      factor = 2.0 * (n - 1) / n;
    else if (s.op == "allgather" || s.op == "reduce_scatter")
      factor = static_cast<double>(n - 1) / n;
    long total_wrong = 0;
    const Pattern pattern(s.op, s.dtype, s.redop, n);
    for (std::size_t bytes = s.min_bytes; bytes <= s.max_bytes; bytes *= s.factor) {
      const std::size_t count = std::max<std::size_t>(1, bytes / element);
      const Result r = run_size(*comm, s, pattern, count);
      total_wrong += r.wrong;
      // allgather: the message is what each rank ends with (n blocks), as nccl-tests counts it.
      const double moved = static_cast<double>(count * element) *
                           (s.op == "allgather" || s.op == "reduce_scatter" ? n : 1);
      const double algbw = r.seconds > 0 ? moved / r.seconds / 1e9 : 0;
      if (comm->rank() == 0) {
        std::printf("  %12zu %12zu %8s %8s %12.2f %12.3f %12.3f %8s\n", count * element, count,
                    std::string(primus::coll::to_string(s.dtype)).c_str(),
                    std::string(primus::coll::to_string(s.redop)).c_str(), r.seconds * 1e6, algbw,
                    algbw * factor, s.check ? std::to_string(r.wrong).c_str() : "-");
        std::fflush(stdout);
      }
      if (bytes > s.max_bytes / s.factor) break;
    }
    if (comm->rank() == 0 && s.check) std::printf("# %ld wrong elements\n", total_wrong);
    return total_wrong == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "primus-bench-collectives: " << e.what() << "\n";
    return 1;
  }
}

// One rank's plan of an epoch of 10^9 records over 1,024 ranks: the record numbers of rank 0's
// share of every global batch (about 976,000), computed as a rank computes them, with no table.
// Prints the time for each shuffle mode, the ratio to shuffle=none measured in the same run (the
// cost of the permutation per record), and the resident memory before and after: the plan's
// memory does not grow with the record count (at most one global batch's share is held).
// Exits 1 when the memory grew by more than 16 MiB.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "primus/data.hpp"

namespace {

using primus::data::EpochPlan;
using primus::data::PlanSettings;
using primus::data::Shuffle;

constexpr std::uint64_t kRecords = 1000000000ULL;
constexpr std::uint32_t kRanks = 1024;
constexpr std::uint64_t kGlobalBatch = 64 * kRanks;

long resident_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

struct Result {
  double seconds = 0;
  std::uint64_t ids = 0;
  std::uint64_t checksum = 0;
};

Result plan_epoch(Shuffle shuffle) {
  PlanSettings settings;
  settings.fingerprint = "bench";
  settings.records = kRecords;
  settings.global_batch_size = kGlobalBatch;
  settings.shuffle = shuffle;
  settings.shuffle_block = 1024;
  settings.seed = 42;
  const auto start = std::chrono::steady_clock::now();
  const EpochPlan plan(settings, 7, kRanks);
  std::vector<std::uint64_t> share;
  Result result;
  for (std::uint64_t step = 0; step < plan.steps(); ++step) {
    plan.share(step, 0, share);
    result.ids += share.size();
    for (const std::uint64_t id : share)
      result.checksum += id;
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace

int main() {
  const long before = resident_kib();
  std::printf(
      "one rank's plan of an epoch: 10^9 records, %u ranks, %llu records per global "
      "batch\n",
      kRanks, static_cast<unsigned long long>(kGlobalBatch));
  const Result none = plan_epoch(Shuffle::kNone);
  std::printf("  shuffle=none     %8.3f s  %llu records (the baseline)\n", none.seconds,
              static_cast<unsigned long long>(none.ids));
  int status = 0;
  for (const Shuffle shuffle : {Shuffle::kBlocks, Shuffle::kRecords}) {
    const Result r = plan_epoch(shuffle);
    std::printf("  shuffle=%-8s %8.3f s  %llu records, %.1f ns a record, %.1fx shuffle=none\n",
                std::string(primus::data::to_string(shuffle)).c_str(), r.seconds,
                static_cast<unsigned long long>(r.ids), 1e9 * r.seconds / r.ids,
                r.seconds / std::max(none.seconds, 1e-9));
    if (r.ids != none.ids) status = 1;
  }
  const long after = resident_kib();
  std::printf(
      "  resident memory: %ld KiB before, %ld KiB after (a table of the order would be "
      "%llu MiB)\n",
      before, after, static_cast<unsigned long long>(kRecords * 8 >> 20));
  if (after - before > 16 * 1024) {
    std::printf("FAIL: the plan's memory grew by %ld KiB\n", after - before);
    status = 1;
  }
  return status;
}

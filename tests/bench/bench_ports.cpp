// Measured collision rate of the derived port path (no MpiParams=ports): K unrelated jobs with
// one step each (and each its own job secret) share a node; how often do two of them get
// overlapping port blocks? Printed next
// to the analytic rate for uniform slots, computed in the same run.
#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "primus/common/ports.hpp"

int main() {
  const primus::PortRange range{20000, 29999};
  const std::uint32_t slots = primus::derived_slot_count(range);
  std::mt19937_64 rng(2026);
  std::printf("primus-bench-ports: derived port blocks, range %u-%u, %u slots of %u ports\n\n",
              range.lo, range.hi, slots, primus::kDerivedPortSlot);
  std::printf("%-14s %9s %20s %20s %12s\n", "jobs on node", "trials", "P(any clash) measured",
              "P(any clash) uniform", "ratio");
  for (const int jobs : {2, 4, 8, 16, 32}) {
    const int trials = 20000;
    int clashes = 0;
    for (int t = 0; t < trials; ++t) {
      std::set<std::uint16_t> used;
      bool clash = false;
      std::set<std::uint64_t> ids;
      while (ids.size() < static_cast<std::size_t>(jobs))
        ids.insert(1 + rng() % 50000000);
      for (const std::uint64_t job : ids) {
        const std::uint64_t step = rng() % 4;
        std::string secret(64, '0');  // each job has its own secret
        for (char& c : secret)
          c = "0123456789abcdef"[rng() % 16];
        for (const std::uint16_t port : primus::derive_port_block(job, step, range, 2, secret)) {
          if (!used.insert(port).second) clash = true;
        }
      }
      clashes += clash ? 1 : 0;
    }
    double no_clash = 1.0;
    for (int i = 1; i < jobs; ++i)
      no_clash *= 1.0 - static_cast<double>(i) / slots;
    const double measured = static_cast<double>(clashes) / trials;
    std::printf("%-14d %9d %20.4f %20.4f %12.2f\n", jobs, trials, measured, 1.0 - no_clash,
                measured / (1.0 - no_clash));
  }
  std::printf(
      "\nPer pair of unrelated jobs: 1/%u = %.4f. Sites that set MpiParams=ports=LO-HI "
      "get Slurm's reservation instead, which never collides.\n",
      slots, 1.0 / slots);
  return 0;
}

// bench_monitor.py's reference loop: the CPU that understanding a heartbeat takes at the least,
// what the launcher's CPU per heartbeat is held against in the same run. Reads a file of
// heartbeat lines (JSON, one per line, as the primus package sends them), parses every line
// with nlohmann/json (the launcher's parser) and reads its step count, over and over for at
// least a second of CPU, and prints the CPU microseconds per line.
//   primus-bench-heartbeat-parse FILE
#include <sys/resource.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: primus-bench-heartbeat-parse FILE\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  if (lines.empty()) {
    std::fprintf(stderr, "primus-bench-heartbeat-parse: %s: no lines\n", argv[1]);
    return 1;
  }
  std::uint64_t parsed = 0;
  std::uint64_t steps = 0;
  const double start = cpu_seconds();
  double used = 0;
  while (used < 1.0) {
    for (const std::string& line : lines) {
      const nlohmann::json message = nlohmann::json::parse(line);
      steps += message.at("steps").get<std::uint64_t>();
      ++parsed;
    }
    used = cpu_seconds() - start;
  }
  std::printf("%.3f us per line (%llu lines, %llu steps)\n",
              used / static_cast<double>(parsed) * 1e6, static_cast<unsigned long long>(parsed),
              static_cast<unsigned long long>(steps));
  return 0;
}

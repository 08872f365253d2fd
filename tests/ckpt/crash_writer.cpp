// crash-writer: saves steps FROM..FROM+COUNT-1 into ROOT as a world of two ranks simulated in
// one process (rank 0's RankWriter, then rank 1's, then commit), each with the deterministic
// contents of crash_common.hpp for generation G (--generation, default 0). --repeat R saves each
// step R times in a row, as generations G, G+1, ..., G+R-1 (a job restarted at the step it had
// saved, again and again). The reliability tests kill it at every phase of a save
// (crash-consistency.test, crash-resave.test), trace it (commit-order.test), fill its disk
// (disk-full.test) and fail its syscalls (io-errors.test).
//
// Silent unless --verbose (the crash tests count its write syscalls). A failed save prints
// "crash-writer: step N: <the library's message>" and exits 1.
//
// CRASH_WRITER_SABOTAGE=drop-previous|wrong-data|mixed-generation breaks the protocol on
// purpose, so that the tests can show that they notice: drop-previous deletes the committed
// steps before saving (what a writer that pruned too early would do), wrong-data saves rank 1's
// rows of the next step (a checkpoint that verifies but holds the wrong values),
// mixed-generation saves rank 1's rows of the previous generation (a checkpoint of the right
// step that mixes two saves of it).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "crash_common.hpp"
#include "primus/ckpt.hpp"
#include "primus/common/error.hpp"

namespace {

using namespace primus::ckpt;

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: crash-writer ROOT --from STEP [--count N] [--generation G] [--repeat R] "
               "[--rows R | --mib M] [--chunk-kib K] [--verbose]\n"
               "  --generation G: the first save's generation (0 to %lld, default 0)\n"
               "  --repeat R: save each step R times, as generations G..G+R-1 (default 1)\n"
               "  --chunk-kib K: target HDF5 chunk size (default 32; 0: the library's default)\n",
               static_cast<long long>(crash::kGenerations - 1));
  std::exit(2);
}

std::int64_t number(const char* text) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < 0) usage();
  return value;
}

void save(const std::filesystem::path& root, std::int64_t step, std::int64_t generation,
          std::uint64_t rows, std::uint64_t chunk_bytes, const std::string& sabotage) {
  if (sabotage == "drop-previous") {
    for (const StepEntry& entry : list_steps(root))
      std::filesystem::remove_all(entry.dir);
  }
  WriteOptions options;
  if (chunk_bytes > 0) options.chunk_bytes = chunk_bytes;
  for (int rank = 0; rank < crash::kWorld; ++rank) {
    RankWriter writer(root, step, rank, crash::kWorld, options);
    const std::int64_t data_step = sabotage == "wrong-data" && rank == 1 ? step + 1 : step;
    const std::int64_t data_generation =
        sabotage == "mixed-generation" && rank == 1 && generation > 0 ? generation - 1 : generation;
    crash::write_rank(writer, step, rank, rows, data_step, generation, data_generation);
  }
  commit(root, step, crash::kWorld);
}

}  // namespace

// LeakSanitizer (--enable-sanitizers): libhdf5 1.10 leaks its chunk buffer when a chunk write
// fails (disk-full.test). What is allocated inside libhdf5 and never freed is HDF5's own leak:
// identifiers a caller forgets to close are freed by HDF5's atexit handler, before the check.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libhdf5\n";
}

int main(int argc, char** argv) {
  if (argc < 2) usage();
  const std::filesystem::path root = argv[1];
  std::int64_t from = -1;
  std::int64_t count = 1;
  std::int64_t generation = 0;
  std::int64_t repeat = 1;
  std::uint64_t rows = crash::kDefaultRows;
  std::uint64_t chunk_bytes = crash::kChunkBytes;
  bool verbose = false;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--verbose") {
      verbose = true;
    } else if (i + 1 < argc && arg == "--from") {
      from = number(argv[++i]);
    } else if (i + 1 < argc && arg == "--count") {
      count = number(argv[++i]);
    } else if (i + 1 < argc && arg == "--generation") {
      generation = number(argv[++i]);
    } else if (i + 1 < argc && arg == "--repeat") {
      repeat = number(argv[++i]);
    } else if (i + 1 < argc && arg == "--rows") {
      rows = static_cast<std::uint64_t>(number(argv[++i]));
    } else if (i + 1 < argc && arg == "--chunk-kib") {
      chunk_bytes = static_cast<std::uint64_t>(number(argv[++i])) << 10;
    } else if (i + 1 < argc && arg == "--mib") {
      rows = static_cast<std::uint64_t>(number(argv[++i])) * (std::uint64_t{1} << 20) /
             (crash::kCols * sizeof(float));
    } else {
      usage();
    }
  }
  if (from < 0 || rows < static_cast<std::uint64_t>(crash::kWorld) || repeat < 1 ||
      generation >= crash::kGenerations || repeat > crash::kGenerations - generation) {
    usage();
  }
  const char* sabotage = std::getenv("CRASH_WRITER_SABOTAGE");
  for (std::int64_t step = from; step < from + count; ++step) {
    for (std::int64_t g = generation; g < generation + repeat; ++g) {
      try {
        save(root, step, g, rows, chunk_bytes, sabotage != nullptr ? sabotage : "");
      } catch (const std::exception& e) {
        std::fprintf(stderr, "crash-writer: step %lld: %s\n", static_cast<long long>(step),
                     e.what());
        return 1;
      }
      if (verbose) {
        std::printf("saved step %lld generation %lld\n", static_cast<long long>(step),
                    static_cast<long long>(g));
      }
    }
  }
  return 0;
}

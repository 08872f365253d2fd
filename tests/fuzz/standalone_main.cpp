// A main() for fuzz targets built without libFuzzer (e.g. with g++ and -fsanitize=address):
// replays every file named on the command line, and every file under each directory named,
// through LLVMFuzzerTestOneInput. Arguments starting with '-' (libFuzzer flags) are ignored.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

bool replay(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    return false;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t count = 0;
  bool ok = true;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (!arg.empty() && arg[0] == '-') continue;
    std::error_code error;
    if (std::filesystem::is_directory(arg, error)) {
      for (const auto& entry : std::filesystem::recursive_directory_iterator(arg, error)) {
        if (!entry.is_regular_file()) continue;
        ok = replay(entry.path()) && ok;
        ++count;
      }
    } else {
      ok = replay(arg) && ok;
      ++count;
    }
    if (error) {
      std::fprintf(stderr, "cannot list %s: %s\n", arg.c_str(), error.message().c_str());
      ok = false;
    }
  }
  std::printf("replayed %zu inputs\n", count);
  if (count == 0) std::fprintf(stderr, "no input to replay: a replay of nothing proves nothing\n");
  return ok && count > 0 ? 0 : 1;
}

#include "checkpoint_root.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <system_error>

#include "primus/ckpt/layout.hpp"

namespace primus::ckpt::tool {
namespace {

constexpr std::uintmax_t kMaxManifestBytes = std::uintmax_t{256} << 20;

}  // namespace

std::filesystem::path checked_root(const std::string& dir) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(dir, error);
  if (status.type() == std::filesystem::file_type::not_found) {
    throw Error(dir + ": no such directory");
  }
  if (error) throw Error(dir + ": " + error.message());
  if (status.type() != std::filesystem::file_type::directory) {
    throw Error(dir + ": not a directory");
  }
  return dir;
}

std::optional<Manifest> read_manifest_unverified(const std::filesystem::path& dir,
                                                 std::string* error) {
  const std::filesystem::path path = dir / kManifestName;
  try {
    std::error_code size_error;
    const std::uintmax_t size = std::filesystem::file_size(path, size_error);
    if (size_error) throw Error(path.string() + ": " + size_error.message());
    if (size > kMaxManifestBytes) throw Error(path.string() + ": too large for a manifest");
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in) throw Error(path.string() + ": cannot read it");
    return parse_manifest(text.str(), path.string());
  } catch (const Error& e) {
    if (error != nullptr) *error = e.what();
    return std::nullopt;
  }
}

std::vector<Leftover> leftovers(const std::filesystem::path& root) {
  std::vector<Leftover> found;
  std::error_code error;
  for (std::filesystem::directory_iterator it(root, error), end; !error && it != end;
       it.increment(error)) {
    const auto step = parse_temporary_dir_name(it->path().filename().string());
    if (!step || !it->is_directory()) continue;
    Leftover leftover;
    leftover.step = *step;
    leftover.dir = it->path();
    struct stat info {};
    if (::stat(it->path().c_str(), &info) == 0) leftover.modified = utc_iso8601(info.st_mtime);
    std::error_code inner;
    for (std::filesystem::directory_iterator file(it->path(), inner), last; !inner && file != last;
         file.increment(inner)) {
      std::error_code size_error;
      if (!file->is_regular_file(size_error)) continue;
      const std::uintmax_t size = file->file_size(size_error);
      if (!size_error) leftover.bytes += size;
      if (parse_rank_file_name(file->path().filename().string())) ++leftover.rank_files;
    }
    found.push_back(std::move(leftover));
  }
  if (error) throw Error("cannot list " + root.string() + ": " + error.message());
  std::sort(found.begin(), found.end(),
            [](const Leftover& a, const Leftover& b) { return a.step > b.step; });
  return found;
}

std::string utc_iso8601(std::time_t time) {
  std::tm tm{};
  gmtime_r(&time, &tm);
  char text[32] = {};
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

}  // namespace primus::ckpt::tool

#include "primus/ckpt/store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <set>
#include <system_error>

#include "fs.hpp"
#include "primus/ckpt/checkpoint.hpp"
#include "primus/ckpt/layout.hpp"
#include "primus/ckpt/manifest.hpp"
#include "primus/common/error.hpp"
#include "rank_file.hpp"

namespace primus::ckpt {
namespace {

constexpr std::string_view kOldPrefix = ".old-";

// The name commit() gives a replaced step while it swaps in the new one: .old-step-N-<pid>.
std::string displaced_name(std::int64_t step) {
  return std::string(kOldPrefix) + step_dir_name(step) + "-" + std::to_string(::getpid());
}

bool is_displaced_name(const std::string& name) {
  if (name.compare(0, kOldPrefix.size(), kOldPrefix) != 0) return false;
  const std::size_t dash = name.rfind('-');
  if (dash == std::string::npos || dash + 1 == name.size() || dash < kOldPrefix.size()) {
    return false;
  }
  const std::string pid = name.substr(dash + 1);
  if (pid.size() > 10 ||
      !std::all_of(pid.begin(), pid.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  return parse_step_dir_name(name.substr(kOldPrefix.size(), dash - kOldPrefix.size())).has_value();
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32] = {};
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

bool is_real_directory(const std::filesystem::path& path) {
  std::error_code error;
  return std::filesystem::symlink_status(path, error).type() ==
         std::filesystem::file_type::directory;
}

std::vector<std::filesystem::path> entries(const std::filesystem::path& root) {
  std::vector<std::filesystem::path> paths;
  std::error_code error;
  for (std::filesystem::directory_iterator it(root, error), end; !error && it != end;
       it.increment(error)) {
    paths.push_back(it->path());
  }
  if (error && error != std::errc::no_such_file_or_directory) {
    throw Error("cannot list " + root.string() + ": " + error.message());
  }
  return paths;
}

// The names in the open directory `dir` (not . and ..).
std::vector<std::string> names_at(int dir, const std::filesystem::path& dir_path) {
  std::vector<std::string> names;
  os::UniqueFd copy(::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  DIR* stream = copy.get() < 0 ? nullptr : ::fdopendir(copy.get());
  if (stream == nullptr) {
    throw Error("cannot list " + dir_path.string() + ": " + std::strerror(errno));
  }
  copy.release();  // the stream owns it
  errno = 0;
  while (const dirent* entry = ::readdir(stream)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  const int error = errno;
  ::closedir(stream);
  if (error != 0) {
    throw Error("cannot list " + dir_path.string() + ": " + std::strerror(error));
  }
  return names;
}

bool is_directory_at(int dir, const std::string& name) {
  struct stat st {};
  return ::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

// LATEST's step, read through the open root.
std::optional<std::int64_t> read_latest_at(int root) {
  std::optional<std::string> text = fs::read_small_file_at(root, std::string(kLatestName), 64);
  if (!text) return std::nullopt;
  while (!text->empty() && (text->back() == '\n' || text->back() == '\r'))
    text->pop_back();
  return parse_step_dir_name(*text);
}

// A message of the library about a path reached through an open directory
// (/proc/self/fd/N/...), said of the directory's own name instead.
std::string shown(std::string text, const std::string& via, const std::string& name) {
  for (std::size_t at; (at = text.find(via)) != std::string::npos;)
    text.replace(at, via.size(), name);
  return text;
}

}  // namespace

// Everything happens through descriptors: the root is opened once (never through a link), and
// the temporary directory through it, checked to be this user's alone; the rank files and the
// manifest are reached through that directory's descriptor; renames and removals are relative
// to the root's. So another user who can write the root (a group-shared one) cannot redirect a
// step of the commit by renaming the root, the directories above it, or the temporary
// directory: a temporary directory swapped for another between the checks and the rename is
// noticed (device and inode) and not committed.
CommitResult commit(const std::filesystem::path& root, std::int64_t step, int world_size) {
  const std::string temporary_name = temporary_dir_name(step);
  const std::string final_name = step_dir_name(step);
  const std::filesystem::path temporary = root / temporary_name;
  const std::filesystem::path final_dir = root / final_name;
  if (world_size < 1 || world_size > kMaxWorldSize) {
    throw Error("cannot commit: world size " + std::to_string(world_size) + " is out of range");
  }
  const os::UniqueFd root_fd = fs::open_directory(root);
  if (!is_directory_at(root_fd.get(), temporary_name)) {
    throw Error("cannot commit step " + std::to_string(step) + ": " + temporary.string() +
                " does not exist (did every rank's RankWriter finish?)");
  }
  os::UniqueFd tmp_fd;
  try {
    tmp_fd = fs::open_private_directory_at(root_fd.get(), root, temporary_name);
  } catch (const Error& e) {
    throw Error("cannot commit step " + std::to_string(step) + ": " + e.what() +
                ", so it may not hold what the ranks wrote");
  }
  const std::string via = fs::through(tmp_fd.get(), "x").parent_path().string();
  auto inside = [&](const std::string& name) { return fs::through(tmp_fd.get(), name); };
  std::vector<RankIndex> indexes;
  std::vector<FileEntry> files;
  try {
    for (int rank = 0; rank < world_size; ++rank) {
      const std::string name = rank_file_name(rank);
      struct stat st {};
      if (::fstatat(tmp_fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        throw CorruptCheckpoint("cannot commit step " + std::to_string(step) + ": " +
                                (temporary / name).string() + " is missing");
      }
      indexes.push_back(RankFile(inside(name)).index());
      files.push_back(FileEntry{name, rank, fs::file_size(inside(name))});
    }
  } catch (const CorruptCheckpoint& e) {
    throw CorruptCheckpoint(shown(e.what(), via, temporary.string()));
  } catch (const Error& e) {
    throw Error(shown(e.what(), via, temporary.string()));
  }
  const Manifest manifest = build_manifest(step, world_size, indexes, files, utc_now());
  // Remove what is in the temporary directory but is not part of this checkpoint (rank files
  // of a larger world from an earlier attempt, stray temporaries).
  std::set<std::string> keep;
  for (const FileEntry& file : manifest.files)
    keep.insert(file.name);
  keep.insert(std::string(kManifestName));
  for (const std::string& name : names_at(tmp_fd.get(), temporary)) {
    if (keep.count(name) == 0) fs::remove_tree_at(tmp_fd.get(), temporary, name);
  }
  fs::replace_file_at(tmp_fd.get(), temporary, std::string(kManifestName), to_json(manifest));
  for (const FileEntry& file : files)
    fs::fsync_at(tmp_fd.get(), temporary, file.name);
  fs::fsync_fd(tmp_fd.get(), temporary);

  if (!fs::is_same_at(root_fd.get(), temporary_name, tmp_fd.get())) {
    throw Error("cannot commit step " + std::to_string(step) + ": " + temporary.string() +
                " was replaced by another directory during the commit (someone else can write " +
                root.string() + "); nothing was committed");
  }
  // A step saved again (after a restart at that very step) replaces the earlier copy in one
  // atomic exchange: step-N is the old copy or the new one at every instant, never missing.
  // The old copy then sits under the temporary name and is removed below.
  std::string displaced;
  if (is_directory_at(root_fd.get(), final_name)) {
    if (fs::exchange_at(root_fd.get(), root, temporary_name, final_name)) {
      displaced = temporary_name;
    } else {
      // A file system without the exchange (some network file systems): move the old copy
      // aside first; a crash in between leaves it under .old-step-N-<pid>.
      displaced = displaced_name(step);
      fs::rename_at(root_fd.get(), root, final_name, displaced);
      fs::rename_at(root_fd.get(), root, temporary_name, final_name);
    }
  } else {
    fs::rename_at(root_fd.get(), root, temporary_name, final_name);
  }
  if (!fs::is_same_at(root_fd.get(), final_name, tmp_fd.get())) {
    throw Error("cannot commit step " + std::to_string(step) + ": " + final_dir.string() +
                " is not the directory the ranks wrote (someone else can write " + root.string() +
                " and renamed it during the commit); LATEST was left as it was");
  }

  const std::optional<std::int64_t> latest = read_latest_at(root_fd.get());
  if (!latest || *latest <= step || !is_directory_at(root_fd.get(), step_dir_name(*latest))) {
    fs::replace_file_at(root_fd.get(), root, std::string(kLatestName), step_dir_name(step) + "\n");
  }
  fs::fsync_fd(root_fd.get(), root);
  // Committed: what follows only tidies up, and never fails the save.
  try {
    if (!displaced.empty()) fs::remove_tree_at(root_fd.get(), root, displaced);
    for (const std::string& name : names_at(root_fd.get(), root)) {
      const auto older = parse_temporary_dir_name(name);
      if (older && *older < step && !fs::in_use(root / name)) {
        fs::remove_tree_at(root_fd.get(), root, name);
      }
    }
  } catch (const Error&) {
  }
  return CommitResult{final_dir, manifest.total_bytes()};
}

std::vector<StepEntry> list_steps(const std::filesystem::path& root) {
  const std::optional<std::int64_t> latest = read_latest(root);
  std::vector<StepEntry> steps;
  for (const std::filesystem::path& path : entries(root)) {
    const auto step = parse_step_dir_name(path.filename().string());
    if (step && is_real_directory(path)) steps.push_back(StepEntry{*step, path, step == latest});
  }
  std::sort(steps.begin(), steps.end(),
            [](const StepEntry& a, const StepEntry& b) { return a.step > b.step; });
  return steps;
}

std::optional<std::int64_t> read_latest(const std::filesystem::path& root) {
  try {
    std::string text = fs::read_small_file(root / kLatestName, 64);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
      text.pop_back();
    return parse_step_dir_name(text);
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::vector<std::int64_t> steps_to_prune(std::vector<std::int64_t> steps, std::size_t keep_last,
                                         std::int64_t keep_every,
                                         std::optional<std::int64_t> protect) {
  std::sort(steps.begin(), steps.end(), std::greater<>());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  std::vector<std::int64_t> doomed;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::int64_t step = steps[i];
    const bool keep = i < keep_last || (keep_every > 0 && step % keep_every == 0) ||
                      (protect && step == *protect);
    if (!keep) doomed.push_back(step);
  }
  return doomed;
}

PrunePlan prune_plan(const std::filesystem::path& root, std::size_t keep_last,
                     std::int64_t keep_every, std::optional<std::int64_t> known_good) {
  const std::vector<StepEntry> steps = list_steps(root);
  std::vector<std::int64_t> numbers;
  for (const StepEntry& entry : steps)
    numbers.push_back(entry.step);
  // Never remove LATEST's step, nor the newest one that verifies (LATEST may name a damaged
  // one): whatever retention says, a good checkpoint stays.
  const auto verifies = [&](const StepEntry& entry) {
    return entry.step == known_good || verify_problems(entry.dir, Verify::kQuick).empty();
  };
  const auto newest_good = std::find_if(steps.begin(), steps.end(), verifies);
  // -1: none verifies (no step is negative); a plain number, since g++ 12 at -O2 takes an
  // optional's comparison for a read of an uninitialized value.
  const std::int64_t newest_valid = newest_good == steps.end() ? -1 : newest_good->step;
  PrunePlan plan;
  for (const std::int64_t step :
       steps_to_prune(numbers, keep_last, keep_every, read_latest(root))) {
    if (step == newest_valid) {
      plan.spared = root / step_dir_name(step);
    } else {
      plan.remove.push_back(root / step_dir_name(step));
    }
  }
  // Leftovers of saves that never committed, of steps not newer than the newest committed
  // one, whose writers are gone (a re-save of a step in progress is left alone), and of
  // replaced steps: only names that the library makes.
  const std::int64_t newest = steps.empty() ? -1 : steps.front().step;
  std::vector<std::filesystem::path> leftovers;
  for (const std::filesystem::path& path : entries(root)) {
    const std::string name = path.filename().string();
    const auto temporary = parse_temporary_dir_name(name);
    if ((temporary && *temporary <= newest && !fs::in_use(path)) || is_displaced_name(name)) {
      leftovers.push_back(path);
    }
  }
  std::sort(leftovers.begin(), leftovers.end());
  plan.remove.insert(plan.remove.end(), leftovers.begin(), leftovers.end());
  return plan;
}

std::vector<std::filesystem::path> prune(const std::filesystem::path& root, std::size_t keep_last,
                                         std::int64_t keep_every,
                                         std::optional<std::int64_t> known_good) {
  const PrunePlan plan = prune_plan(root, keep_last, keep_every, known_good);
  if (plan.remove.empty()) return plan.remove;
  // Every entry to remove is in the root: removed through the root's descriptor.
  const os::UniqueFd root_fd = fs::open_directory(root);
  for (const std::filesystem::path& path : plan.remove)
    fs::remove_tree_at(root_fd.get(), root, path.filename().string());
  fs::fsync_fd(root_fd.get(), root);
  return plan.remove;
}

}  // namespace primus::ckpt

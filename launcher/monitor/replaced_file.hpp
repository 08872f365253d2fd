// A file that the launcher rewrites again and again (status.json once a second, the metrics
// file): each version takes the old one's place at once, so that a reader sees one version
// whole, and a reader that opened a version keeps it whole however many follow.
//
// Each new version used to be a new file (write, exchange names, unlink the old one). On ext4
// without a journal, as here, creating a file skips every inode of its block group deleted in
// the last 60 s (5 minutes while the inode table is dirty) and reads each: with one status.json
// a second that was 7 % of the launcher's CPU at 1,024 ranks, and growing while the job ran.
// ReplacedFile keeps the previous version (path + ".previous") and writes the next one into it
// in place when no one else has it open, which a write lease proves (F_SETLEASE fails while
// another descriptor is open, and an open that comes while it is held waits until the new
// version is whole). Otherwise, on a file system whose leases cannot see other machines' readers
// (anything but a local one), or without leases, the next version is a new file as before.
#pragma once

#include <filesystem>
#include <string>

namespace primus::launch {

class ReplacedFile {
 public:
  explicit ReplacedFile(std::filesystem::path path);
  ~ReplacedFile();  // removes the previous version
  ReplacedFile(const ReplacedFile&) = delete;
  ReplacedFile& operator=(const ReplacedFile&) = delete;

  // Writes `text` as the file's next version (mode 0600). False when it cannot: then the file
  // keeps its last version, and no partial file is left.
  bool write(const std::string& text);

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path previous_path() const { return previous_; }
  // Versions written into the previous one's file in place, and as new files (for tests and
  // benchmarks).
  std::size_t reused() const { return reused_; }
  std::size_t created() const { return created_; }

 private:
  bool rewrite_previous(const std::string& text);
  bool write_new(const std::string& text);

  std::filesystem::path path_;
  std::filesystem::path previous_;
  bool have_previous_ = false;  // previous_ is the version this object replaced
  std::size_t reused_ = 0;
  std::size_t created_ = 0;
};

// One version of `path`, written once (metrics.addr, the file_sd target): the old version, if
// any, makes way at once and is removed; false (and no partial file) when it cannot.
bool replace_file(const std::filesystem::path& path, const std::string& text);

}  // namespace primus::launch

// A dataset: its files (a glob, a directory or @MANIFEST, docs/architecture.md "Data
// distribution"), one record format, and the index of every file, so that record i of the
// dataset (files in their order, records in file order) is located without reading the data.
// Opening a dataset checks every file: a truncated record, a wrong CRC, a missing or unreadable
// file, an empty glob or a manifest line naming a directory is an Error naming the file (and the
// byte offset, or the manifest's line).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "primus/data/format.hpp"

namespace primus::data {

// The files a dataset specification names, in dataset order:
//   @PATH        a manifest: one file per line, in its order; relative paths are taken from the
//                manifest's directory; blank lines and lines starting with '#' are skipped
//   a glob       (*, ? or [ in it) the regular files it matches, sorted by name as bytes
//   a directory  its regular files, not hidden ones (.name), sorted by name as bytes, not
//                recursive
//   a file       that file alone
// Throws Error naming `what` (the option or setting) and the spec.
std::vector<std::string> list_dataset_files(const std::string& spec,
                                            const std::string& what = "--primus-data");

// Where indexes go that cannot go beside their data: $PRIMUS_JOB_DIR/index, else
// $XDG_CACHE_HOME/primus/index, else $HOME/.cache/primus/index (empty without any of them).
std::string default_index_cache_dir();

// Where a file's index came from when the dataset was opened.
enum class IndexOrigin {
  kNone,          // fixed-size records: computed
  kCachedBeside,  // .NAME.primus-FORMAT-index beside the file, still valid
  kCachedElsewhere,
  kBuilt,  // read the file now (and cached it where `index_path` says, if anywhere)
};

struct DataFile {
  std::string path;
  std::uint64_t size = 0;
  std::uint64_t records = 0;
  std::uint64_t first_record = 0;  // its first record's number in the dataset
  IndexOrigin origin = IndexOrigin::kNone;
  std::string index_path;  // where its index is cached; empty: nowhere
};

struct OpenOptions {
  RecordFormat format;
  // Where an index goes when the data's directory is not writable (the job directory's index/,
  // or the user's cache); empty: such indexes are kept in memory only.
  std::string cache_dir;
  unsigned threads = 0;                // index builders at once; 0: one per CPU
  bool use_cache = true;               // false: read every file again and write no index (verify)
  std::string what = "--primus-data";  // names the setting in messages
};

// One record's place: its frame is `frame_length` bytes at `frame_offset` of file `file`, its
// data `length` bytes at `offset`.
struct RecordLocation {
  std::uint32_t file = 0;
  std::uint64_t frame_offset = 0;
  std::uint64_t frame_length = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

struct FormatOps;  // what libprimus-data knows of one record format (internal)

class Dataset {
 public:
  // Lists, checks and indexes the files (in parallel over files). Throws Error.
  static std::shared_ptr<const Dataset> open(const std::string& spec, const OpenOptions& options);
  ~Dataset();
  Dataset(const Dataset&) = delete;
  Dataset& operator=(const Dataset&) = delete;

  const RecordFormat& format() const { return format_; }
  const std::vector<DataFile>& files() const { return files_; }
  std::uint64_t records() const { return records_; }
  std::uint64_t bytes() const;
  // 16 hex digits that change when the format, a file's name, size or record count changes:
  // what a cursor must match.
  const std::string& fingerprint() const { return fingerprint_; }
  // The file holding `record` (< records()).
  std::uint32_t file_of(std::uint64_t record) const;
  RecordLocation locate(std::uint64_t record) const;
  RecordLocation locate(std::uint32_t file, std::uint64_t record) const;  // faster when known

  struct FileIndex;  // the record starts of one file (internal)

 private:
  Dataset() = default;
  RecordFormat format_;
  const FormatOps* format_ops_ = nullptr;  // the format's row (internal)
  std::vector<DataFile> files_;
  std::vector<std::unique_ptr<FileIndex>> indexes_;
  std::uint64_t records_ = 0;
  std::string fingerprint_;
};

}  // namespace primus::data

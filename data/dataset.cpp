#include "primus/data/dataset.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <thread>

#include "file_index.hpp"
#include "formats/format_ops.hpp"
#include "primus/common/error.hpp"
#include "primus/common/keyed_hash.hpp"

namespace primus::data {
namespace {

void put_u64(std::string& out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>(value >> (8 * i)));
}

std::string base_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// What a cursor depends on: the format and, per file in order, its name (not its directory: a
// dataset copied elsewhere is the same dataset), size and record count.
std::string fingerprint_of(const RecordFormat& format, const std::vector<DataFile>& files) {
  constexpr SipKey kKey = {'p', 'r', 'i', 'm', 'u', 's', ' ', 'd',
                           'a', 't', 'a', 's', 'e', 't', ' ', 'f'};
  std::string message = to_string(format);
  message.push_back('\0');
  put_u64(message, files.size());
  for (const DataFile& file : files) {
    const std::string name = base_name(file.path);
    put_u64(message, name.size());
    message += name;
    put_u64(message, file.size);
    put_u64(message, file.records);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(siphash24(kKey, message.data(), message.size())));
  return hex;
}

}  // namespace

Dataset::~Dataset() = default;

std::shared_ptr<const Dataset> Dataset::open(const std::string& spec, const OpenOptions& options) {
  const std::vector<std::string> paths = list_dataset_files(spec, options.what);
  std::shared_ptr<Dataset> dataset(new Dataset());
  dataset->format_ = options.format;
  dataset->format_ops_ = &format_ops(options.format.kind);
  dataset->files_.resize(paths.size());
  dataset->indexes_.resize(paths.size());
  std::vector<std::exception_ptr> errors(paths.size());

  // Files are indexed in parallel; the first error in dataset order is the one reported, so
  // that every rank that opens the same dataset says the same.
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    std::unique_ptr<ScanBuffer> buffer;
    for (std::size_t i = next++; i < paths.size(); i = next++) {
      try {
        if (!buffer) buffer = std::make_unique<ScanBuffer>();
        dataset->indexes_[i] = index_file(paths[i], options, dataset->files_[i], *buffer);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  unsigned threads = options.threads != 0 ? options.threads : std::thread::hardware_concurrency();
  threads = std::max(1U, std::min<unsigned>(threads, static_cast<unsigned>(paths.size())));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t)
    pool.emplace_back(work);
  work();
  for (std::thread& thread : pool)
    thread.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }

  std::uint64_t first = 0;
  for (DataFile& file : dataset->files_) {
    file.first_record = first;
    first += file.records;
  }
  dataset->records_ = first;
  dataset->fingerprint_ = fingerprint_of(dataset->format_, dataset->files_);
  return dataset;
}

std::uint64_t Dataset::bytes() const {
  std::uint64_t total = 0;
  for (const DataFile& file : files_)
    total += file.size;
  return total;
}

std::uint32_t Dataset::file_of(std::uint64_t record) const {
  if (record >= records_) {
    throw Error("record " + std::to_string(record) + " is past the dataset's " +
                std::to_string(records_));
  }
  // The last file whose first record is <= record (empty files share their successor's).
  const auto it = std::upper_bound(
      files_.begin(), files_.end(), record,
      [](std::uint64_t value, const DataFile& file) { return value < file.first_record; });
  auto index = static_cast<std::uint32_t>(it - files_.begin() - 1);
  while (files_[index].records == 0 || record - files_[index].first_record >= files_[index].records)
    ++index;
  return index;
}

RecordLocation Dataset::locate(std::uint64_t record) const {
  return locate(file_of(record), record);
}

RecordLocation Dataset::locate(std::uint32_t file, std::uint64_t record) const {
  const FileIndex& index = *indexes_[file];
  const std::uint64_t local = record - files_[file].first_record;
  RecordLocation where;
  where.file = file;
  format_ops_->locate(format_, index, local, where);
  return where;
}

}  // namespace primus::data

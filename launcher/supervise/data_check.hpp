// The dataset (--primus-data), checked and indexed before any rank starts: primus-data index,
// the program beside primus-launch, so that a truncated record or a wrong CRC stops the job with
// the file and byte offset named instead of failing every rank, and the ranks find every index
// built. Indexes that cannot go beside the data go to the job directory's index/.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

#include "primus/common/options.hpp"

namespace primus::launch {

struct DatasetCheck {
  bool ok = true;
  std::string message;  // primus-data's summary, or what is wrong
};

// nullopt without --primus-data. Throws Error when primus-data cannot be run at all.
std::optional<DatasetCheck> check_dataset(const ResolvedOptions& options,
                                          const std::filesystem::path& job_dir,
                                          std::chrono::seconds timeout);

}  // namespace primus::launch

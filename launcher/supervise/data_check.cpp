// The dataset's check before any rank starts (data_check.hpp).
#include "supervise/data_check.hpp"

#include "primus/common/error.hpp"
#include "process/run_command.hpp"

namespace primus::launch {

std::optional<DatasetCheck> check_dataset(const ResolvedOptions& options,
                                          const std::filesystem::path& job_dir,
                                          std::chrono::seconds timeout) {
  const auto spec = options.get("primus-data");
  if (!spec) return std::nullopt;
  SiblingOutput out =
      run_sibling("primus-data",
                  {"index", spec->value,
                   "--primus-data-format=" + options.value_or("primus-data-format", "tfrecord"),
                   "--cache-dir=" + (job_dir / "index").string()},
                  timeout, "checks the dataset before the ranks start");
  const int code = out.exit_code;
  std::string& message = out.message;
  if (code == 0) return DatasetCheck{true, message};
  const std::string prefix = "primus-data: ";
  if (message.rfind(prefix, 0) == 0) message.erase(0, prefix.size());
  if (message.empty()) message = "primus-data failed (" + std::to_string(code) + ")";
  return DatasetCheck{false, message};
}

}  // namespace primus::launch

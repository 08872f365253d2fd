#include "data_check.hpp"

#include <sys/wait.h>

#include "primus/common/error.hpp"
#include "resume.hpp"
#include "slurm_queries.hpp"

namespace primus::launch {

std::optional<DatasetCheck> check_dataset(const ResolvedOptions& options,
                                          const std::filesystem::path& job_dir,
                                          std::chrono::seconds timeout) {
  const auto spec = options.get("primus-data");
  if (!spec) return std::nullopt;
  const std::string program = program_beside_launcher("primus-data");
  const CommandOutput out =
      run_command({program, "index", spec->value,
                   "--primus-data-format=" + options.value_or("primus-data-format", "tfrecord"),
                   "--cache-dir=" + (job_dir / "index").string()},
                  // Shielded: a stop signal to every process of the job (a preemption) must not
                  // end the check halfway and read as an unreadable dataset; the launcher takes
                  // the stop itself once the ranks start.
                  timeout, /*shielded=*/true);
  const bool exited = out.status >= 0 && WIFEXITED(out.status);
  const int code = exited ? WEXITSTATUS(out.status) : -1;
  std::string message = out.output;
  while (!message.empty() && message.back() == '\n')
    message.pop_back();
  if (out.status < 0 || code == 127) {
    throw Error("cannot run " + program +
                ", which checks the dataset before the ranks start (is Primus installed whole?)");
  }
  if (code == 0) return DatasetCheck{true, message};
  const std::string prefix = "primus-data: ";
  if (message.rfind(prefix, 0) == 0) message.erase(0, prefix.size());
  if (message.empty()) message = program + " failed (" + std::to_string(code) + ")";
  return DatasetCheck{false, message};
}

}  // namespace primus::launch

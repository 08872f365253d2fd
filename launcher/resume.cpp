#include "resume.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "primus/common/error.hpp"
#include "slurm_queries.hpp"

namespace primus::launch {

NewestCheckpoint parse_newest_checkpoint(const std::string& json_text) {
  NewestCheckpoint out;
  try {
    const nlohmann::json document = nlohmann::json::parse(json_text);
    const auto& path = document.at("path");
    const auto& step = document.at("step");
    if (!path.is_null()) out.path = path.get<std::string>();
    if (!step.is_null()) out.step = step.get<std::int64_t>();
    for (const auto& reason : document.at("skipped"))
      out.skipped.push_back(reason.get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    throw Error("primus-ckpt latest --json printed what is not its document (" +
                std::string(e.what()) + "): " + json_text.substr(0, 300));
  }
  if (out.path.has_value() != out.step.has_value()) {
    throw Error("primus-ckpt latest --json gave a path without a step, or a step without a path");
  }
  return out;
}

std::optional<std::string> resume_point(const NewestCheckpoint& newest,
                                        const std::optional<std::string>& given) {
  if (newest.path) return newest.path;
  if (given && !given->empty()) return given;
  return std::nullopt;
}

std::string program_beside_launcher(const std::string& name) {
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    const std::filesystem::path beside = self.parent_path() / name;
    if (::access(beside.c_str(), X_OK) == 0) return beside.string();
  }
  return name;
}

NewestCheckpoint find_newest_checkpoint(const std::filesystem::path& root,
                                        std::chrono::seconds timeout) {
  std::error_code error;
  if (!std::filesystem::exists(root, error)) return {};
  const std::string program = program_beside_launcher("primus-ckpt");
  const CommandOutput out =
      // Shielded: a stop signal to every process of the job (a preemption) must not end the
      // resolution halfway, which would read as a broken checkpoint directory; the launcher
      // takes the stop itself once the ranks start.
      run_command({program, "latest", "--json", "--full", root.string()}, timeout, true);
  const bool exited = out.status >= 0 && WIFEXITED(out.status);
  const int code = exited ? WEXITSTATUS(out.status) : -1;
  if (code == 0 || code == 1) return parse_newest_checkpoint(out.output);
  std::string message = out.output;
  while (!message.empty() && message.back() == '\n')
    message.pop_back();
  if (out.status < 0 || code == 127) {
    throw Error("cannot run " + program +
                ", which finds the checkpoint the ranks resume from (is Primus installed whole?)");
  }
  throw Error("cannot tell which checkpoint under " + root.string() +
              " to resume from: " + (message.empty() ? program + " failed" : message));
}

}  // namespace primus::launch

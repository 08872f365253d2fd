// Where the ranks resume from (resume.hpp).
#include "supervise/resume.hpp"

#include <nlohmann/json.hpp>

#include "primus/common/error.hpp"
#include "process/run_command.hpp"

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

NewestCheckpoint find_newest_checkpoint(const std::filesystem::path& root,
                                        std::chrono::seconds timeout) {
  std::error_code error;
  if (!std::filesystem::exists(root, error)) return {};
  // Shielded (run_sibling): a stop signal must not end the resolution halfway, which would read
  // as a broken checkpoint directory.
  const SiblingOutput out =
      run_sibling("primus-ckpt", {"latest", "--json", "--full", root.string()}, timeout,
                  "finds the checkpoint the ranks resume from");
  if (out.exit_code == 0 || out.exit_code == 1) return parse_newest_checkpoint(out.message);
  throw Error("cannot tell which checkpoint under " + root.string() + " to resume from: " +
              (out.message.empty() ? std::string("primus-ckpt failed") : out.message));
}

std::optional<std::string> parse_set_aside(const std::string& json_text) {
  try {
    const nlohmann::json document = nlohmann::json::parse(json_text);
    const auto& moved = document.at("moved_to");
    if (moved.is_null()) return std::nullopt;
    return moved.get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw Error("primus-ckpt set-aside --json printed what is not its document (" +
                std::string(e.what()) + "): " + json_text.substr(0, 300));
  }
}

std::optional<std::string> set_aside_root(const std::filesystem::path& root,
                                          std::chrono::seconds timeout) {
  const SiblingOutput out = run_sibling("primus-ckpt", {"set-aside", "--json", root.string()},
                                        timeout, "moves the old checkpoints aside");
  if (out.exit_code == 0) return parse_set_aside(out.message);
  throw Error("--primus-fresh: cannot move " + root.string() +
              " aside: " + (out.message.empty() ? std::string("primus-ckpt failed") : out.message));
}

}  // namespace primus::launch

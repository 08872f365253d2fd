// primus-ckpt verify DIR [--step N] [--quick]: every problem of every committed checkpoint (or
// of one), each naming its file and dataset.
#include "checkpoint_root.hpp"
#include "commands.hpp"
#include "primus/ckpt/checkpoint.hpp"
#include "primus/ckpt/layout.hpp"
#include "primus/ckpt/store.hpp"
#include "render.hpp"

namespace primus::ckpt::tool {
namespace {

struct Checked {
  std::int64_t step = 0;
  std::string directory;
  bool latest = false;
  std::vector<std::string> problems;
};

int run(const ParsedArgs& args, std::ostream& out, std::ostream& err) {
  const Verify mode = args.has("quick") ? Verify::kQuick : Verify::kFull;
  std::optional<std::int64_t> only;
  if (const auto step = args.value("step")) only = parse_step(*step, "--step");
  const std::filesystem::path root = checked_root(args.operands[0]);

  std::vector<Checked> checked;
  for (const StepEntry& entry : list_steps(root)) {
    if (only && entry.step != *only) continue;
    checked.push_back(Checked{entry.step, entry.dir.filename().string(), entry.latest,
                              verify_problems(entry.dir, mode)});
  }
  std::optional<std::int64_t> newest_valid;
  std::size_t corrupt = 0;
  for (const Checked& step : checked) {
    if (!step.problems.empty()) {
      ++corrupt;
    } else if (!newest_valid) {
      newest_valid = step.step;
    }
  }
  const std::optional<std::int64_t> latest = read_latest(root);

  if (args.has("json")) {
    Json steps = Json::array();
    for (const Checked& step : checked) {
      steps.push_back(Json{{"step", step.step},
                           {"directory", step.directory},
                           {"latest", step.latest},
                           {"status", step.problems.empty() ? "ok" : "corrupt"},
                           {"problems", step.problems}});
    }
    Json document;
    document["root"] = root.string();
    document["mode"] = mode == Verify::kFull ? "full" : "quick";
    document["checked"] = checked.size();
    document["corrupt"] = corrupt;
    document["latest"] = latest ? Json(*latest) : Json();
    document["newest_valid"] = newest_valid ? Json(*newest_valid) : Json();
    document["steps"] = std::move(steps);
    print_json(out, document);
  } else {
    for (const Checked& step : checked) {
      out << step.directory << (step.latest ? " (LATEST)" : "") << ": ";
      if (step.problems.empty()) {
        out << "ok\n";
        continue;
      }
      out << "CORRUPT, " << step.problems.size()
          << (step.problems.size() == 1 ? " problem" : " problems") << "\n";
      for (const std::string& problem : step.problems)
        out << "  " << problem << "\n";
    }
    if (!checked.empty()) {
      out << checked.size() << " checked (" << (mode == Verify::kFull ? "full" : "quick") << "), "
          << checked.size() - corrupt << " ok, " << corrupt << " corrupt\n";
    }
    if (!only && newest_valid && latest && *latest != *newest_valid) {
      out << "note: LATEST names " << step_dir_name(*latest)
          << ", but the newest valid checkpoint is " << step_dir_name(*newest_valid)
          << ": a load falls back to it\n";
    }
  }

  if (only && checked.empty()) {
    err << "primus-ckpt: no committed step " << *only << " in " << root.string() << "\n";
    return kExitFound;
  }
  if (!newest_valid) {
    err << "primus-ckpt: no valid checkpoint in " << root.string() << "\n";
    return kExitFound;
  }
  return corrupt == 0 ? kExitOk : kExitFound;
}

}  // namespace

Command verify_command() {
  return {{"verify",
           {{"DIR", "the checkpoint root directory"}},
           {{"step", "a step number"}, {"quick", ""}, {"json", ""}},
           "Usage: primus-ckpt verify DIR [--step N] [--quick] [--json]\n"
           "\n"
           "Verifies every committed checkpoint under DIR (or step N) and prints every problem,\n"
           "naming the file and dataset. The full verification (the default) reads every\n"
           "dataset and checks its CRC32C; --quick checks the manifest, that every file is\n"
           "there with its size, and the rank files' indexes.\n"
           "Exit status 1 when a checked checkpoint is corrupt or none is valid, else 0.\n"
           "\n"
           "  --step N   only that step\n"
           "  --quick    the quick verification\n"
           "  --json     one JSON document instead of the report\n"},
          run};
}

}  // namespace primus::ckpt::tool

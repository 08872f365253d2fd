// primus-ckpt list DIR: every committed step (newest first) with a quick (or full) verification,
// and the temporary directories of saves that never committed.
#include <algorithm>

#include "checkpoint_root.hpp"
#include "commands.hpp"
#include "primus/ckpt/checkpoint.hpp"
#include "primus/ckpt/layout.hpp"
#include "primus/ckpt/store.hpp"
#include "render.hpp"

namespace primus::ckpt::tool {
namespace {

struct Row {
  std::int64_t step = 0;
  std::string directory;
  bool committed = true;
  std::optional<Manifest> manifest;  // committed steps whose manifest parses
  bool latest = false;
  std::string problem;  // committed: the first problem of the quick verification
  const Leftover* leftover = nullptr;
};

std::string status_of(const Row& row) {
  if (!row.committed) return "uncommitted";
  return row.problem.empty() ? "ok" : "CORRUPT: " + row.problem;
}

int run(const ParsedArgs& args, std::ostream& out, std::ostream& err) {
  const std::filesystem::path root = checked_root(args.operands[0]);
  const Verify verify = args.has("full") ? Verify::kFull : Verify::kQuick;
  const std::optional<std::int64_t> latest = read_latest(root);
  const std::vector<Leftover> temporaries = leftovers(root);
  std::vector<Row> rows;
  bool latest_found = false;
  for (const StepEntry& entry : list_steps(root)) {
    Row row;
    row.step = entry.step;
    row.directory = entry.dir.filename().string();
    row.latest = entry.latest;
    latest_found = latest_found || entry.latest;
    std::string error;
    row.manifest = read_manifest_unverified(entry.dir, &error);
    const std::vector<std::string> problems = verify_problems(entry.dir, verify);
    if (!problems.empty()) row.problem = problems.front();
    rows.push_back(std::move(row));
  }
  for (const Leftover& leftover : temporaries) {
    Row row;
    row.step = leftover.step;
    row.directory = leftover.dir.filename().string();
    row.committed = false;
    row.leftover = &leftover;
    rows.push_back(std::move(row));
  }
  // Newest first; a committed step before the leftover of the same step.
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return a.step != b.step ? a.step > b.step : a.committed && !b.committed;
  });

  if (args.has("json")) {
    Json steps = Json::array();
    for (const Row& row : rows) {
      Json item;
      item["step"] = row.step;
      item["directory"] = row.directory;
      item["committed"] = row.committed;
      if (row.committed) {
        item["world_size"] = row.manifest ? Json(row.manifest->world_size) : Json();
        item["total_bytes"] = row.manifest ? Json(row.manifest->total_bytes()) : Json();
        item["created"] = row.manifest ? Json(row.manifest->created) : Json();
        item["latest"] = row.latest;
        item["status"] = row.problem.empty() ? "ok" : "corrupt";
        if (!row.problem.empty()) item["problem"] = row.problem;
      } else {
        item["rank_files"] = row.leftover->rank_files;
        item["total_bytes"] = row.leftover->bytes;
        item["modified"] = row.leftover->modified;
        item["latest"] = false;
        item["status"] = "uncommitted";
      }
      steps.push_back(std::move(item));
    }
    Json document;
    document["root"] = root.string();
    document["latest"] = latest ? Json(*latest) : Json();
    document["verification"] = verify == Verify::kFull ? "full" : "quick";
    document["steps"] = std::move(steps);
    print_json(out, document);
    return kExitOk;
  }

  if (rows.empty()) {
    out << "no checkpoints in " << root.string() << "\n";
    // A job directory given for its checkpoint root: say where they are.
    std::error_code error;
    if (std::filesystem::is_directory(root / "ckpt", error) &&
        std::filesystem::exists(root / "events.jsonl", error)) {
      err << "primus-ckpt: " << root.string() << " is a job directory; its checkpoints are in "
          << (root / "ckpt").string() << "\n";
    }
    return kExitOk;
  }
  Table table({{"STEP", Table::Align::kRight},
               {"DIRECTORY"},
               {"WORLD", Table::Align::kRight},
               {"BYTES", Table::Align::kRight},
               {"CREATED"},
               {"LATEST"},
               {"STATUS"}});
  for (const Row& row : rows) {
    if (row.committed) {
      const Manifest* manifest = row.manifest ? &*row.manifest : nullptr;
      table.add_row({std::to_string(row.step), row.directory,
                     manifest ? std::to_string(manifest->world_size) : "-",
                     manifest ? bytes_column(manifest->total_bytes()) : "-",
                     manifest ? manifest->created : "-", row.latest ? "*" : "", status_of(row)});
    } else {
      table.add_row(
          {std::to_string(row.step), row.directory, "-", bytes_column(row.leftover->bytes),
           row.leftover->modified, "",
           status_of(row) + " (" + std::to_string(row.leftover->rank_files) + " rank files)"});
    }
  }
  table.print(out);
  if (verify == Verify::kQuick) {
    out << "(a quick verification: the data's CRC32C was not read; --full reads it, as loading "
           "and primus-ckpt latest do)\n";
  }
  if (latest && !latest_found) {
    out << "note: LATEST names " << step_dir_name(*latest) << ", which does not exist\n";
  }
  return kExitOk;
}

}  // namespace

Command list_command() {
  return {{"list",
           {{"DIR", "the checkpoint root directory"}},
           {{"full", ""}, {"json", ""}},
           "Usage: primus-ckpt list DIR [--full] [--json]\n"
           "\n"
           "Lists the checkpoints under DIR, newest first: step, directory, world size, size,\n"
           "creation time (UTC), '*' for the one LATEST names, and the status of a quick\n"
           "verification (manifest, files and their sizes, rank indexes): ok, or CORRUPT and\n"
           "the first problem. Directories of saves that never committed (.tmp-step-*) are\n"
           "listed as uncommitted, with their files, size and last change.\n"
           "\n"
           "  --full   verify every dataset's CRC32C too (reads all the data)\n"
           "  --json   one JSON document instead of the table (\"verification\": quick or full)\n"},
          run};
}

}  // namespace primus::ckpt::tool

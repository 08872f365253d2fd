// primus-data: indexes, inspects and verifies a dataset as primus.data.Dataset and primus-launch
// see it (docs/man/primus-data.1).
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "../../common/cli/command_line.hpp"
#include "../../common/cli/render.hpp"
#include "primus/common/options.hpp"
#include "primus/common/parse_number.hpp"
#include "primus/data.hpp"

namespace primus::data::tool {
namespace {

using cli::bytes_column;
using cli::Json;
using cli::print_json;
using cli::quote_truncated;
using cli::run_printing;
using cli::Table;
using cli::UsageError;

constexpr int kExitOk = 0;
constexpr int kExitBad = 1;    // the dataset has a bad file or record
constexpr int kExitUsage = 2;  // and every other failure

constexpr const char* kUsage =
    "Usage: primus-data COMMAND SPEC [options]\n"
    "\n"
    "Looks at a dataset as primus.data.Dataset and primus-launch see it. SPEC is what\n"
    "--primus-data takes: a glob (its files sorted by name), a directory (its files, sorted, not\n"
    "recursive, hidden ones skipped), a file, or @FILE (a manifest, one file per line).\n"
    "  index SPEC     check every file and build the indexes that are missing or stale\n"
    "  inspect SPEC   the files, their records and the plan of an epoch\n"
    "  verify SPEC    read every file again, ignoring cached indexes, and check every record\n"
    "Every command takes --primus-data-format=FORMAT (default $PRIMUS_DATA_FORMAT, else\n"
    "tfrecord), --json (one JSON document instead of tables) and --help.\n"
    "  --help      this text; --version the version\n"
    "\n"
    "Exit status: 0 success; 1 a bad file or record (named with its byte offset); 2 usage\n"
    "errors and other failures.\n";

struct Command {
  std::string name;
  std::string help;
  bool plan_options = false;
};

const std::vector<Command>& commands() {
  static const std::vector<Command> list = {
      {"index",
       "Usage: primus-data index SPEC [--primus-data-format=FORMAT] [--cache-dir=DIR]\n"
       "                         [--threads=N] [--json]\n"
       "\n"
       "Checks every file of the dataset and builds the index of each one whose cached index is\n"
       "missing or stale (a change of size, modification time, change time or inode), in\n"
       "parallel over files. An index is cached beside its file (.NAME.primus-FORMAT-index) when\n"
       "its directory is writable, else in the cache directory. primus-launch runs this before "
       "any\n"
       "rank starts.\n"
       "\n"
       "  --primus-data-format=FORMAT  tfrecord, lines or fixed:N\n"
       "  --cache-dir=DIR   where indexes go that cannot go beside the data (default\n"
       "                    $PRIMUS_JOB_DIR/index, else $XDG_CACHE_HOME/primus/index, else\n"
       "                    ~/.cache/primus/index)\n"
       "  --threads=N       files indexed at once (default: one per CPU)\n"
       "  --json            {\"spec\", \"format\", \"records\", \"bytes\", \"fingerprint\", "
       "\"files\":\n"
       "                    [{\"path\", \"records\", \"bytes\", \"index\", \"origin\"}]}\n",
       false},
      {"inspect",
       "Usage: primus-data inspect SPEC [--primus-data-format=FORMAT] [--show=N]\n"
       "                           [--primus-global-batch-size=N [--world-size=N]\n"
       "                            [--primus-drop-last] [--primus-shuffle=MODE] "
       "[--primus-seed=N]\n"
       "                            [--primus-shuffle-block=N] [--epoch=E]] [--json]\n"
       "\n"
       "The dataset's files (records, bytes, where the index is) and its fingerprint (what a\n"
       "saved data cursor must match). With a global batch size, the plan of epoch E (default\n"
       "0): steps, records used and dropped, and rank 0's first share for --world-size ranks.\n"
       "With --show=N, the first N records (escaped, cut at 80 characters). Uses and updates\n"
       "the cached indexes as `index` does.\n",
       true},
      {"verify",
       "Usage: primus-data verify SPEC [--primus-data-format=FORMAT] [--json]\n"
       "\n"
       "Reads every file from start to end, ignoring cached indexes and writing none, and checks\n"
       "every record: whole records (fixed:N), complete framing and both CRC-32Cs of every\n"
       "record (tfrecord). Exit status 1 names the first bad file and the byte offset of its bad\n"
       "record.\n",
       false},
  };
  return list;
}

std::optional<std::string> positive(const std::string& text, std::uint64_t max) {
  const auto value = parse_unsigned(text, max);
  if (value && *value >= 1) return std::nullopt;
  return "a number from 1 to " + std::to_string(max);
}

std::string environment_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

std::string_view origin_name(IndexOrigin origin) {
  switch (origin) {
    case IndexOrigin::kNone:
      return "computed";
    case IndexOrigin::kCachedBeside:
      return "cached beside";
    case IndexOrigin::kCachedElsewhere:
      return "cached";
    case IndexOrigin::kBuilt:
      return "built";
  }
  return "?";
}

// A setting: the command line's, else the environment's (PRIMUS_*), else the table's default.
std::string setting(const cli::Parsed& args, const std::string& name) {
  if (const auto given = args.value(name)) return given->empty() ? "1" : *given;
  const OptionSpec* spec = find_option(name);
  std::string fallback = spec != nullptr ? std::string(spec->default_value) : "";
  if (spec == nullptr || spec->env.empty()) return fallback;
  std::string from_env = environment_or(std::string(spec->env).c_str(), "");
  if (from_env.empty()) return fallback;
  if (const auto problem = spec->validate != nullptr ? spec->validate(from_env) : std::nullopt) {
    throw UsageError(std::string(spec->env) + ": expected " + *problem + ", got '" + from_env +
                     "'");
  }
  return from_env;
}

Json files_json(const Dataset& dataset) {
  Json files = Json::array();
  for (const DataFile& file : dataset.files()) {
    files.push_back({{"path", file.path},
                     {"records", file.records},
                     {"bytes", file.size},
                     {"index", file.index_path.empty() ? Json() : Json(file.index_path)},
                     {"origin", origin_name(file.origin)}});
  }
  return files;
}

void print_files(const Dataset& dataset, std::ostream& out) {
  Table table(
      {{"FILE"}, {"RECORDS", Table::Align::kRight}, {"BYTES", Table::Align::kRight}, {"INDEX"}});
  for (const DataFile& file : dataset.files()) {
    table.add_row({file.path, std::to_string(file.records), bytes_column(file.size),
                   std::string(origin_name(file.origin)) +
                       (file.index_path.empty() ? "" : " " + file.index_path)});
  }
  table.print(out);
}

void print_summary(const std::string& spec, const Dataset& dataset, std::ostream& out) {
  out << "dataset:     " << spec << "\n"
      << "format:      " << to_string(dataset.format()) << "\n"
      << "files:       " << dataset.files().size() << "\n"
      << "records:     " << dataset.records() << "\n"
      << "bytes:       " << bytes_column(dataset.bytes()) << "\n"
      << "fingerprint: " << dataset.fingerprint() << "\n";
}

Json summary_json(const std::string& spec, const Dataset& dataset) {
  Json document;
  document["spec"] = spec;
  document["format"] = to_string(dataset.format());
  document["records"] = dataset.records();
  document["bytes"] = dataset.bytes();
  document["fingerprint"] = dataset.fingerprint();
  document["files"] = files_json(dataset);
  return document;
}

int run(const Command& command, const cli::Parsed& args, std::ostream& out, std::ostream& err) {
  const std::string spec = args.operands[0];
  const auto format_text = setting(args, "primus-data-format");
  OpenOptions options;
  options.format = *parse_format(format_text);  // checked by the row's validator
  options.cache_dir = args.value("cache-dir").value_or(default_index_cache_dir());
  if (const auto threads = args.value("threads")) {
    options.threads = static_cast<unsigned>(*parse_unsigned(*threads, 1024));
  }
  options.use_cache = command.name != "verify";
  options.what = "SPEC";
  std::shared_ptr<const Dataset> dataset;
  try {
    dataset = Dataset::open(spec, options);
  } catch (const Error& e) {
    const std::string message = e.what();
    // A fault in the data (a file, a record) is exit status 1; a specification that names
    // nothing usable is a usage error.
    if (message.rfind("SPEC:", 0) == 0) throw;
    err << "primus-data: " << message << "\n";
    if (args.has("json")) print_json(out, Json{{"spec", spec}, {"ok", false}, {"error", message}});
    return kExitBad;
  }
  Json document = summary_json(spec, *dataset);
  if (command.name == "verify") document["ok"] = true;

  if (command.name == "inspect") {
    if (args.has("primus-global-batch-size")) {
      PlanSettings settings;
      settings.fingerprint = dataset->fingerprint();
      settings.records = dataset->records();
      settings.global_batch_size =
          *parse_unsigned(setting(args, "primus-global-batch-size"), ~std::uint64_t{0});
      settings.shuffle = *parse_shuffle(setting(args, "primus-shuffle"));
      settings.shuffle_block =
          *parse_unsigned(setting(args, "primus-shuffle-block"), ~std::uint64_t{0});
      settings.seed = *parse_unsigned(setting(args, "primus-seed"), ~std::uint64_t{0});
      const std::string drop = setting(args, "primus-drop-last");
      settings.drop_last = drop == "1" || drop == "yes" || drop == "true";
      const auto world = static_cast<std::uint32_t>(
          *parse_unsigned(args.value("world-size").value_or("1"), 1U << 20));
      const std::uint64_t epoch = *parse_unsigned(args.value("epoch").value_or("0"), ~0ULL);
      const EpochPlan plan(settings, epoch, world);
      std::vector<std::uint64_t> first_share;
      if (plan.steps() > 0) plan.share(0, 0, first_share);
      if (first_share.size() > 16) first_share.resize(16);
      Json json_plan = {{"epoch", epoch},
                        {"world_size", world},
                        {"global_batch_size", settings.global_batch_size},
                        {"shuffle", to_string(settings.shuffle)},
                        {"seed", settings.seed},
                        {"drop_last", settings.drop_last},
                        {"steps", plan.steps()},
                        {"records_used", plan.used_records()},
                        {"records_dropped", dataset->records() - plan.used_records()},
                        {"rank0_first_share", first_share}};
      document["plan"] = json_plan;
    }
    if (const auto show = args.value("show")) {
      const std::uint64_t wanted =
          std::min<std::uint64_t>(*parse_unsigned(*show, 1000000), dataset->records());
      std::vector<std::uint64_t> ids(wanted);
      for (std::uint64_t i = 0; i < wanted; ++i)
        ids[i] = i;
      RecordReader reader(dataset);
      RecordBatch batch;
      reader.read(ids.data(), ids.size(), batch);
      Json records = Json::array();
      for (std::size_t i = 0; i < batch.size(); ++i) {
        const std::string bytes(reinterpret_cast<const char*>(batch.data(i)), batch.length(i));
        records.push_back({{"record", i}, {"length", bytes.size()}, {"text", bytes}});
      }
      document["records_shown"] = records;
    }
  }

  if (args.has("json")) {
    print_json(out, document);
    return kExitOk;
  }
  print_summary(spec, *dataset, out);
  if (command.name == "verify") {
    out << "verified:    every file read again, every record sound\n";
    return kExitOk;
  }
  out << "\n";
  print_files(*dataset, out);
  if (document.contains("plan")) {
    const Json& plan = document["plan"];
    out << "\nepoch " << plan["epoch"].get<std::uint64_t>() << " at "
        << plan["global_batch_size"].get<std::uint64_t>() << " records per global batch, "
        << plan["world_size"].get<std::uint64_t>() << " rank(s), shuffle "
        << plan["shuffle"].get<std::string>() << ":\n"
        << "  steps:           " << plan["steps"].get<std::uint64_t>() << "\n"
        << "  records used:    " << plan["records_used"].get<std::uint64_t>() << "\n"
        << "  records dropped: " << plan["records_dropped"].get<std::uint64_t>() << "\n"
        << "  rank 0, step 0:  " << plan["rank0_first_share"].dump() << "\n";
  }
  if (document.contains("records_shown")) {
    out << "\n";
    for (const Json& record : document["records_shown"]) {
      out << "record " << record["record"].get<std::uint64_t>() << " ("
          << record["length"].get<std::uint64_t>()
          << " bytes): " << quote_truncated(record["text"].get<std::string>(), 80) << "\n";
    }
  }
  return kExitOk;
}

cli::Parser parser_for(const Command& command) {
  cli::Parser parser(" (see primus-data " + command.name + " --help)",
                     " for '" + command.name + "'");
  parser.operands({{"SPEC", "the dataset: a glob, a directory, a file or @MANIFEST"}});
  parser.add({"json", cli::Arg::kNone, "", "", "one JSON document"});
  const OptionSpec* format = find_option("primus-data-format");
  parser.add({"primus-data-format", cli::Arg::kRequired, "FORMAT", std::string(kFormatExpected),
              "the record format",
              [format](const std::string& value) { return format->validate(value); }, 0, true});
  if (command.name == "index" || command.name == "inspect") {
    parser.add({"cache-dir", cli::Arg::kRequired, "DIR", "a directory", "where indexes go"});
    parser.add({"threads", cli::Arg::kRequired, "N", "a number from 1 to 1024", "builders",
                [](const std::string& v) { return positive(v, 1024); }});
  }
  if (command.plan_options) {
    for (const char* name : {"primus-global-batch-size", "primus-shuffle", "primus-seed",
                             "primus-shuffle-block", "primus-drop-last"}) {
      const OptionSpec* spec = find_option(name);
      cli::Option option;
      option.name = name;
      option.arg = spec->arg == OptionArg::kNone ? cli::Arg::kNone : cli::Arg::kRequired;
      option.value_name = std::string(spec->placeholder);
      option.help = std::string(spec->help);
      option.check = [spec](const std::string& value) { return spec->validate(value); };
      option.from_table = true;
      parser.add(std::move(option));
    }
    parser.add({"world-size", cli::Arg::kRequired, "N", "a number of ranks from 1 to 1048576",
                "ranks", [](const std::string& v) { return positive(v, 1U << 20); }});
    parser.add({"epoch", cli::Arg::kRequired, "E", "an epoch number", "epoch",
                [](const std::string& v) -> std::optional<std::string> {
                  if (parse_unsigned(v, ~0ULL)) return std::nullopt;
                  return "an epoch number";
                }});
    parser.add({"show", cli::Arg::kRequired, "N", "a number of records from 1 to 1000000",
                "records to show", [](const std::string& v) { return positive(v, 1000000); }});
  }
  return parser;
}

int main_(int argc, char** argv) {
  if (argc < 2) throw UsageError("missing COMMAND: index, inspect or verify (see --help)");
  const std::string first = argv[1];
  if (first == "--help" || first == "-h") {
    std::cout << kUsage;
    return kExitOk;
  }
  if (first == "--version") {
    std::cout << "primus-data " << PACKAGE_VERSION << "\n";
    return kExitOk;
  }
  for (const Command& command : commands()) {
    if (command.name != first) continue;
    const cli::Parsed args =
        parser_for(command).parse(std::vector<std::string>(argv + 2, argv + argc));
    if (args.help) {
      std::cout << command.help;
      return kExitOk;
    }
    return run_printing(
        [&](std::ostream& out, std::ostream& err) { return run(command, args, out, err); });
  }
  if (first.rfind('-', 0) == 0) throw UsageError("unknown option '" + first + "' (see --help)");
  throw UsageError("unknown command '" + first +
                   "': expected index, inspect or verify (see --help)");
}

}  // namespace
}  // namespace primus::data::tool

int main(int argc, char** argv) {
  try {
    return primus::data::tool::main_(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "primus-data: " << primus::cli::printable(e.what(), false) << "\n";
    return primus::data::tool::kExitUsage;
  }
}

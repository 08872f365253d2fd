// primus-ckpt inspect DIR [--step N]: the tensors of the newest valid checkpoint (or of step N)
// and every rank's state.
#include <variant>

#include "checkpoint_root.hpp"
#include "commands.hpp"
#include "primus/ckpt/checkpoint.hpp"
#include "primus/ckpt/layout.hpp"
#include "render.hpp"

namespace primus::ckpt::tool {
namespace {

constexpr std::size_t kShownChars = 60;

std::uint64_t tensor_bytes(const TensorEntry& tensor) {
  return element_count(tensor.global_shape) * dtype_size(tensor.dtype);
}

const char* kind_of(const StateValue& value) {
  if (std::holds_alternative<std::int64_t>(value)) return "int";
  if (std::holds_alternative<std::string>(value)) return "string";
  return "bytes";
}

std::string shown_value(const StateValue& value) {
  if (const auto* number = std::get_if<std::int64_t>(&value)) return std::to_string(*number);
  if (const auto* text = std::get_if<std::string>(&value)) {
    return quote_truncated(*text, kShownChars);
  }
  return std::to_string(std::get<std::vector<std::uint8_t>>(value).size()) + " bytes";
}

Json value_json(const std::string& key, const StateValue& value) {
  Json item;
  item["key"] = key;
  item["kind"] = kind_of(value);
  if (const auto* number = std::get_if<std::int64_t>(&value)) {
    item["value"] = *number;
  } else if (const auto* text = std::get_if<std::string>(&value)) {
    item["value"] = *text;
    item["length"] = text->size();
  } else {
    item["length"] = std::get<std::vector<std::uint8_t>>(value).size();
  }
  return item;
}

int run(const ParsedArgs& args, std::ostream& out, std::ostream& err) {
  std::optional<std::int64_t> only;
  if (const auto step = args.value("step")) only = parse_step(*step, "--step");
  const std::filesystem::path root = checked_root(args.operands[0]);
  std::vector<std::string> skipped;
  std::optional<Loaded> loaded;
  if (only) {
    const std::int64_t number = *only;
    if (!std::filesystem::is_directory(root / step_dir_name(number))) {
      err << "primus-ckpt: no committed step " << number << " in " << root.string() << "\n";
      return kExitFound;
    }
    loaded = load_step(root, number, Verify::kQuick, &skipped);
    if (!loaded) {
      err << "primus-ckpt: step " << number
          << " is corrupt: " << (skipped.empty() ? "" : skipped.front()) << "\n";
      return kExitFound;
    }
  } else {
    loaded = load_latest(root, Verify::kQuick, &skipped);
    if (!loaded) {
      err << "primus-ckpt: no valid checkpoint in " << root.string() << "\n";
      for (const std::string& reason : skipped)
        err << "  skipped " << reason << "\n";
      return kExitFound;
    }
  }
  const Checkpoint& checkpoint = loaded->checkpoint;
  const Manifest& manifest = checkpoint.manifest();
  std::vector<std::map<std::string, StateValue>> states;
  for (int rank = 0; rank < checkpoint.world_size(); ++rank)
    states.push_back(checkpoint.state(rank));

  if (args.has("json")) {
    Json document;
    document["root"] = root.string();
    document["step"] = manifest.step;
    document["directory"] = checkpoint.dir().filename().string();
    document["world_size"] = manifest.world_size;
    document["total_bytes"] = manifest.total_bytes();
    document["created"] = manifest.created;
    document["skipped"] = loaded->skipped;
    Json tensors = Json::array();
    for (const auto& [name, tensor] : manifest.tensors) {
      Json item;
      item["name"] = name;
      item["dtype"] = std::string(to_string(tensor.dtype));
      item["shape"] = shape_json(tensor.global_shape);
      item["shards"] = tensor.shards.size();
      item["bytes"] = tensor_bytes(tensor);
      tensors.push_back(std::move(item));
    }
    document["tensors"] = std::move(tensors);
    Json ranks = Json::array();
    for (std::size_t rank = 0; rank < states.size(); ++rank) {
      Json state = Json::array();
      for (const auto& [key, value] : states[rank])
        state.push_back(value_json(key, value));
      ranks.push_back(Json{{"rank", rank}, {"state", std::move(state)}});
    }
    document["ranks"] = std::move(ranks);
    print_json(out, document);
    return kExitOk;
  }

  out << checkpoint.dir().filename().string() << ": step " << manifest.step << ", world size "
      << manifest.world_size << ", " << bytes_column(manifest.total_bytes()) << ", created "
      << manifest.created << "\n";
  for (const std::string& reason : loaded->skipped)
    out << "skipped " << reason << "\n";
  out << "\n";
  Table tensors({{"TENSOR"},
                 {"DTYPE"},
                 {"SHAPE"},
                 {"SHARDS", Table::Align::kRight},
                 {"BYTES", Table::Align::kRight}});
  for (const auto& [name, tensor] : manifest.tensors) {
    tensors.add_row({name, std::string(to_string(tensor.dtype)), format_shape(tensor.global_shape),
                     std::to_string(tensor.shards.size()), std::to_string(tensor_bytes(tensor))});
  }
  if (tensors.empty()) {
    out << "no tensors\n";
  } else {
    tensors.print(out);
  }
  for (std::size_t rank = 0; rank < states.size(); ++rank) {
    out << "\nrank " << rank << " state:";
    if (states[rank].empty()) {
      out << " none\n";
      continue;
    }
    out << "\n";
    Table state({{"KEY"}, {"KIND"}, {"VALUE"}});
    for (const auto& [key, value] : states[rank])
      state.add_row({key, kind_of(value), shown_value(value)});
    state.print(out, "  ");
  }
  return kExitOk;
}

}  // namespace

Command inspect_command() {
  return {{"inspect",
           {{"DIR", "the checkpoint root directory"}},
           {{"step", "a step number"}, {"json", ""}},
           "Usage: primus-ckpt inspect DIR [--step N] [--json]\n"
           "\n"
           "Shows the newest checkpoint under DIR that passes a quick verification (or step N):\n"
           "its tensors (name, dtype, global shape, number of shards, bytes) and the state of\n"
           "every rank (key, kind, value: integers in full, strings cut to 60 characters, bytes\n"
           "as their length). Newer checkpoints that were skipped are named, with the reason.\n"
           "\n"
           "  --step N   that step instead of the newest valid one\n"
           "  --json     one JSON document instead of the tables (strings in full)\n"},
          run};
}

}  // namespace primus::ckpt::tool

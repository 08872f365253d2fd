// primus-ckpt diff DIR STEP_A STEP_B: the tensors of two checkpoints compared, whole and
// element by element, whatever world sizes saved them.
#include <set>

#include "checkpoint_root.hpp"
#include "commands.hpp"
#include "primus/ckpt/checkpoint.hpp"
#include "primus/ckpt/layout.hpp"
#include "render.hpp"
#include "tensor_compare.hpp"

namespace primus::ckpt::tool {
namespace {

enum class Outcome { kIdentical, kOnlyInA, kOnlyInB, kDtypeChanged, kShapeChanged, kContent };

struct TensorDiff {
  std::string name;
  Outcome outcome = Outcome::kIdentical;
  const TensorEntry* a = nullptr;
  const TensorEntry* b = nullptr;
  TensorComparison comparison;
};

const char* label(Outcome outcome) {
  switch (outcome) {
    case Outcome::kIdentical:
      return "identical";
    case Outcome::kOnlyInA:
      return "only in A";
    case Outcome::kOnlyInB:
      return "only in B";
    case Outcome::kDtypeChanged:
      return "dtype changed";
    case Outcome::kShapeChanged:
      return "shape changed";
    case Outcome::kContent:
      return "content changed";
  }
  return "?";
}

const char* json_label(Outcome outcome) {
  switch (outcome) {
    case Outcome::kIdentical:
      return "identical";
    case Outcome::kOnlyInA:
      return "only_in_a";
    case Outcome::kOnlyInB:
      return "only_in_b";
    case Outcome::kDtypeChanged:
      return "dtype_changed";
    case Outcome::kShapeChanged:
      return "shape_changed";
    case Outcome::kContent:
      return "content_changed";
  }
  return "?";
}

std::string describe(const TensorEntry& tensor) {
  return std::string(to_string(tensor.dtype)) + " " + format_shape(tensor.global_shape);
}

std::string detail(const TensorDiff& diff) {
  switch (diff.outcome) {
    case Outcome::kOnlyInA:
      return describe(*diff.a);
    case Outcome::kOnlyInB:
      return describe(*diff.b);
    case Outcome::kDtypeChanged:
    case Outcome::kShapeChanged:
      return describe(*diff.a) + " -> " + describe(*diff.b);
    case Outcome::kIdentical:
      return describe(*diff.a);
    case Outcome::kContent: {
      std::string text = std::to_string(diff.comparison.differing) + " of " +
                         std::to_string(diff.comparison.elements) + " elements differ";
      if (diff.comparison.max_abs_diff) {
        text += ", max abs diff " + format_double(*diff.comparison.max_abs_diff);
      }
      return text;
    }
  }
  return "";
}

// Either checkpoint, opened with a quick verification; a missing or corrupt one is trouble
// (exit status 2, as diff(1)), not a difference.
Checkpoint open_step(const std::filesystem::path& root, std::int64_t step) {
  if (!std::filesystem::is_directory(root / step_dir_name(step))) {
    throw Error("no committed step " + std::to_string(step) + " in " + root.string());
  }
  std::vector<std::string> skipped;
  std::optional<Loaded> loaded = load_step(root, step, Verify::kQuick, &skipped);
  if (!loaded) {
    throw Error("step " + std::to_string(step) +
                " is corrupt: " + (skipped.empty() ? "" : skipped.front()));
  }
  return std::move(loaded->checkpoint);
}

std::vector<std::uint8_t> read_tensor(const Checkpoint& checkpoint, const std::string& name) {
  try {
    return checkpoint.read(name);
  } catch (const Error& e) {
    throw Error(std::string("cannot compare: ") + e.what());  // not CorruptCheckpoint: exit 2
  }
}

Json step_json(const Checkpoint& checkpoint) {
  return Json{{"step", checkpoint.step()},
              {"directory", checkpoint.dir().filename().string()},
              {"world_size", checkpoint.world_size()}};
}

int run(const ParsedArgs& args, std::ostream& out, std::ostream&) {
  const std::int64_t step_a = parse_step(args.operands[1], "STEP_A");
  const std::int64_t step_b = parse_step(args.operands[2], "STEP_B");
  const std::filesystem::path root = checked_root(args.operands[0]);
  const Checkpoint a = open_step(root, step_a);
  const Checkpoint b = open_step(root, step_b);

  std::set<std::string> names;
  for (const auto& entry : a.manifest().tensors)
    names.insert(entry.first);
  for (const auto& entry : b.manifest().tensors)
    names.insert(entry.first);
  std::vector<TensorDiff> diffs;
  std::size_t different = 0;
  for (const std::string& name : names) {
    TensorDiff diff;
    diff.name = name;
    const auto in_a = a.manifest().tensors.find(name);
    const auto in_b = b.manifest().tensors.find(name);
    if (in_a != a.manifest().tensors.end()) diff.a = &in_a->second;
    if (in_b != b.manifest().tensors.end()) diff.b = &in_b->second;
    if (diff.b == nullptr) {
      diff.outcome = Outcome::kOnlyInA;
    } else if (diff.a == nullptr) {
      diff.outcome = Outcome::kOnlyInB;
    } else if (diff.a->dtype != diff.b->dtype) {
      diff.outcome = Outcome::kDtypeChanged;
    } else if (diff.a->global_shape != diff.b->global_shape) {
      diff.outcome = Outcome::kShapeChanged;
    } else {
      diff.comparison = compare_tensors(diff.a->dtype, read_tensor(a, name), read_tensor(b, name));
      if (diff.comparison.differing > 0) diff.outcome = Outcome::kContent;
    }
    if (diff.outcome != Outcome::kIdentical) ++different;
    diffs.push_back(std::move(diff));
  }

  if (args.has("json")) {
    Json tensors = Json::array();
    for (const TensorDiff& diff : diffs) {
      Json item;
      item["name"] = diff.name;
      item["status"] = json_label(diff.outcome);
      if (diff.a != nullptr) {
        item["dtype_a"] = std::string(to_string(diff.a->dtype));
        item["shape_a"] = shape_json(diff.a->global_shape);
      }
      if (diff.b != nullptr) {
        item["dtype_b"] = std::string(to_string(diff.b->dtype));
        item["shape_b"] = shape_json(diff.b->global_shape);
      }
      if (diff.outcome == Outcome::kIdentical || diff.outcome == Outcome::kContent) {
        item["elements"] = diff.comparison.elements;
        item["differing_elements"] = diff.comparison.differing;
        if (diff.comparison.max_abs_diff) {
          item["max_abs_diff"] = *diff.comparison.max_abs_diff;  // NaN prints as null
        }
      }
      tensors.push_back(std::move(item));
    }
    Json document;
    document["root"] = root.string();
    document["a"] = step_json(a);
    document["b"] = step_json(b);
    document["identical"] = different == 0;
    document["different_tensors"] = different;
    document["tensors"] = std::move(tensors);
    print_json(out, document);
  } else {
    out << "A: " << a.dir().filename().string() << " (world size " << a.world_size() << ")\n"
        << "B: " << b.dir().filename().string() << " (world size " << b.world_size() << ")\n\n";
    Table table({{"TENSOR"}, {"STATUS"}, {"DETAIL"}});
    for (const TensorDiff& diff : diffs)
      table.add_row({diff.name, label(diff.outcome), detail(diff)});
    if (table.empty()) {
      out << "no tensors\n";
    } else {
      table.print(out);
    }
    out << "\n";
    if (different == 0) {
      out << "identical: " << diffs.size() << (diffs.size() == 1 ? " tensor" : " tensors") << "\n";
    } else {
      out << "different: " << different << " of " << diffs.size() << " tensors\n";
    }
  }
  return different == 0 ? kExitOk : kExitFound;
}

}  // namespace

Command diff_command() {
  return {{"diff",
           {{"DIR", "the checkpoint root directory"},
            {"STEP_A", "a step number"},
            {"STEP_B", "a step number"}},
           {{"json", ""}},
           "Usage: primus-ckpt diff DIR STEP_A STEP_B [--json]\n"
           "\n"
           "Compares the tensors of two checkpoints under DIR, read whole (so the world sizes\n"
           "that saved them do not matter): only in A, only in B, dtype changed, shape changed,\n"
           "content changed (how many elements differ and, for floating-point dtypes, the\n"
           "largest absolute difference) or identical. The ranks' state is not compared.\n"
           "Exit status 0 when every tensor is identical, 1 when any differs, 2 when a step is\n"
           "missing or corrupt.\n"
           "\n"
           "  --json   one JSON document instead of the table\n"},
          run};
}

}  // namespace primus::ckpt::tool

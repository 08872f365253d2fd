#include "primus/ckpt/manifest.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "crc32c.hpp"
#include "primus/ckpt/layout.hpp"

namespace primus::ckpt {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxDims = 32;
constexpr std::string_view kTensorGroup = "/tensors/";

[[noreturn]] void corrupt(std::string_view where, const std::string& what) {
  throw CorruptCheckpoint(std::string(where) + ": " + what);
}

const json& field(const json& object, const char* key, std::string_view where) {
  if (!object.is_object()) corrupt(where, "expected a JSON object");
  const auto it = object.find(key);
  if (it == object.end()) corrupt(where, std::string("missing \"") + key + "\"");
  return *it;
}

std::int64_t int_field(const json& object, const char* key, std::int64_t lo, std::int64_t hi,
                       std::string_view where) {
  const json& value = field(object, key, where);
  if (!value.is_number_integer()) corrupt(where, std::string("\"") + key + "\" is not an integer");
  const auto number = value.get<std::int64_t>();
  if (number < lo || number > hi) {
    corrupt(where, std::string("\"") + key + "\" is out of range: " + std::to_string(number));
  }
  return number;
}

std::uint64_t uint_field(const json& object, const char* key, std::string_view where) {
  const json& value = field(object, key, where);
  if (!value.is_number_unsigned() &&
      !(value.is_number_integer() && value.get<std::int64_t>() >= 0)) {
    corrupt(where, std::string("\"") + key + "\" is not a non-negative integer");
  }
  return value.get<std::uint64_t>();
}

std::string string_field(const json& object, const char* key, std::string_view where) {
  const json& value = field(object, key, where);
  if (!value.is_string()) corrupt(where, std::string("\"") + key + "\" is not a string");
  return value.get<std::string>();
}

Shape shape_field(const json& object, const char* key, std::string_view where) {
  const json& value = field(object, key, where);
  if (!value.is_array() || value.size() > kMaxDims) {
    corrupt(where, std::string("\"") + key + "\" is not a shape (an array of at most 32 sizes)");
  }
  Shape shape;
  for (const json& dim : value) {
    if (!dim.is_number_unsigned()) corrupt(where, std::string("\"") + key + "\" has a bad size");
    shape.push_back(dim.get<std::uint64_t>());
  }
  element_count(shape);  // throws on overflow
  return shape;
}

DType dtype_field(const json& object, std::string_view where) {
  const std::string name = string_field(object, "dtype", where);
  const auto dtype = parse_dtype(name);
  if (!dtype) corrupt(where, "unknown dtype '" + name + "'");
  return *dtype;
}

std::uint32_t crc_field(const json& object, std::string_view where) {
  const auto crc = parse_crc_hex(string_field(object, "crc32c", where));
  if (!crc) corrupt(where, "\"crc32c\" is not 8 hex digits");
  return *crc;
}

std::string dataset_field(const json& object, std::string_view where) {
  std::string dataset = string_field(object, "dataset", where);
  if (dataset.compare(0, kTensorGroup.size(), kTensorGroup) != 0 ||
      dataset.find('/', kTensorGroup.size()) != std::string::npos ||
      dataset.size() == kTensorGroup.size()) {
    corrupt(where, "dataset '" + dataset + "' is not under /tensors/");
  }
  return dataset;
}

json shape_json(const Shape& shape) {
  json array = json::array();
  for (const std::uint64_t dim : shape)
    array.push_back(dim);
  return array;
}

// Deeper than any manifest or index Primus writes (they nest 5 levels): a document nested
// deeper is refused while it is parsed, before anything walks it recursively (nlohmann's
// dump() recurses once per level, and a valid array nested 200,000 deep overflowed the stack).
constexpr int kMaxJsonDepth = 32;

json parse_json(std::string_view text, std::string_view where) {
  struct TooDeep {};
  const json::parser_callback_t limit_depth = [](int depth, json::parse_event_t event, json&) {
    if (depth > kMaxJsonDepth &&
        (event == json::parse_event_t::object_start || event == json::parse_event_t::array_start)) {
      throw TooDeep{};
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), limit_depth);
  } catch (const json::exception& e) {
    corrupt(where, std::string("not valid JSON (") + e.what() + ")");
  } catch (const TooDeep&) {
    corrupt(where, "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
}

// A part of a tensor: where it starts and its size, in elements.
struct Box {
  const Shape* offset;
  const Shape* shape;
};

bool boxes_overlap(const Box& a, const Box& b) {
  for (std::size_t d = 0; d < a.offset->size(); ++d) {
    if ((*a.shape)[d] == 0 || (*b.shape)[d] == 0) return false;
    if ((*a.offset)[d] + (*a.shape)[d] <= (*b.offset)[d] ||
        (*b.offset)[d] + (*b.shape)[d] <= (*a.offset)[d]) {
      return false;
    }
  }
  return true;
}

enum class Overlap { kNone, kFound, kTooComplex };

// A sweep along the dimension where the parts have the most distinct offsets: sorted by their
// start there, each part is compared only with the parts still open at its start. Row shards
// cost O(k log k); a grid of r x c parts at most O(k min(r, c)). A hostile layout that needs
// more than kMaxComparisons is refused rather than checked for minutes.
Overlap any_overlap(const Shape& global, const std::vector<Box>& parts) {
  constexpr std::uint64_t kMaxComparisons = std::uint64_t{100} << 20;
  std::vector<const Box*> boxes;
  for (const Box& p : parts) {
    if (element_count(*p.shape) != 0) boxes.push_back(&p);
  }
  if (boxes.size() < 2) return Overlap::kNone;
  if (global.empty()) return Overlap::kFound;  // two parts of a scalar
  std::size_t axis = 0;
  std::size_t most = 0;
  for (std::size_t d = 0; d < global.size(); ++d) {
    std::vector<std::uint64_t> starts;
    starts.reserve(boxes.size());
    for (const Box* b : boxes)
      starts.push_back((*b->offset)[d]);
    std::sort(starts.begin(), starts.end());
    const auto distinct =
        static_cast<std::size_t>(std::unique(starts.begin(), starts.end()) - starts.begin());
    if (distinct > most) {
      most = distinct;
      axis = d;
    }
  }
  std::sort(boxes.begin(), boxes.end(),
            [axis](const Box* a, const Box* b) { return (*a->offset)[axis] < (*b->offset)[axis]; });
  std::vector<const Box*> open;
  std::uint64_t comparisons = 0;
  for (const Box* box : boxes) {
    const std::uint64_t start = (*box->offset)[axis];
    open.erase(std::remove_if(
                   open.begin(), open.end(),
                   [&](const Box* o) { return (*o->offset)[axis] + (*o->shape)[axis] <= start; }),
               open.end());
    comparisons += open.size();
    if (comparisons > kMaxComparisons) return Overlap::kTooComplex;
    for (const Box* other : open) {
      if (boxes_overlap(*other, *box)) return Overlap::kFound;
    }
    open.push_back(box);
  }
  return Overlap::kNone;
}

// The one check of a tensor's layout, at commit and at every load: a byte size that fits in
// 63 bits, parts of the right rank inside the global shape, and parts that tile it exactly.
void check_tiling(std::string_view where, const std::string& name, DType dtype, const Shape& global,
                  const std::vector<Box>& parts) {
  const std::uint64_t count = element_count(global);
  if (count > (std::uint64_t{1} << 62) / dtype_size(dtype)) {
    corrupt(where, "tensor '" + name + "' is too large to be real (" + std::to_string(count) +
                       " elements)");
  }
  std::uint64_t covered = 0;
  for (const Box& part : parts) {
    if (part.offset->size() != global.size() || part.shape->size() != global.size()) {
      corrupt(where, "a part of tensor '" + name + "' has the wrong number of dimensions");
    }
    for (std::size_t d = 0; d < global.size(); ++d) {
      if ((*part.offset)[d] > global[d] || (*part.shape)[d] > global[d] - (*part.offset)[d]) {
        corrupt(where, "a part of tensor '" + name + "' lies outside its global shape");
      }
    }
    covered += element_count(*part.shape);
  }
  switch (any_overlap(global, parts)) {
    case Overlap::kNone:
      break;
    case Overlap::kFound:
      corrupt(where, "tensor '" + name +
                         "' is written twice (overlapping parts); a replicated tensor is added by "
                         "its owner only");
    case Overlap::kTooComplex:
      corrupt(where, "the " + std::to_string(parts.size()) + " parts of tensor '" + name +
                         "' form a layout too irregular to check");
  }
  if (covered != count) {
    corrupt(where, "the parts of tensor '" + name + "' do not cover its global shape");
  }
}

}  // namespace

std::uint64_t Manifest::total_bytes() const {
  std::uint64_t total = 0;
  for (const FileEntry& file : files)
    total += file.size;
  return total;
}

std::string to_json(const RankIndex& index) {
  json state = json::object();
  for (const auto& [key, crc] : index.state)
    state[key] = crc_hex(crc);
  json parts = json::array();
  for (const TensorPart& part : index.parts) {
    parts.push_back({{"name", part.name},
                     {"dtype", std::string(to_string(part.dtype))},
                     {"global_shape", shape_json(part.global_shape)},
                     {"offset", shape_json(part.offset)},
                     {"shape", shape_json(part.shape)},
                     {"dataset", part.dataset},
                     {"crc32c", crc_hex(part.crc32c)}});
  }
  const json doc = {{"format", "primus-ckpt-rank"},
                    {"version", index.version},
                    {"step", index.step},
                    {"rank", index.rank},
                    {"world_size", index.world_size},
                    {"tensors", parts},
                    {"state", state}};
  return doc.dump();
}

RankIndex parse_rank_index(std::string_view text, std::string_view where) {
  const json doc = parse_json(text, where);
  if (string_field(doc, "format", where) != "primus-ckpt-rank") corrupt(where, "not a rank index");
  RankIndex index;
  index.version = static_cast<int>(int_field(doc, "version", 1, kFormatVersion, where));
  index.step = int_field(doc, "step", 0, kMaxStep, where);
  index.world_size = static_cast<int>(int_field(doc, "world_size", 1, kMaxWorldSize, where));
  index.rank = static_cast<int>(int_field(doc, "rank", 0, index.world_size - 1, where));
  const json& tensors = field(doc, "tensors", where);
  if (!tensors.is_array()) corrupt(where, "\"tensors\" is not an array");
  for (const json& entry : tensors) {
    TensorPart part;
    part.name = string_field(entry, "name", where);
    part.dtype = dtype_field(entry, where);
    part.global_shape = shape_field(entry, "global_shape", where);
    part.offset = shape_field(entry, "offset", where);
    part.shape = shape_field(entry, "shape", where);
    part.dataset = dataset_field(entry, where);
    part.crc32c = crc_field(entry, where);
    index.parts.push_back(std::move(part));
  }
  const json& state = field(doc, "state", where);
  if (!state.is_object()) corrupt(where, "\"state\" is not an object");
  for (const auto& [key, crc] : state.items()) {
    const auto value = crc.is_string() ? parse_crc_hex(crc.get<std::string>()) : std::nullopt;
    if (!value) corrupt(where, "state '" + key + "' has no valid checksum");
    index.state.emplace(key, *value);
  }
  return index;
}

std::string to_json(const Manifest& manifest) {
  json files = json::array();
  for (const FileEntry& file : manifest.files) {
    files.push_back({{"name", file.name}, {"rank", file.rank}, {"size", file.size}});
  }
  json tensors = json::object();
  for (const auto& [name, tensor] : manifest.tensors) {
    json shards = json::array();
    for (const Shard& shard : tensor.shards) {
      shards.push_back({{"rank", shard.rank},
                        {"file", shard.file},
                        {"dataset", shard.dataset},
                        {"offset", shape_json(shard.offset)},
                        {"shape", shape_json(shard.shape)},
                        {"crc32c", crc_hex(shard.crc32c)}});
    }
    tensors[name] = {{"dtype", std::string(to_string(tensor.dtype))},
                     {"global_shape", shape_json(tensor.global_shape)},
                     {"shards", shards}};
  }
  const json body = {{"format", "primus-ckpt"},     {"version", manifest.version},
                     {"step", manifest.step},       {"world_size", manifest.world_size},
                     {"created", manifest.created}, {"files", files},
                     {"tensors", tensors}};
  const std::string text = body.dump();
  // The checksum covers the body's exact text, which dump() reproduces from the parsed value.
  return json({{"manifest", body}, {"crc32c", crc_hex(crc32c(text.data(), text.size()))}}).dump(1) +
         "\n";
}

Manifest parse_manifest(std::string_view text, std::string_view where) {
  const json doc = parse_json(text, where);
  const json& body = field(doc, "manifest", where);
  const std::uint32_t expected = crc_field(doc, where);
  const std::string body_text = body.dump();
  if (crc32c(body_text.data(), body_text.size()) != expected) {
    corrupt(where, "checksum mismatch (the manifest was changed or damaged)");
  }
  if (string_field(body, "format", where) != "primus-ckpt") corrupt(where, "not a manifest");
  Manifest manifest;
  manifest.version = static_cast<int>(int_field(body, "version", 1, kFormatVersion, where));
  manifest.step = int_field(body, "step", 0, kMaxStep, where);
  manifest.world_size = static_cast<int>(int_field(body, "world_size", 1, kMaxWorldSize, where));
  manifest.created = string_field(body, "created", where);
  const json& files = field(body, "files", where);
  if (!files.is_array()) corrupt(where, "\"files\" is not an array");
  for (const json& entry : files) {
    FileEntry file;
    file.name = string_field(entry, "name", where);
    file.rank = static_cast<int>(int_field(entry, "rank", 0, manifest.world_size - 1, where));
    file.size = uint_field(entry, "size", where);
    if (parse_rank_file_name(file.name) != file.rank) {
      corrupt(where, "file '" + file.name + "' is not rank " + std::to_string(file.rank) +
                         "'s file in this directory");
    }
    manifest.files.push_back(std::move(file));
  }
  if (manifest.files.size() != static_cast<std::size_t>(manifest.world_size)) {
    corrupt(where, "lists " + std::to_string(manifest.files.size()) + " files for " +
                       std::to_string(manifest.world_size) + " ranks");
  }
  const json& tensors = field(body, "tensors", where);
  if (!tensors.is_object()) corrupt(where, "\"tensors\" is not an object");
  for (const auto& [name, entry] : tensors.items()) {
    TensorEntry tensor;
    tensor.name = name;
    tensor.dtype = dtype_field(entry, where);
    tensor.global_shape = shape_field(entry, "global_shape", where);
    const json& shards = field(entry, "shards", where);
    if (!shards.is_array()) corrupt(where, "\"shards\" of '" + name + "' is not an array");
    for (const json& s : shards) {
      Shard shard;
      shard.rank = static_cast<int>(int_field(s, "rank", 0, manifest.world_size - 1, where));
      shard.file = string_field(s, "file", where);
      if (parse_rank_file_name(shard.file) != shard.rank) {
        corrupt(where, "tensor '" + name + "' points at '" + shard.file +
                           "', not a rank file of this directory");
      }
      shard.dataset = dataset_field(s, where);
      shard.offset = shape_field(s, "offset", where);
      shard.shape = shape_field(s, "shape", where);
      shard.crc32c = crc_field(s, where);
      if (shard.offset.size() != tensor.global_shape.size() ||
          shard.shape.size() != tensor.global_shape.size()) {
        corrupt(where, "a shard of '" + name + "' has the wrong number of dimensions");
      }
      for (std::size_t d = 0; d < shard.shape.size(); ++d) {
        if (shard.offset[d] > tensor.global_shape[d] ||
            shard.shape[d] > tensor.global_shape[d] - shard.offset[d]) {
          corrupt(where, "a shard of '" + name + "' lies outside its global shape");
        }
      }
      tensor.shards.push_back(std::move(shard));
    }
    std::vector<Box> boxes;
    for (const Shard& shard : tensor.shards)
      boxes.push_back(Box{&shard.offset, &shard.shape});
    check_tiling(where, name, tensor.dtype, tensor.global_shape, boxes);
    manifest.tensors.emplace(name, std::move(tensor));
  }
  return manifest;
}

Manifest build_manifest(std::int64_t step, int world_size, const std::vector<RankIndex>& ranks,
                        const std::vector<FileEntry>& files, std::string created) {
  const std::string where = step_dir_name(step);
  if (ranks.size() != static_cast<std::size_t>(world_size) || files.size() != ranks.size()) {
    corrupt(where, "expected " + std::to_string(world_size) + " rank files, found " +
                       std::to_string(ranks.size()));
  }
  Manifest manifest;
  manifest.version = kFormatVersion;
  manifest.step = step;
  manifest.world_size = world_size;
  manifest.created = std::move(created);
  manifest.files = files;

  std::map<std::string, std::vector<TensorPart>> parts_by_name;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const RankIndex& index = ranks[r];
    const std::string file = files[r].name;
    if (index.rank != static_cast<int>(r) || files[r].rank != index.rank) {
      corrupt(where, file + " holds rank " + std::to_string(index.rank) + ", expected " +
                         std::to_string(r));
    }
    if (index.step != step || index.world_size != world_size) {
      corrupt(where, file + " was written for step " + std::to_string(index.step) + " of " +
                         std::to_string(index.world_size) + " ranks, not step " +
                         std::to_string(step) + " of " + std::to_string(world_size));
    }
    for (const TensorPart& part : index.parts)
      parts_by_name[part.name].push_back(part);
  }

  for (auto& [name, parts] : parts_by_name) {
    TensorEntry tensor;
    tensor.name = name;
    tensor.dtype = parts.front().dtype;
    tensor.global_shape = parts.front().global_shape;
    std::vector<Box> boxes;
    for (const TensorPart& part : parts) {
      if (part.dtype != tensor.dtype || part.global_shape != tensor.global_shape) {
        corrupt(where, "ranks disagree on the dtype or global shape of tensor '" + name + "'");
      }
      boxes.push_back(Box{&part.offset, &part.shape});
    }
    check_tiling(where, name, tensor.dtype, tensor.global_shape, boxes);
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      for (const TensorPart& part : ranks[r].parts) {
        if (part.name != name) continue;
        tensor.shards.push_back(Shard{ranks[r].rank, files[r].name, part.dataset, part.offset,
                                      part.shape, part.crc32c});
      }
    }
    manifest.tensors.emplace(name, std::move(tensor));
  }
  return manifest;
}

}  // namespace primus::ckpt

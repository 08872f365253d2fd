// Reading option values from each source and resolving their precedence.
#include <algorithm>

#include "option_validators.hpp"
#include "primus/common/error.hpp"
#include "primus/common/options.hpp"

namespace primus {
namespace {

std::string known_site_keys() {
  std::string keys;
  for (const OptionSpec& spec : option_table()) {
    if (spec.site_key.empty()) continue;
    if (!keys.empty()) keys += ", ";
    keys += spec.site_key;
  }
  return keys;
}

// Booleans are stored as "1" or "0" whatever the spelling.
std::optional<std::string> normalised(const OptionSpec& spec, std::optional<std::string> value) {
  if (value && spec.validate == validators::boolean) {
    return (*value == "1" || *value == "yes" || *value == "true") ? "1" : "0";
  }
  return value;
}

}  // namespace

std::string_view to_string(OptionSource source) {
  switch (source) {
    case OptionSource::kDefault:
      return "default";
    case OptionSource::kSite:
      return "plugstack";
    case OptionSource::kEnvironment:
      return "environment";
    case OptionSource::kSbatch:
      return "sbatch";
    case OptionSource::kSrun:
      return "srun";
  }
  return "unknown";
}

std::string option_display_name(const OptionSpec& spec, OptionSource source) {
  switch (source) {
    case OptionSource::kSite:
      return "plugstack argument " + std::string(spec.site_key);
    case OptionSource::kEnvironment:
      return std::string(spec.env);
    case OptionSource::kSbatch:
    case OptionSource::kSrun:
      return "--" + std::string(spec.name);
    case OptionSource::kDefault:
      break;
  }
  return std::string(spec.name);
}

void validate_option_value(const OptionSpec& spec, OptionSource source,
                           const std::optional<std::string>& value) {
  const std::string who = option_display_name(spec, source);
  if (!value) {
    if (spec.arg == OptionArg::kRequired) {
      throw Error(who + ": expected a value (" + std::string(spec.placeholder) + ")");
    }
    return;
  }
  if (const auto expected = spec.validate(*value)) {
    throw Error(who + ": expected " + *expected + ", got '" + *value + "'");
  }
}

OptionLayer parse_site_arguments(const std::vector<std::string>& args) {
  OptionLayer layer;
  layer.source = OptionSource::kSite;
  for (const std::string& arg : args) {
    const std::size_t eq = arg.find('=');
    if (eq == std::string::npos) {
      throw Error("plugstack argument '" + arg + "': expected key=value with a key among " +
                  known_site_keys());
    }
    const std::string key = arg.substr(0, eq);
    const OptionSpec* spec = find_option_by_site_key(key);
    if (spec == nullptr) {
      std::string message = "plugstack argument '";
      message += arg;
      message += "': unknown key '";
      message += key;
      message += "', expected one of ";
      message += known_site_keys();
      throw Error(message);
    }
    std::optional<std::string> value = arg.substr(eq + 1);
    validate_option_value(*spec, layer.source, value);
    layer.values[std::string(spec->name)] = normalised(*spec, std::move(value));
  }
  return layer;
}

OptionLayer parse_environment_options(const Environment& env) {
  OptionLayer layer;
  layer.source = OptionSource::kEnvironment;
  for (const OptionSpec& spec : option_table()) {
    if (spec.env.empty()) continue;
    std::optional<std::string> value = lookup(env, spec.env);
    if (!value) continue;
    validate_option_value(spec, layer.source, value);
    layer.values[std::string(spec.name)] = normalised(spec, std::move(value));
  }
  return layer;
}

OptionLayer parse_command_line_options(
    OptionSource source,
    const std::vector<std::pair<std::string, std::optional<std::string>>>& given) {
  OptionLayer layer;
  layer.source = source;
  for (const auto& [name, value] : given) {
    const OptionSpec* spec = find_option(name);
    if (spec == nullptr || spec->scope != OptionScope::kUser) {
      throw Error("--" + name + ": unknown option (see --help for the --primus options)");
    }
    validate_option_value(*spec, source, value);
    layer.values[name] = normalised(*spec, value);
  }
  return layer;
}

ResolvedOptions ResolvedOptions::resolve(const std::vector<OptionLayer>& layers) {
  std::vector<const OptionLayer*> ordered(layers.size());
  std::transform(layers.begin(), layers.end(), ordered.begin(),
                 [](const OptionLayer& layer) { return &layer; });
  std::stable_sort(ordered.begin(), ordered.end(), [](const OptionLayer* a, const OptionLayer* b) {
    return a->source < b->source;
  });

  ResolvedOptions result;
  for (const OptionSpec& spec : option_table()) {
    std::optional<ResolvedOption> current;
    if (!spec.default_value.empty()) {
      current = ResolvedOption{std::string(spec.default_value), OptionSource::kDefault};
    }
    bool explicit_value = false;
    for (const OptionLayer* layer : ordered) {
      const auto it = layer->values.find(spec.name);
      if (it == layer->values.end()) continue;
      if (it->second) {
        current = ResolvedOption{*it->second, layer->source};
        explicit_value = true;
      } else if (spec.arg == OptionArg::kOptional && explicit_value) {
        current->source = layer->source;  // given without a value: keeps the lower layer's value
      } else {
        current = ResolvedOption{std::string(spec.implicit_value), layer->source};
      }
    }
    if (current) result.values_[std::string(spec.name)] = *current;
  }
  return result;
}

bool primus_requested(const ResolvedOptions& options) {
  const auto framework = options.get("primus");
  return framework && framework->source > OptionSource::kSite && framework->value != "none";
}

std::optional<ResolvedOption> ResolvedOptions::get(std::string_view name) const {
  const auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string ResolvedOptions::value_or(std::string_view name, std::string_view fallback) const {
  const auto it = values_.find(name);
  return it == values_.end() ? std::string(fallback) : it->second.value;
}

bool option_enabled(const ResolvedOptions& options, std::string_view name) {
  const std::string value = options.value_or(name, "0");
  return value == "1" || value == "yes" || value == "true";
}

}  // namespace primus

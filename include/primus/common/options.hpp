// The one option table: every Primus setting once, with its validator, environment variable,
// plugstack key and help text. The SPANK plugin, primus-launch and the man pages are driven by it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "primus/common/environment.hpp"

namespace primus {

enum class OptionArg {
  kNone,      // a flag: --primus-verbose
  kRequired,  // --primus-ckpt-dir=PATH
  kOptional,  // --primus[=FRAMEWORK]
};

// Who may set an option: users (command line and environment, with a site default in the
// plugstack) or only the site (plugstack arguments).
enum class OptionScope { kUser, kSite };

// Checks a value; returns nullopt when it is valid, or what was expected ("a port number or
// 'auto'") when it is not.
using OptionValidator = std::optional<std::string> (*)(std::string_view value);

struct OptionSpec {
  std::string_view name;         // "primus-ckpt-dir": the command line's --primus-ckpt-dir
  std::string_view env;          // "PRIMUS_CKPT_DIR" (empty: not read from the environment)
  std::string_view site_key;     // plugstack key "ckpt_dir" (empty: no site default)
  std::string_view placeholder;  // "PATH", shown in help
  OptionArg arg = OptionArg::kRequired;
  OptionScope scope = OptionScope::kUser;
  std::string_view implicit_value;  // value of a flag, or of kOptional given without a value
  std::string_view default_value;   // when set nowhere; empty: unset
  OptionValidator validate = nullptr;
  std::string_view help;
};

// The table, in the order help lists it.
const std::vector<OptionSpec>& option_table();

// Names the architecture reserves for later features ("primus-data", ...): not options yet.
const std::vector<std::string_view>& reserved_option_names();

const OptionSpec* find_option(std::string_view name);  // by name, without "--"
const OptionSpec* find_option_by_env(std::string_view env);
const OptionSpec* find_option_by_site_key(std::string_view key);

// Where a value came from, lowest precedence first.
enum class OptionSource { kDefault, kSite, kEnvironment, kSbatch, kSrun };
std::string_view to_string(OptionSource source);

// "--primus-master-port", "PRIMUS_MASTER_PORT" or "plugstack master_port": how a user wrote it.
std::string option_display_name(const OptionSpec& spec, OptionSource source);

// The values one source gave. A value of nullopt means "given without a value" (a flag, or
// --primus alone).
struct OptionLayer {
  OptionSource source = OptionSource::kDefault;
  std::map<std::string, std::optional<std::string>, std::less<>> values;  // by option name
};

// Plugstack arguments "key=value". Throws Error naming the argument: unknown key, missing '=',
// or a value the validator refuses.
OptionLayer parse_site_arguments(const std::vector<std::string>& args);

// Every PRIMUS_* variable of the table found in `env`, validated.
OptionLayer parse_environment_options(const Environment& env);

// Command-line options as (name without "--", value or nullopt), from sbatch/salloc or srun.
OptionLayer parse_command_line_options(
    OptionSource source,
    const std::vector<std::pair<std::string, std::optional<std::string>>>& given);

// Checks one value against its row, throwing Error formatted as
// "--primus-master-port: expected a port number or 'auto', got '99999'".
void validate_option_value(const OptionSpec& spec, OptionSource source,
                           const std::optional<std::string>& value);

struct ResolvedOption {
  std::string value;
  OptionSource source = OptionSource::kDefault;
};

// The settings in force, after precedence: plugstack < environment < sbatch < srun.
class ResolvedOptions {
 public:
  // Layers may come in any order and any may be missing.
  static ResolvedOptions resolve(const std::vector<OptionLayer>& layers);

  // nullopt when the option is set nowhere and has no default.
  std::optional<ResolvedOption> get(std::string_view name) const;
  std::string value_or(std::string_view name, std::string_view fallback) const;
  bool is_set(std::string_view name) const { return get(name).has_value(); }
  const std::map<std::string, ResolvedOption, std::less<>>& all() const { return values_; }

 private:
  std::map<std::string, ResolvedOption, std::less<>> values_;
};

// Whether the user turned Primus on: --primus (or PRIMUS_FRAMEWORK) given with a framework other
// than none. A plugstack default alone turns it on for no job.
bool primus_requested(const ResolvedOptions& options);

// Whether a boolean setting (such as primus-verbose) is on: 1, yes or true.
bool option_enabled(const ResolvedOptions& options, std::string_view name);

}  // namespace primus

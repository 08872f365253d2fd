#include "plugin_options.hpp"

#include <deque>
#include <string>
#include <string_view>

#include "plugin_state.hpp"
#include "primus/common/options.hpp"

namespace primus::spank {
namespace {

// SPANK keeps pointers into these: they live as long as the plugin.
struct Registered {
  std::string name;
  std::string arginfo;
  std::string usage;
  spank_option option{};
};
std::deque<Registered>& registered() {
  static std::deque<Registered> options;
  return options;
}

// Slurm 22.05's sbatch and salloc export an option given without a value (#SBATCH --primus)
// into the job's environment as SLURM_SPANK__SLURM_SPANK_OPTION_primus_primus=(null), printf's
// text for a null pointer, and srun inside the job hands that text back as the value.
constexpr std::string_view kExportedNull = "(null)";

// Records the value; it is validated in init_post_opt, where an error can stop the command.
// slurmstepd receives an option given without a value (--primus) as an empty value, and srun
// inside a batch job as "(null)": both mean no value for an option whose value is optional.
int remember_option(int val, const char* optarg, int remote) {
  try {
    const auto& table = option_table();
    if (val < 0 || static_cast<std::size_t>(val) >= table.size()) return -1;
    const OptionSpec& spec = table[static_cast<std::size_t>(val)];
    std::optional<std::string> value;
    if (optarg != nullptr) value = std::string(optarg);
    if (value && spec.arg != OptionArg::kRequired &&
        ((remote != 0 && value->empty()) || *value == kExportedNull)) {
      value.reset();
    }
    state().given.emplace_back(std::string(spec.name), value);
    return 0;
  } catch (...) {
    return -1;
  }
}

int has_arg(OptionArg arg) {
  switch (arg) {
    case OptionArg::kNone:
      return 0;
    case OptionArg::kRequired:
      return 1;
    case OptionArg::kOptional:
      return 2;
  }
  return 1;
}

}  // namespace

int register_options(spank_t sp) {
  try {
    const auto& table = option_table();
    for (std::size_t i = 0; i < table.size(); ++i) {
      const OptionSpec& spec = table[i];
      if (spec.scope != OptionScope::kUser) continue;
      Registered& r = registered().emplace_back();
      r.name = std::string(spec.name);
      r.arginfo = std::string(spec.placeholder);
      r.usage = std::string(spec.help);
      r.option.name = r.name.data();
      r.option.arginfo = r.arginfo.empty() ? nullptr : r.arginfo.data();
      r.option.usage = r.usage.data();
      r.option.has_arg = has_arg(spec.arg);
      r.option.val = static_cast<int>(i);
      r.option.cb = remember_option;
      if (spank_option_register(sp, &r.option) != ESPANK_SUCCESS) {
        slurm_error("primus: cannot register --%s", r.name.c_str());
        return -1;
      }
    }
    return 0;
  } catch (...) {
    slurm_error("primus: cannot register the --primus options");
    return -1;
  }
}

}  // namespace primus::spank

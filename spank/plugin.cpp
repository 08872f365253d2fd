// The C ABI of primus.so: the symbols Slurm looks up, each a thin guard that dispatches by SPANK
// context and turns every exception into a logged error and a negative return value.
// spank.h declares the hooks outside its extern "C" block: include it inside one, first, so that
// the definitions below have C linkage.
extern "C" {
#include <slurm/spank.h>
}

#include <slurm/slurm_version.h>

#include <exception>
#include <string>
#include <vector>

#include "plugin_options.hpp"
#include "plugin_state.hpp"
#include "primus/common/error.hpp"
#include "primus/common/options.hpp"
#include "step_side.hpp"
#include "submit_side.hpp"
#include "task_side.hpp"

// What SPANK_PLUGIN(primus, 1) declares, with external linkage (a const at namespace scope is
// internal in C++). plugin_version must equal the Slurm this was built against.
// Built with -fvisibility=hidden: only what is marked here leaves the plugin (primus.map agrees).
#define PRIMUS_EXPORT __attribute__((visibility("default")))

extern "C" {
PRIMUS_EXPORT extern const char plugin_name[] = "primus";
PRIMUS_EXPORT extern const char plugin_type[] = "spank";
PRIMUS_EXPORT extern const unsigned int plugin_version = SLURM_VERSION_NUMBER;
PRIMUS_EXPORT extern const unsigned int spank_plugin_version = 1;
}

namespace primus::spank {

PluginState& state() {
  static PluginState instance;
  return instance;
}

std::optional<ResolvedOptions> requested_options(OptionSource source, const Environment& env) {
  const OptionLayer command_line = parse_command_line_options(source, state().given);
  if (!primus_requested(ResolvedOptions::resolve({state().site, command_line})) &&
      !lookup(env, "PRIMUS_FRAMEWORK")) {
    return std::nullopt;
  }
  ResolvedOptions options =
      ResolvedOptions::resolve({state().site, parse_environment_options(env), command_line});
  if (!primus_requested(options)) return std::nullopt;
  return options;
}

namespace {

template <typename Work>
int guarded(const char* hook, Work&& work) noexcept {
  try {
    work();
    return 0;
  } catch (const std::exception& e) {
    slurm_error("primus: %s", e.what());
  } catch (...) {
    slurm_error("primus: unexpected error in %s", hook);
  }
  return -1;
}

}  // namespace
}  // namespace primus::spank

using primus::spank::guarded;
using primus::spank::state;

extern "C" PRIMUS_EXPORT int slurm_spank_init(spank_t sp, int ac, char** av) {
  return guarded("slurm_spank_init", [&] {
    const spank_context_t context = spank_context();
    if (context != S_CTX_LOCAL && context != S_CTX_REMOTE && context != S_CTX_ALLOCATOR) return;
    state().site = primus::parse_site_arguments(std::vector<std::string>(av, av + ac));
    if (primus::spank::register_options(sp) != 0) throw primus::Error("option registration failed");
  });
}

extern "C" PRIMUS_EXPORT int slurm_spank_init_post_opt(spank_t sp, int /*ac*/, char** /*av*/) {
  return guarded("slurm_spank_init_post_opt", [&] {
    const spank_context_t context = spank_context();
    if (context == S_CTX_LOCAL || context == S_CTX_ALLOCATOR) {
      primus::spank::check_submission(sp, context == S_CTX_ALLOCATOR);
    }
  });
}

extern "C" PRIMUS_EXPORT int slurm_spank_local_user_init(spank_t sp, int /*ac*/, char** /*av*/) {
  return guarded("slurm_spank_local_user_init", [&] {
    if (spank_context() == S_CTX_LOCAL) primus::spank::prepare_step(sp);
  });
}

extern "C" PRIMUS_EXPORT int slurm_spank_task_init(spank_t sp, int /*ac*/, char** /*av*/) {
  return guarded("slurm_spank_task_init", [&] {
    if (spank_context() == S_CTX_REMOTE) primus::spank::set_task_environment(sp);
  });
}

// Writes the primus(7) man page, the settings section generated from the option table, so that
// the manual names every option, variable and plugstack key exactly as the code does. With
// --site-keys=man or --site-keys=markdown it writes only the plugstack keys that give site
// defaults of user options, as spank-primus(8) (built from its .in) and the admin guide's table
// row (checked by tests/python/test_docs.py) show them.
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>

#include "primus/common/options.hpp"
#include "primus/common/rank_env.hpp"

namespace {

// Escapes text for troff: backslashes, and a leading dot or quote.
std::string troff(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
  }
  if (!out.empty() && (out.front() == '.' || out.front() == '\'')) out.insert(0, "\\&");
  return out;
}

void write_option(const primus::OptionSpec& spec) {
  std::cout << ".TP\n";
  if (spec.scope == primus::OptionScope::kSite) {
    std::cout << ".B " << troff(spec.site_key) << "=" << troff(spec.placeholder) << "\n";
  } else {
    std::cout << ".B \\-\\-" << troff(spec.name);
    if (spec.arg == primus::OptionArg::kRequired) std::cout << "=" << troff(spec.placeholder);
    if (spec.arg == primus::OptionArg::kOptional)
      std::cout << "[=" << troff(spec.placeholder) << "]";
    std::cout << "\n";
  }
  std::cout << troff(spec.help) << "\n";
  std::cout << ".br\n";
  if (!spec.env.empty()) std::cout << "Environment: \\fB" << troff(spec.env) << "\\fR. ";
  if (!spec.site_key.empty() && spec.scope == primus::OptionScope::kUser) {
    std::cout << "Site default (plugstack): \\fB" << troff(spec.site_key) << "\\fR. ";
  }
  if (!spec.default_value.empty()) std::cout << "Default: " << troff(spec.default_value) << ".";
  std::cout << "\n";
}

// The plugstack keys of user options, in the table's order: "a=, b=" with each key in bold
// (troff) or code (markdown). --primus's own key (framework) has its own row in both documents.
std::string site_default_keys(bool markdown) {
  std::string out;
  for (const primus::OptionSpec& spec : primus::option_table()) {
    if (spec.scope != primus::OptionScope::kUser || spec.site_key.empty()) continue;
    if (spec.name == "primus") continue;
    if (!out.empty()) out += ", ";
    const std::string key = std::string(spec.site_key) + "=";
    out += markdown ? "`" + key + "`" : "\\fB" + troff(key) + "\\fR";
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strncmp(argv[1], "--site-keys=", 12) == 0) {
    const std::string_view form = argv[1] + 12;
    if (form != "man" && form != "markdown") {
      std::cerr << "primus-gen-man: --site-keys: expected 'man' or 'markdown', got '" << form
                << "'\n";
      return 2;
    }
    std::cout << site_default_keys(form == "markdown") << "\n";
    return 0;
  }
  const std::string version = argc > 1 ? argv[1] : "unknown";
  std::cout << ".TH PRIMUS 7 \"\" \"primus " << troff(version) << "\" \"Primus for Slurm\"\n"
            << ".SH NAME\nprimus \\- distributed PyTorch and TensorFlow training on Slurm\n"
            << ".SH SYNOPSIS\n.nf\n#SBATCH \\-\\-primus=pytorch\nsrun python train.py\n.fi\n"
            << ".SH DESCRIPTION\n"
            << "Primus wires every rank of a Slurm job step: rank numbers, the rendezvous "
               "(MASTER_ADDR, MASTER_PORT, TF_CONFIG), GPU binding and its own settings. Every "
               "setting below is accepted, with one name and one validation, by srun, sbatch and "
               "salloc (the SPANK plugin), by primus\\-launch, and from the environment.\n"
            << ".SH OPTIONS\n";
  for (const primus::OptionSpec& spec : primus::option_table()) {
    if (spec.scope == primus::OptionScope::kUser) write_option(spec);
  }
  std::cout << ".SH SITE CONFIGURATION\n"
               "Arguments after the plugin's path on its plugstack.conf line, as key=value. An "
               "unknown key or a bad value is an error naming the key.\n";
  for (const primus::OptionSpec& spec : primus::option_table()) {
    if (spec.scope == primus::OptionScope::kSite) write_option(spec);
  }
  std::cout
      << ".SH PRECEDENCE\n"
         "Lowest first: the built-in default, the plugstack argument, the PRIMUS_* "
         "environment variable, the sbatch or salloc option, the srun option.\n"
      << ".SH ENVIRONMENT\n"
         "Every rank gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, "
         "NODE_RANK, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RESTART_COUNT, "
         "TORCHELASTIC_RUN_ID, TORCHELASTIC_MAX_RESTARTS, GROUP_WORLD_SIZE, ROLE_NAME, "
         "ROLE_RANK and ROLE_WORLD_SIZE as torchrun "
         "sets them; TF_CONFIG with \\-\\-primus=tensorflow; CUDA_VISIBLE_DEVICES where "
         "Primus binds GPUs; OMP_NUM_THREADS unless already set (\\-\\-cpus\\-per\\-task, else "
         "the node's CPUs for the job divided among its ranks there, at least 1); and "
         "PRIMUS_ENV_VERSION="
      << primus::kPrimusEnvVersion
      << ", PRIMUS_JOB_ID, PRIMUS_JOB_DIR, PRIMUS_CKPT_DIR, PRIMUS_RESTART_COUNT, "
         "PRIMUS_PORT, PRIMUS_BOOTSTRAP and PRIMUS_JOB_SECRET (never printed).\n"
         ".PP\nRead by the primus package in every rank, set by the user: "
         "PRIMUS_STOP_INTERVAL, the seconds between primus.should_stop()'s agreements (0.5; 0: "
         "at every call, as the tests do), which bounds how long after a stop signal every rank "
         "saves the same step; PRIMUS_PYTHON, the Python primus\\-launch runs a script.py or "
         "\\-m module with.\n"
      << ".SH SEE ALSO\nsrun(1), sbatch(1), spank(8)\n";
  return 0;
}

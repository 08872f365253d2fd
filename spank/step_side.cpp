#include "step_side.hpp"

#include <slurm/slurm.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "plugin_state.hpp"
#include "primus/common/error.hpp"
#include "primus/common/hostlist.hpp"
#include "primus/common/master_node.hpp"
#include "primus/common/options.hpp"
#include "process_environment.hpp"

namespace primus::spank {
namespace {

struct LayoutFree {
  void operator()(slurm_step_layout_t* layout) const { slurm_job_step_layout_free(layout); }
};
struct NodeInfoFree {
  void operator()(node_info_msg_t* nodes) const { slurm_free_node_info_msg(nodes); }
};

struct StepNodes {
  std::string node_list;
  std::string first_node;
};

// The step's node list as slurmctld laid it out (the tasks see the same SLURM_STEP_NODELIST).
std::optional<StepNodes> step_nodes(std::uint32_t job_id, std::uint32_t step_id) {
  slurm_step_id_t id{};
  id.job_id = job_id;
  id.step_id = step_id;
  id.step_het_comp = NO_VAL;
  const std::unique_ptr<slurm_step_layout_t, LayoutFree> layout(slurm_job_step_layout_get(&id));
  if (!layout || layout->node_list == nullptr) return std::nullopt;
  StepNodes nodes;
  nodes.node_list = layout->node_list;
  nodes.first_node = Hostlist::parse(nodes.node_list).at(0);
  return nodes;
}

// The node's NodeAddr from slurmctld (hidden under PrivateData=nodes: then nullopt).
std::optional<std::string> node_addr(const std::string& node) {
  node_info_msg_t* raw = nullptr;
  std::string name = node;
  const int rc = slurm_load_node_single(&raw, name.data(), SHOW_ALL);
  const std::unique_ptr<node_info_msg_t, NodeInfoFree> nodes(raw);
  if (rc != SLURM_SUCCESS || !nodes || nodes->record_count < 1 ||
      nodes->node_array[0].node_addr == nullptr) {
    return std::nullopt;
  }
  return std::string(nodes->node_array[0].node_addr);
}

}  // namespace

void prepare_step(spank_t sp) {
  // A variable inherited from an enclosing step never reaches this step's tasks.
  const std::string variable(kMasterNodeVariable);
  unsetenv(variable.c_str());
  const auto requested = requested_options(OptionSource::kSrun, primus_variables_of_this_process());
  if (!requested) return;
  const bool verbose = option_enabled(*requested, "primus-verbose");

  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;
  if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS) {
    throw Error("cannot read the job and step ids");
  }
  const auto nodes = step_nodes(job_id, step_id);
  const auto address = nodes ? node_addr(nodes->first_node) : std::nullopt;
  if (address && is_node_address(*address)) {
    set_process_variable(variable, format_master_node(nodes->first_node, *address));
  }
  if (!verbose) return;
  const std::string framework = requested->value_or("primus", "pytorch");
  if (!nodes) {
    slurm_info(
        "primus: step %u.%u: %s; the step layout is not readable, so each task resolves "
        "MASTER_ADDR from the first node's name",
        job_id, step_id, framework.c_str());
  } else {
    slurm_info("primus: step %u.%u: %s on %s; MASTER_ADDR=%s (%s)", job_id, step_id,
               framework.c_str(), nodes->node_list.c_str(),
               address ? address->c_str() : nodes->first_node.c_str(),
               address ? "the NodeAddr of the first node" : "NodeAddr hidden: resolved by name");
  }
}

}  // namespace primus::spank

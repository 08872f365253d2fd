// libprimus-common: the pure logic every Primus component shares (no I/O).
#pragma once

#include "primus/common/environment.hpp"
#include "primus/common/error.hpp"
#include "primus/common/gpu_binding.hpp"
#include "primus/common/hostlist.hpp"
#include "primus/common/json_text.hpp"
#include "primus/common/keyed_hash.hpp"
#include "primus/common/master_node.hpp"
#include "primus/common/options.hpp"
#include "primus/common/parse_number.hpp"
#include "primus/common/ports.hpp"
#include "primus/common/rank_env.hpp"
#include "primus/common/slurm_step.hpp"
#include "primus/common/task_env.hpp"
#include "primus/common/tasks_per_node.hpp"
#include "primus/common/topology.hpp"

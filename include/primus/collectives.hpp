// libprimus-coll: communicators for Primus ranks (CPU over TCP; NCCL for GPUs where built),
// bootstrap through PMIx or a TCP store, connections authenticated with the job secret.
#pragma once

#include "primus/collectives/bootstrap.hpp"
#include "primus/collectives/communicator.hpp"
#include "primus/collectives/control.hpp"
#include "primus/collectives/dtype.hpp"
#include "primus/collectives/error.hpp"
#include "primus/collectives/nccl.hpp"

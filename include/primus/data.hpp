// libprimus-data: what every rank computes about its share of a dataset (docs/architecture.md,
// "Data distribution"). Built so far: the global order of an epoch and the static split.
#pragma once

#include "primus/data/order.hpp"
#include "primus/data/split.hpp"

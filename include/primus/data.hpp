// libprimus-data: what every rank computes about its share of a dataset (docs/architecture.md,
// "Data distribution"): the record formats, the dataset and its cached indexes, the reader, the
// global order of an epoch, the static split, the cursor and the dynamic mode's splits.
#pragma once

#include "primus/data/cursor.hpp"
#include "primus/data/dataset.hpp"
#include "primus/data/dynamic.hpp"
#include "primus/data/format.hpp"
#include "primus/data/order.hpp"
#include "primus/data/reader.hpp"
#include "primus/data/split.hpp"

// libprimus-ckpt: HDF5 checkpoints that are never torn (docs/ckpt-format.md).
//
// Save, on every rank: a RankWriter writes the rank's tensors and state into one HDF5 file in
// the step's temporary directory, then finish() closes and fsyncs it. Once the caller knows
// that every rank's finish() succeeded (a barrier or an allreduce of its own: this library knows
// no transport), rank 0 calls commit(), which builds the manifest from the rank files, fsyncs,
// renames the directory into place and moves LATEST. Only that rename makes a checkpoint
// visible.
//
// Load: load_latest() opens the newest committed checkpoint that verifies, skipping (and
// reporting) torn, partial or corrupt ones.
#pragma once

#include "primus/ckpt/async_save.hpp"
#include "primus/ckpt/checkpoint.hpp"
#include "primus/ckpt/dtype.hpp"
#include "primus/ckpt/layout.hpp"
#include "primus/ckpt/manifest.hpp"
#include "primus/ckpt/store.hpp"
#include "primus/ckpt/writer.hpp"

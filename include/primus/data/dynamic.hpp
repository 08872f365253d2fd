// The splits of the dynamic mode (--primus-data-mode=dynamic, docs/architecture.md "Data
// distribution"): the dataset cut into record ranges of at most `split_records` records that
// never cross a file, in dataset order. Every rank cuts the same; primus-launch hands the splits
// out by number. Pure.
#pragma once

#include <cstdint>
#include <vector>

#include "primus/data/dataset.hpp"

namespace primus::data {

struct SplitRange {
  std::uint64_t begin = 0;  // record numbers of the dataset
  std::uint64_t end = 0;
};

// Throws Error for a split size of 0.
std::vector<SplitRange> cut_splits(const Dataset& dataset, std::uint64_t split_records);

// The default split size: about eight splits per rank, at least one record.
std::uint64_t default_split_records(std::uint64_t records, std::uint32_t world_size);

}  // namespace primus::data

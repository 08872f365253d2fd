#include "primus/data/dynamic.hpp"

#include "primus/common/error.hpp"

namespace primus::data {

std::vector<SplitRange> cut_splits(const Dataset& dataset, std::uint64_t split_records) {
  if (split_records == 0) throw Error("the split size must be at least one record");
  std::vector<SplitRange> splits;
  for (const DataFile& file : dataset.files()) {
    const std::uint64_t end = file.first_record + file.records;
    for (std::uint64_t begin = file.first_record; begin < end; begin += split_records)
      splits.push_back({begin, end - begin > split_records ? begin + split_records : end});
  }
  return splits;
}

std::uint64_t default_split_records(std::uint64_t records, std::uint32_t world_size) {
  const std::uint64_t wanted = std::uint64_t{8} * (world_size == 0 ? 1 : world_size);
  const std::uint64_t size = (records + wanted - 1) / wanted;
  return size == 0 ? 1 : size;
}

}  // namespace primus::data

// Names inside a checkpoint root directory (docs/ckpt-format.md): committed steps
// "step-<12 digits>", their temporary directories ".tmp-step-<12 digits>", rank files
// "rank-<5 digits>.h5", "manifest.json" and the "LATEST" pointer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace primus::ckpt {

inline constexpr std::string_view kManifestName = "manifest.json";
inline constexpr std::string_view kLatestName = "LATEST";
inline constexpr int kFormatVersion = 1;
inline constexpr std::int64_t kMaxStep = 999'999'999'999;
inline constexpr int kMaxWorldSize = 99'999;

std::string step_dir_name(std::int64_t step);       // throws Error outside 0..kMaxStep
std::string temporary_dir_name(std::int64_t step);  // ".tmp-step-..."
std::string rank_file_name(int rank);               // throws Error outside 0..kMaxWorldSize-1
std::optional<std::int64_t> parse_step_dir_name(std::string_view name);
std::optional<std::int64_t> parse_temporary_dir_name(std::string_view name);
std::optional<int> parse_rank_file_name(std::string_view name);

// A tensor name as an HDF5 link name under /tensors: '%' and '/' escaped as %25 and %2F (a '/'
// would make groups), "." and ".." and the empty name refused.
std::string dataset_name(std::string_view tensor_name);
std::string tensor_name_of_dataset(std::string_view dataset);

}  // namespace primus::ckpt

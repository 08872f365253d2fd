#include "primus/common/gpu_binding.hpp"

#include "primus/common/error.hpp"

namespace primus {

std::vector<std::string> split_device_list(std::string_view text) {
  std::vector<std::string> devices;
  std::size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    const std::size_t comma = text.find(',', start);
    const std::size_t end = comma == std::string_view::npos ? text.size() : comma;
    if (end > start) devices.emplace_back(text.substr(start, end - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return devices;
}

std::string join_device_list(const std::vector<std::string>& devices) {
  std::string out;
  for (const std::string& device : devices) {
    if (!out.empty()) out += ',';
    out += device;
  }
  return out;
}

std::vector<std::string> gpu_block(const std::vector<std::string>& visible,
                                   std::uint32_t local_rank, std::uint32_t local_world_size) {
  if (local_world_size == 0 || local_rank >= local_world_size) {
    throw Error("GPU binding: local rank " + std::to_string(local_rank) +
                " is not below the local world size " + std::to_string(local_world_size));
  }
  if (visible.size() < local_world_size) {
    throw Error("GPU binding: " + std::to_string(local_world_size) + " ranks on this node but " +
                std::to_string(visible.size()) +
                " GPUs visible: every rank needs a GPU of its own (ask for more GPUs, fewer tasks "
                "per node, or --primus-bind-gpus=none)");
  }
  const std::size_t per_rank = visible.size() / local_world_size;
  const auto first = visible.begin() + static_cast<std::ptrdiff_t>(per_rank * local_rank);
  return {first, first + static_cast<std::ptrdiff_t>(per_rank)};
}

}  // namespace primus

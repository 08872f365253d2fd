// Dividing a node's GPUs among its local ranks.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace primus {

// "0,1,2,3" (CUDA_VISIBLE_DEVICES, SLURM_STEP_GPUS) into its entries; empty text, no GPU.
std::vector<std::string> split_device_list(std::string_view text);
std::string join_device_list(const std::vector<std::string>& devices);

// The disjoint block of `visible` that local rank `local_rank` of `local_world_size` gets: every
// rank gets floor(G / L) consecutive GPUs, and the G mod L left over stay unused. Fewer GPUs than
// ranks is an Error naming both counts, never an overlap.
std::vector<std::string> gpu_block(const std::vector<std::string>& visible,
                                   std::uint32_t local_rank, std::uint32_t local_world_size);

}  // namespace primus

// Validators used by the option table (internal to libprimus-common).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace primus::validators {

std::optional<std::string> framework(std::string_view value);
std::optional<std::string> port_or_auto(std::string_view value);
std::optional<std::string> auto_or_none(std::string_view value);
std::optional<std::string> boolean(std::string_view value);
std::optional<std::string> path(std::string_view value);
std::optional<std::string> absolute_path_list(std::string_view value);
std::optional<std::string> absolute_path(std::string_view value);
std::optional<std::string> port_range(std::string_view value);
std::optional<std::string> restart_count(std::string_view value);
std::optional<std::string> exit_status(std::string_view value);
std::optional<std::string> requeue_count(std::string_view value);
std::optional<std::string> spare_nodes(std::string_view value);
std::optional<std::string> elastic_nodes(std::string_view value);
std::optional<std::string> exclude_after(std::string_view value);
std::optional<std::string> stop_signal(std::string_view value);
std::optional<std::string> seconds_or_off(std::string_view value);
std::optional<std::string> seconds(std::string_view value);
std::optional<std::string> mebibytes(std::string_view value);
std::optional<std::string> host_and_port(std::string_view value);
std::optional<std::string> listen_address(std::string_view value);
std::optional<std::string> data_format(std::string_view value);
std::optional<std::string> data_mode(std::string_view value);
std::optional<std::string> recover_mode(std::string_view value);
std::optional<std::string> global_batch_size(std::string_view value);
std::optional<std::string> seed(std::string_view value);
std::optional<std::string> shuffle(std::string_view value);
std::optional<std::string> shuffle_block(std::string_view value);

}  // namespace primus::validators

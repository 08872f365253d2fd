#include "option_validators.hpp"

#include <algorithm>
#include <cctype>

#include "primus/common/error.hpp"
#include "primus/common/parse_number.hpp"
#include "primus/common/ports.hpp"
#include "primus/common/record_format.hpp"

namespace primus::validators {
namespace {

constexpr std::size_t kMaxPathLength = 4095;

bool has_control_character(std::string_view value) {
  return std::any_of(value.begin(), value.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

}  // namespace

std::optional<std::string> framework(std::string_view value) {
  if (value == "pytorch" || value == "tensorflow" || value == "none") return std::nullopt;
  return "one of pytorch, tensorflow, none";
}

std::optional<std::string> port_or_auto(std::string_view value) {
  if (value == "auto") return std::nullopt;
  const auto port = parse_unsigned(value, 65535);
  if (port && *port >= 1) return std::nullopt;
  return "a port number (1-65535) or 'auto'";
}

std::optional<std::string> auto_or_none(std::string_view value) {
  if (value == "auto" || value == "none") return std::nullopt;
  return "'auto' or 'none'";
}

std::optional<std::string> boolean(std::string_view value) {
  if (value == "0" || value == "1" || value == "yes" || value == "no" || value == "true" ||
      value == "false") {
    return std::nullopt;
  }
  return "1/yes/true or 0/no/false";
}

std::optional<std::string> restart_count(std::string_view value) {
  if (parse_unsigned(value, 1000)) return std::nullopt;
  return "a number of restarts from 0 to 1000";
}

std::optional<std::string> exit_status(std::string_view value) {
  const auto status = parse_unsigned(value, 125);
  if (status && *status >= 1) return std::nullopt;
  return "an exit status from 1 to 125 (126 and up mean a command that cannot run or a signal)";
}

std::optional<std::string> spare_nodes(std::string_view value) {
  if (parse_unsigned(value, 1000)) return std::nullopt;
  return "a number of spare nodes from 0 to 1000";
}

std::optional<std::string> elastic_nodes(std::string_view value) {
  if (value == "off") return std::nullopt;
  const auto nodes = parse_unsigned(value, 100000);
  if (nodes && *nodes >= 1) return std::nullopt;
  return "a number of nodes from 1 to 100000, or off";
}

std::optional<std::string> exclude_after(std::string_view value) {
  const auto count = parse_unsigned(value, 1000);
  if (count && *count >= 1) return std::nullopt;
  return "a number of failed ranks from 1 to 1000";
}

std::optional<std::string> requeue_count(std::string_view value) {
  if (parse_unsigned(value, 1000)) return std::nullopt;
  return "a number of requeues from 0 to 1000";
}

std::optional<std::string> stop_signal(std::string_view value) {
  std::string_view name = value;
  if (name.substr(0, 3) == "SIG") name.remove_prefix(3);
  for (const std::string_view allowed : {"USR1", "USR2", "TERM", "INT", "HUP", "URG"}) {
    if (name == allowed) return std::nullopt;
  }
  return "a signal name: USR1, USR2, TERM, INT, HUP or URG (with or without SIG)";
}

std::optional<std::string> seconds_or_off(std::string_view value) {
  if (value == "off" || value == "0") return std::nullopt;
  if (parse_unsigned(value, 7 * 24 * 3600)) return std::nullopt;
  return "a number of seconds (1 to 604800) or 'off'";
}

std::optional<std::string> seconds(std::string_view value) {
  if (parse_unsigned(value, 3600)) return std::nullopt;
  return "a number of seconds from 0 (off) to 3600";
}

std::optional<std::string> mebibytes(std::string_view value) {
  if (parse_unsigned(value, std::uint64_t{1} << 20)) return std::nullopt;
  return "a size in MiB from 0 (off) to 1048576";
}

std::optional<std::string> host_and_port(std::string_view value) {
  const auto colon = value.rfind(':');
  const std::string_view host = colon == std::string_view::npos ? value : value.substr(0, colon);
  const bool host_ok =
      !host.empty() && host.size() <= 253 && std::all_of(host.begin(), host.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == '_';
      });
  const bool port_ok =
      colon == std::string_view::npos || parse_unsigned(value.substr(colon + 1), 65535);
  if (host_ok && port_ok) return std::nullopt;
  return "HOST or HOST:PORT (an address or a name of this node; port 0 or none: any free one)";
}

std::optional<std::string> listen_address(std::string_view value) {
  const auto colon = value.rfind(':');
  const std::string_view port = colon == std::string_view::npos ? value : value.substr(colon + 1);
  const bool host_ok = colon == std::string_view::npos || !host_and_port(value.substr(0, colon));
  if (host_ok && parse_unsigned(port, 65535)) return std::nullopt;
  return "[ADDR:]PORT (a port from 0, any free one, to 65535; the address defaults to "
         "127.0.0.1)";
}

std::optional<std::string> path(std::string_view value) {
  if (value.empty() || value.size() > kMaxPathLength || has_control_character(value)) {
    return "a path (1-4095 characters, no control characters)";
  }
  return std::nullopt;
}

std::optional<std::string> absolute_path(std::string_view value) {
  if (value.empty() || value.front() != '/' || path(value)) return "an absolute path";
  return std::nullopt;
}

std::optional<std::string> absolute_path_list(std::string_view value) {
  const std::string_view expected = "absolute directories separated by ':'";
  std::size_t start = 0;
  while (true) {
    const std::size_t colon = value.find(':', start);
    const std::string_view item = value.substr(
        start, colon == std::string_view::npos ? std::string_view::npos : colon - start);
    if (item.empty() || item.front() != '/' || path(item)) return std::string(expected);
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  return std::nullopt;
}

std::optional<std::string> port_range(std::string_view value) {
  try {
    const PortRange range = parse_port_range(value, "port range");
    if (derived_slot_count(range) == 0) {
      return "a port range LO-HI holding at least " + std::to_string(kDerivedPortSlot) + " ports";
    }
  } catch (const Error&) {
    return "a port range LO-HI within 1-65535";
  }
  return std::nullopt;
}

std::optional<std::string> data_format(std::string_view value) {
  if (parse_format(value)) return std::nullopt;
  return std::string(kFormatExpected);
}

std::optional<std::string> data_mode(std::string_view value) {
  if (value == "static" || value == "dynamic") return std::nullopt;
  return "'static' or 'dynamic'";
}

std::optional<std::string> recover_mode(std::string_view value) {
  if (value == "rejoin" || value == "restart") return std::nullopt;
  return "'rejoin' or 'restart'";
}

std::optional<std::string> global_batch_size(std::string_view value) {
  const auto size = parse_unsigned(value, std::uint64_t{1} << 40);
  if (size && *size >= 1) return std::nullopt;
  return "a number of records from 1 to 1099511627776";
}

std::optional<std::string> seed(std::string_view value) {
  if (parse_unsigned(value, ~std::uint64_t{0})) return std::nullopt;
  return "a number from 0 to 18446744073709551615";
}

std::optional<std::string> shuffle(std::string_view value) {
  if (value == "none" || value == "records" || value == "blocks") return std::nullopt;
  return "one of none, records, blocks";
}

std::optional<std::string> shuffle_block(std::string_view value) {
  const auto size = parse_unsigned(value, std::uint64_t{1} << 40);
  if (size && *size >= 1) return std::nullopt;
  return "a number of records from 1 to 1099511627776";
}

}  // namespace primus::validators

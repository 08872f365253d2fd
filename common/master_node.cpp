#include "primus/common/master_node.hpp"

#include <algorithm>

#include "primus/common/error.hpp"

namespace primus {
namespace {

bool is_address_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == ':' || c == '-' || c == '_';
}

bool is_node_name(std::string_view node) {
  return !node.empty() && node.size() <= 253 && node.front() != '-' &&
         std::all_of(node.begin(), node.end(),
                     [](char c) { return is_address_char(c) && c != ':'; });
}

}  // namespace

bool is_node_address(std::string_view address) {
  return !address.empty() && address.size() <= 253 && address.front() != '-' &&
         std::all_of(address.begin(), address.end(), is_address_char);
}

std::string format_master_node(std::string_view node, std::string_view address) {
  if (!is_node_name(node)) throw Error("not a node name: '" + std::string(node) + "'");
  if (!is_node_address(address)) {
    throw Error("not a node address: '" + std::string(address) + "'");
  }
  std::string text(node);
  text += '=';
  text += address;
  return text;
}

std::optional<std::string> master_node_address(const Environment& env,
                                               std::string_view first_node) {
  const auto value = lookup(env, kMasterNodeVariable);
  if (!value) return std::nullopt;
  const std::size_t eq = value->find('=');
  const std::string_view node = std::string_view(*value).substr(0, eq);
  const std::string_view address =
      eq == std::string::npos ? std::string_view() : std::string_view(*value).substr(eq + 1);
  if (eq == std::string::npos || !is_node_name(node) || !is_node_address(address)) {
    throw Error(std::string(kMasterNodeVariable) + ": expected NODE=ADDRESS, got '" + *value + "'");
  }
  if (node != first_node) return std::nullopt;
  return std::string(address);
}

}  // namespace primus

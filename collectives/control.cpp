#include "primus/collectives/control.hpp"

#include <fcntl.h>

#include <charconv>
#include "authenticated.hpp"

namespace primus::coll {

std::pair<std::string, std::uint16_t> parse_control_address(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    throw Error("PRIMUS_CONTROL: expected HOST:PORT, got '" + address + "'");
  }
  const std::string digits = address.substr(colon + 1);
  unsigned port = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (error != std::errc() || end != digits.data() + digits.size() || port == 0 || port > 65535) {
    throw Error("PRIMUS_CONTROL: expected a port from 1 to 65535 after the host, got '" + address +
                "'");
  }
  return {address.substr(0, colon), static_cast<std::uint16_t>(port)};
}

std::string control_session_key(const std::string& secret, const std::string& address) {
  return handshake::session_key(secret, {"primus-launch control", address, 0});
}

os::UniqueFd connect_control(const std::string& address, const std::string& secret,
                             std::uint32_t connector, std::chrono::milliseconds timeout) {
  const auto [host, port] = parse_control_address(address);
  net::Socket socket = net::connect_authenticated(
      host, port, handshake::Purpose::kControl, connector, control_session_key(secret, address),
      net::Clock::now() + timeout, "primus-launch at " + address,
      static_cast<int>(kControlLauncherRank));
  os::UniqueFd fd = socket.release();
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags >= 0) ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

}  // namespace primus::coll

#include "primus/os/job_secret.hpp"

#include <sys/random.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "primus/common/error.hpp"
#include "primus/common/keyed_hash.hpp"

namespace primus::os {

std::string make_job_secret() {
  // The kernel's CSPRNG (getrandom(2) blocks only until it is seeded, at boot). Not OpenSSL:
  // loading libcrypto into srun and every slurmstepd cost about 3 ms per step start.
  std::array<unsigned char, 32> bytes{};
  std::size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t got = getrandom(bytes.data() + filled, bytes.size() - filled, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      throw Error(std::string("cannot make the job secret: getrandom failed: ") +
                  std::strerror(errno));
    }
    filled += static_cast<std::size_t>(got);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string secret;
  secret.reserve(bytes.size() * 2);
  for (const unsigned char b : bytes) {
    secret += kHex[b >> 4];
    secret += kHex[b & 0xf];
  }
  return secret;
}

bool is_job_secret(std::string_view text) {
  return std::none_of(text.begin(), text.end(), [](char c) { return c >= 'A' && c <= 'F'; }) &&
         parse_job_secret(text).has_value();
}

}  // namespace primus::os

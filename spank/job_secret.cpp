#include "job_secret.hpp"

#include <openssl/rand.h>

#include <array>
#include <cctype>

#include "primus/common/error.hpp"

namespace primus::spank {

std::string make_job_secret() {
  std::array<unsigned char, 32> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    throw Error("cannot make the job secret: OpenSSL's RAND_bytes failed");
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
  if (text.size() != 64) return false;
  for (const char c : text) {
    if (!std::isxdigit(static_cast<unsigned char>(c)) ||
        std::isupper(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return true;
}

}  // namespace primus::spank

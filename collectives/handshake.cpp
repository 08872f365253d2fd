#include "handshake.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <vector>

#include "primus/common/error.hpp"

namespace primus::coll::handshake {
namespace {

constexpr std::string_view kMagic = "PRIMUSA2";
constexpr std::string_view kAcceptorLabel = "primus acceptor";
constexpr std::string_view kConnectorLabel = "primus connector";
constexpr std::string_view kToAcceptorLabel = "primus integrity to acceptor";
constexpr std::string_view kToConnectorLabel = "primus integrity to connector";
constexpr std::uint32_t kFlagIntegrity = 1;
constexpr std::size_t kPurposeAt = 8;
constexpr std::size_t kFlagsAt = 12;
constexpr std::size_t kRankAt = 16;
constexpr std::size_t kNonceAt = 20;

void put_u32(std::uint8_t* out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i)
    out[i] = static_cast<std::uint8_t>(value >> (8 * i));
}

std::uint32_t get_u32(const std::uint8_t* in) {
  std::uint32_t value = 0;
  for (int i = 3; i >= 0; --i)
    value = (value << 8) | in[i];
  return value;
}

std::array<std::uint8_t, kMacBytes> hmac(const std::string& key,
                                         const std::vector<std::uint8_t>& message) {
  static_assert(sizeof(Sha256Digest) == kMacBytes);
  return hmac_sha256(key, message.data(), message.size());
}

std::array<std::uint8_t, kMacBytes> mac(const std::string& key, std::string_view label,
                                        const Hello& hello, const Nonce& nonce,
                                        std::uint32_t acceptor_rank) {
  std::vector<std::uint8_t> message;
  message.reserve(label.size() + hello.size() + nonce.size() + 4);
  message.insert(message.end(), label.begin(), label.end());
  message.insert(message.end(), hello.begin(), hello.end());
  message.insert(message.end(), nonce.begin(), nonce.end());
  std::uint8_t rank[4];
  put_u32(rank, acceptor_rank);
  message.insert(message.end(), rank, rank + 4);
  return hmac(key, message);
}

}  // namespace

Nonce fresh_nonce() {
  Nonce nonce{};
  std::size_t done = 0;
  while (done < nonce.size()) {
    const ssize_t n = ::getrandom(nonce.data() + done, nonce.size() - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(std::string("getrandom: ") + std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
  return nonce;
}

Hello make_hello(Purpose purpose, std::uint32_t rank, const Nonce& nonce, bool integrity) {
  Hello hello{};
  std::memcpy(hello.data(), kMagic.data(), kMagic.size());
  put_u32(hello.data() + kPurposeAt, static_cast<std::uint32_t>(purpose));
  put_u32(hello.data() + kFlagsAt, integrity ? kFlagIntegrity : 0);
  put_u32(hello.data() + kRankAt, rank);
  std::memcpy(hello.data() + kNonceAt, nonce.data(), nonce.size());
  return hello;
}

std::optional<HelloFields> parse_hello(const Hello& hello) {
  if (std::memcmp(hello.data(), kMagic.data(), kMagic.size()) != 0) return std::nullopt;
  const std::uint32_t purpose = get_u32(hello.data() + kPurposeAt);
  if (purpose != static_cast<std::uint32_t>(Purpose::kStore) &&
      purpose != static_cast<std::uint32_t>(Purpose::kPeer) &&
      purpose != static_cast<std::uint32_t>(Purpose::kControl)) {
    return std::nullopt;
  }
  const std::uint32_t flags = get_u32(hello.data() + kFlagsAt);
  if ((flags & ~kFlagIntegrity) != 0) return std::nullopt;
  HelloFields fields{static_cast<Purpose>(purpose),
                     get_u32(hello.data() + kRankAt),
                     {},
                     (flags & kFlagIntegrity) != 0};
  std::memcpy(fields.nonce.data(), hello.data() + kNonceAt, kNonceBytes);
  return fields;
}

std::string session_key(const std::string& secret, const Session& session) {
  constexpr std::string_view kLabel = "primus session";
  std::vector<std::uint8_t> message(kLabel.begin(), kLabel.end());
  message.insert(message.end(), session.job.begin(), session.job.end());
  message.push_back(0);
  message.insert(message.end(), session.step.begin(), session.step.end());
  message.push_back(0);
  std::uint8_t world[4];
  put_u32(world, session.world_size);
  message.insert(message.end(), world, world + 4);
  const auto key = hmac(secret, message);
  return std::string(key.begin(), key.end());
}

Challenge make_challenge(const std::string& key, const Hello& hello, const Nonce& nonce,
                         std::uint32_t acceptor_rank) {
  Challenge challenge{};
  const auto tag = mac(key, kAcceptorLabel, hello, nonce, acceptor_rank);
  std::memcpy(challenge.data(), nonce.data(), kNonceBytes);
  std::memcpy(challenge.data() + kNonceBytes, tag.data(), kMacBytes);
  return challenge;
}

bool check_challenge(const std::string& key, const Hello& hello, const Challenge& challenge,
                     std::uint32_t acceptor_rank, Proof& proof) {
  Nonce nonce{};
  std::memcpy(nonce.data(), challenge.data(), kNonceBytes);
  const auto expected = mac(key, kAcceptorLabel, hello, nonce, acceptor_rank);
  if (!equal_in_constant_time(expected.data(), challenge.data() + kNonceBytes, kMacBytes)) {
    return false;
  }
  proof = mac(key, kConnectorLabel, hello, nonce, acceptor_rank);
  return true;
}

bool check_proof(const std::string& key, const Hello& hello, const Nonce& nonce,
                 std::uint32_t acceptor_rank, const Proof& proof) {
  const auto expected = mac(key, kConnectorLabel, hello, nonce, acceptor_rank);
  return equal_in_constant_time(expected.data(), proof.data(), kMacBytes);
}

ConnectionKeys connection_keys(const std::string& key, const Hello& hello,
                               const Nonce& acceptor_nonce, std::uint32_t acceptor_rank) {
  static_assert(kMacBytes == integrity::kKeyBytes);
  ConnectionKeys keys{};
  const auto to_acceptor = mac(key, kToAcceptorLabel, hello, acceptor_nonce, acceptor_rank);
  const auto to_connector = mac(key, kToConnectorLabel, hello, acceptor_nonce, acceptor_rank);
  std::memcpy(keys.to_acceptor.data(), to_acceptor.data(), kMacBytes);
  std::memcpy(keys.to_connector.data(), to_connector.data(), kMacBytes);
  return keys;
}

}  // namespace primus::coll::handshake

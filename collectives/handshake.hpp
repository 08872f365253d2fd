// The mutual challenge-response every Primus connection starts with (pure: bytes in, bytes
// out; HMAC-SHA256 from OpenSSL). Both sides prove that they know the job secret without
// sending it, each over a nonce the other just chose, so that a recorded handshake cannot be
// replayed:
//   connector -> acceptor  hello      "PRIMUSA1" | purpose u32 | rank u32 | nonce_c[32]
//   acceptor  -> connector challenge  nonce_a[32] | HMAC(secret, "primus acceptor" | hello |
//   nonce_a) connector -> acceptor  proof      HMAC(secret, "primus connector" | hello | nonce_a)
//   acceptor  -> connector verdict    1 byte: 1 accepted (0: refused, then the connection closes)
// Integers are little-endian. The labels keep one side's MAC from serving as the other's.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace primus::coll::handshake {

constexpr std::size_t kNonceBytes = 32;
constexpr std::size_t kMacBytes = 32;
constexpr std::size_t kHelloBytes = 8 + 4 + 4 + kNonceBytes;
constexpr std::size_t kChallengeBytes = kNonceBytes + kMacBytes;
constexpr std::size_t kProofBytes = kMacBytes;
constexpr std::uint8_t kAccepted = 1;
constexpr std::uint8_t kRefused = 0;

using Nonce = std::array<std::uint8_t, kNonceBytes>;
using Hello = std::array<std::uint8_t, kHelloBytes>;
using Challenge = std::array<std::uint8_t, kChallengeBytes>;
using Proof = std::array<std::uint8_t, kProofBytes>;

// What a connection is for, so that a handshake for one kind of connection is not accepted by
// a listener of another.
enum class Purpose : std::uint32_t { kStore = 1, kPeer = 2 };

struct HelloFields {
  Purpose purpose;
  std::uint32_t rank;
  Nonce nonce;
};

// A nonce from the kernel's CSPRNG (getrandom). Throws primus::Error if none can be had.
Nonce fresh_nonce();

Hello make_hello(Purpose purpose, std::uint32_t rank, const Nonce& nonce);
// The fields of a hello, or nothing when it is not one (wrong magic or purpose).
std::optional<HelloFields> parse_hello(const Hello& hello);

Challenge make_challenge(const std::string& secret, const Hello& hello, const Nonce& nonce);
// The connector's check of the acceptor; on success, `proof` is what it sends back.
bool check_challenge(const std::string& secret, const Hello& hello, const Challenge& challenge,
                     Proof& proof);
// The acceptor's check of the connector (constant time).
bool check_proof(const std::string& secret, const Hello& hello, const Nonce& nonce,
                 const Proof& proof);

}  // namespace primus::coll::handshake

// The mutual challenge-response every Primus connection starts with (pure: bytes in, bytes
// out; HMAC-SHA256 from sha256.hpp). Both sides prove that they know the session key without
// sending it, each over a nonce the other just chose, so that a recorded handshake cannot be
// replayed:
//   connector -> acceptor  hello      "PRIMUSA2" | purpose u32 | flags u32 | rank u32 |
//                                     nonce_c[32]
//   acceptor  -> connector challenge  nonce_a[32] | HMAC(key, "primus acceptor" | hello |
//                                     nonce_a | acceptor rank u32)
//   connector -> acceptor  proof      HMAC(key, "primus connector" | hello | nonce_a |
//                                     acceptor rank u32)
//   acceptor  -> connector verdict    1 byte: 1 accepted (0: refused, then the connection closes)
// Integers are little-endian. The labels keep one side's MAC from serving as the other's. The
// key is session_key(): the job secret bound to the job, the step and the world size, so that
// the ranks of two jobs, of two tasks of one array job (which share the secret sbatch made), or
// of two steps never accept each other; both ranks are in every MAC. flags bit 0: the connector
// asks for integrity (integrity.hpp) after the handshake; an acceptor that runs otherwise
// refuses it, so both ends always agree. The keys of a connection's two directions come from the
// session key and both nonces (connection_keys()).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "integrity.hpp"
#include "sha256.hpp"

namespace primus::coll::handshake {

constexpr std::size_t kNonceBytes = 32;
constexpr std::size_t kMacBytes = 32;
constexpr std::size_t kHelloBytes = 8 + 4 + 4 + 4 + kNonceBytes;
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
// kControl: a rank (or its task wrapper) reporting to primus-launch (control.hpp).
enum class Purpose : std::uint32_t { kStore = 1, kPeer = 2, kControl = 3 };

struct HelloFields {
  Purpose purpose;
  std::uint32_t rank;
  Nonce nonce;
  bool integrity;  // flags bit 0
};

// A nonce from the kernel's CSPRNG (getrandom). Throws primus::Error if none can be had.
Nonce fresh_nonce();

Hello make_hello(Purpose purpose, std::uint32_t rank, const Nonce& nonce, bool integrity = false);
// The fields of a hello, or nothing when it is not one (wrong magic or purpose, unknown flags).
std::optional<HelloFields> parse_hello(const Hello& hello);

// Where a connection is made: the job (PRIMUS_JOB_ID, which names an array task), the step
// and the world size. Two connections of different sessions never authenticate each other.
struct Session {
  std::string job;
  std::string step;
  std::uint32_t world_size = 0;
};
// HMAC(secret, "primus session" | job | NUL | step | NUL | world size u32), 32 bytes.
std::string session_key(const std::string& secret, const Session& session);

// `key` is a session key (or, in tests, any key both sides share). acceptor_rank is the rank of
// the side that listens: its own for the acceptor, the one it meant to reach for the connector.
Challenge make_challenge(const std::string& key, const Hello& hello, const Nonce& nonce,
                         std::uint32_t acceptor_rank);
// The connector's check of the acceptor; on success, `proof` is what it sends back.
bool check_challenge(const std::string& key, const Hello& hello, const Challenge& challenge,
                     std::uint32_t acceptor_rank, Proof& proof);
// The acceptor's check of the connector (constant time).
bool check_proof(const std::string& key, const Hello& hello, const Nonce& nonce,
                 std::uint32_t acceptor_rank, const Proof& proof);

// The integrity keys of one connection, one per direction: HMAC(key, label | hello | nonce_a |
// acceptor rank), with a label of its own for each direction. Both ends compute the same two
// after a handshake that succeeded; no other connection has them (its nonces differ).
struct ConnectionKeys {
  integrity::Key to_acceptor;
  integrity::Key to_connector;
};
ConnectionKeys connection_keys(const std::string& key, const Hello& hello,
                               const Nonce& acceptor_nonce, std::uint32_t acceptor_rank);

}  // namespace primus::coll::handshake

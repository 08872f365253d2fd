// SHA-256 (FIPS 180-4), its HMAC (RFC 2104) and a comparison in constant time: what the
// handshake needs, without OpenSSL, so that the programs on every job's start path (primus-task,
// primus-launch) do not load libcrypto (about half a millisecond per exec here). Pure logic.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace primus::coll {

using Sha256Digest = std::array<std::uint8_t, 32>;

// A digest computed in pieces: update() any number of times, then finish() once.
class Sha256 {
 public:
  Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  // Wipes the state (it may hold key material).
  ~Sha256();

  void update(const void* data, std::size_t size);
  Sha256Digest finish();

 private:
  void compress(const std::uint8_t* block);

  std::array<std::uint32_t, 8> state_;
  std::array<std::uint8_t, 64> buffer_{};
  std::size_t buffered_ = 0;
  std::uint64_t total_ = 0;  // bytes
};

Sha256Digest sha256(const void* data, std::size_t size);

// HMAC-SHA256 of `size` bytes at `data` under `key` (any length; RFC 2104, RFC 4231).
Sha256Digest hmac_sha256(std::string_view key, const void* data, std::size_t size);

// Whether the `size` bytes at a and b are equal, in a time that depends on size alone.
bool equal_in_constant_time(const void* a, const void* b, std::size_t size);

// Overwrites `size` bytes at `data` with zeros in a way the compiler keeps.
void wipe(void* data, std::size_t size);

}  // namespace primus::coll

#include "primus/common/keyed_hash.hpp"

namespace primus {
namespace {

constexpr std::uint64_t rotl(std::uint64_t x, int b) noexcept {
  return (x << b) | (x >> (64 - b));
}

std::uint64_t load_le(const std::uint8_t* p, std::size_t n) noexcept {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i)
    v |= std::uint64_t{p[i]} << (8 * i);
  return v;
}

struct SipState {
  std::uint64_t v0, v1, v2, v3;

  void round() noexcept {
    v0 += v1;
    v1 = rotl(v1, 13);
    v1 ^= v0;
    v0 = rotl(v0, 32);
    v2 += v3;
    v3 = rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = rotl(v1, 17);
    v1 ^= v2;
    v2 = rotl(v2, 32);
  }

  void absorb(std::uint64_t m) noexcept {
    v3 ^= m;
    round();
    round();
    v0 ^= m;
  }
};

int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::uint64_t siphash24(const SipKey& key, const void* data, std::size_t size) noexcept {
  const std::uint64_t k0 = load_le(key.data(), 8);
  const std::uint64_t k1 = load_le(key.data() + 8, 8);
  SipState s{k0 ^ 0x736f6d6570736575ULL, k1 ^ 0x646f72616e646f6dULL, k0 ^ 0x6c7967656e657261ULL,
             k1 ^ 0x7465646279746573ULL};
  const auto* bytes = static_cast<const std::uint8_t*>(data);
  const std::size_t whole = size - size % 8;
  for (std::size_t at = 0; at < whole; at += 8)
    s.absorb(load_le(bytes + at, 8));
  s.absorb((std::uint64_t{size & 0xFF} << 56) | load_le(bytes + whole, size % 8));
  s.v2 ^= 0xFF;
  for (int i = 0; i < 4; ++i)
    s.round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

std::optional<JobSecretBytes> parse_job_secret(std::string_view hex) noexcept {
  JobSecretBytes bytes{};
  if (hex.size() != 2 * bytes.size()) return std::nullopt;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const int hi = hex_digit(hex[2 * i]);
    const int lo = hex_digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    bytes[i] = static_cast<std::uint8_t>(hi * 16 + lo);
  }
  return bytes;
}

}  // namespace primus

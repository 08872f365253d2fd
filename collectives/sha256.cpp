#include "sha256.hpp"

#include <cstring>

namespace primus::coll {
namespace {

// The first 32 bits of the fractional parts of the cube roots of the first 64 primes.
constexpr std::array<std::uint32_t, 64> kRound = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

// The first 32 bits of the fractional parts of the square roots of the first 8 primes.
constexpr std::array<std::uint32_t, 8> kInitial = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

constexpr std::size_t kBlock = 64;

std::uint32_t rotr(std::uint32_t x, int n) {
  return (x >> n) | (x << (32 - n));
}

std::uint32_t load_be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

void store_be32(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 24);
  p[1] = static_cast<std::uint8_t>(v >> 16);
  p[2] = static_cast<std::uint8_t>(v >> 8);
  p[3] = static_cast<std::uint8_t>(v);
}

}  // namespace

Sha256::Sha256() : state_(kInitial) {}

Sha256::~Sha256() {
  wipe(state_.data(), sizeof state_);
  wipe(buffer_.data(), buffer_.size());
}

void Sha256::compress(const std::uint8_t* block) {
  std::array<std::uint32_t, 64> w;
  for (std::size_t i = 0; i < 16; ++i)
    w[i] = load_be32(block + 4 * i);
  for (std::size_t i = 16; i < 64; ++i) {
    const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  std::uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
  std::uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
  for (std::size_t i = 0; i < 64; ++i) {
    const std::uint32_t t1 =
        h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[i] + w[i];
    const std::uint32_t t2 =
        (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state_[0] += a;
  state_[1] += b;
  state_[2] += c;
  state_[3] += d;
  state_[4] += e;
  state_[5] += f;
  state_[6] += g;
  state_[7] += h;
  wipe(w.data(), sizeof w);
}

void Sha256::update(const void* data, std::size_t size) {
  const auto* in = static_cast<const std::uint8_t*>(data);
  total_ += size;
  if (buffered_ > 0) {
    const std::size_t take = std::min(size, kBlock - buffered_);
    std::memcpy(buffer_.data() + buffered_, in, take);
    buffered_ += take;
    in += take;
    size -= take;
    if (buffered_ < kBlock) return;
    compress(buffer_.data());
    buffered_ = 0;
  }
  for (; size >= kBlock; in += kBlock, size -= kBlock)
    compress(in);
  if (size > 0) std::memcpy(buffer_.data(), in, size);
  buffered_ = size;
}

Sha256Digest Sha256::finish() {
  // Padding: 0x80, zeros up to 56 bytes into a block, then the length in bits, big-endian.
  const std::uint64_t bits = total_ * 8;
  buffer_[buffered_++] = 0x80;
  if (buffered_ > 56) {
    std::memset(buffer_.data() + buffered_, 0, kBlock - buffered_);
    compress(buffer_.data());
    buffered_ = 0;
  }
  std::memset(buffer_.data() + buffered_, 0, 56 - buffered_);
  for (std::size_t i = 0; i < 8; ++i)
    buffer_[56 + i] = static_cast<std::uint8_t>(bits >> (56 - 8 * i));
  compress(buffer_.data());
  buffered_ = 0;
  Sha256Digest digest{};
  for (std::size_t i = 0; i < 8; ++i)
    store_be32(digest.data() + 4 * i, state_[i]);
  return digest;
}

Sha256Digest sha256(const void* data, std::size_t size) {
  Sha256 hash;
  hash.update(data, size);
  return hash.finish();
}

Sha256Digest hmac_sha256(std::string_view key, const void* data, std::size_t size) {
  std::array<std::uint8_t, kBlock> block{};
  if (key.size() > kBlock) {
    const Sha256Digest short_key = sha256(key.data(), key.size());
    std::memcpy(block.data(), short_key.data(), short_key.size());
  } else if (!key.empty()) {
    std::memcpy(block.data(), key.data(), key.size());
  }
  std::array<std::uint8_t, kBlock> pad{};
  for (std::size_t i = 0; i < kBlock; ++i)
    pad[i] = block[i] ^ 0x36;
  Sha256 inner;
  inner.update(pad.data(), pad.size());
  inner.update(data, size);
  Sha256Digest inner_digest = inner.finish();
  for (std::size_t i = 0; i < kBlock; ++i)
    pad[i] = block[i] ^ 0x5c;
  Sha256 outer;
  outer.update(pad.data(), pad.size());
  outer.update(inner_digest.data(), inner_digest.size());
  wipe(block.data(), block.size());
  wipe(pad.data(), pad.size());
  wipe(inner_digest.data(), inner_digest.size());
  return outer.finish();
}

bool equal_in_constant_time(const void* a, const void* b, std::size_t size) {
  const auto* x = static_cast<const volatile std::uint8_t*>(a);
  const auto* y = static_cast<const volatile std::uint8_t*>(b);
  std::uint8_t difference = 0;
  for (std::size_t i = 0; i < size; ++i)
    difference = static_cast<std::uint8_t>(difference | (x[i] ^ y[i]));
  return difference == 0;
}

void wipe(void* data, std::size_t size) {
  auto* p = static_cast<volatile std::uint8_t*>(data);
  for (std::size_t i = 0; i < size; ++i)
    p[i] = 0;
}

}  // namespace primus::coll

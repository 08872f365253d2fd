#include "primus/common/keyed_hash.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace primus {
namespace {

SipKey reference_key() {
  SipKey key{};
  for (std::size_t i = 0; i < key.size(); ++i)
    key[i] = static_cast<std::uint8_t>(i);
  return key;
}

// The reference implementation's test vectors (key 00 01 .. 0f, message 00 01 .. of length n),
// as 64-bit little-endian values: lengths 0, 1, 7, 8 and 15 cover the empty message, a partial
// last word, one whole word, and a word plus 7 bytes.
TEST(SipHash, MatchesTheReferenceVectors) {
  const SipKey key = reference_key();
  std::vector<std::uint8_t> message(64);
  for (std::size_t i = 0; i < message.size(); ++i)
    message[i] = static_cast<std::uint8_t>(i);
  EXPECT_EQ(siphash24(key, message.data(), 0), 0x726fdb47dd0e0e31ULL);
  EXPECT_EQ(siphash24(key, message.data(), 1), 0x74f839c593dc67fdULL);
  EXPECT_EQ(siphash24(key, message.data(), 7), 0xab0200f58b01d137ULL);
  EXPECT_EQ(siphash24(key, message.data(), 8), 0x93f5f5799a932462ULL);
  EXPECT_EQ(siphash24(key, message.data(), 15), 0xa129ca6149be45e5ULL);
}

TEST(SipHash, EveryKeyBitMatters) {
  const SipKey key = reference_key();
  const std::string text = "primus";
  const std::uint64_t base = siphash24(key, text.data(), text.size());
  for (std::size_t bit = 0; bit < 128; ++bit) {
    SipKey other = key;
    other[bit / 8] = static_cast<std::uint8_t>(other[bit / 8] ^ (1U << (bit % 8)));
    EXPECT_NE(siphash24(other, text.data(), text.size()), base) << "key bit " << bit;
  }
}

TEST(JobSecret, ParsesSixtyFourHexDigits) {
  const auto bytes = parse_job_secret(std::string(62, '0') + "fF");
  ASSERT_TRUE(bytes);
  EXPECT_EQ((*bytes)[31], 0xFF);
  EXPECT_EQ((*bytes)[0], 0x00);
  for (const std::string& bad : {std::string(), std::string(63, 'a'), std::string(65, 'a'),
                                 std::string(63, 'a') + "g", std::string(63, 'a') + " "}) {
    EXPECT_FALSE(parse_job_secret(bad)) << "'" << bad << "'";
  }
}

}  // namespace
}  // namespace primus

#include "primus/common/ports.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "primus/common/error.hpp"

namespace primus {
namespace {

// A job secret of the plugin's form: 64 lowercase hex digits.
std::string secret_from(std::mt19937_64& rng) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string secret(64, '0');
  for (char& c : secret)
    c = kHex[rng() % 16];
  return secret;
}

const std::string kSecret(64, 'a');

TEST(Ports, ParsesRanges) {
  const PortRange r = parse_port_range("20000-29999", "port_range");
  EXPECT_EQ(r.lo, 20000);
  EXPECT_EQ(r.hi, 29999);
  EXPECT_EQ(r.size(), 10000U);
  for (const char* bad : {"", "20000", "0-10", "10-5", "1-65536", "a-b", "1-2-3", " 1-2"}) {
    EXPECT_THROW(parse_port_range(bad, "port_range"), Error) << bad;
  }
}

TEST(Ports, ParsesSlurmReservedPorts) {
  EXPECT_EQ(parse_reserved_ports("12001-12003"), (std::vector<std::uint16_t>{12001, 12002, 12003}));
  EXPECT_EQ(parse_reserved_ports("12001,12005-12006"),
            (std::vector<std::uint16_t>{12001, 12005, 12006}));
  for (const char* bad : {"", "x", "12003-12001", "70000", "1-65535,1-65535", "12001,"}) {
    EXPECT_THROW(parse_reserved_ports(bad), Error) << bad;
  }
}

TEST(Ports, DerivedBlockStaysInsideTheRange) {
  const PortRange range{20000, 20999};
  std::mt19937_64 rng(7);
  for (int i = 0; i < 10000; ++i) {
    const auto block =
        derive_port_block(rng() % 100000000, rng() % 1000, range, 9, secret_from(rng));
    ASSERT_EQ(block.size(), 9U);
    EXPECT_GE(block.front(), range.lo);
    EXPECT_LE(block.back(), range.hi);
    EXPECT_EQ((block.front() - range.lo) % kDerivedPortSlot, 0U);
  }
}

// Property: the steps of one job never share a port while the job has no more steps than slots.
TEST(Ports, StepsOfOneJobNeverCollide) {
  const PortRange range{20000, 29999};
  const std::uint32_t slots = derived_slot_count(range);
  ASSERT_EQ(slots, 312U);
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const std::uint64_t job = rng() % 4000000000ULL;
    const std::uint64_t first_step = rng() % 100;
    const std::string secret = secret_from(rng);
    // Keyed with the job's secret, and public (a job whose steps made their own secrets).
    for (const auto key :
         {std::optional<std::string_view>(secret), std::optional<std::string_view>()}) {
      std::set<std::uint16_t> used;
      for (std::uint64_t step = first_step; step < first_step + slots; ++step) {
        for (const std::uint16_t port :
             derive_port_block(job, step, range, kDerivedPortSlot, key)) {
          ASSERT_TRUE(used.insert(port).second)
              << "job " << job << " step " << step << (key ? " keyed" : " public");
        }
      }
    }
  }
}

TEST(Ports, DerivationIsDeterministic) {
  const PortRange range{20000, 29999};
  EXPECT_EQ(derive_port_block(123, 4, range, 3, kSecret),
            derive_port_block(123, 4, range, 3, kSecret));
  EXPECT_NE(derive_port_block(123, 4, range, 3, kSecret),
            derive_port_block(123, 5, range, 3, kSecret));
}

// The slot is keyed with the job secret: without it, another user cannot tell which ports a job
// will use. Over many secrets one job id lands in nearly every slot, evenly; and secrets that
// differ in any one byte, in either half, move it.
TEST(Ports, TheSlotDependsOnTheJobSecret) {
  const PortRange range{20000, 29999};
  const std::uint32_t slots = derived_slot_count(range);
  std::mt19937_64 rng(5);
  std::vector<int> hits(slots, 0);
  const int draws = 31200;
  for (int i = 0; i < draws; ++i) {
    const auto block = derive_port_block(4242, 0, range, 1, secret_from(rng));
    ++hits[(block[0] - range.lo) / kDerivedPortSlot];
  }
  // 100 expected per slot: a slot with none or with over 3 times that is not a keyed hash.
  for (std::uint32_t slot = 0; slot < slots; ++slot) {
    EXPECT_GT(hits[slot], 0) << "slot " << slot;
    EXPECT_LT(hits[slot], 300) << "slot " << slot;
  }
  int moved = 0;
  const std::string base = secret_from(rng);
  for (std::size_t at = 0; at < base.size(); ++at) {
    std::string other = base;
    other[at] = other[at] == '0' ? '1' : '0';
    moved +=
        derive_port_block(4242, 0, range, 1, other) != derive_port_block(4242, 0, range, 1, base);
  }
  EXPECT_GE(moved, 60);  // of 64: a change collides with the old slot with probability 1/312
}

TEST(Ports, RefusesWhatCannotFit) {
  EXPECT_THROW(derive_port_block(1, 0, PortRange{20000, 20010}, 2, kSecret), Error);
  EXPECT_THROW(derive_port_block(1, 0, PortRange{20000, 29999}, kDerivedPortSlot + 1, kSecret),
               Error);
  for (const std::string& bad : {std::string(), std::string(63, 'a'), std::string(63, 'a') + "g"}) {
    try {
      derive_port_block(1, 0, PortRange{20000, 29999}, 2, bad);
      ADD_FAILURE() << "accepted secret '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("PRIMUS_JOB_SECRET"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace primus

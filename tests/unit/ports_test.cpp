#include "primus/common/ports.hpp"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "primus/common/error.hpp"

namespace primus {
namespace {

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
    const auto block = derive_port_block(rng() % 100000000, rng() % 1000, range, 9);
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
    std::set<std::uint16_t> used;
    for (std::uint64_t step = first_step; step < first_step + slots; ++step) {
      for (const std::uint16_t port : derive_port_block(job, step, range, kDerivedPortSlot)) {
        ASSERT_TRUE(used.insert(port).second) << "job " << job << " step " << step;
      }
    }
  }
}

TEST(Ports, DerivationIsDeterministic) {
  const PortRange range{20000, 29999};
  EXPECT_EQ(derive_port_block(123, 4, range, 3), derive_port_block(123, 4, range, 3));
  EXPECT_NE(derive_port_block(123, 4, range, 3), derive_port_block(123, 5, range, 3));
}

TEST(Ports, RefusesWhatCannotFit) {
  EXPECT_THROW(derive_port_block(1, 0, PortRange{20000, 20010}, 2), Error);
  EXPECT_THROW(derive_port_block(1, 0, PortRange{20000, 29999}, kDerivedPortSlot + 1), Error);
}

}  // namespace
}  // namespace primus

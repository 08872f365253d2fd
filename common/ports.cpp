#include "primus/common/ports.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "primus/common/error.hpp"
#include "primus/common/keyed_hash.hpp"
#include "primus/common/parse_number.hpp"

namespace primus {
namespace {

constexpr std::uint64_t kMaxPort = 65535;
constexpr std::size_t kMaxReservedPorts = 4096;

// SplitMix64 finaliser: spreads consecutive job ids over the slots (the public slot).
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The job's first slot: SipHash-2-4 of (a label, the job id) keyed with the job secret, so that
// only the job's own tasks can compute it (another user cannot aim at a job's ports).
std::uint64_t keyed_slot_hash(std::uint64_t job_id, std::string_view job_secret) {
  const auto secret = parse_job_secret(job_secret);
  if (!secret) {
    throw Error(
        "PRIMUS_JOB_SECRET: expected 64 hexadecimal digits (the plugin makes one at submit "
        "time), needed to derive the step's ports");
  }
  SipKey key{};
  std::copy(secret->begin(), secret->begin() + key.size(), key.begin());
  constexpr std::string_view kLabel = "primus derived port slot";
  std::array<std::uint8_t, kLabel.size() + 16 + 8> message{};
  std::copy(kLabel.begin(), kLabel.end(), message.begin());
  std::copy(secret->begin() + key.size(), secret->end(), message.begin() + kLabel.size());
  for (int i = 0; i < 8; ++i)
    message[kLabel.size() + 16 + static_cast<std::size_t>(i)] =
        static_cast<std::uint8_t>(job_id >> (8 * i));
  return siphash24(key, message.data(), message.size());
}

}  // namespace

PortRange parse_port_range(std::string_view text, std::string_view what) {
  const std::size_t dash = text.find('-');
  const auto bad = [&]() {
    return Error(std::string(what) + ": expected a port range LO-HI within 1-65535, got '" +
                 std::string(text) + "'");
  };
  if (dash == std::string_view::npos) throw bad();
  const auto lo = parse_unsigned(text.substr(0, dash), kMaxPort);
  const auto hi = parse_unsigned(text.substr(dash + 1), kMaxPort);
  if (!lo || !hi || *lo == 0 || *lo > *hi) throw bad();
  return PortRange{static_cast<std::uint16_t>(*lo), static_cast<std::uint16_t>(*hi)};
}

std::vector<std::uint16_t> parse_reserved_ports(std::string_view text) {
  std::vector<std::uint16_t> ports;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string_view item = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    const std::size_t dash = item.find('-');
    std::optional<std::uint64_t> lo;
    std::optional<std::uint64_t> hi;
    if (dash == std::string_view::npos) {
      lo = hi = parse_unsigned(item, kMaxPort);
    } else {
      lo = parse_unsigned(item.substr(0, dash), kMaxPort);
      hi = parse_unsigned(item.substr(dash + 1), kMaxPort);
    }
    if (!lo || !hi || *lo == 0 || *lo > *hi) {
      throw Error("SLURM_STEP_RESV_PORTS: expected ports such as '12001-12003', got '" +
                  std::string(text) + "'");
    }
    if (ports.size() + (*hi - *lo) >= kMaxReservedPorts) {
      throw Error("SLURM_STEP_RESV_PORTS: more than " + std::to_string(kMaxReservedPorts) +
                  " ports in '" + std::string(text) + "'");
    }
    for (std::uint64_t port = *lo; port <= *hi; ++port) {
      ports.push_back(static_cast<std::uint16_t>(port));
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return ports;
}

std::uint32_t derived_slot_count(PortRange range) noexcept {
  return range.lo == 0 || range.hi < range.lo ? 0 : range.size() / kDerivedPortSlot;
}

std::vector<std::uint16_t> derive_port_block(std::uint64_t job_id, std::uint64_t step_id,
                                             PortRange range, std::uint32_t count,
                                             std::optional<std::string_view> job_secret) {
  if (count > kDerivedPortSlot) {
    throw Error("a step needs " + std::to_string(count) + " ports per node, more than the " +
                std::to_string(kDerivedPortSlot) +
                " of a derived port slot: have the site set MpiParams=ports=LO-HI in slurm.conf");
  }
  const std::uint32_t slots = derived_slot_count(range);
  if (slots == 0) {
    throw Error("port range " + std::to_string(range.lo) + "-" + std::to_string(range.hi) +
                " holds fewer than " + std::to_string(kDerivedPortSlot) + " ports");
  }
  const std::uint64_t slot =
      ((job_secret ? keyed_slot_hash(job_id, *job_secret) : mix(job_id)) % slots +
       step_id % slots) %
      slots;
  const std::uint32_t first = range.lo + static_cast<std::uint32_t>(slot) * kDerivedPortSlot;
  std::vector<std::uint16_t> block;
  block.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i)
    block.push_back(static_cast<std::uint16_t>(first + i));
  return block;
}

}  // namespace primus

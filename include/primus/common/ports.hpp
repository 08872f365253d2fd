// The block of TCP ports a step uses on every node: from Slurm's reservation
// (SLURM_STEP_RESV_PORTS, with MpiParams=ports=LO-HI) or derived from (job id, step id) under
// the job secret.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace primus {

struct PortRange {
  std::uint16_t lo = 0;
  std::uint16_t hi = 0;  // inclusive
  std::uint32_t size() const noexcept { return std::uint32_t{hi} - lo + 1U; }
};

// "LO-HI" with 1 <= LO <= HI <= 65535. `what` names the option or variable in errors.
PortRange parse_port_range(std::string_view text, std::string_view what);

// SLURM_STEP_RESV_PORTS: "12001-12003" or a comma list of ports and ranges.
std::vector<std::uint16_t> parse_reserved_ports(std::string_view text);

// The derived path hands out aligned slots of this many ports.
constexpr std::uint32_t kDerivedPortSlot = 32;

// A slot of `range` chosen from (job_id, step_id). With the job's secret (64 hex digits, the
// same in every step of the job), the job's first slot is a keyed hash (SipHash-2-4) of its id,
// so that other users, who lack the secret, cannot compute it; without one (a job whose steps
// each made their own secret, because its sbatch or salloc had no --primus), a public hash of
// the job id, as other users can compute. Consecutive steps of one job take consecutive slots
// (mod the slot count) either way, so that no two steps of one job collide while the job has
// fewer live steps than slots; unrelated jobs collide with probability 1/slots per pair.
// Returns the first `count` ports of the slot. Throws Error when count > kDerivedPortSlot, the
// range holds no slot, or a secret is given that is not 64 hex digits.
std::vector<std::uint16_t> derive_port_block(std::uint64_t job_id, std::uint64_t step_id,
                                             PortRange range, std::uint32_t count,
                                             std::optional<std::string_view> job_secret);

// Number of slots in `range` for the derived path.
std::uint32_t derived_slot_count(PortRange range) noexcept;

}  // namespace primus

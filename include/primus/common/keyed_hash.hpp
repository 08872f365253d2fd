// A keyed hash for values that other users must not be able to compute (the derived port slot):
// SipHash-2-4 (Aumasson and Bernstein, 2012), a pseudorandom function of short inputs under a
// 128-bit key, and the job secret as the bytes it is written in. Pure; the SPANK plugin links
// nothing but libc, so this is not OpenSSL.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace primus {

using SipKey = std::array<std::uint8_t, 16>;

// SipHash-2-4 of `size` bytes at `data` under `key`, as the reference implementation's 64-bit
// little-endian output.
std::uint64_t siphash24(const SipKey& key, const void* data, std::size_t size) noexcept;

// The job secret's 32 bytes, from its 64 hexadecimal digits (either case); nullopt for anything
// else.
using JobSecretBytes = std::array<std::uint8_t, 32>;
std::optional<JobSecretBytes> parse_job_secret(std::string_view hex) noexcept;

}  // namespace primus

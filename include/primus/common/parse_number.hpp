// Strict decimal number parsing shared by the Slurm environment parsers and the validators.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace primus {

// Reads the decimal digits at text[pos...] and advances pos past them. Returns nullopt (pos
// unchanged) when there is no digit or the value exceeds `max`.
std::optional<std::uint64_t> take_unsigned(std::string_view text, std::size_t& pos,
                                           std::uint64_t max);

// The whole text as an unsigned decimal no larger than `max`: no sign, no spaces, no suffix.
std::optional<std::uint64_t> parse_unsigned(std::string_view text, std::uint64_t max);

}  // namespace primus

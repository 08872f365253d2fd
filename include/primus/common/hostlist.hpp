// Slurm hostlists ("n[01-04,7],gpu[1-2]x[3-4]"): parse, index, expand and compress exactly as
// Slurm 22.05 (`scontrol show hostnames` / `scontrol show hostlist`) does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace primus {

// An ordered list of host names, stored as ranges so that 800000 consecutive hosts cost one
// range and at(i) costs O(log ranges). Order and duplicates are kept. Semantics and the few
// deliberate differences from Slurm: docs/hostlist.md.
class Hostlist {
 public:
  // Primus's own ceiling: parse() refuses a list of more ranges than this before joining,
  // even where Slurm still copes (docs/hostlist.md).
  static constexpr std::size_t kMaxRanges = std::size_t{1} << 18;

  Hostlist() = default;

  // Parses a Slurm hostlist expression. Throws ParseError naming the position and what was
  // expected where Slurm rejects the text (Slurm allows at most 65536 hosts per "lo-hi", so
  // "n[1-800000]" is rejected), and where Slurm would crash or misbehave (docs/hostlist.md).
  static Hostlist parse(std::string_view text);

  // Appends one host name (no brackets), merging it into the last range when it continues it.
  // The name is taken literally, as Slurm's hostlist_push_host does; throws ParseError when its
  // number is 2^64-1 or more.
  void push_host(std::string_view host);

  std::size_t size() const noexcept;
  bool empty() const noexcept { return size() == 0; }

  // The i-th host name (0-based). Throws std::out_of_range past the end.
  std::string at(std::size_t index) const;

  // Every host name in order (what `scontrol show hostnames` prints, one per line).
  std::vector<std::string> expand() const;

  // The compressed form, equal to `scontrol show hostlist` for the same list.
  std::string compress() const;

 private:
  class Parser;  // common/hostlist.cpp: the text grammar of Slurm 22.05

  struct Range {
    std::string prefix;     // text before the number
    std::uint64_t lo = 0;   // first number
    std::uint64_t hi = 0;   // last number (inclusive)
    int width = 0;          // zero-padded width of the numbers
    bool numbered = false;  // false: a single host with no numeric suffix (prefix only)
  };

  // Appends a range, joining it to the last one as Slurm does (same prefix, consecutive numbers,
  // compatible zero padding).
  void push_range(Range range);
  std::string host_name(std::size_t range_index, std::size_t offset) const;

  std::vector<Range> ranges_;
  std::vector<std::size_t> ends_;  // ends_[k] = number of hosts in ranges_[0..k]
};

}  // namespace primus

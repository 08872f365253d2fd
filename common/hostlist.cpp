// Slurm hostlists indexed, expanded and compressed as Slurm 22.05.8 does (parsed in
// hostlist_parse.cpp).
// The grammar, including its oddities, was established by experiment with `scontrol show
// hostnames` / `scontrol show hostlist` (see docs/hostlist.md); this is an independent
// implementation of that behaviour.
#include "primus/common/hostlist.hpp"

#include <algorithm>
#include <climits>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "hostlist_text.hpp"
#include "primus/common/error.hpp"

namespace primus {

using namespace hostlist_text;

void Hostlist::push_range(Range range) {
  if (!ranges_.empty()) {
    Range& tail = ranges_.back();
    if (tail.numbered && range.numbered && tail.hi != kUint64Max && tail.hi + 1 == range.lo &&
        natural_equal(tail.prefix, range.prefix)) {
      if (std::optional<int> width = joined_width(tail.lo, tail.width, range.lo, range.width)) {
        tail.width = *width;
        tail.hi = range.hi;
        ends_.back() += range_count(range.lo, range.hi);
        return;
      }
    }
  }
  const std::size_t count = range.numbered ? range_count(range.lo, range.hi) : 1;
  ends_.push_back(size() + count);
  ranges_.push_back(std::move(range));
}

std::size_t Hostlist::size() const noexcept {
  return ends_.empty() ? 0 : ends_.back();
}

std::string Hostlist::host_name(std::size_t range_index, std::size_t offset) const {
  const Range& range = ranges_[range_index];
  std::string name = range.prefix;
  if (range.numbered) append_number(name, range.lo + offset, range.width);
  return name;
}

std::string Hostlist::at(std::size_t index) const {
  if (index >= size()) {
    throw std::out_of_range("Hostlist::at: index " + std::to_string(index) + " past the end (" +
                            std::to_string(size()) + " hosts)");
  }
  const std::size_t k =
      static_cast<std::size_t>(std::upper_bound(ends_.begin(), ends_.end(), index) - ends_.begin());
  return host_name(k, index - (k == 0 ? 0 : ends_[k - 1]));
}

std::vector<std::string> Hostlist::expand() const {
  std::vector<std::string> hosts;
  hosts.reserve(size());
  for (std::size_t k = 0; k < ranges_.size(); ++k) {
    const std::size_t count = ends_[k] - (k == 0 ? 0 : ends_[k - 1]);
    for (std::size_t i = 0; i < count; ++i)
      hosts.push_back(host_name(k, i));
  }
  return hosts;
}

namespace {

void append_numbers(std::string& out, std::uint64_t lo, std::uint64_t hi, int width) {
  append_number(out, lo, width);
  if (lo < hi) {
    out += '-';
    append_number(out, hi, width);
  }
}

}  // namespace

// Slurm writes each run of consecutive ranges with the same prefix (compared as strnatcmp
// does) as prefix[a-b,c,...] under the run's first prefix; brackets only where the run holds
// more than one host.
std::string Hostlist::compress() const {
  const auto same_run = [this](std::size_t a, std::size_t b) {
    return ranges_[a].numbered && ranges_[b].numbered &&
           natural_equal(ranges_[a].prefix, ranges_[b].prefix);
  };
  std::string out;
  for (std::size_t i = 0; i < ranges_.size();) {
    if (i > 0) out += ',';
    const Range& first = ranges_[i];
    const bool bracket =
        (first.numbered && first.lo != first.hi) || (i + 1 < ranges_.size() && same_run(i, i + 1));
    out += first.prefix;
    if (bracket) out += '[';
    std::size_t j = i;
    do {
      if (j > i) out += ',';
      if (ranges_[j].numbered) append_numbers(out, ranges_[j].lo, ranges_[j].hi, ranges_[j].width);
      ++j;
    } while (j < ranges_.size() && same_run(j, j - 1));
    if (bracket) out += ']';
    i = j;
  }
  return out;
}

}  // namespace primus

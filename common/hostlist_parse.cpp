// Slurm hostlists parsed as Slurm 22.05.8 parses them (docs/hostlist.md): Hostlist::parse and
// push_host; the grammar's oddities were established by experiment with `scontrol show
// hostnames` and are an independent implementation of that behaviour.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "hostlist_text.hpp"
#include "primus/common/error.hpp"
#include "primus/common/hostlist.hpp"

namespace primus {
namespace {

using namespace hostlist_text;

// One "lo", "lo-hi" item of a bracket, with where it starts in the text.
struct NumberRange {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  int width = 0;
  std::size_t position = 0;
};

struct Failure {
  std::size_t position = 0;
  std::string expected;
};

struct RangeList {
  std::vector<NumberRange> ranges;
  std::optional<Failure> failure;
};

// A bracket group before the last bracket of an entry: the positions of its '[' and ']'.
struct PrefixGroup {
  std::size_t open = 0;
  std::size_t close = 0;
};

// One digit of the odometer that walks the prefix combinations, leftmost group fastest.
struct Dial {
  const std::vector<NumberRange>* ranges = nullptr;
  std::size_t range = 0;
  std::uint64_t value = 0;
};

bool advance(std::vector<Dial>& dials) {
  for (Dial& dial : dials) {
    const std::vector<NumberRange>& ranges = *dial.ranges;
    if (dial.value < ranges[dial.range].hi) {
      ++dial.value;
      return true;
    }
    if (dial.range + 1 < ranges.size()) {
      dial.value = ranges[++dial.range].lo;
      return true;
    }
    dial.range = 0;
    dial.value = ranges[0].lo;
  }
  return false;
}

}  // namespace

using namespace hostlist_text;

// ---------------------------------------------------------------------------------------------
// The parser. An entry is a run of text between separators (',', ' ', '\t'), where a separator
// between a '[' and the next ']' does not end the entry. In an entry, the last '[' and the first
// ']' after it delimit the last bracket, which must end the entry; each earlier "[...]" (found
// from the right: the last '[' and the last ']' after it) multiplies the host name prefixes.
class Hostlist::Parser {
 public:
  explicit Parser(std::string_view text) : text_(text), opens_(text, '['), closes_(text, ']') {}

  Hostlist run() {
    const std::size_t nul = text_.find('\0');
    if (nul != kNone) fail(nul, "unexpected NUL byte");
    std::size_t pos = 0;
    for (;;) {
      while (pos < text_.size() && is_separator(text_[pos]))
        ++pos;
      if (pos == text_.size()) break;
      const std::size_t end = entry_end(pos);
      parse_entry(pos, end);
      pos = end;
    }
    return std::move(list_);
  }

  // A host name taken literally: a trailing run of digits is its number. `position` is where the
  // name starts in `text`, for errors.
  static Range plain_range(std::string_view name, std::size_t position, std::string_view text) {
    std::size_t digits = 0;
    while (digits < name.size() && is_digit(name[name.size() - 1 - digits]))
      ++digits;
    const std::size_t start = name.size() - digits;
    Range range;
    range.prefix = std::string(name.substr(0, start));
    if (digits == 0) return range;
    range.lo = range.hi = read_c_number(name, start, name.size()).value;
    if (range.lo > kMaxNumber) {
      const std::size_t at = position + start;
      throw ParseError(describe(text, at, too_large()), at);
    }
    range.width = static_cast<int>(digits);
    range.numbered = true;
    return range;
  }

 private:
  static std::string describe(std::string_view text, std::size_t position,
                              const std::string& expected) {
    constexpr std::size_t kShown = 200;
    std::string shown = printable(text.substr(0, kShown));
    if (text.size() > kShown) shown += "...";
    return "hostlist '" + shown + "': at position " + std::to_string(position) + ": " + expected;
  }
  [[noreturn]] void fail(std::size_t position, const std::string& expected) const {
    throw ParseError(describe(text_, position, expected), position);
  }
  [[noreturn]] void fail(const Failure& failure) const { fail(failure.position, failure.expected); }

  // The end of the entry starting at `begin`: the next separator that is not inside a bracket
  // span, a span running from the first '[' to the first ']' after the last span.
  std::size_t entry_end(std::size_t begin) {
    std::size_t end = begin;
    std::size_t scan = begin;
    for (;;) {
      while (end < text_.size() && !is_separator(text_[end]))
        ++end;
      std::size_t close = kNone;
      for (;;) {
        const std::size_t open = opens_.next(scan);
        if (open == kNone || open > end) return end;
        close = closes_.next(scan);
        if (close == kNone || close < open) return end;
        if (close >= end) break;
        scan = close + 1;
      }
      end = close;
    }
  }

  void parse_entry(std::size_t begin, std::size_t end) {
    const std::size_t open = rfind_in(text_, '[', begin, end);
    if (open == kNone) return push_plain(std::string(text_.substr(begin, end - begin)), begin);
    const std::size_t close = find_in(text_, ']', open + 1, end);
    if (close == kNone) return push_unclosed(begin, open, end);
    if (close + 1 != end) fail(close + 1, "expected ',' or end of list after ']'");
    parse_brackets(begin, open, close);
  }

  // Slurm keeps an entry whose last '[' is never closed: "a[1-2" names the host "a]" and
  // "[1-2" the host "1-2".
  void push_unclosed(std::size_t begin, std::size_t open, std::size_t end) {
    if (open > begin)
      return push_plain(std::string(text_.substr(begin, open - begin)) + "]", begin);
    push_plain(std::string(text_.substr(open + 1, end - open - 1)), open + 1);
  }

  void push_plain(const std::string& name, std::size_t position) {
    push(plain_range(name, position, text_), position);
  }

  void parse_brackets(std::size_t begin, std::size_t open, std::size_t close) {
    RangeList last = parse_range_list(open + 1, close);
    if (last.failure) fail(*last.failure);
    const std::vector<PrefixGroup> groups = find_prefix_groups(begin, open);
    std::vector<std::vector<NumberRange>> values(groups.size());
    for (std::size_t k = 0; k < groups.size(); ++k) {  // right to left, as Slurm recurses
      RangeList list = parse_range_list(groups[k].open + 1, groups[k].close);
      if (list.failure) {
        if (k == 0) fail(*list.failure);
        return;  // Slurm ignores a failure in an earlier bracket: the entry names no host
      }
      values[k] = limit_prefix_values(std::move(list.ranges), k == 0);
      check_numbers(values[k]);
    }
    check_numbers(last.ranges);
    push_products(begin, open, groups, values, last.ranges);
  }

  // The bracket groups of the prefix text [begin, end), from the right.
  std::vector<PrefixGroup> find_prefix_groups(std::size_t begin, std::size_t end) const {
    std::vector<PrefixGroup> groups;
    for (;;) {
      const std::size_t open = rfind_in(text_, '[', begin, end);
      if (open == kNone) break;
      const std::size_t close = rfind_in(text_, ']', open + 1, end);
      if (close == kNone) break;
      groups.push_back({open, close});
      end = open;
    }
    return groups;
  }

  // Slurm takes at most 65536 values from a bracket before the last: past that, an error for the
  // bracket next to the last, and for earlier ones the ranges that fit.
  std::vector<NumberRange> limit_prefix_values(std::vector<NumberRange> ranges, bool strict) const {
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      total += range_count(ranges[i].lo, ranges[i].hi);
      if (total <= kMaxPrefixValues) continue;
      if (strict) {
        fail(ranges[i].position, "expected at most " + std::to_string(kMaxPrefixValues) +
                                     " values in a bracket before the last one");
      }
      ranges.resize(i);
      break;
    }
    return ranges;
  }

  void check_numbers(const std::vector<NumberRange>& ranges) const {
    for (const NumberRange& range : ranges) {
      if (range.hi > kMaxNumber) fail(range.position, too_large());
    }
  }

  static std::string too_large() {
    return "expected a number below " + std::to_string(kUint64Max) +
           " (Slurm saturates larger numbers at it, then fails)";
  }

  // The comma-separated items between a '[' at open - 1 and a ']' at end.
  RangeList parse_range_list(std::size_t begin, std::size_t end) const {
    RangeList list;
    for (std::size_t item = begin;; ++item) {
      if (list.ranges.size() == kMaxRangesInBracket) {
        fail(item,
             "expected at most " + std::to_string(kMaxRangesInBracket) + " ranges in one bracket");
      }
      const std::size_t comma = find_in(text_, ',', item, end);
      const std::size_t item_end = comma == kNone ? end : comma;
      NumberRange range;
      if (std::optional<Failure> failure = parse_range(item, item_end, range)) {
        list.failure = std::move(failure);
        return list;
      }
      list.ranges.push_back(range);
      if (comma == kNone) return list;
      item = comma;
    }
  }

  // One item: "lo" or "lo-hi", each number as strtoul reads it; the width is the length of the
  // text of lo. Slurm ignores text between lo and '-' ("1a-3" is "01-03").
  std::optional<Failure> parse_range(std::size_t begin, std::size_t end, NumberRange& out) const {
    const std::size_t x = find_in(text_, 'x', begin, end);
    if (x != kNone) return Failure{x, "expected a number, not 'x' (a multi-dimensional box)"};
    const std::size_t dash = find_in(text_, '-', begin, end);
    const std::size_t lo_end = dash == kNone ? end : dash;
    if (dash != kNone && dash + 1 < end && text_[dash + 1] == '-') {
      return Failure{dash + 1, "expected a number after '-'"};
    }
    const CNumber lo = read_c_number(text_, begin, lo_end);
    if (lo.end == begin)
      return Failure{digits_expected_at(text_, begin, lo_end), "expected a number"};
    out = {lo.value, lo.value, static_cast<int>(lo_end - begin), begin};
    if (dash != kNone && dash + 1 < end) {
      const CNumber hi = read_c_number(text_, dash + 1, end);
      if (hi.end == dash + 1) {
        return Failure{digits_expected_at(text_, dash + 1, end), "expected a number after '-'"};
      }
      if (hi.end != end) return Failure{hi.end, "expected ',' or ']' after a range"};
      out.hi = hi.value;
    } else if (lo.end != lo_end) {
      return Failure{lo.end, "expected '-', ',' or ']' after a number"};
    }
    return check_range(out, begin, end);
  }

  std::optional<Failure> check_range(const NumberRange& range, std::size_t begin,
                                     std::size_t end) const {
    const std::string item(text_.substr(begin, end - begin));
    if (range.lo > range.hi) {
      return Failure{begin,
                     "expected a range whose end is not below its start, not '" + item + "'"};
    }
    if (range_count(range.lo, range.hi) > kMaxHostsInRange) {
      return Failure{begin, "expected at most " + std::to_string(kMaxHostsInRange) +
                                " hosts in one range, not '" + item + "'"};
    }
    return std::nullopt;
  }

  // Pushes the last bracket's ranges once for every combination of the earlier brackets' values,
  // the leftmost bracket varying fastest (Slurm's order).
  void push_products(std::size_t begin, std::size_t open, const std::vector<PrefixGroup>& groups,
                     const std::vector<std::vector<NumberRange>>& values,
                     const std::vector<NumberRange>& last) {
    std::vector<std::string_view> literals;  // text around the groups, left to right
    std::vector<Dial> dials;
    std::size_t literal_begin = begin;
    for (std::size_t k = groups.size(); k-- > 0;) {
      literals.push_back(text_.substr(literal_begin, groups[k].open - literal_begin));
      dials.push_back({&values[k], 0, values[k][0].lo});
      literal_begin = groups[k].close + 1;
    }
    literals.push_back(text_.substr(literal_begin, open - literal_begin));
    check_product_size(begin, values, last.size());
    do {
      const std::string prefix = build_prefix(literals, dials);
      for (const NumberRange& range : last) {
        push(Range{prefix, range.lo, range.hi, range.width, true}, begin);
      }
    } while (advance(dials));
  }

  void check_product_size(std::size_t position, const std::vector<std::vector<NumberRange>>& values,
                          std::uint64_t last_ranges) const {
    std::uint64_t pushes = last_ranges;
    for (const std::vector<NumberRange>& ranges : values) {
      std::uint64_t count = 0;
      for (const NumberRange& range : ranges)
        count += range_count(range.lo, range.hi);
      pushes = saturating_multiply(pushes, count);
    }
    if (pushes > Hostlist::kMaxRanges - pushed_ranges_) fail(position, too_many_ranges());
  }

  static std::string too_many_ranges() {
    return "expected at most " + std::to_string(Hostlist::kMaxRanges) + " ranges in the list";
  }

  static std::string build_prefix(const std::vector<std::string_view>& literals,
                                  const std::vector<Dial>& dials) {
    std::string prefix(literals[0]);
    for (std::size_t k = 0; k < dials.size(); ++k) {
      append_number(prefix, dials[k].value, (*dials[k].ranges)[dials[k].range].width);
      prefix += literals[k + 1];
    }
    return prefix;
  }

  void push(Range range, std::size_t position) {
    if (++pushed_ranges_ > Hostlist::kMaxRanges) fail(position, too_many_ranges());
    prefix_bytes_ += range.prefix.size();
    if (prefix_bytes_ > kMaxPrefixBytes) {
      fail(position, "expected at most " + std::to_string(kMaxPrefixBytes) +
                         " bytes of host name prefixes in the expanded list");
    }
    list_.push_range(std::move(range));
    if (list_.size() > kMaxHosts) {
      fail(position, "expected at most " + std::to_string(kMaxHosts) + " hosts in the list");
    }
  }

  std::string_view text_;
  ForwardFinder opens_;
  ForwardFinder closes_;
  Hostlist list_;
  std::size_t pushed_ranges_ = 0;
  std::size_t prefix_bytes_ = 0;
};

Hostlist Hostlist::parse(std::string_view text) {
  return Parser(text).run();
}

void Hostlist::push_host(std::string_view host) {
  push_range(Parser::plain_range(host, 0, host));
}

}  // namespace primus

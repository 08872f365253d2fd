#include "primus/ckpt/layout.hpp"

#include "primus/common/error.hpp"

namespace primus::ckpt {
namespace {

constexpr std::string_view kStepPrefix = "step-";
constexpr std::string_view kTemporaryPrefix = ".tmp-step-";
constexpr std::string_view kRankPrefix = "rank-";
constexpr std::string_view kRankSuffix = ".h5";
constexpr std::size_t kStepDigits = 12;
constexpr std::size_t kRankDigits = 5;

std::string padded(std::uint64_t value, std::size_t digits) {
  std::string text = std::to_string(value);
  if (text.size() < digits) text.insert(0, digits - text.size(), '0');
  return text;
}

std::optional<std::uint64_t> digits_only(std::string_view text, std::size_t digits) {
  if (text.size() != digits) return std::nullopt;
  std::uint64_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return value;
}

std::optional<std::int64_t> parse_prefixed_step(std::string_view name, std::string_view prefix) {
  if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
  const auto value = digits_only(name.substr(prefix.size()), kStepDigits);
  if (!value) return std::nullopt;
  return static_cast<std::int64_t>(*value);
}

void check_step(std::int64_t step) {
  if (step < 0 || step > kMaxStep) {
    throw Error("checkpoint step " + std::to_string(step) + " is outside 0.." +
                std::to_string(kMaxStep));
  }
}

}  // namespace

std::string step_dir_name(std::int64_t step) {
  check_step(step);
  return std::string(kStepPrefix) + padded(static_cast<std::uint64_t>(step), kStepDigits);
}

std::string temporary_dir_name(std::int64_t step) {
  check_step(step);
  return std::string(kTemporaryPrefix) + padded(static_cast<std::uint64_t>(step), kStepDigits);
}

std::string rank_file_name(int rank) {
  if (rank < 0 || rank >= kMaxWorldSize) {
    throw Error("rank " + std::to_string(rank) + " is outside 0.." +
                std::to_string(kMaxWorldSize - 1));
  }
  return std::string(kRankPrefix) + padded(static_cast<std::uint64_t>(rank), kRankDigits) +
         std::string(kRankSuffix);
}

std::optional<std::int64_t> parse_step_dir_name(std::string_view name) {
  return parse_prefixed_step(name, kStepPrefix);
}

std::optional<std::int64_t> parse_temporary_dir_name(std::string_view name) {
  return parse_prefixed_step(name, kTemporaryPrefix);
}

std::optional<int> parse_rank_file_name(std::string_view name) {
  if (name.size() != kRankPrefix.size() + kRankDigits + kRankSuffix.size() ||
      name.substr(0, kRankPrefix.size()) != kRankPrefix ||
      name.substr(name.size() - kRankSuffix.size()) != kRankSuffix) {
    return std::nullopt;
  }
  const auto value = digits_only(name.substr(kRankPrefix.size(), kRankDigits), kRankDigits);
  if (!value) return std::nullopt;
  return static_cast<int>(*value);
}

std::string dataset_name(std::string_view tensor_name) {
  if (tensor_name.empty() || tensor_name == "." || tensor_name == "..") {
    throw Error("tensor name '" + std::string(tensor_name) +
                "': expected a non-empty name other "
                "than '.' and '..'");
  }
  std::string out;
  out.reserve(tensor_name.size());
  for (const char c : tensor_name) {
    if (c == '\0') throw Error("tensor name contains a NUL character");
    if (c == '%') {
      out += "%25";
    } else if (c == '/') {
      out += "%2F";
    } else {
      out += c;
    }
  }
  return out;
}

std::string tensor_name_of_dataset(std::string_view dataset) {
  std::string out;
  for (std::size_t i = 0; i < dataset.size(); ++i) {
    if (dataset[i] == '%' && dataset.substr(i, 3) == "%25") {
      out += '%';
      i += 2;
    } else if (dataset[i] == '%' && dataset.substr(i, 3) == "%2F") {
      out += '/';
      i += 2;
    } else {
      out += dataset[i];
    }
  }
  return out;
}

}  // namespace primus::ckpt

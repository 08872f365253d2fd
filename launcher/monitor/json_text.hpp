// JSON text written straight into a string, for the files the launcher rewrites every second
// (status.json, throughput.jsonl): building them as nlohmann::ordered_json and dumping it was a
// fifth of the launcher's CPU at 1,024 heartbeating ranks. Pure. The output is what
// nlohmann::json::dump() writes for the same values, but for the digits of a double: the
// shortest that read back as the same value (std::to_chars), with ".0" after a whole number so
// that it stays a float; NaN and infinities are null, as there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace primus::launch::json_text {

// A JSON string (primus::append_json_string: escaped, invalid UTF-8 replaced).
void append_string(std::string& out, std::string_view value);
void append_number(std::string& out, double value);
void append_number(std::string& out, std::uint64_t value);
// A double written with 6 significant digits (status.json's measurements: small, and its diffs
// read well), ".0" after a whole number, null for NaN and infinities.
struct Rounded {
  double value;
};
void append_number(std::string& out, Rounded value);

// One object, compact ({"a":1,"b":"x"}), its members appended in order.
class Object {
 public:
  explicit Object(std::string& out) : out_(out) { out_.push_back('{'); }
  Object(const Object&) = delete;
  Object& operator=(const Object&) = delete;
  ~Object() { out_.push_back('}'); }

  void field(const char* key, std::string_view value) {
    name(key);
    append_string(out_, value);
  }
  void field(const char* key, const char* value) { field(key, std::string_view(value)); }
  void field(const char* key, const std::string& value) { field(key, std::string_view(value)); }
  void field(const char* key, double value) {
    name(key);
    append_number(out_, value);
  }
  void field(const char* key, Rounded value) {
    name(key);
    append_number(out_, value);
  }
  void field(const char* key, std::uint64_t value) {
    name(key);
    append_number(out_, value);
  }
  void field(const char* key, std::uint32_t value) { field(key, std::uint64_t{value}); }
  void field(const char* key, bool value) {
    name(key);
    out_ += value ? "true" : "false";
  }
  // Only when it holds a value.
  template <typename T>
  void field(const char* key, const std::optional<T>& value) {
    if (value) field(key, *value);
  }
  // The key; the caller appends the value's text.
  void name(const char* key) {
    if (!first_) out_.push_back(',');
    first_ = false;
    append_string(out_, key);
    out_.push_back(':');
  }

 private:
  std::string& out_;
  bool first_ = true;
};

}  // namespace primus::launch::json_text

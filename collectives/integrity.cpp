#include "integrity.hpp"

#include "primus/common/error.hpp"
#include "sha256.hpp"

namespace primus::coll::integrity {
namespace {

constexpr std::size_t kIvBytes = 12;

EngineFactory installed_engine = nullptr;

}  // namespace

void set_engine(EngineFactory factory) noexcept {
  installed_engine = factory;
}

Mac::Mac(const Key& key) {
  if (installed_engine == nullptr) {
    throw Error(
        "--primus-coll-integrity: this program has no MAC engine (it is in libprimus-coll)");
  }
  engine_ = installed_engine(key);
}

Mac::~Mac() = default;
Mac::Mac(Mac&&) noexcept = default;
Mac& Mac::operator=(Mac&&) noexcept = default;

Tag Mac::compute(const void* frame, std::size_t bytes) {
  // IV: the sequence number, little-endian, then four zero bytes. A key serves one direction
  // of one connection, so (key, IV) never repeats.
  std::uint8_t iv[kIvBytes] = {};
  for (int i = 0; i < 8; ++i)
    iv[i] = static_cast<std::uint8_t>(sequence_ >> (8 * i));
  ++sequence_;
  return engine_->tag(iv, frame, bytes);
}

Tag Mac::tag(const void* frame, std::size_t bytes) {
  return compute(frame, bytes);
}

bool Mac::check(const void* frame, std::size_t bytes, const Tag& tag) {
  const Tag expected = compute(frame, bytes);
  return equal_in_constant_time(expected.data(), tag.data(), tag.size());
}

}  // namespace primus::coll::integrity

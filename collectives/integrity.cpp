#include "integrity.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <climits>
#include <cstring>

#include "primus/common/error.hpp"

namespace primus::coll::integrity {

// AES-256-GCM with its key schedule made once; each frame only sets a new IV.
struct Mac::Context {
  struct Free {
    void operator()(EVP_CIPHER_CTX* ctx) const { EVP_CIPHER_CTX_free(ctx); }
  };
  std::unique_ptr<EVP_CIPHER_CTX, Free> ctx;
};

namespace {

constexpr std::size_t kIvBytes = 12;

[[noreturn]] void openssl_failed(const char* what) {
  throw Error(std::string("AES-256-GCM (OpenSSL): ") + what + " failed");
}

}  // namespace

Mac::Mac(const Key& key) : context_(std::make_unique<Context>()) {
  context_->ctx.reset(EVP_CIPHER_CTX_new());
  if (!context_->ctx) openssl_failed("EVP_CIPHER_CTX_new");
  if (EVP_EncryptInit_ex(context_->ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(), nullptr) !=
      1) {
    openssl_failed("setting the key");
  }
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
  EVP_CIPHER_CTX* ctx = context_->ctx.get();
  if (EVP_EncryptInit_ex(ctx, nullptr, nullptr, nullptr, iv) != 1) openssl_failed("setting the IV");
  const auto* at = static_cast<const unsigned char*>(frame);
  while (bytes > 0) {
    const int piece = bytes > INT_MAX ? INT_MAX : static_cast<int>(bytes);
    int out = 0;
    // Additional data only (no output buffer): GHASH over the frame.
    if (EVP_EncryptUpdate(ctx, nullptr, &out, at, piece) != 1) openssl_failed("hashing a frame");
    at += piece;
    bytes -= static_cast<std::size_t>(piece);
  }
  int out = 0;
  unsigned char none[1];
  if (EVP_EncryptFinal_ex(ctx, none, &out) != 1) openssl_failed("finishing a frame");
  Tag result{};
  if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, static_cast<int>(result.size()),
                          result.data()) != 1) {
    openssl_failed("reading the tag");
  }
  return result;
}

Tag Mac::tag(const void* frame, std::size_t bytes) {
  return compute(frame, bytes);
}

bool Mac::check(const void* frame, std::size_t bytes, const Tag& tag) {
  const Tag expected = compute(frame, bytes);
  return CRYPTO_memcmp(expected.data(), tag.data(), tag.size()) == 0;
}

}  // namespace primus::coll::integrity

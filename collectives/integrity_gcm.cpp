// The integrity MAC's engine: GMAC, AES-256-GCM from OpenSSL over the frame as additional data
// (integrity.hpp). Part of libprimus-coll only; it installs itself when the library loads.
#include <openssl/evp.h>

#include <climits>
#include <string>

#include "integrity.hpp"
#include "primus/common/error.hpp"

namespace primus::coll::integrity {
namespace {

[[noreturn]] void openssl_failed(const char* what) {
  throw Error(std::string("AES-256-GCM (OpenSSL): ") + what + " failed");
}

// AES-256-GCM with its key schedule made once; each frame only sets a new IV.
class GcmEngine final : public Engine {
 public:
  explicit GcmEngine(const Key& key) : ctx_(EVP_CIPHER_CTX_new()) {
    if (!ctx_) openssl_failed("EVP_CIPHER_CTX_new");
    if (EVP_EncryptInit_ex(ctx_.get(), EVP_aes_256_gcm(), nullptr, key.data(), nullptr) != 1) {
      openssl_failed("setting the key");
    }
  }

  Tag tag(const std::uint8_t* iv, const void* frame, std::size_t bytes) override {
    EVP_CIPHER_CTX* ctx = ctx_.get();
    if (EVP_EncryptInit_ex(ctx, nullptr, nullptr, nullptr, iv) != 1) {
      openssl_failed("setting the IV");
    }
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

 private:
  struct Free {
    void operator()(EVP_CIPHER_CTX* ctx) const { EVP_CIPHER_CTX_free(ctx); }
  };
  std::unique_ptr<EVP_CIPHER_CTX, Free> ctx_;
};

std::unique_ptr<Engine> make_gcm_engine(const Key& key) {
  return std::make_unique<GcmEngine>(key);
}

// Installed when libprimus-coll loads.
[[maybe_unused]] const bool kInstalled = (set_engine(&make_gcm_engine), true);

}  // namespace
}  // namespace primus::coll::integrity

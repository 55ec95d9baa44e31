// HMAC-SHA256 through OpenSSL 3's EVP_MAC (the HMAC_* functions are deprecated).
#include "sandbox/jupyter/message_signer.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <array>
#include <cassert>
#include <memory>

namespace envforge::sandbox::jupyter {
namespace {

struct MacDeleter {
  void operator()(EVP_MAC* mac) const { EVP_MAC_free(mac); }
  void operator()(EVP_MAC_CTX* context) const { EVP_MAC_CTX_free(context); }
};

// The algorithm object is immutable and shared (EVP_MAC_fetch is comparatively slow).
EVP_MAC* HmacAlgorithm() {
  static const std::unique_ptr<EVP_MAC, MacDeleter> mac(EVP_MAC_fetch(nullptr, "HMAC", nullptr));
  return mac.get();
}

std::string Hex(const unsigned char* bytes, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(size * 2, '0');
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return out;
}

}  // namespace

std::string MessageSigner::Sign(std::span<const std::string_view> parts) const {
  if (key_.empty()) return "";
  std::unique_ptr<EVP_MAC_CTX, MacDeleter> context(EVP_MAC_CTX_new(HmacAlgorithm()));
  char digest_name[] = "SHA256";
  const std::array<OSSL_PARAM, 2> params = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest_name, 0),
                                            OSSL_PARAM_construct_end()};
  bool ok = context && EVP_MAC_init(context.get(), reinterpret_cast<const unsigned char*>(key_.data()), key_.size(),
                                    params.data()) == 1;
  for (std::string_view part : parts) {
    ok = ok && EVP_MAC_update(context.get(), reinterpret_cast<const unsigned char*>(part.data()), part.size()) == 1;
  }
  std::array<unsigned char, 32> digest{};
  size_t length = 0;
  ok = ok && EVP_MAC_final(context.get(), digest.data(), &length, digest.size()) == 1;
  // Only an OpenSSL without HMAC or SHA-256 fails here; a signature that verifies nothing is
  // then the safe answer (every message is refused).
  assert(ok && length == digest.size());
  if (!ok) return "!";
  return Hex(digest.data(), length);
}

bool MessageSigner::Verify(std::span<const std::string_view> parts, std::string_view signature) const {
  const std::string expected = Sign(parts);
  if (expected.size() != signature.size()) return false;
  return CRYPTO_memcmp(expected.data(), signature.data(), expected.size()) == 0;
}

}  // namespace envforge::sandbox::jupyter

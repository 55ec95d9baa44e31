// HMAC-SHA256 signatures of Jupyter messages (messaging spec 5.x, "signature_scheme":
// "hmac-sha256"): the hex digest, keyed by the connection file's `key`, over the serialized
// header, parent header, metadata and content, in that order.
//
// Contract: an empty key disables signing (Sign returns "", Verify accepts only ""), as the spec
// says. Verify compares in constant time. Thread safety: a signer is immutable after
// construction; Sign and Verify may be called from any number of threads.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace envforge::sandbox::jupyter {

class MessageSigner {
 public:
  explicit MessageSigner(std::string key) : key_(std::move(key)) {}

  // Lower-case hex HMAC-SHA256 of the parts concatenated; "" when the key is empty.
  std::string Sign(std::span<const std::string_view> parts) const;
  // True when `signature` is the signature of `parts` (constant-time comparison).
  bool Verify(std::span<const std::string_view> parts, std::string_view signature) const;

  const std::string& key() const { return key_; }

 private:
  std::string key_;
};

}  // namespace envforge::sandbox::jupyter

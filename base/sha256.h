// SHA-256 (OpenSSL EVP). Used for content hashes of environments, tasks and verifiers.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace envforge {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(std::string_view bytes);
  // Feeds a length prefix then the bytes, so that ("ab","c") and ("a","bc") hash differently.
  void UpdateField(std::string_view bytes);
  // Lower-case hex of the digest; the object must not be updated afterwards.
  std::string FinishHex();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string Sha256Hex(std::string_view bytes);

}  // namespace envforge

// XXH3-128 content hashes: weight identity in the weight table and the container checksum.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace ctxkit {

struct Hash128 {
  std::array<uint8_t, 16> bytes{};  // canonical (big-endian) XXH128 representation

  std::string toHex() const;
  friend bool operator==(const Hash128&, const Hash128&) = default;
  friend auto operator<=>(const Hash128&, const Hash128&) = default;
};

Hash128 hash128(std::span<const std::byte> data);

// Incremental hashing for data fed in pieces (header, then tables).
class Hasher128 {
public:
  Hasher128();
  ~Hasher128();
  Hasher128(const Hasher128&) = delete;
  Hasher128& operator=(const Hasher128&) = delete;
  void update(std::span<const std::byte> data);
  Hash128 digest() const;

private:
  void* state_;
};

}  // namespace ctxkit

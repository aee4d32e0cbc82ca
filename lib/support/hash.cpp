// XXH3-128 through the system libxxhash.
#include "support/hash.h"

#include <xxhash.h>

#include <new>

namespace ctxkit {

namespace {
Hash128 fromCanonical(XXH128_hash_t h) {
  XXH128_canonical_t canon;
  XXH128_canonicalFromHash(&canon, h);
  Hash128 out;
  for (size_t i = 0; i < 16; ++i) out.bytes[i] = canon.digest[i];
  return out;
}
}  // namespace

std::string Hash128::toHex() const {
  static const char* digits = "0123456789abcdef";
  std::string s;
  s.reserve(32);
  for (uint8_t b : bytes) {
    s.push_back(digits[b >> 4]);
    s.push_back(digits[b & 15]);
  }
  return s;
}

Hash128 hash128(std::span<const std::byte> data) { return fromCanonical(XXH3_128bits(data.data(), data.size())); }

Hasher128::Hasher128() : state_(XXH3_createState()) {
  if (!state_) throw std::bad_alloc();
  XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_));
}
Hasher128::~Hasher128() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }
void Hasher128::update(std::span<const std::byte> data) {
  XXH3_128bits_update(static_cast<XXH3_state_t*>(state_), data.data(), data.size());
}
Hash128 Hasher128::digest() const { return fromCanonical(XXH3_128bits_digest(static_cast<XXH3_state_t*>(state_))); }

}  // namespace ctxkit

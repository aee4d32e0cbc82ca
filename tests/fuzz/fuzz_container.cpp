// libFuzzer target for the container reader: any bytes must be rejected cleanly or open and verify.
#include "format/container.h"
#include "format/layout.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

namespace {

void openAndUse(std::shared_ptr<std::vector<std::byte>> owned) {
  std::span<const std::byte> bytes(*owned);
  auto view = ctxkit::format::ContainerView::open(bytes, owned, "fuzz.bin");
  if (!view.isOk()) return;
  (void)view->verify();
  for (size_t i = 0; i < view->weights().size(); ++i) (void)view->weightTensor(i);
  for (size_t i = 0; i < view->graphs().size(); ++i) (void)view->programBytes(i);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Owned buffers, so that each view's owner keeps exactly these bytes alive.
  auto owned = std::make_shared<std::vector<std::byte>>(size);
  if (size > 0) std::memcpy(owned->data(), data, size);
  openAndUse(owned);
  // Random mutations almost never keep the checksum right; re-sealing lets the fuzzer reach the table rules.
  auto sealed = std::make_shared<std::vector<std::byte>>(*owned);
  if (ctxkit::format::layout::sealChecksum(*sealed, "fuzz.bin").isOk()) openAndUse(sealed);
  return 0;
}

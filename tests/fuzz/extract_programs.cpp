// Seed maker for fuzz_program: writes program n of each context binary STEM.bin to OUT_DIR/STEM_n.prog.
#include "format/container.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s OUT_DIR FILE.bin...\n", argv[0]);
    return 2;
  }
  std::filesystem::path out = argv[1];
  std::filesystem::create_directories(out);
  int written = 0;
  for (int i = 2; i < argc; ++i) {
    std::string stem = std::filesystem::path(argv[i]).stem().string();
    auto view = ctxkit::format::ContainerView::openFile(argv[i]);
    if (!view.isOk()) {
      std::fprintf(stderr, "extract_programs: %s\n", view.error().message().c_str());
      return 1;
    }
    for (size_t g = 0; g < view->graphs().size(); ++g) {
      auto bytes = view->programBytes(g);
      std::ofstream file(out / (stem + "_" + std::to_string(g) + ".prog"), std::ios::binary);
      file.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
      ++written;
    }
  }
  std::printf("extract_programs: %d programs\n", written);
  return written > 0 ? 0 : 1;
}

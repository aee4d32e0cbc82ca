// Support tests' scratch folder and file helpers.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string_view>

namespace ctxkit::testing {

// A fresh folder for one test, removed at the end.
class Scratch {
public:
  Scratch() {
    std::random_device rd;
    root_ = std::filesystem::temp_directory_path() / fmt::format("ctxkit_support_{}_{:08x}", ::getpid(), rd());
    std::filesystem::create_directories(root_);
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  const std::filesystem::path& root() const { return root_; }

private:
  std::filesystem::path root_;
};

inline void writeText(const std::filesystem::path& p, std::string_view text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
}

}  // namespace ctxkit::testing

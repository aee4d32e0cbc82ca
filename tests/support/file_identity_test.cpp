// FileIdentity: which file (device, inode) and which state of it (size, modification time) a path names now.
#include "support/file_identity.h"
#include "support/file_io.h"

#include "scratch.h"

#include <catch2/catch.hpp>

#include <chrono>

using namespace ctxkit;
using ctxkit::testing::Scratch;
using ctxkit::testing::writeText;
namespace fs = std::filesystem;

namespace {

FileIdentity identityOf(const fs::path& p) {
  auto id = identifyFile(p);
  INFO((id ? std::string() : id.error().message()));
  REQUIRE(id);
  return *id;
}

}  // namespace

TEST_CASE("a file's identity follows the file, not its name", "[support][identity]") {
  Scratch f;
  const fs::path a = f.root() / "a.bin";
  writeText(a, "first");
  const FileIdentity first = identityOf(a);
  CHECK(first.size == 5);
  CHECK(first.path == a);
  CHECK(identityOf(a) == first);

  SECTION("a hard link is the same file in the same state") {
    fs::create_hard_link(a, f.root() / "link.bin");
    const FileIdentity link = identityOf(f.root() / "link.bin");
    CHECK(link == first);
    CHECK(FileIdentityHash{}(link) == FileIdentityHash{}(first));
  }
  SECTION("a name replaced by rename is another file, even with the same bytes and time") {
    writeText(f.root() / "tmp", "first");
    fs::last_write_time(f.root() / "tmp", fs::last_write_time(a));
    fs::rename(f.root() / "tmp", a);
    const FileIdentity now = identityOf(a);
    CHECK(!now.sameFile(first));
    CHECK(!(now == first));
  }
  SECTION("a file rewritten in place is the same file in another state") {
    writeText(a, "second!");
    const FileIdentity longer = identityOf(a);
    CHECK(longer.sameFile(first));
    CHECK(!(longer == first));
    writeText(a, "first");
    fs::last_write_time(a, fs::last_write_time(a) + std::chrono::seconds(3));
    const FileIdentity later = identityOf(a);
    CHECK(later.sameFile(first));
    CHECK(later.size == first.size);
    CHECK(!(later == first));
  }
  SECTION("a mapping records the identity of what it opened") {
    auto mapped = MappedFile::open(a);
    REQUIRE(mapped);
    CHECK((*mapped)->identity() == first);
    writeText(f.root() / "tmp", "other");
    fs::rename(f.root() / "tmp", a);
    CHECK((*mapped)->identity() == first);  // the mapping is still of the file it opened
    CHECK(!(identityOf(a) == first));
  }
}

TEST_CASE("a missing file has no identity, and the error names it", "[support][identity]") {
  Scratch f;
  auto id = identifyFile(f.root() / "missing.bin");
  REQUIRE(!id);
  CHECK(id.error().code() == ErrorCode::NotFound);
  CHECK_THAT(id.error().message(), Catch::Contains("missing.bin"));
}

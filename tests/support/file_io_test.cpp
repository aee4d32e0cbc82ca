// Unit tests for file_io's defences: path confinement through symbolic links (docs/bad-input.md#paths, rule 11) and the
// atomic writer's removal of temporary files that killed processes left behind.
#include "support/file_io.h"

#include "scratch.h"

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <set>

using namespace ctxkit;
using ctxkit::testing::Scratch;
using ctxkit::testing::writeText;
namespace fs = std::filesystem;

namespace {

// A file as AtomicFileWriter creates its temporaries: with the sticky bit, the mark of a writer's own file.
void writeMarked(const fs::path& p, std::string_view text) {
  writeText(p, text);
  fs::permissions(p, fs::perms::sticky_bit, fs::perm_options::add);
}

std::set<std::string> namesIn(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

// A pid that belonged to a process of ours that has exited and been reaped.
pid_t deadPid() {
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(::kill(child, 0) != 0);
  return child;
}

// A live child that sleeps until it is killed.
struct Sleeper {
  pid_t pid = ::fork();
  Sleeper() {
    if (pid == 0) {
      ::pause();
      ::_exit(0);
    }
    REQUIRE(pid > 0);
  }
  ~Sleeper() {
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
};

// Sets up: model/ with real.bin and sub/inner.bin, outside/secret.bin next to it.
struct Layout {
  Scratch scratch;
  fs::path model = scratch.root() / "model";
  fs::path outside = scratch.root() / "outside";
  Layout() {
    fs::create_directories(model / "sub");
    fs::create_directories(outside);
    writeText(model / "real.bin", "inside");
    writeText(model / "sub" / "inner.bin", "inner");
    writeText(outside / "secret.bin", "secret");
  }
};

void expectEscape(const fs::path& folder, std::string_view relative) {
  auto r = resolveInside(folder, relative);
  INFO("path " << relative);
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == ErrorCode::InvalidGraph);
  CHECK_THAT(r.error().message(), Catch::Contains("escapes the model folder") && Catch::Contains("symbolic link") &&
                                      Catch::Contains(std::string(relative)));
}

}  // namespace

TEST_CASE("a symlinked file that points out of the folder is refused like ..", "[support][symlink]") {
  Layout l;
  fs::create_symlink(l.outside / "secret.bin", l.model / "abs.bin");
  fs::create_symlink("../outside/secret.bin", l.model / "rel.bin");
  expectEscape(l.model, "abs.bin");
  expectEscape(l.model, "rel.bin");
  expectEscape(l.model, "./rel.bin");
  // The message says where the link leads.
  auto r = resolveInside(l.model, "abs.bin");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message(), Catch::Contains("secret.bin"));
}

TEST_CASE("a symlinked subfolder that points out of the folder is refused", "[support][symlink]") {
  Layout l;
  fs::create_directory_symlink(l.outside, l.model / "linked");
  expectEscape(l.model, "linked/secret.bin");
  expectEscape(l.model, "linked/not_there_yet.bin");  // what open() or a writer would reach is outside
  expectEscape(l.model, "sub/../linked/secret.bin");
}

TEST_CASE("a dangling symlink that points out is refused, a chain of links is followed", "[support][symlink]") {
  Layout l;
  fs::create_symlink(l.outside / "future.bin", l.model / "dangling.bin");
  expectEscape(l.model, "dangling.bin");
  // link1 -> link2 -> outside
  fs::create_symlink("link2.bin", l.model / "link1.bin");
  fs::create_symlink("../outside/secret.bin", l.model / "link2.bin");
  expectEscape(l.model, "link1.bin");
}

TEST_CASE("a symlink loop is an error, not a hang", "[support][symlink]") {
  Layout l;
  fs::create_symlink("loop_b.bin", l.model / "loop_a.bin");
  fs::create_symlink("loop_a.bin", l.model / "loop_b.bin");
  auto r = resolveInside(l.model, "loop_a.bin");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message(), Catch::Contains("symbolic links"));
}

TEST_CASE("symlinks that resolve inside the folder are fine", "[support][symlink]") {
  Layout l;
  fs::create_symlink("real.bin", l.model / "alias.bin");
  fs::create_symlink(l.model / "sub" / "inner.bin", l.model / "abs_alias.bin");
  fs::create_directory_symlink("sub", l.model / "sub_alias");
  // Out of the folder and straight back in: the resolved path is inside.
  fs::create_symlink("../model/real.bin", l.model / "round_trip.bin");
  for (std::string_view rel : {"alias.bin", "abs_alias.bin", "sub_alias/inner.bin", "round_trip.bin", "real.bin"}) {
    INFO(rel);
    auto r = resolveInside(l.model, rel);
    REQUIRE(r);
    CHECK(*r == (l.model / rel).lexically_normal());  // the lexical path, as before
    CHECK(readFile(*r).isOk());
  }
}

TEST_CASE("a model folder that is itself a symlink still confines its paths", "[support][symlink]") {
  Layout l;
  fs::path linkedModel = l.scratch.root() / "model_link";
  fs::create_directory_symlink(l.model, linkedModel);
  REQUIRE(resolveInside(linkedModel, "real.bin"));
  REQUIRE(resolveInside(linkedModel, "sub/inner.bin"));
  CHECK_FALSE(resolveInside(linkedModel, "../outside/secret.bin"));
  fs::create_symlink(l.outside / "secret.bin", l.model / "abs.bin");
  expectEscape(linkedModel, "abs.bin");
}

TEST_CASE("the temporary-name pattern is matched exactly", "[support][atomic]") {
  CHECK(atomicTempOwner(".out.bin.tmp123-0123abcd", "out.bin") == 123);
  CHECK(atomicTempOwner(".out.bin.tmp4194304-ffffffff", "out.bin") == 4194304);
  for (std::string_view name :
       {"out.bin.tmp123-0123abcd", ".out.bin.tmp123-0123abc", ".out.bin.tmp123-0123abcde", ".out.bin.tmp123-0123ABCD",
        ".out.bin.tmp0123-0123abcd", ".out.bin.tmp-0123abcd", ".out.bin.tmp12a-0123abcd", ".out.bin.tmp123_0123abcd",
        ".out.bin.tmp99999999999-0123abcd", ".other.bin.tmp123-0123abcd", ".out.bin.tmp0123abcd", ".out.bin",
        ".out.bin.tmp123-0123abcd.bak", ".out.binx.tmp123-0123abcd", ""}) {
    INFO(name);
    CHECK_FALSE(atomicTempOwner(name, "out.bin").has_value());
  }
}

TEST_CASE("the writer's temporary name carries its pid", "[support][atomic]") {
  Scratch s;
  auto w = AtomicFileWriter::create(s.root() / "out.bin");
  REQUIRE(w);
  CHECK(atomicTempOwner((*w)->tempPath().filename().string(), "out.bin") == ::getpid());
}

TEST_CASE("a new writer removes temporaries of dead processes for the same final name only", "[support][atomic]") {
  Scratch s;
  const fs::path dir = s.root();
  const pid_t dead = deadPid();
  Sleeper alive;
  const std::string staleName = fmt::format(".out.bin.tmp{}-0123abcd", dead);
  const std::set<std::string> kept = {
      fmt::format(".out.bin.tmp{}-00000001", alive.pid),       // a live process is still writing it
      fmt::format(".out.bin.tmp{}-00000002", ::getpid()),      // this process: maybe another writer
      fmt::format(".other.bin.tmp{}-0123abcd", dead),          // another final name
      fmt::format(".out.bin.tmp{}-0123abcd.keep", dead),       // not the pattern exactly
      fmt::format("out.bin.tmp{}-0123abcd", dead),             // no leading dot
      fmt::format(".out.bin.tmp{}-0123ABCD", dead),            // upper-case hex is not ours
      "out.bin.tmp",
  };
  writeMarked(dir / staleName, "stale");
  for (const auto& name : kept) writeMarked(dir / name, "keep");
  // Names that match but are not regular files are left alone too.
  const std::string dirName = fmt::format(".out.bin.tmp{}-0000000a", dead);
  const std::string linkName = fmt::format(".out.bin.tmp{}-0000000b", dead);
  fs::create_directory(dir / dirName);
  fs::create_symlink("out.bin.tmp", dir / linkName);

  auto w = AtomicFileWriter::create(dir / "out.bin");
  REQUIRE(w);
  const std::string ours = (*w)->tempPath().filename().string();
  std::set<std::string> expected = kept;
  expected.insert({dirName, linkName, ours});
  CHECK(namesIn(dir) == expected);
  REQUIRE((*w)->write(std::string_view("done")));
  REQUIRE((*w)->commit());
  expected.erase(ours);
  expected.insert("out.bin");
  CHECK(namesIn(dir) == expected);
}

TEST_CASE("a user's file with a temporary's name is never removed", "[support][atomic]") {
  Scratch s;
  const pid_t dead = deadPid();
  const std::string name = fmt::format(".out.bin.tmp{}-0123abcd", dead);
  writeText(s.root() / name, "the user's");
  REQUIRE(writeFileAtomically(s.root() / "out.bin", std::string_view("new")));
  CHECK(namesIn(s.root()) == std::set<std::string>{name, "out.bin"});
  CHECK(*readFile(s.root() / name) == "the user's");
  // The writer's own mark never reaches a final file.
  CHECK((fs::status(s.root() / "out.bin").permissions() & fs::perms::sticky_bit) == fs::perms::none);
}

TEST_CASE("temporary names stay within 255 bytes for long final names", "[support][atomic]") {
  Scratch s;
  for (size_t length : {size_t(200), size_t(231), size_t(232), size_t(240), size_t(255)}) {
    INFO(length);
    const std::string finalName(length, 'n');
    auto w = AtomicFileWriter::create(s.root() / finalName);
    REQUIRE(w);
    const std::string temp = (*w)->tempPath().filename().string();
    CHECK(temp.size() <= 255);
    CHECK(atomicTempOwner(temp, finalName) == ::getpid());
    CHECK_FALSE(atomicTempOwner(temp, std::string(length - 1, 'n')).has_value());
    REQUIRE((*w)->write(std::string_view("long")));
    REQUIRE((*w)->commit());
    CHECK(*readFile(s.root() / finalName) == "long");
  }
  // Names cut for length keep whole UTF-8 sequences.
  std::string accented;
  while (accented.size() < 250) accented += "Ã©";
  auto w = AtomicFileWriter::create(s.root() / accented);
  REQUIRE(w);
  const std::string temp = (*w)->tempPath().filename().string();
  CHECK(temp.size() <= 255);
  const size_t cut = temp.find('~');
  REQUIRE(cut != std::string::npos);
  CHECK(cut % 2 == 1);  // the leading dot, then whole two-byte characters
}

TEST_CASE("a writer killed mid-write leaves a temporary that the next writer removes", "[support][atomic]") {
  Scratch s;
  const fs::path target = s.root() / "out.bin";
  writeText(target, "old");
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  pid_t child = ::fork();
  if (child == 0) {
    auto w = AtomicFileWriter::create(target);
    if (!w || !(*w)->write(std::string_view("partial"))) ::_exit(3);
    char c = 'x';
    (void)!::write(ready[1], &c, 1);
    ::pause();  // killed here, mid-write: no destructor runs
    ::_exit(0);
  }
  REQUIRE(child > 0);
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  ::close(ready[0]);
  ::close(ready[1]);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(WIFSIGNALED(status));

  auto left = namesIn(s.root());
  REQUIRE(left.size() == 2);  // out.bin, untouched, and the killed writer's temporary
  CHECK(*readFile(target) == "old");
  std::string temp = *std::find_if(left.begin(), left.end(), [](const std::string& n) { return n != "out.bin"; });
  CHECK(atomicTempOwner(temp, "out.bin") == child);

  REQUIRE(writeFileAtomically(target, std::string_view("new")));
  CHECK(namesIn(s.root()) == std::set<std::string>{"out.bin"});
  CHECK(*readFile(target) == "new");
}

TEST_CASE("a writer patches bytes it wrote, reserves without growing, and writes back large files", "[support][atomic]") {
  Scratch s;
  const fs::path path = s.root() / "patched.bin";
  auto w = AtomicFileWriter::create(path);
  REQUIRE(w);
  const uint64_t size = (uint64_t{40} << 20) + 5;  // over two stretches the writer starts writeback for
  (*w)->reserve(size + 4096);
  REQUIRE((*w)->writeZeros(16));
  std::vector<std::byte> chunk(1 << 20, std::byte{7});
  while ((*w)->bytesWritten() + chunk.size() <= size) REQUIRE((*w)->write(chunk));
  REQUIRE((*w)->writeZeros(size - (*w)->bytesWritten()));
  auto bytesOf = [](std::string_view t) { return std::as_bytes(std::span(t.data(), t.size())); };
  REQUIRE((*w)->writeAt(0, bytesOf("head")));
  REQUIRE((*w)->writeAt(size - 4, bytesOf("tail")));
  CHECK_FALSE((*w)->writeAt(size - 3, bytesOf("tail")));  // past the end written
  REQUIRE((*w)->commit());
  CHECK(fs::file_size(path) == size);  // reserved space is not file size
  auto text = readFile(path);
  REQUIRE(text);
  CHECK(text->substr(0, 6) == std::string("head\0\0", 6));
  CHECK(text->substr(16, 2) == "\x07\x07");
  CHECK(text->substr(text->size() - 4) == "tail");
}

// util/file.hpp: whole-file reads with a size limit, atomic replacement.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/test_util.hpp"
#include "superpoint_rt/errors.hpp"
#include "util/file.hpp"

namespace {

namespace fs = std::filesystem;
namespace util = superpoint_rt::util;
using superpoint_rt::Error;
using superpoint_rt::ErrorKind;

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

template <class F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no Error thrown";
  return Error(ErrorKind::Internal, "");
}

std::size_t entries(const std::string& dir) {
  return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

TEST(ReadFile, ReadsEverythingUpToTheLimit) {
  sprt_test::TempDir d;
  write(d.file("a"), "hello");
  EXPECT_EQ(util::read_text_file(d.file("a"), 5), "hello");
  EXPECT_EQ(util::read_file(d.file("a"), util::kNoSizeLimit).size(), 5u);
  write(d.file("empty"), "");
  EXPECT_TRUE(util::read_file(d.file("empty"), 0).empty());
}

TEST(ReadFile, ErrorsNameThePathAndTheLimit) {
  sprt_test::TempDir d;
  write(d.file("a"), "hello");
  const Error big = error_of([&] { util::read_file(d.file("a"), 4); });
  EXPECT_EQ(big.kind(), ErrorKind::TooLarge);
  EXPECT_NE(std::string(big.what()).find(d.file("a")), std::string::npos) << big.what();
  EXPECT_NE(std::string(big.what()).find("limit of 4 bytes"), std::string::npos) << big.what();

  const Error missing = error_of([&] { util::read_file(d.file("nope"), 10); });
  EXPECT_EQ(missing.kind(), ErrorKind::NotFound);
  EXPECT_NE(std::string(missing.what()).find(d.file("nope")), std::string::npos) << missing.what();

  const Error dir = error_of([&] { util::read_file(d.path(), 10); });
  EXPECT_EQ(dir.kind(), ErrorKind::Io);
  EXPECT_NE(std::string(dir.what()).find("is a directory"), std::string::npos) << dir.what();
}

TEST(ReadFile, LimitAppliesToFilesWithoutASize) {
  // A FIFO has no size to check up front: the limit must stop the read itself.
  sprt_test::TempDir d;
  const std::string fifo = d.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::ofstream(fifo, std::ios::binary) << std::string(100000, 'x');
    ::_exit(0);
  }
  const Error e = error_of([&] { util::read_file(fifo, 70000); });
  EXPECT_EQ(e.kind(), ErrorKind::TooLarge) << e.what();
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

TEST(WriteFileAtomic, ReplacesTheFileAndLeavesNoTemporary) {
  sprt_test::TempDir d;
  const std::string p = d.file("out.txt");
  util::write_file_atomic(p, std::string_view("first"));
  util::write_file_atomic(p, std::vector<std::uint8_t>{'s', 'e', 'c'});
  EXPECT_EQ(util::read_text_file(p, 100), "sec");
  EXPECT_EQ(entries(d.path()), 1u);  // no <path>.*.tmp left behind
}

TEST(WriteFileAtomic, FailureNamesThePathAndKeepsTheOldFile) {
  sprt_test::TempDir d;
  const std::string p = d.file("out.txt");
  util::write_file_atomic(p, std::string_view("old"));
  // The target is a non-empty folder: rename(2) fails after the temporary file was written.
  const std::string blocked = d.file("blocked");
  fs::create_directories(blocked + "/inside");
  const Error e = error_of([&] { util::write_file_atomic(blocked, std::string_view("new")); });
  EXPECT_EQ(e.kind(), ErrorKind::Io);
  EXPECT_NE(std::string(e.what()).find(blocked), std::string::npos) << e.what();
  EXPECT_EQ(entries(d.path()), 2u);  // out.txt and blocked/: the temporary file was removed
  EXPECT_EQ(util::read_text_file(p, 100), "old");
  // A folder that does not exist: nothing can be created there.
  const Error nodir = error_of([&] { util::write_file_atomic(d.file("no/such/file"), std::string_view("x")); });
  EXPECT_EQ(nodir.kind(), ErrorKind::Io);
  EXPECT_NE(std::string(nodir.what()).find(d.file("no/such/file")), std::string::npos) << nodir.what();
}

TEST(RenameIntoPlace, MovesSymbolicLinksAsTheyAre) {
  // The hub's snapshot pointers are symbolic links renamed into place; a dangling one too (its blob may be written
  // later by another process).
  sprt_test::TempDir d;
  fs::create_symlink("blob", d.file("tmp"));
  util::rename_into_place(d.file("tmp"), d.file("pointer"));
  EXPECT_TRUE(fs::is_symlink(d.file("pointer")));
  EXPECT_EQ(fs::read_symlink(d.file("pointer")), fs::path("blob"));
  EXPECT_FALSE(fs::exists(fs::symlink_status(d.file("tmp"))));
}

TEST(RandomHex8, EightHexDigitsThatDiffer) {
  const std::string a = util::random_hex8(), b = util::random_hex8();
  EXPECT_EQ(a.size(), 8u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);  // 2^-32 chance of a false failure
}

}  // namespace

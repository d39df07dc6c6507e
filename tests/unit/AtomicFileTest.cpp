// AtomicFileTest.cpp — tests for jit/AtomicFile: the file is written whole or not at all, an existing file
// keeps its bytes when a write fails, no temporary is ever left behind, and the errors name the file.
#include "jit/AtomicFile.h"

#include "common/TestFiles.h"

#include <gtest/gtest.h>

using namespace minfer;
using test::failsMentioning;

namespace {

class AtomicFile : public testing::Test {
protected:
  test::TempDir tmp{"minfer-atomic"};
};

// A writer that puts some bytes into the stream, then fails as a serialiser's validation would.
llvm::Error halfThenFail(llvm::raw_ostream &os) {
  os << "half of a file";
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "the writer's own error");
}

TEST_F(AtomicFile, WritesTheBytesAndNothingElse) {
  ASSERT_FALSE(llvm::errorToBool(writeAtomically(tmp.file("a.bin"), llvm::StringRef("one\0two", 7))));
  EXPECT_EQ(tmp.read("a.bin"), std::string("one\0two", 7));
  EXPECT_EQ(tmp.list(), std::vector<std::string>{"a.bin"});
}

TEST_F(AtomicFile, ReplacesAnExistingFileWhole) {
  tmp.write("a.txt", "the old contents, longer than the new");
  ASSERT_FALSE(llvm::errorToBool(writeAtomically(tmp.file("a.txt"), [](llvm::raw_ostream &os) {
    os << "new";
    return llvm::Error::success();
  })));
  EXPECT_EQ(tmp.read("a.txt"), "new");
  EXPECT_EQ(tmp.list(), std::vector<std::string>{"a.txt"});
}

TEST_F(AtomicFile, DurableWriteIsTheSameFile) {
  tmp.write("entry", "old");
  ASSERT_FALSE(llvm::errorToBool(writeAtomically(tmp.file("entry"), "new entry", Durability::Machine)));
  EXPECT_EQ(tmp.read("entry"), "new entry");
  EXPECT_EQ(tmp.list(), std::vector<std::string>{"entry"});
}

TEST_F(AtomicFile, NamesAMissingDirectory) {
  std::string file = tmp.file("no-dir/a.npy"), dir = tmp.file("no-dir");
  std::string want = (llvm::Twine("'") + file + "': cannot write file: directory '" + dir + "' does not exist").str();
  EXPECT_TRUE(failsMentioning(writeAtomically(file, "x"), {want}));
  EXPECT_TRUE(tmp.list().empty());
}

TEST_F(AtomicFile, AWriterErrorLeavesNoFileAndNoTemporary) {
  llvm::Error e = writeAtomically(tmp.file("a.npy"), halfThenFail);
  ASSERT_TRUE(bool(e));
  EXPECT_EQ(llvm::toString(std::move(e)), "the writer's own error") << "returned as it is";
  EXPECT_TRUE(tmp.list().empty());

  tmp.write("b.npy", "kept");
  EXPECT_TRUE(llvm::errorToBool(writeAtomically(tmp.file("b.npy"), halfThenFail, Durability::Machine)));
  EXPECT_EQ(tmp.read("b.npy"), "kept");
  EXPECT_EQ(tmp.list(), std::vector<std::string>{"b.npy"});
}

} // namespace

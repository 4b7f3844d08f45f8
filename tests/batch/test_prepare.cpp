// batch::prepare: the one set of option checks of `superpoint-rt extract --output` and superpoint_rt.extract_folder,
// each message in the caller's spelling of the option.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "batch/batch.hpp"
#include "common/test_util.hpp"

namespace fs = std::filesystem;
using namespace superpoint_rt;

namespace {

/// The InvalidArgument message of prepare(list, shard, config).
std::string refusal(const batch::ListSpec& list, const std::string& shard, batch::RunConfig config) {
  try {
    batch::prepare(list, shard, config);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "prepare accepted the options";
  return "";
}

class Prepare : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* n : {"a.jpg", "b.jpg", "c.jpg", "d.jpg", "e.jpg"}) std::ofstream(dir_.file(n)) << "x";
    list_.inputs = {dir_.path()};
  }
  batch::RunConfig config(const batch::Spelling& s) const {
    batch::RunConfig c;
    c.output = out_.file("f.h5");
    c.spelling = s;
    return c;
  }
  sprt_test::TempDir dir_, out_;
  batch::ListSpec list_;
};

TEST_F(Prepare, ListsTheShardAndRecordsIt) {
  batch::RunConfig c = config(batch::kCliSpelling);
  const auto images = batch::prepare(list_, "1/2", c);
  ASSERT_EQ(images.size(), 2u);  // b, d of a..e
  EXPECT_EQ(images[0].name, "b.jpg");
  EXPECT_EQ(images[1].name, "d.jpg");
  EXPECT_EQ(c.shard, "1/2");
  EXPECT_EQ(batch::prepare(list_, "", c).size(), 5u);
}

TEST_F(Prepare, CliMessagesNameTheCommandLineOptions) {
  const batch::RunConfig base = config(batch::kCliSpelling);
  batch::RunConfig c = base;
  c.skip_existing = c.overwrite = true;
  EXPECT_EQ(refusal(list_, "", c), "extract: --skip-existing and --overwrite conflict");
  c = base;
  c.output.clear();
  c.as_half = true;
  EXPECT_EQ(refusal(list_, "", c), "extract: --skip-existing, --overwrite and --as-half need --output FEATURES.h5");
  EXPECT_EQ(refusal(list_, "2/2", base), "--shard: '2/2' is not i/n with 0 <= i < n <= 1000000");
  EXPECT_EQ(refusal({}, "", base), "extract: no images given");
}

TEST_F(Prepare, PythonMessagesNameTheKeywordArguments) {
  const batch::RunConfig base = config(batch::kPythonSpelling);
  batch::RunConfig c = base;
  c.skip_existing = c.overwrite = true;
  EXPECT_EQ(refusal(list_, "", c), "extract_folder: skip_existing and overwrite conflict");
  EXPECT_EQ(refusal(list_, "x", base), "shard: 'x' is not i/n with 0 <= i < n <= 1000000");
  EXPECT_NE(refusal({}, "", base).find("images or image_list"), std::string::npos);
}

TEST_F(Prepare, AnExistingOutputNeedsSkipExistingOrOverwrite) {
  batch::RunConfig c = config(batch::kCliSpelling);
  std::ofstream(c.output) << "old";
  EXPECT_EQ(refusal(list_, "", c),
            "extract: output " + c.output + " exists: use --skip-existing to continue it or --overwrite");
  c.spelling = batch::kPythonSpelling;
  EXPECT_NE(refusal(list_, "", c).find("use skip_existing to continue it or overwrite"), std::string::npos);
  c.skip_existing = true;
  EXPECT_EQ(batch::prepare(list_, "", c).size(), 5u);
  c.skip_existing = false;
  c.overwrite = true;
  EXPECT_EQ(batch::prepare(list_, "", c).size(), 5u);

  // The part files of a killed run count as an existing output too.
  batch::RunConfig p = config(batch::kCliSpelling);
  p.output = out_.file("g.h5");
  fs::create_directories(p.output + ".parts");
  std::ofstream(p.output + ".parts/part-1.h5") << "x";
  EXPECT_NE(refusal(list_, "", p).find("--skip-existing"), std::string::npos);
}

}  // namespace

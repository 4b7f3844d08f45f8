// Pair lists (src/match/pairs.cpp): hloc's pairs.txt reading rules (parse_retrieval in text mode: lines end at '\n',
// "\r\n" or '\r', empty lines skipped, exactly two names split at any of Python's whitespace), the limits, writing,
// the generators and names_to_pair.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "common/test_util.hpp"
#include "superpoint_rt/errors.hpp"
#include "superpoint_rt/match.hpp"
#include "util/file.hpp"

namespace sp = superpoint_rt;

namespace {

std::string error_of(const std::string& text) {
  try {
    sp::parse_pairs(text, "p.txt");
  } catch (const sp::Error& e) {
    EXPECT_EQ(e.kind(), sp::ErrorKind::InvalidArgument);
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(Pairs, ParseFollowsHlocsParseRetrieval) {
  using P = std::vector<sp::ImagePair>;
  EXPECT_EQ(sp::parse_pairs(""), P{});
  EXPECT_EQ(sp::parse_pairs("\n\n"), P{});
  EXPECT_EQ(sp::parse_pairs("a b"), (P{{"a", "b"}}));
  EXPECT_EQ(sp::parse_pairs("a b\r\n\n c\td \n"), (P{{"a", "b"}, {"c", "d"}}));
  // Python's universal newlines: a lone '\r' ends a line too (old Mac files), "\r\n" is one line end.
  EXPECT_EQ(sp::parse_pairs("a b\rc d\r\re f\r\ng h\r"), (P{{"a", "b"}, {"c", "d"}, {"e", "f"}, {"g", "h"}}));
  // \v \f \x1c-\x1f and Unicode spaces (U+00A0, U+2003, U+3000) separate names too, as Python's str.split().
  EXPECT_EQ(sp::parse_pairs("a\x0b"
                            "b\nc\x1f"
                            "d\ne\xc2\xa0"
                            "f\ng\xe2\x80\x83h\ni\xe3\x80\x80j"),
            (P{{"a", "b"}, {"c", "d"}, {"e", "f"}, {"g", "h"}, {"i", "j"}}));
  // Other UTF-8 stays part of a name.
  EXPECT_EQ(sp::parse_pairs("caf\xc3\xa9.jpg x/y.png"), (P{{"caf\xc3\xa9.jpg", "x/y.png"}}));
  // Repeats are kept by the parser (unique_pairs drops them).
  EXPECT_EQ(sp::parse_pairs("a b\na b\nb a").size(), 3u);
}

TEST(Pairs, ParseErrorsNameTheLineAndTheRule) {
  EXPECT_NE(error_of("a b\nc\n").find("p.txt: line 2: one name"), std::string::npos);
  EXPECT_NE(error_of("a b\n \t \n").find("line 2: only whitespace"), std::string::npos);
  EXPECT_NE(error_of("a b c").find("line 1: more than two names"), std::string::npos);
  EXPECT_NE(error_of("a b\r\nc d\re\r\n").find("line 3: one name"), std::string::npos);
  EXPECT_NE(error_of("a " + std::string(sp::kMaxPairNameBytes + 1, 'x')).find("bytes (at most 4096)"),
            std::string::npos);
  EXPECT_EQ(sp::parse_pairs("a " + std::string(sp::kMaxPairNameBytes, 'x')).size(), 1u);
}

TEST(Pairs, UniquePairsKeepsTheFirstOrientation) {
  const std::vector<sp::ImagePair> in{{"a", "b"}, {"b", "a"}, {"a", "c"}, {"a", "b"}, {"c", "c"}, {"c", "c"}};
  EXPECT_EQ(sp::unique_pairs(in), (std::vector<sp::ImagePair>{{"a", "b"}, {"a", "c"}, {"c", "c"}}));
}

TEST(Pairs, Generators) {
  const std::vector<std::string> names{"0", "1", "2", "3", "4", "5"};
  const auto ex = sp::pairs_exhaustive(names);
  ASSERT_EQ(ex.size(), 15u);
  EXPECT_EQ(ex.front(), (sp::ImagePair{"0", "1"}));
  EXPECT_EQ(ex[5], (sp::ImagePair{"1", "2"}));
  EXPECT_TRUE(sp::pairs_exhaustive(std::vector<std::string>{"a"}).empty());
  // window 1 + quadratic: (i, i+1) and (i, i+2); key frames every 3: (0, 3) added.
  const auto seq = sp::pairs_sequential(names, 1, true, 3);
  EXPECT_EQ(seq, (std::vector<sp::ImagePair>{{"0", "1"},
                                             {"0", "2"},
                                             {"1", "2"},
                                             {"1", "3"},
                                             {"2", "3"},
                                             {"2", "4"},
                                             {"3", "4"},
                                             {"3", "5"},
                                             {"4", "5"},
                                             {"0", "3"}}));
  EXPECT_THROW(sp::pairs_sequential(names, 0), sp::Error);
  EXPECT_THROW(sp::pairs_sequential(names, 1, false, -1), sp::Error);
  // A window longer than the sequence: everything once.
  EXPECT_EQ(sp::pairs_sequential(names, 100, true, 1).size(), 15u);
}

TEST(Pairs, WriteIsHlocsFormatAndRefusesWhatItCannotReadBack) {
  sprt_test::TempDir dir;
  const std::string p = dir.file("pairs.txt");
  sp::write_pairs(p, std::vector<sp::ImagePair>{{"a/x.jpg", "b.jpg"}, {"c.jpg", "d.jpg"}});
  EXPECT_EQ(sp::util::read_text_file(p, 1 << 20), "a/x.jpg b.jpg\nc.jpg d.jpg");  // no newline after the last
  EXPECT_EQ(sp::read_pairs(p).size(), 2u);
  EXPECT_THROW(sp::write_pairs(p, std::vector<sp::ImagePair>{{"a b.jpg", "c.jpg"}}), sp::Error);
  EXPECT_THROW(sp::write_pairs(p, std::vector<sp::ImagePair>{{"", "c.jpg"}}), sp::Error);
  EXPECT_EQ(sp::read_pairs(p).size(), 2u);  // a refused write leaves the old file
  try {
    sp::read_pairs(dir.file("none.txt"));
    FAIL() << "no error";
  } catch (const sp::Error& e) {
    EXPECT_EQ(e.kind(), sp::ErrorKind::NotFound);
  }
}

TEST(Pairs, NamesToPairIsHlocs) {
  EXPECT_EQ(sp::names_to_pair("db/a.jpg", "q/b/c.jpg"), "db-a.jpg/q-b-c.jpg");
  EXPECT_EQ(sp::names_to_pair("a.jpg", "b.jpg", "_"), "a.jpg_b.jpg");
}

namespace {

// The message of the InvalidArgument Error `f` throws ("no error" when it returns).
template <class F>
std::string invalid_of(F&& f) {
  try {
    f();
  } catch (const sp::Error& e) {
    EXPECT_EQ(e.kind(), sp::ErrorKind::InvalidArgument) << e.what();
    return e.what();
  }
  return "no error";
}

std::vector<std::string> numbered(std::size_t n) {
  std::vector<std::string> names(n);
  for (std::size_t i = 0; i < n; ++i) names[i] = std::to_string(i) + ".jpg";
  return names;
}

}  // namespace

// Issue 32: the generators stop at the limit of a pair list (kMaxPairs, as parse_pairs), before they store anything;
// `pairs --exhaustive` on 20,000 names and `--sequential 1 --loop` ended in bad_alloc.
TEST(Pairs, GeneratorsStopAtThePairListLimit) {
  const auto names = numbered(20000);
  std::string m = invalid_of([&] { sp::pairs_exhaustive(names); });
  EXPECT_NE(m.find("exhaustive pairs of 20000 names gives 199990000 pairs, over the limit of 134217728"),
            std::string::npos)
      << m;
  m = invalid_of([&] { sp::pairs_sequential(names, 1, false, 1); });
  EXPECT_NE(m.find("sequential pairs of 20000 names (window 1, loop stride 1)"), std::string::npos) << m;
  EXPECT_NE(m.find("over the limit of 134217728"), std::string::npos) << m;
  // Lists under the limit are made as before.
  EXPECT_EQ(sp::pairs_exhaustive(numbered(100)).size(), 4950u);
  EXPECT_EQ(sp::pairs_sequential(numbered(100), 1, false, 10).size(), 99u + 45u - 0u);
}

// Issue 32: unique_pairs joined the names with '\0', so ("a\0b", "c") and ("a", "b\0c") were one pair.
TEST(Pairs, UniquePairsKeysCannotCollide) {
  const std::vector<sp::ImagePair> pairs = {{std::string("a\0b", 3), "c"},
                                            {"a", std::string("b\0c", 3)},
                                            {"c", std::string("a\0b", 3)}};  // the first, reversed: dropped
  const auto unique = sp::unique_pairs(pairs);
  ASSERT_EQ(unique.size(), 2u);
  EXPECT_EQ(unique[0], pairs[0]);
  EXPECT_EQ(unique[1], pairs[1]);
}

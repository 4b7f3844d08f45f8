// Unit tests of the server's encoding pieces. The server sources are compiled into the superpoint-rt executable,
// not the library, so the two small translation units under test are compiled into this program directly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "server/codec.cpp"    // NOLINT(bugprone-suspicious-include): see above
#include "server/metrics.cpp"  // NOLINT(bugprone-suspicious-include)

namespace {

using superpoint_rt::server::base64_encode;
using superpoint_rt::server::Metrics;
using superpoint_rt::server::parse_query;
using superpoint_rt::util::float_to_half;

// The reference: the compiler's _Float16 conversion (IEEE round-to-nearest-even, libgcc __truncsfhf2).
std::uint16_t reference_half(float f) {
  const auto h = static_cast<_Float16>(f);
  std::uint16_t b = 0;
  std::memcpy(&b, &h, sizeof b);
  return b;
}

void expect_same_half(std::uint32_t bits) {
  float f = 0;
  std::memcpy(&f, &bits, sizeof f);
  const std::uint16_t got = float_to_half(f), want = reference_half(f);
  if (std::isnan(f)) {  // NaN payloads may differ; a NaN must stay a NaN of the same sign
    EXPECT_EQ(got & 0x7c00u, 0x7c00u) << std::hex << bits;
    EXPECT_NE(got & 0x3ffu, 0u) << std::hex << bits;
    EXPECT_EQ(got & 0x8000u, want & 0x8000u) << std::hex << bits;
    return;
  }
  ASSERT_EQ(got, want) << "float bits 0x" << std::hex << bits << " = " << f;
}

TEST(Half, MatchesCompilerOnAStrideOfAllFloats) {
  for (std::uint64_t b = 0; b <= 0xffffffffull; b += 257) expect_same_half(static_cast<std::uint32_t>(b));
}

TEST(Half, ExhaustiveAroundSubnormalsTiesAndOverflow) {
  // Every float whose exponent is at a boundary: flush to zero (2^-25), subnormal -> normal (2^-14), largest
  // finite -> inf (65504 / 65520), both signs, every mantissa (ties included).
  for (std::uint32_t e : {101u, 102u, 103u, 112u, 113u, 142u, 143u})
    for (std::uint32_t m = 0; m < (1u << 23); m += 1) {
      expect_same_half((e << 23) | m);
      if ((m & 0xfff) == 0) expect_same_half(0x80000000u | (e << 23) | m);
    }
}

TEST(Half, SpecialValues) {
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_half(-std::numeric_limits<float>::infinity()), 0xfc00);
}

TEST(Base64, Rfc4648Vectors) {
  const std::pair<const char*, const char*> cases[] = {{"", ""},
                                                       {"f", "Zg=="},
                                                       {"fo", "Zm8="},
                                                       {"foo", "Zm9v"},
                                                       {"foob", "Zm9vYg=="},
                                                       {"fooba", "Zm9vYmE="},
                                                       {"foobar", "Zm9vYmFy"}};
  for (const auto& [in, out] : cases) EXPECT_EQ(base64_encode(in, std::strlen(in)), out) << in;
  const unsigned char high[] = {0xfb, 0xff, 0xfe};  // the two non-alphanumeric symbols
  EXPECT_EQ(base64_encode(high, 3), "+//+");
}

TEST(Query, SplitsAndDecodes) {
  const auto q = parse_query("a=1&b=x%20y+z&&c&d=%zz&e=%41%4a");
  ASSERT_EQ(q.size(), 5u);
  EXPECT_EQ(q[0], (std::pair<std::string, std::string>{"a", "1"}));
  EXPECT_EQ(q[1], (std::pair<std::string, std::string>{"b", "x y z"}));
  EXPECT_EQ(q[2], (std::pair<std::string, std::string>{"c", ""}));
  EXPECT_EQ(q[3], (std::pair<std::string, std::string>{"d", "%zz"}));
  EXPECT_EQ(q[4], (std::pair<std::string, std::string>{"e", "AJ"}));
  EXPECT_TRUE(parse_query("").empty());
  EXPECT_EQ(parse_query("x=1%").at(0).second, "1%");  // a trailing '%' is kept, not read past the end
}

TEST(Metrics, HistogramIsCumulativeAndLabelsAreBounded) {
  Metrics m;
  m.observe_request("/v1/keypoints", 200, 0.003);
  m.observe_request("/v1/keypoints", 200, 0.2);
  m.observe_request("/v1/keypoints", 503, 100.0);
  m.observe_request("other", 404, -1);
  const std::string t = m.render(2, 64);
  EXPECT_NE(t.find("superpoint_rt_http_request_duration_seconds_bucket{endpoint=\"/v1/keypoints\",le=\"0.005\"} 1\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("superpoint_rt_http_request_duration_seconds_bucket{endpoint=\"/v1/keypoints\",le=\"0.25\"} 2\n"),
            std::string::npos);
  EXPECT_NE(t.find("superpoint_rt_http_request_duration_seconds_bucket{endpoint=\"/v1/keypoints\",le=\"60\"} 2\n"),
            std::string::npos);
  EXPECT_NE(t.find("superpoint_rt_http_request_duration_seconds_count{endpoint=\"/v1/keypoints\"} 3\n"),
            std::string::npos);
  EXPECT_NE(t.find("superpoint_rt_http_requests_total{endpoint=\"/v1/keypoints\",status=\"503\"} 1\n"),
            std::string::npos);
  EXPECT_NE(t.find("superpoint_rt_http_requests_total{endpoint=\"other\",status=\"404\"} 1\n"), std::string::npos);
  EXPECT_EQ(t.find("duration_seconds_count{endpoint=\"other\"}"), std::string::npos);  // unknown duration: counted only
  EXPECT_EQ(Metrics::endpoint_label("/v1/keypoints/batch"), "/v1/keypoints/batch");
  EXPECT_EQ(Metrics::endpoint_label("/random/scan/path"), "other");
}

}  // namespace

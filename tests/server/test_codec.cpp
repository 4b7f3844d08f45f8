// Unit tests of the server's encoding pieces and parsers, linked from the server's library (superpoint_rt_server,
// src/CMakeLists.txt), as the executable and the fuzz harnesses link them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "common/half_reference.hpp"
#include "server/codec.hpp"
#include "server/metrics.hpp"
#include "server/multipart.hpp"
#include "util/npz.hpp"

namespace {

using superpoint_rt::server::base64_encode;
using superpoint_rt::server::Metrics;
using superpoint_rt::server::parse_query;
namespace srv = superpoint_rt::server;
namespace sp = superpoint_rt;
using superpoint_rt::util::float_to_half;

using sprt_test::reference_half;  // common/half_reference.hpp: IEEE round-to-nearest-even

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

namespace {

// The kind and message of the Error `f` throws.
template <class F>
std::pair<sp::ErrorKind, std::string> error_of(F&& f) {
  try {
    f();
  } catch (const sp::Error& e) {
    return {e.kind(), e.what()};
  }
  ADD_FAILURE() << "no Error";
  return {sp::ErrorKind::Internal, ""};
}

sp::Features random_features(std::size_t n, int dim, unsigned seed, float width = 640, float height = 480) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0, 1);
  sp::Features f;
  f.keypoints.resize(2 * n);
  f.scores.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    f.keypoints[2 * i] = u(rng) * width;
    f.keypoints[2 * i + 1] = u(rng) * height;
    f.scores[i] = u(rng);
  }
  f.has_descriptors = dim > 0;
  f.descriptor_dim = dim > 0 ? dim : 256;
  if (dim > 0) {
    f.descriptors.resize(n * static_cast<std::size_t>(dim));
    for (float& d : f.descriptors) d = u(rng) * 2 - 1;
  }
  f.image_size = {static_cast<int>(height), static_cast<int>(width)};
  f.scale = {1.0f, 1.5f};
  return f;
}

}  // namespace

TEST(Query, MoreFieldsThanTheLimitAre422) {
  std::string q;
  for (std::size_t i = 0; i < srv::kMaxQueryFields; ++i) {
    q += 'a';
    q += std::to_string(i);
    q += "=1&";
  }
  EXPECT_EQ(parse_query(q).size(), srv::kMaxQueryFields);
  const auto [kind, msg] = error_of([&] { parse_query(q + "x=2"); });
  EXPECT_EQ(kind, sp::ErrorKind::InvalidArgument);
  EXPECT_NE(msg.find("max_query_fields"), std::string::npos) << msg;
}

TEST(Multipart, FieldsInOrderAsViewsOfTheBody) {
  const std::string body =
      "preamble\r\n--XyZ\r\nContent-Disposition: form-data; name=\"image\"; filename=\"a \\\"b\\\".png\"\r\n"
      "Content-Type: image/png\r\n\r\nPNG\r\nbytes\r\n--XyZ  \r\ncontent-disposition: FORM-DATA; name=other\r\n\r\n"
      "\r\n--XyZ\r\nContent-Disposition: form-data; name=\"image\"\r\n\r\n--XyZ-not-a-delimiter\r\n--XyZ--\r\nepilogue";
  ASSERT_EQ(srv::multipart_boundary("multipart/form-data; charset=x; boundary=\"XyZ\""), "XyZ");
  const auto parts = srv::parse_multipart(body, "XyZ");
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].name, "image");
  EXPECT_EQ(parts[0].filename, "a \"b\".png");
  EXPECT_EQ(parts[0].content, "PNG\r\nbytes");
  EXPECT_TRUE(parts[0].content.data() >= body.data() && parts[0].content.data() < body.data() + body.size());
  EXPECT_EQ(parts[1].name, "other");
  EXPECT_EQ(parts[1].content, "");
  EXPECT_EQ(parts[2].filename, "");
  EXPECT_EQ(parts[2].content, "--XyZ-not-a-delimiter");
}

TEST(Multipart, MalformedBodiesAndLimitsAreNamedErrors) {
  using K = sp::ErrorKind;
  const auto kind_and = [](const std::string& body, const std::string& boundary = "b") {
    return error_of([&] { srv::parse_multipart(body, boundary); });
  };
  const std::string head = "--b\r\nContent-Disposition: form-data; name=\"image\"\r\n\r\n";
  EXPECT_EQ(kind_and("").first, K::DecodeError);
  EXPECT_EQ(kind_and(head + "data without a close").first, K::DecodeError);
  EXPECT_NE(kind_and(head + "x").second.find("not closed"), std::string::npos);
  EXPECT_EQ(kind_and("--b\r\nContent-Type: x\r\n\r\nx\r\n--b--").first, K::DecodeError);  // no disposition
  EXPECT_EQ(kind_and("--b\r\nContent-Disposition: form-data\r\n\r\nx\r\n--b--").first, K::DecodeError);  // no name
  EXPECT_EQ(kind_and("--b\r\nContent-Disposition: attachment; name=a\r\n\r\nx\r\n--b--").first, K::DecodeError);
  EXPECT_EQ(kind_and("--bX\r\n").first, K::DecodeError);  // a delimiter followed by neither CRLF nor "--"
  // The header block of a part: at most kMaxPartHeaderBytes.
  const std::string long_header =
      "--b\r\nContent-Disposition: form-data; name=a\r\nX: " + std::string(srv::kMaxPartHeaderBytes, 'h') +
      "\r\n\r\nx\r\n--b--";
  const auto [k1, m1] = kind_and(long_header);
  EXPECT_EQ(k1, K::DecodeError);
  EXPECT_NE(m1.find("max_part_header_bytes"), std::string::npos) << m1;
  // Parts: at most kMaxMultipartParts (413: TooLarge).
  std::string many;
  for (std::size_t i = 0; i <= srv::kMaxMultipartParts; ++i)
    many += "--b\r\nContent-Disposition: form-data; name=a\r\n\r\n\r\n";
  const auto [k2, m2] = kind_and(many + "--b--");
  EXPECT_EQ(k2, K::TooLarge);
  EXPECT_NE(m2.find("max_multipart_parts"), std::string::npos) << m2;
  // Boundaries: 1..70 characters, given.
  EXPECT_EQ(error_of([] { srv::multipart_boundary("multipart/form-data"); }).first, K::DecodeError);
  EXPECT_EQ(error_of([] { srv::multipart_boundary("multipart/form-data; boundary=" + std::string(71, 'b')); }).first,
            K::DecodeError);
  EXPECT_EQ(error_of([] { srv::multipart_boundary("multipart/form-data; boundary=\"open"); }).first, K::DecodeError);
}

TEST(Answers, JsonIsWithinItsBoundAndReadsBackAsTheFeatures) {
  for (const auto& [n, dim] :
       std::vector<std::pair<std::size_t, int>>{{0, 256}, {1, 256}, {37, 256}, {500, 0}, {3, 7}}) {
    sp::Features f = random_features(n, dim, static_cast<unsigned>(n + 3));
    if (n == 1) {  // the widest numbers there are
      f.keypoints = {-std::numeric_limits<float>::max(), 1e-30f};
      f.scores = {-std::numeric_limits<float>::denorm_min()};
    }
    std::string out;
    srv::append_features_json(out, f, 12.5);
    EXPECT_LE(out.size(), srv::features_json_bound(static_cast<std::int64_t>(n), dim)) << n << " " << dim;
    const auto j = nlohmann::json::parse(out);
    ASSERT_EQ(j["keypoints"].size(), n);
    for (std::size_t i = 0; i < n; ++i) {
      EXPECT_EQ(j["keypoints"][i][0].get<double>(), srv::round_to(f.keypoints[2 * i], 3));
      EXPECT_EQ(j["scores"][i].get<double>(), srv::round_to(f.scores[i], 6));
    }
    if (dim > 0) {
      EXPECT_EQ(j["descriptors"]["shape"], nlohmann::json({n, dim}));
      std::vector<std::uint16_t> half(f.descriptors.size());
      for (std::size_t i = 0; i < half.size(); ++i) half[i] = float_to_half(f.descriptors[i]);
      EXPECT_EQ(j["descriptors"]["data"], base64_encode(half.data(), half.size() * 2));
    } else {
      EXPECT_TRUE(j["descriptors"].is_null());
    }
    EXPECT_EQ(j["image_size"], nlohmann::json({f.image_size[0], f.image_size[1]}));
    EXPECT_EQ(j["scale"][1].get<double>(), 1.5);
    EXPECT_EQ(j["timing_ms"]["queue"].get<double>(), 12.5);
  }
}

TEST(Answers, NpzIsWithinItsBoundAndReadsBackAsTheFeatures) {
  const sp::Features f = random_features(123, 256, 9);
  std::string out;
  srv::write_features_npz(out, f);
  EXPECT_LE(out.size(), srv::features_npz_bound(123, 256));
  const auto arrays = sp::util::parse_npz(std::vector<std::uint8_t>(out.begin(), out.end()), "answer.npz");
  EXPECT_EQ(arrays.at("keypoints").as_float(), f.keypoints);
  EXPECT_EQ(arrays.at("scores").as_float(), f.scores);
  EXPECT_EQ(arrays.at("descriptors").dtype, "f2");
  EXPECT_EQ(arrays.at("descriptors").shape, (std::vector<std::int64_t>{123, 256}));
  EXPECT_EQ(arrays.at("image_size").as_int64(), (std::vector<std::int64_t>{480, 640}));
  // The same bytes as the writer of files (util::npz_bytes), which the CLI's --format npz uses.
  std::map<std::string, sp::util::NpyArray> m;
  m["keypoints"] = sp::util::NpyArray::from_float(f.keypoints, {123, 2});
  m["scores"] = sp::util::NpyArray::from_float(f.scores, {123});
  std::vector<std::uint16_t> half(f.descriptors.size());
  for (std::size_t i = 0; i < half.size(); ++i) half[i] = float_to_half(f.descriptors[i]);
  m["descriptors"] = sp::util::NpyArray::from_bytes("f2", half.data(), half.size() * 2, {123, 256});
  m["image_size"] = sp::util::NpyArray::from_int64({480, 640}, {2});
  m["scale"] = sp::util::NpyArray::from_float({1.0f, 1.5f}, {2});
  const auto bytes = sp::util::npz_bytes(m);
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), out);
}

TEST(Answers, MatchesJsonIsWithinItsBound) {
  sp::Matches m;
  for (int i = 0; i < 300; ++i) {
    m.matches0.push_back(i % 3 ? std::numeric_limits<std::int32_t>::max() - i : -1);
    m.scores0.push_back(static_cast<float>(i) / 301.0f);
  }
  std::string out = "{";
  srv::append_matches_json(out, m, sp::MatchOptions{}, "NN-mutual", 1.25);
  out += "}";
  EXPECT_LE(out.size(), srv::matches_json_bound(300));
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["matches"].size(), 200u);
  EXPECT_EQ(j["matches"][0], nlohmann::json({1, std::numeric_limits<std::int32_t>::max() - 1}));
  EXPECT_EQ(j["match"]["conf"], "NN-mutual");
  EXPECT_EQ(j["timing_ms"]["match"].get<double>(), 1.25);
}

TEST(Answers, LightGlueMatchesJsonIsWithinItsBound) {
  // Every row matched to the largest index, with the longest numbers the settings can print: the bound still holds.
  sp::LightGlueMatches m;
  for (int i = 0; i < 300; ++i) {
    m.matches0.push_back(i % 3 ? std::numeric_limits<std::int32_t>::max() - i : -1);
    m.scores0.push_back(static_cast<float>(i) / 301.0f);
  }
  m.stop = 9;
  sp::LightGlueOptions o;
  o.depth_confidence = -0.123456789012345;
  o.width_confidence = 0.987654321098765;
  o.filter_threshold = 0.000123456789012;
  std::string out = "{";
  srv::append_lightglue_matches_json(out, m, o, 123456.789);
  out += "}";
  EXPECT_LE(out.size(), srv::matches_json_bound(300));
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["matches"].size(), 200u);
  EXPECT_EQ(j["scores"].size(), 200u);
  EXPECT_EQ(j["matches"][0], nlohmann::json({1, std::numeric_limits<std::int32_t>::max() - 1}));
  EXPECT_EQ(j["match"]["matcher"], "lightglue");
  EXPECT_EQ(j["match"]["width_confidence"].get<double>(), o.width_confidence);
  EXPECT_EQ(j["match"]["filter_threshold"].get<double>(), o.filter_threshold);
  EXPECT_EQ(j["stop"], 9);
  EXPECT_EQ(j["timing_ms"]["match"].get<double>(), 123456.789);
}

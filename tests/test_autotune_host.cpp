// The autotuner's host side (src/autotune/tune_cache.h), no GPU needed.
// Pins: tuning keys and their power-of-two buckets; the cache file's round
// trip (escaped strings, exact times, sources), its header checks and its
// rejection of every kind of damaged file with a one-line warning and an
// unchanged cache; the atomic write (no temporary file left, clean failure);
// the cache under 8 threads; and the rule that picks cache, tuning or
// heuristic.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "flash/flash.hpp"
#include "src/autotune/tune_cache.h"

namespace {

namespace fs = std::filesystem;
using flash::AttentionParams;
using flash::ChoiceSource;
using flash::DType;
using flash::detail::bucket_pow2;
using flash::detail::CacheEntry;
using flash::detail::CacheFileHeader;
using flash::detail::decide_tune_action;
using flash::detail::make_tune_key;
using flash::detail::TuneAction;
using flash::detail::TuneCache;
using flash::detail::TuneKey;

constexpr int64_t kPow62 = int64_t{1} << 62;

AttentionParams shape(int64_t batch, int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q, int64_t heads_kv,
                      int64_t head_dim = 128, DType dtype = DType::kBFloat16, bool causal = true) {
  AttentionParams p;
  p.batch = batch;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.head_dim = head_dim;
  p.dtype = dtype;
  p.causal = causal;
  return p;
}

CacheFileHeader this_header() { return {"0.1.0", 13000, "NVIDIA H200"}; }

CacheEntry entry(const std::string& config, double time_ms, ChoiceSource source = ChoiceSource::kTuned) {
  CacheEntry e;
  e.config = config;
  e.time_ms = time_ms;
  e.source = source;
  return e;
}

// Everything a cache holds, comparable.
using Snapshot = std::vector<std::tuple<std::string, std::string, double, ChoiceSource>>;
Snapshot snapshot(const TuneCache& cache) {
  Snapshot out;
  for (const auto& [key, e] : cache.entries()) out.emplace_back(key, e.config, e.time_ms, e.source);
  return out;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  ASSERT_TRUE(f.good()) << path;
}

std::string read_text(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<std::string> list_dir(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A valid file with two entries, as a human might write it.
std::string valid_file_text(const std::string& header_members = R"("format": 1, "flash_version": "0.1.0",
  "cuda_runtime": 13000, "gpu": "NVIDIA H200")") {
  return "{" + header_members + R"(,
  "entries": [
    {"key": "NVIDIA H200|132|bf16|d128|causal|g1|q4096|k4096|bh64", "config": "sm90 128x128 2wg 2st", "time_ms": 1.5},
    {"key": "NVIDIA H200|132|fp16|d64|full|g4|q512|k512|bh512", "config": "sm80 128x64 4w 2st", "time_ms": 0.25}
  ]
})";
}

// A fresh directory per test, removed afterwards.
class AutotuneFile : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "flash_autotune_XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    path_ = dir_ / "cache.json";
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  // A cache holding one tuned entry, so "unchanged" is visible.
  static TuneCache& seeded(TuneCache& cache) {
    cache.store("seed|key", entry("sm80 64x64 4w 2st", 9.0));
    return cache;
  }

  // Loading `text` fails with a one-line warning naming the file and
  // containing `reason`, and leaves a seeded cache as it was.
  ::testing::AssertionResult rejected(const std::string& text, const std::string& reason = "") {
    write_text(path_, text);
    TuneCache cache;
    seeded(cache);
    const Snapshot before = snapshot(cache);
    std::string warning;
    if (cache.load_file(path_.string(), this_header(), &warning)) {
      return ::testing::AssertionFailure() << "loaded; warning \"" << warning << "\"";
    }
    const std::string prefix = "flash: ignoring autotune cache " + path_.string() + ": ";
    if (warning.rfind(prefix, 0) != 0) return ::testing::AssertionFailure() << "warning \"" << warning << "\"";
    if (warning.find('\n') != std::string::npos || warning.size() <= prefix.size()) {
      return ::testing::AssertionFailure() << "not one line with a reason: \"" << warning << "\"";
    }
    if (warning.find(reason) == std::string::npos) {
      return ::testing::AssertionFailure() << "warning \"" << warning << "\" does not say \"" << reason << "\"";
    }
    if (snapshot(cache) != before) return ::testing::AssertionFailure() << "the cache changed";
    return ::testing::AssertionSuccess() << warning;
  }

  fs::path dir_;
  fs::path path_;
};

TEST(AutotuneKey, BucketsAreTheNextPowerOfTwo) {
  const std::pair<int64_t, int64_t> cases[] = {
      {1, 1}, {2, 2}, {3, 4}, {4, 4}, {5, 8}, {1000, 1024}, {1024, 1024}, {1025, 2048}, {2049, 4096},
      {16384, 16384}, {0, 0}, {-1, 0}, {std::numeric_limits<int64_t>::min(), 0},
      {(int64_t{1} << 40) + 1, int64_t{1} << 41}, {kPow62 - 1, kPow62}, {kPow62, kPow62},
  };
  for (const auto& [n, bucket] : cases) EXPECT_EQ(bucket_pow2(n), bucket) << "n = " << n;
  for (int s = 0; s <= 62; ++s) {
    const int64_t p = int64_t{1} << s;
    EXPECT_EQ(bucket_pow2(p), p) << "2^" << s;
    if (s >= 1 && s < 62) {
      EXPECT_EQ(bucket_pow2(p + 1), p << 1) << "2^" << s << " + 1";
    }
  }
  // The next power of two does not fit: saturated, never wrapped negative.
  EXPECT_EQ(bucket_pow2(kPow62 + 1), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(bucket_pow2(std::numeric_limits<int64_t>::max()), std::numeric_limits<int64_t>::max());
}

TEST(AutotuneKey, TextFormNamesEveryPart) {
  const TuneKey key = make_tune_key(shape(2, 3000, 4000, 32, 8), "NVIDIA H200", 132);
  EXPECT_EQ(key.str(), "NVIDIA H200|132|bf16|d128|causal|g4|q4096|k4096|bh64");
  EXPECT_EQ(key.gqa_ratio, 4);
  EXPECT_EQ(key.batch_heads_bucket, 64);
  const TuneKey full = make_tune_key(shape(1, 512, 512, 16, 16, 64, DType::kFloat16, false), "A100", 108);
  EXPECT_EQ(full.str(), "A100|108|fp16|d64|full|g1|q512|k512|bh16");
}

TEST(AutotuneKey, ShapesInTheSameBucketsShareAKey) {
  // seqlen 2049 and 4096 share q4096; batch*heads 40 and 64 share bh64.
  const TuneKey a = make_tune_key(shape(1, 2049, 3000, 40, 10), "NVIDIA H200", 132);
  const TuneKey b = make_tune_key(shape(2, 4096, 4096, 32, 8), "NVIDIA H200", 132);
  EXPECT_EQ(a.str(), b.str());
  EXPECT_TRUE(a == b);
}

TEST(AutotuneKey, EachPartOfTheClassChangesTheKey) {
  const AttentionParams base = shape(2, 4096, 4096, 32, 8);
  std::vector<TuneKey> keys = {make_tune_key(base, "NVIDIA H200", 132)};
  auto vary = [&](auto change, const std::string& gpu = "NVIDIA H200", int sms = 132) {
    AttentionParams p = base;
    change(p);
    keys.push_back(make_tune_key(p, gpu, sms));
  };
  vary([](AttentionParams& p) { p.dtype = DType::kFloat16; });
  vary([](AttentionParams& p) { p.causal = false; });
  vary([](AttentionParams& p) { p.heads_kv = 32; });  // gqa 1
  vary([](AttentionParams& p) { p.heads_kv = 4; });   // gqa 8
  vary([](AttentionParams& p) { p.head_dim = 64; });
  vary([](AttentionParams& p) { p.seqlen_q = 4097; });
  vary([](AttentionParams& p) { p.seqlen_k = 2048; });
  vary([](AttentionParams& p) { p.batch = 3; });
  vary([](AttentionParams&) {}, "NVIDIA H100 80GB HBM3");
  vary([](AttentionParams&) {}, "NVIDIA H200", 66);
  std::set<std::string> distinct;
  for (const TuneKey& k : keys) distinct.insert(k.str());
  EXPECT_EQ(distinct.size(), keys.size());
  EXPECT_FALSE(keys[0] == keys[1]);
}

TEST(AutotuneRule, CachedWinsThenTuningWhenAllowedElseHeuristic) {
  struct Row {
    bool enabled, capturing, cached;
    TuneAction action;
  };
  const Row table[] = {
      {false, false, false, TuneAction::kHeuristic}, {false, false, true, TuneAction::kUseCache},
      {false, true, false, TuneAction::kHeuristic},  {false, true, true, TuneAction::kUseCache},
      {true, false, false, TuneAction::kTune},       {true, false, true, TuneAction::kUseCache},
      {true, true, false, TuneAction::kHeuristic},   {true, true, true, TuneAction::kUseCache},
  };
  for (const Row& r : table) {
    EXPECT_EQ(decide_tune_action(r.enabled, r.capturing, r.cached), r.action)
        << "enabled " << r.enabled << " capturing " << r.capturing << " cached " << r.cached;
  }
}

TEST(AutotuneCache, StoreLookupAndSortedEntries) {
  TuneCache cache;
  EXPECT_FALSE(cache.lookup("b").has_value());
  cache.store("b", entry("x", 2.0));
  cache.store("a", entry("y", 1.0));
  cache.store("b", entry("z", 3.0));  // replaces
  ASSERT_TRUE(cache.lookup("b").has_value());
  EXPECT_EQ(cache.lookup("b")->config, "z");
  EXPECT_EQ(cache.size(), 2u);
  const auto all = cache.entries();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].first, "a");
  EXPECT_EQ(all[1].first, "b");
}

TEST_F(AutotuneFile, RoundTripKeepsEntriesTimesAndEscapedStrings) {
  CacheFileHeader header = this_header();
  header.gpu = "NVIDIA \"H200\" \\ \xCE\xA9 \xF0\x9F\x98\x80 tab\there";  // quotes, backslash, Omega, emoji, tab
  TuneCache cache;
  const std::vector<std::pair<std::string, CacheEntry>> stored = {
      {"k|plain", entry("sm90 128x128 2wg 2st", 1.234)},
      {"k|\"quoted\"", entry("cfg \\ back\\slash", 0.1)},
      {"k|ctrl\x01\n\x1f", entry("cfg\r\n", 123456.789)},
      {"k|unicode \xE2\x82\xAC", entry("\xC3\xA9", 1e-9, ChoiceSource::kCache)},
      {"k|big", entry("sm80 64x64 4w 2st", 1e300)},
      {"k|zero", entry("sm80 128x64 4w 2st", 0.0)},
      {"k|thirds", entry("sm80 128x32 4w 2st", 1.0 / 3.0)},
  };
  for (const auto& [key, e] : stored) cache.store(key, e);
  std::string error = "stale";
  ASSERT_TRUE(cache.save_file(path_.string(), header, &error)) << error;
  EXPECT_EQ(error, "");

  const std::string text = read_text(path_);
  EXPECT_NE(text.find(R"("format": 1)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(NVIDIA \"H200\" \\ )"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(tab\u0009here)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(k|ctrl\u0001\u000a\u001f)"), std::string::npos) << text;
  // Sorted by key, so the file is stable.
  EXPECT_LT(text.find("k|\\\"quoted"), text.find("k|big"));
  EXPECT_LT(text.find("k|big"), text.find("k|zero"));
  ASSERT_TRUE(cache.save_file(path_.string(), header, &error)) << error;
  EXPECT_EQ(read_text(path_), text) << "saving twice must write the same bytes";

  TuneCache loaded;
  std::string warning = "stale";
  ASSERT_TRUE(loaded.load_file(path_.string(), header, &warning)) << warning;
  EXPECT_EQ(warning, "");
  ASSERT_EQ(loaded.size(), stored.size());
  for (const auto& [key, e] : stored) {
    const auto got = loaded.lookup(key);
    ASSERT_TRUE(got.has_value()) << key;
    EXPECT_EQ(got->config, e.config) << key;
    EXPECT_EQ(got->time_ms, e.time_ms) << key;  // exact: the shortest form reads back bit for bit
    EXPECT_EQ(got->source, ChoiceSource::kCache) << key;
  }
}

TEST_F(AutotuneFile, HandWrittenFileWithUnknownMembersAndEscapesLoads) {
  const std::string text = R"({"format": 1, "comment": {"nested": [1, 2.5e3, -0.5, true, false, null, "s"]},
    "flash_version": "0.1.0", "cuda_runtime": 13000, "gpu": "NVIDIA\u0020H200",
    "entries": [{"key": "a\/b \u00e9 \ud83d\ude00", "config": "c\"d", "time_ms": 2E-1, "note": []}]})";
  write_text(path_, text);
  TuneCache cache;
  std::string warning;
  ASSERT_TRUE(cache.load_file(path_.string(), this_header(), &warning)) << warning;
  const auto got = cache.lookup("a/b \xC3\xA9 \xF0\x9F\x98\x80");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->config, "c\"d");
  EXPECT_EQ(got->time_ms, 0.2);
}

TEST_F(AutotuneFile, EmptyEntriesAndMissingFileLoadNothing) {
  TuneCache cache;
  seeded(cache);
  const Snapshot before = snapshot(cache);
  std::string warning = "stale";
  EXPECT_TRUE(cache.load_file((dir_ / "absent.json").string(), this_header(), &warning));
  EXPECT_EQ(warning, "");
  EXPECT_TRUE(cache.load_file((dir_ / "absent.json").string(), this_header(), nullptr));
  write_text(path_, R"({"format":1,"flash_version":"0.1.0","cuda_runtime":13000,"gpu":"NVIDIA H200","entries":[]})");
  EXPECT_TRUE(cache.load_file(path_.string(), this_header(), &warning)) << warning;
  EXPECT_EQ(snapshot(cache), before);
}

TEST_F(AutotuneFile, KeysInMemoryWinAndTheLastDuplicateInTheFileWins) {
  write_text(path_, R"({"format": 1, "flash_version": "0.1.0", "cuda_runtime": 13000, "gpu": "NVIDIA H200",
    "entries": [{"key": "dup", "config": "first", "time_ms": 1},
                {"key": "dup", "config": "second", "time_ms": 2},
                {"key": "mine", "config": "from file", "time_ms": 3}]})");
  TuneCache cache;
  cache.store("mine", entry("measured", 4.0));
  std::string warning;
  ASSERT_TRUE(cache.load_file(path_.string(), this_header(), &warning)) << warning;
  EXPECT_EQ(cache.lookup("dup")->config, "second");
  EXPECT_EQ(cache.lookup("mine")->config, "measured");
  EXPECT_EQ(cache.lookup("mine")->source, ChoiceSource::kTuned);
}

TEST_F(AutotuneFile, HeaderMismatchIsIgnoredWithAWarning) {
  TuneCache writer;
  writer.store("k", entry("sm80 128x64 4w 2st", 1.0));
  const struct {
    CacheFileHeader file;
    const char* reason;
  } cases[] = {
      {{"0.0.9", 13000, "NVIDIA H200"}, "written by flash 0.0.9, this is 0.1.0"},
      {{"0.1.0", 12080, "NVIDIA H200"}, "written under CUDA runtime 12080, this is 13000"},
      {{"0.1.0", 13000, "NVIDIA A100-SXM4-80GB"}, "written for GPU \"NVIDIA A100-SXM4-80GB\", this is \"NVIDIA H200\""},
      {{"0.1.0\nevil", 13000, "NVIDIA H200"}, "written by flash \"0.1.0\\u000aevil\""},  // still one line
  };
  for (const auto& c : cases) {
    std::string error;
    ASSERT_TRUE(writer.save_file(path_.string(), c.file, &error)) << error;
    EXPECT_TRUE(rejected(read_text(path_), c.reason));
  }
}

TEST_F(AutotuneFile, DamagedFilesAreIgnoredWithAWarning) {
  const std::string head = R"("flash_version": "0.1.0", "cuda_runtime": 13000, "gpu": "NVIDIA H200")";
  auto file = [&](const std::string& members) { return "{\"format\": 1, " + members + "}"; };
  auto with_entry = [&](const std::string& e) { return file(head + ", \"entries\": [" + e + "]"); };
  const struct {
    std::string text;
    const char* reason;
  } cases[] = {
      {"", "the file is empty"},
      {" \n\t ", "the file is empty"},
      {"[]", "expected '{'"},
      {"null", "expected '{'"},
      {valid_file_text() + "x", "unexpected data after the object"},
      {valid_file_text() + "{}", "unexpected data after the object"},
      // Wrong format, wrong types.
      {valid_file_text(R"("format": 2, "flash_version": "0.1.0", "cuda_runtime": 13000, "gpu": "NVIDIA H200")"),
       "format 2 is not supported (this flash reads format 1)"},
      {valid_file_text(R"("format": "1", "flash_version": "0.1.0", "cuda_runtime": 13000, "gpu": "NVIDIA H200")"),
       "\"format\" must be a number"},
      {file(R"("flash_version": 1, "cuda_runtime": 13000, "gpu": "g", "entries": [])"),
       "\"flash_version\" must be a string"},
      {file(R"("flash_version": "0.1.0", "cuda_runtime": "13000", "gpu": "g", "entries": [])"),
       "\"cuda_runtime\" must be a number"},
      {file(R"("flash_version": "0.1.0", "cuda_runtime": 13000.5, "gpu": "g", "entries": [])"),
       "\"cuda_runtime\" must be an integer"},
      {file(R"("flash_version": "0.1.0", "cuda_runtime": -1, "gpu": "g", "entries": [])"),
       "\"cuda_runtime\" must be an integer"},
      {file(R"("flash_version": "0.1.0", "cuda_runtime": 13000, "gpu": null, "entries": [])"),
       "\"gpu\" must be a string"},
      {file(head + R"(, "entries": {})"), "\"entries\" must be an array"},
      {with_entry(R"(["k", "c", 1])"), "entry 0: not an object"},
      {with_entry(R"({"key": 5, "config": "c", "time_ms": 1})"), "\"key\" must be a string"},
      {with_entry(R"({"key": "k", "config": "c", "time_ms": "1"})"), "\"time_ms\" must be a number"},
      {with_entry(R"({"key": "k", "config": "c", "time_ms": -1})"), "\"time_ms\" must be >= 0"},
      {with_entry(R"({"key": "", "config": "c", "time_ms": 1})"), "\"key\" is empty"},
      {with_entry(R"({"key": "k", "config": "c", "time_ms": 1, "time_ms": 2})"), "duplicate \"time_ms\""},
      {file(head + R"(, "gpu": "again", "entries": [])"), "duplicate \"gpu\""},
      // Missing fields.
      {file(R"("cuda_runtime": 13000, "gpu": "NVIDIA H200", "entries": [])"), "missing \"flash_version\""},
      {file(R"("flash_version": "0.1.0", "gpu": "NVIDIA H200", "entries": [])"), "missing \"cuda_runtime\""},
      {file(R"("flash_version": "0.1.0", "cuda_runtime": 13000, "entries": [])"), "missing \"gpu\""},
      {file(head), "missing \"entries\""},
      {valid_file_text().replace(1, 12, ""), "missing \"format\""},
      {with_entry(R"({"config": "c", "time_ms": 1})"), "entry 0: missing \"key\""},
      {with_entry(R"({"key": "k", "time_ms": 1})"), "entry 0: missing \"config\""},
      {with_entry(R"({"key": "k", "config": "c"}, {"key": "k2", "config": "c"})"), "entry 0: missing \"time_ms\""},
      // Huge numbers.
      {with_entry(R"({"key": "k", "config": "c", "time_ms": 1e999})"), "is out of range"},
      {with_entry(R"({"key": "k", "config": "c", "time_ms": -1e400})"), "is out of range"},
      {with_entry(R"({"key": "k", "config": "c", "time_ms": 1)" + std::string(100000, '0') + "}"),
       "is out of range"},
      {file(R"("flash_version": "0.1.0", "cuda_runtime": 1e30, "gpu": "g", "entries": [])"),
       "\"cuda_runtime\" must be an integer"},
      {file(R"("flash_version": "0.1.0", "cuda_runtime": 99999999999, "gpu": "g", "entries": [])"),
       "\"cuda_runtime\" must be an integer"},
      // Not JSON.
      {with_entry(R"({"key": "k", "config": "c", "time_ms": 01})"), "not valid JSON"},
      {with_entry(R"({"key": "k", "config": "c", "time_ms": 1.})"), "not valid JSON"},
      {with_entry(R"({"key": "k", "config": "c", "time_ms": .5})"), "must be a number"},
      {with_entry(R"({"key": "k", "config": "c", "time_ms": +1})"), "must be a number"},
      {with_entry(R"({"key": "k", "config": "c", "time_ms": NaN})"), "must be a number"},
      {with_entry(R"({"key": "k" "config": "c", "time_ms": 1})"), "expected ',' or '}'"},
      {with_entry(R"({"key": "k", "config": "c", "time_ms": 1},])"), "entry 1: not an object"},
      {with_entry(R"({'key': "k", "config": "c", "time_ms": 1})"), "expected a member name"},
      {with_entry("{\"key\": \"a\tb\", \"config\": \"c\", \"time_ms\": 1}"), "unescaped control character"},
      {with_entry(R"({"key": "a\xb", "config": "c", "time_ms": 1})"), "bad escape"},
      {with_entry(R"({"key": "a\u12", "config": "c", "time_ms": 1})"), "bad \\u escape"},
      {with_entry(R"({"key": "\ud800", "config": "c", "time_ms": 1})"), "unpaired high surrogate"},
      {with_entry(R"({"key": "\udc00", "config": "c", "time_ms": 1})"), "unpaired low surrogate"},
      {with_entry("{\"key\": \"\xC0\xAF\", \"config\": \"c\", \"time_ms\": 1}"), "invalid UTF-8"},   // overlong
      {with_entry("{\"key\": \"\xED\xA0\x80\", \"config\": \"c\", \"time_ms\": 1}"), "invalid UTF-8"},  // surrogate
      {with_entry("{\"key\": \"\xF4\x90\x80\x80\", \"config\": \"c\", \"time_ms\": 1}"), "invalid UTF-8"},
      {with_entry("{\"key\": \"\xE2\x82\", \"config\": \"c\", \"time_ms\": 1}"), "invalid UTF-8"},  // cut short
      {file(head + R"(, "entries": [], "x": tru)"), "expected a value"},
      {std::string("{\"format\": 1") + '\0' + ", \"x\": 1}", "not valid JSON"},  // a NUL byte
  };
  for (const auto& c : cases) EXPECT_TRUE(rejected(c.text, c.reason)) << "file: " << c.text.substr(0, 200);
}

TEST_F(AutotuneFile, EveryTruncationOfAValidFileIsRejected) {
  const std::string text = valid_file_text();
  write_text(path_, text);
  TuneCache probe;
  std::string warning;
  ASSERT_TRUE(probe.load_file(path_.string(), this_header(), &warning)) << warning;
  const size_t close = text.rfind('}');
  EXPECT_TRUE(rejected(text.substr(0, 0), "the file is empty"));
  for (size_t n = 1; n < close; ++n) {
    EXPECT_TRUE(rejected(text.substr(0, n), "unexpected end of file")) << "first " << n << " bytes";
  }
}

TEST_F(AutotuneFile, GarbageBytesAreRejected) {
  std::mt19937_64 rng(42);
  for (size_t length : {1, 2, 7, 100, 4096, 65537}) {
    for (int round = 0; round < 4; ++round) {
      std::string bytes(length, '\0');
      for (char& c : bytes) c = static_cast<char>(rng() & 0xFF);
      if (round == 1) bytes[0] = '{';  // get past the first check
      EXPECT_TRUE(rejected(bytes)) << length << " random bytes, round " << round;
    }
  }
  EXPECT_TRUE(rejected(std::string("\xEF\xBB\xBF") + valid_file_text(), "expected '{'"));  // a BOM is not JSON
}

TEST_F(AutotuneFile, DeepNestingIsRejectedWithoutRecursingIntoIt) {
  const size_t depth = 1000000;
  EXPECT_TRUE(rejected(std::string(depth, '['), "expected '{'"));
  const std::string head = R"({"format": 1, "flash_version": "0.1.0", "cuda_runtime": 13000, "gpu": "NVIDIA H200",)";
  EXPECT_TRUE(rejected(head + "\"x\": " + std::string(depth, '[') + std::string(depth, ']') + ", \"entries\": []}",
                       "nesting deeper than 32 levels"));
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  EXPECT_TRUE(rejected(head + "\"x\": " + objects, "nesting deeper than 32 levels"));
  EXPECT_TRUE(rejected(head + R"("entries": [{"key": "k", "config": "c", "time_ms": 1, "x": )" +
                           std::string(depth, '[') + "]}",
                       "nesting deeper than 32 levels"));
  // Within the limit an unknown member is skipped.
  const std::string ok = head + "\"x\": " + std::string(30, '[') + std::string(30, ']') + ", \"entries\": []}";
  write_text(path_, ok);
  TuneCache cache;
  std::string warning;
  EXPECT_TRUE(cache.load_file(path_.string(), this_header(), &warning)) << warning;
}

TEST_F(AutotuneFile, HugeFilesAreRefusedUnread) {
  std::string text = valid_file_text();
  text.append((size_t{16} << 20) + 1 - text.size(), ' ');  // valid JSON, one byte too many
  EXPECT_TRUE(rejected(text, "larger than 16 MiB"));
  text.resize(size_t{16} << 20);  // exactly the limit is read
  write_text(path_, text);
  TuneCache cache;
  std::string warning;
  EXPECT_TRUE(cache.load_file(path_.string(), this_header(), &warning)) << warning;
  EXPECT_EQ(cache.size(), 2u);
}

TEST_F(AutotuneFile, UnreadablePathsAreIgnoredWithAWarning) {
  TuneCache cache;
  std::string warning;
  EXPECT_FALSE(cache.load_file(dir_.string(), this_header(), &warning));  // a directory
  EXPECT_NE(warning.find("flash: ignoring autotune cache " + dir_.string() + ": "), std::string::npos) << warning;
  EXPECT_FALSE(cache.load_file(dir_.string(), this_header(), nullptr));
  EXPECT_EQ(cache.size(), 0u);
}

TEST_F(AutotuneFile, SaveLeavesNoTemporaryFilesAndReplacesTheOldFile) {
  TuneCache cache;
  cache.store("k1", entry("a", 1.0));
  std::string error;
  ASSERT_TRUE(cache.save_file(path_.string(), this_header(), &error)) << error;
  cache.store("k2", entry("b", 2.0));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(cache.save_file(path_.string(), this_header(), &error)) << error;
  EXPECT_EQ(list_dir(dir_), std::vector<std::string>{"cache.json"});
  TuneCache loaded;
  ASSERT_TRUE(loaded.load_file(path_.string(), this_header(), &error)) << error;
  EXPECT_EQ(loaded.size(), 2u);
  // Nothing to save is still a valid file.
  TuneCache empty;
  ASSERT_TRUE(empty.save_file(path_.string(), this_header(), nullptr));
  ASSERT_TRUE(loaded.load_file(path_.string(), this_header(), &error)) << error;
}

TEST_F(AutotuneFile, SaveFailuresAreCleanErrors) {
  TuneCache cache;
  cache.store("k", entry("a", 1.0));
  const std::string missing_dir = (dir_ / "no" / "such" / "cache.json").string();
  std::string error;
  EXPECT_FALSE(cache.save_file(missing_dir, this_header(), &error));
  EXPECT_NE(error.find("flash: cannot save autotune cache " + missing_dir), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  EXPECT_FALSE(cache.save_file(missing_dir, this_header(), nullptr));

  // A path that is not a regular file (a directory here) is never
  // replaced, and no temporary file is left behind.
  const fs::path occupied = dir_ / "occupied";
  fs::create_directory(occupied);
  error.clear();
  EXPECT_FALSE(cache.save_file(occupied.string(), this_header(), &error));
  EXPECT_NE(error.find("not a regular file"), std::string::npos) << error;
  EXPECT_EQ(list_dir(dir_), std::vector<std::string>{"occupied"});

  // A string the file cannot hold (not UTF-8) fails before any file exists.
  CacheFileHeader bad = this_header();
  bad.gpu = "GPU \xFF";
  EXPECT_FALSE(cache.save_file(path_.string(), bad, &error));
  EXPECT_NE(error.find("not valid UTF-8"), std::string::npos) << error;
  EXPECT_EQ(list_dir(dir_), std::vector<std::string>{"occupied"});
}

TEST_F(AutotuneFile, EightThreadsShareOneCache) {
  constexpr int kThreads = 8;
  constexpr int kOps = 10000;
  constexpr int kShared = 64;  // keys every thread writes, always with the same value per key
  constexpr int kOwn = 100;    // keys only one thread writes
  TuneCache cache;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kOps; ++i) {
        const int s = (i * 7 + t) % kShared;
        const std::string shared_key = "shared|" + std::to_string(s);
        cache.store(shared_key, entry("cfg" + std::to_string(s), s));
        const auto shared = cache.lookup(shared_key);
        if (!shared || shared->config != "cfg" + std::to_string(s) || shared->time_ms != s) ++failures;

        const std::string own_key = "own|" + std::to_string(t) + "|" + std::to_string(i % kOwn);
        cache.store(own_key, entry("t" + std::to_string(t), i));
        const auto own = cache.lookup(own_key);
        if (!own || own->time_ms != i || own->config != "t" + std::to_string(t)) ++failures;

        if (i % 1000 == 0) {
          const auto all = cache.entries();
          if (!std::is_sorted(all.begin(), all.end(), [](auto& a, auto& b) { return a.first < b.first; })) {
            ++failures;
          }
          if (cache.size() > static_cast<size_t>(kShared + kThreads * kOwn)) ++failures;
        }
        if (t < 2 && i % 2500 == 0) {  // two threads also save while the others store
          std::string error;
          if (!cache.save_file(path_.string(), this_header(), &error)) ++failures;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(cache.size(), static_cast<size_t>(kShared + kThreads * kOwn));
  for (int t = 0; t < kThreads; ++t) {
    for (int k = 0; k < kOwn; ++k) {
      const auto e = cache.lookup("own|" + std::to_string(t) + "|" + std::to_string(k));
      ASSERT_TRUE(e.has_value());
      EXPECT_EQ(e->time_ms, kOps - kOwn + k);  // the last i with i % kOwn == k
    }
  }
  EXPECT_EQ(list_dir(dir_), std::vector<std::string>{"cache.json"});
  TuneCache loaded;
  std::string warning;
  EXPECT_TRUE(loaded.load_file(path_.string(), this_header(), &warning)) << warning;
}

}  // namespace

// The autotune cache file's text: a hand-written reader and writer for the
// one JSON object it holds, so flash needs no JSON library.
//
//   {"format": 1, "flash_version": "0.1.0", "cuda_runtime": 13000,
//    "gpu": "NVIDIA H200",
//    "entries": [{"key": "...", "config": "...", "time_ms": 1.234}, ...]}
//
// The reader is strict JSON (RFC 8259), valid UTF-8 only, and schema-directed:
// it keeps only the members above and skips unknown ones, so a hostile file
// costs no more memory than its entries. Nesting is limited to
// kMaxJsonDepth levels, so a deeply nested file cannot overflow the stack.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tune_cache.h"

namespace flash::detail {

// The value of "format" this library writes and reads.
constexpr int kCacheFileFormat = 1;
// Deepest nesting of arrays and objects the reader follows.
constexpr int kMaxJsonDepth = 32;

struct CacheFileContents {
  CacheFileHeader header;
  std::vector<std::pair<std::string, CacheEntry>> entries;  // file order; sources are kCache
};

// Parses `text`. On failure returns false and sets *why to one line such as
// "not valid JSON: expected ',' or '}' at byte 120" or "format 2 is not
// supported (this flash reads format 1)". Never throws except std::bad_alloc.
bool parse_cache_json(std::string_view text, CacheFileContents* out, std::string* why);

// Writes the file's text, entries in the order given, one per line. Fails
// (false, *why) when a string is not valid UTF-8. Entries whose time is not
// finite and >= 0 are left out: the reader would reject them.
bool write_cache_json(const CacheFileHeader& header, const std::vector<std::pair<std::string, CacheEntry>>& entries,
                      std::string* out, std::string* why);

// `s` as a JSON string literal, cut to at most `max_bytes` bytes of input
// (then "..." is appended): file content quoted in a one-line message.
std::string quote_for_message(std::string_view s, size_t max_bytes = 64);

}  // namespace flash::detail

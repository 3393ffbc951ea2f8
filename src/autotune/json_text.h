// Text helpers of the autotune cache file's JSON, shared by its reader
// (cache_json_read.cpp) and writer (cache_json.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace flash::detail {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is not
// one (truncated, overlong, a surrogate, or above U+10FFFF).
size_t utf8_sequence_length(std::string_view s, size_t i);
// Appends code point `cp` as UTF-8.
void append_utf8(std::string* out, uint32_t cp);
// `s` escaped for the inside of a JSON string literal: quotes, backslashes
// and control characters. Other bytes are copied (the caller checks UTF-8).
void append_escaped(std::string* out, std::string_view s);
bool is_valid_utf8(std::string_view s);
// Shortest text that reads back as exactly `v` (locale-independent).
std::string format_number(double v);
bool is_int_in_range(double v, double lo, double hi);

}  // namespace flash::detail

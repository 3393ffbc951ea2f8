// Writer of the autotune cache file's JSON, and the text helpers its reader
// shares (see cache_json.h, json_text.h).
#include "cache_json.h"
#include "json_text.h"

#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <system_error>

namespace flash::detail {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is not
// one (truncated, overlong, a surrogate, or above U+10FFFF).
size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong below U+0800
    if (c == 0xED) hi = 0x9F;  // U+D800..U+DFFF are surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;  // overlong below U+10000
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (s.size() - i < n) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  }
  return n;
}

void append_utf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// `s` escaped for the inside of a JSON string literal: quotes, backslashes
// and control characters. Other bytes are copied (the caller checks UTF-8).
void append_escaped(std::string* out, std::string_view s) {
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out->push_back('\\');
      out->push_back(ch);
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      out->append(buf);
    } else {
      out->push_back(ch);
    }
  }
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// Shortest text that reads back as exactly `v` (locale-independent).
std::string format_number(double v) {
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, result.ptr);
}

bool is_int_in_range(double v, double lo, double hi) { return std::floor(v) == v && v >= lo && v <= hi; }

bool write_cache_json(const CacheFileHeader& header, const std::vector<std::pair<std::string, CacheEntry>>& entries,
                      std::string* out, std::string* why) {
  const auto check = [&](const char* what, const std::string& s) {
    if (is_valid_utf8(s)) return true;
    *why = std::string(what) + " " + quote_for_message(s) + " is not valid UTF-8";
    return false;
  };
  if (!check("flash_version", header.flash_version) || !check("gpu name", header.gpu)) return false;
  std::string text = "{\n  \"format\": " + std::to_string(kCacheFileFormat) + ",\n  \"flash_version\": \"";
  append_escaped(&text, header.flash_version);
  text += "\",\n  \"cuda_runtime\": " + std::to_string(header.cuda_runtime) + ",\n  \"gpu\": \"";
  append_escaped(&text, header.gpu);
  text += "\",\n  \"entries\": [";
  bool first = true;
  for (const auto& [key, entry] : entries) {
    if (!std::isfinite(entry.time_ms) || entry.time_ms < 0.0 || key.empty() || entry.config.empty()) continue;
    if (!check("key", key) || !check("config", entry.config)) return false;
    text += first ? "\n    {\"key\": \"" : ",\n    {\"key\": \"";
    append_escaped(&text, key);
    text += "\", \"config\": \"";
    append_escaped(&text, entry.config);
    text += "\", \"time_ms\": " + format_number(entry.time_ms) + "}";
    first = false;
  }
  text += first ? "]\n}\n" : "\n  ]\n}\n";
  *out = std::move(text);
  return true;
}

std::string quote_for_message(std::string_view s, size_t max_bytes) {
  size_t cut = s.size();
  if (cut > max_bytes) {
    cut = max_bytes;
    // Back up to the start of a UTF-8 sequence rather than split one.
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  }
  std::string out = "\"";
  append_escaped(&out, s.substr(0, cut));
  out += cut < s.size() ? "\"..." : "\"";
  return out;
}

}  // namespace flash::detail

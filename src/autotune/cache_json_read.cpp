// Reader of the autotune cache file's JSON (see cache_json.h).
#include "cache_json.h"
#include "json_text.h"

#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <system_error>

namespace flash::detail {
namespace {

// Schema-directed recursive-descent reader over the whole file's text.
class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  bool parse(CacheFileContents* out);
  const std::string& error() const { return error_; }

 private:
  // A malformed document: "not valid JSON: <what> at byte N".
  bool fail_syntax(const std::string& what) {
    if (error_.empty()) error_ = "not valid JSON: " + what + " at byte " + std::to_string(pos_);
    return false;
  }
  // Well-formed JSON that is not a cache file: "<what> at byte N". (Where
  // the text ends instead, the file was cut short.)
  bool fail_schema(const std::string& what) {
    if (at_end()) return fail_syntax("unexpected end of file");
    if (error_.empty()) error_ = what + " at byte " + std::to_string(pos_);
    return false;
  }
  bool fail_eof_or(const std::string& what) { return fail_syntax(at_end() ? "unexpected end of file" : what); }

  bool at_end() const { return pos_ >= text_.size(); }
  void skip_ws() {
    while (!at_end() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  // The next significant character, or -1 at the end.
  int peek() {
    skip_ws();
    return at_end() ? -1 : static_cast<unsigned char>(text_[pos_]);
  }
  bool consume(char c) {
    if (peek() != static_cast<unsigned char>(c)) return false;
    ++pos_;
    return true;
  }
  bool expect(char c) {
    if (consume(c)) return true;
    return fail_eof_or(std::string("expected '") + c + "'");
  }
  // After a member or element: true to go on, false at `close` or on error.
  bool next_or_close(char close, bool* more) {
    if (consume(',')) {
      *more = true;
      return true;
    }
    if (consume(close)) {
      *more = false;
      return true;
    }
    return fail_eof_or(std::string("expected ',' or '") + close + "'");
  }

  bool parse_hex4(uint32_t* out);
  bool parse_string(std::string* out);
  bool parse_number(double* out);
  bool skip_value(int depth);

  bool member_string(const char* name, std::string* out);
  bool member_number(const char* name, double* out);
  bool parse_entries(std::vector<std::pair<std::string, CacheEntry>>* out);
  bool parse_entry(size_t index, std::pair<std::string, CacheEntry>* out);

  std::string_view text_;
  size_t pos_ = 0;
  std::string error_;
};

bool Reader::parse_hex4(uint32_t* out) {
  if (text_.size() - pos_ < 4) return fail_syntax("unexpected end of file");
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    const char c = text_[pos_];
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    if (digit < 0) return fail_syntax("bad \\u escape");
    v = v * 16 + static_cast<uint32_t>(digit);
    ++pos_;
  }
  *out = v;
  return true;
}

bool Reader::parse_string(std::string* out) {
  out->clear();
  ++pos_;  // the opening quote, checked by the caller
  while (true) {
    if (at_end()) return fail_syntax("unexpected end of file in a string");
    const char ch = text_[pos_];
    const auto c = static_cast<unsigned char>(ch);
    if (ch == '"') {
      ++pos_;
      return true;
    }
    if (c < 0x20) return fail_syntax("unescaped control character in a string");
    if (ch != '\\') {
      const size_t n = utf8_sequence_length(text_, pos_);
      if (n == 0) return fail_syntax("invalid UTF-8");
      out->append(text_.substr(pos_, n));
      pos_ += n;
      continue;
    }
    ++pos_;
    if (at_end()) return fail_syntax("unexpected end of file in a string");
    const char e = text_[pos_++];
    switch (e) {
      case '"': out->push_back('"'); break;
      case '\\': out->push_back('\\'); break;
      case '/': out->push_back('/'); break;
      case 'b': out->push_back('\b'); break;
      case 'f': out->push_back('\f'); break;
      case 'n': out->push_back('\n'); break;
      case 'r': out->push_back('\r'); break;
      case 't': out->push_back('\t'); break;
      case 'u': {
        uint32_t cp = 0;
        if (!parse_hex4(&cp)) return false;
        if (cp >= 0xDC00 && cp <= 0xDFFF) return fail_syntax("unpaired low surrogate");
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          uint32_t low = 0;
          if (text_.substr(pos_, 2) != "\\u") return fail_syntax("unpaired high surrogate");
          pos_ += 2;
          if (!parse_hex4(&low)) return false;
          if (low < 0xDC00 || low > 0xDFFF) return fail_syntax("unpaired high surrogate");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        append_utf8(out, cp);
        break;
      }
      default:
        --pos_;
        return fail_syntax("bad escape");
    }
  }
}

bool Reader::parse_number(double* out) {
  const size_t start = pos_;
  const auto digit_at = [&](size_t i) { return i < text_.size() && text_[i] >= '0' && text_[i] <= '9'; };
  if (!at_end() && text_[pos_] == '-') ++pos_;
  if (!digit_at(pos_)) return fail_eof_or("expected a digit");
  if (text_[pos_] == '0') {
    ++pos_;
  } else {
    while (digit_at(pos_)) ++pos_;
  }
  if (!at_end() && text_[pos_] == '.') {
    ++pos_;
    if (!digit_at(pos_)) return fail_eof_or("expected a digit after '.'");
    while (digit_at(pos_)) ++pos_;
  }
  if (!at_end() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
    ++pos_;
    if (!at_end() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
    if (!digit_at(pos_)) return fail_eof_or("expected a digit in the exponent");
    while (digit_at(pos_)) ++pos_;
  }
  const char* first = text_.data() + start;
  const char* last = text_.data() + pos_;
  const auto result = std::from_chars(first, last, *out);
  if (result.ec == std::errc::result_out_of_range) {
    pos_ = start;
    return fail_schema("number " + quote_for_message(std::string_view(first, last - first), 32) +
                       " is out of range");
  }
  if (result.ec != std::errc() || result.ptr != last) return fail_syntax("bad number");
  return true;
}

bool Reader::skip_value(int depth) {
  const int c = peek();
  if (c == '"') {
    std::string ignored;
    return parse_string(&ignored);
  }
  if (c == '-' || (c >= '0' && c <= '9')) {
    double ignored = 0;
    return parse_number(&ignored);
  }
  for (const std::string_view literal : {"true", "false", "null"}) {
    if (text_.substr(pos_, literal.size()) == literal) {
      pos_ += literal.size();
      return true;
    }
  }
  if (c != '[' && c != '{') return fail_eof_or("expected a value");
  if (depth >= kMaxJsonDepth) return fail_syntax("nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  ++pos_;
  const char close = c == '[' ? ']' : '}';
  if (consume(close)) return true;
  for (bool more = true; more;) {
    if (close == '}') {
      std::string ignored;
      if (peek() != '"') return fail_eof_or("expected a member name");
      if (!parse_string(&ignored) || !expect(':')) return false;
    }
    if (!skip_value(depth + 1) || !next_or_close(close, &more)) return false;
  }
  return true;
}

bool Reader::member_string(const char* name, std::string* out) {
  if (peek() != '"') return fail_schema(std::string("\"") + name + "\" must be a string");
  return parse_string(out);
}

bool Reader::member_number(const char* name, double* out) {
  const int c = peek();
  if (c != '-' && !(c >= '0' && c <= '9')) return fail_schema(std::string("\"") + name + "\" must be a number");
  return parse_number(out);
}

bool Reader::parse_entry(size_t index, std::pair<std::string, CacheEntry>* out) {
  const std::string where = "entry " + std::to_string(index) + ": ";
  if (peek() != '{') return fail_schema(where + "not an object");
  ++pos_;
  bool has_key = false, has_config = false, has_time = false;
  if (!consume('}')) {
    for (bool more = true; more;) {
      std::string name;
      if (peek() != '"') return fail_eof_or("expected a member name");
      if (!parse_string(&name) || !expect(':')) return false;
      bool ok = true;
      bool* seen = nullptr;
      if (name == "key") {
        seen = &has_key;
        ok = member_string("key", &out->first);
      } else if (name == "config") {
        seen = &has_config;
        ok = member_string("config", &out->second.config);
      } else if (name == "time_ms") {
        seen = &has_time;
        ok = member_number("time_ms", &out->second.time_ms);
      } else {
        ok = skip_value(/*depth=*/3);  // inside the file object, "entries" and this entry
      }
      if (!ok) return false;
      if (seen != nullptr) {
        if (*seen) return fail_schema(where + "duplicate \"" + name + "\"");
        *seen = true;
      }
      if (!next_or_close('}', &more)) return false;
    }
  }
  if (!has_key) return fail_schema(where + "missing \"key\"");
  if (!has_config) return fail_schema(where + "missing \"config\"");
  if (!has_time) return fail_schema(where + "missing \"time_ms\"");
  if (out->first.empty()) return fail_schema(where + "\"key\" is empty");
  if (out->second.config.empty()) return fail_schema(where + "\"config\" is empty");
  if (!(out->second.time_ms >= 0.0)) return fail_schema(where + "\"time_ms\" must be >= 0");
  out->second.source = ChoiceSource::kCache;
  return true;
}

bool Reader::parse_entries(std::vector<std::pair<std::string, CacheEntry>>* out) {
  if (peek() != '[') return fail_schema("\"entries\" must be an array");
  ++pos_;
  if (consume(']')) return true;
  for (bool more = true; more;) {
    std::pair<std::string, CacheEntry> entry;
    if (!parse_entry(out->size(), &entry)) return false;
    out->push_back(std::move(entry));
    if (!next_or_close(']', &more)) return false;
  }
  return true;
}

bool Reader::parse(CacheFileContents* out) {
  if (peek() == -1) {
    error_ = "the file is empty";
    return false;
  }
  if (peek() != '{') return fail_syntax("expected '{'");
  ++pos_;
  enum Member { kFormat, kVersion, kRuntime, kGpu, kEntries, kMemberCount };
  static const char* const kNames[kMemberCount] = {"format", "flash_version", "cuda_runtime", "gpu", "entries"};
  bool seen[kMemberCount] = {};
  if (!consume('}')) {
    for (bool more = true; more;) {
      std::string name;
      if (peek() != '"') return fail_eof_or("expected a member name");
      if (!parse_string(&name) || !expect(':')) return false;
      int member = kMemberCount;
      for (int m = 0; m < kMemberCount; ++m) {
        if (name == kNames[m]) member = m;
      }
      if (member < kMemberCount && seen[member]) return fail_schema("duplicate \"" + name + "\"");
      double number = 0;
      switch (member) {
        case kFormat:
          if (!member_number("format", &number)) return false;
          if (number != kCacheFileFormat) {
            error_ = "format " + format_number(number) + " is not supported (this flash reads format " +
                     std::to_string(kCacheFileFormat) + ")";
            return false;
          }
          break;
        case kVersion:
          if (!member_string("flash_version", &out->header.flash_version)) return false;
          break;
        case kRuntime:
          if (!member_number("cuda_runtime", &number)) return false;
          if (!is_int_in_range(number, 0, INT_MAX)) return fail_schema("\"cuda_runtime\" must be an integer >= 0");
          out->header.cuda_runtime = static_cast<int>(number);
          break;
        case kGpu:
          if (!member_string("gpu", &out->header.gpu)) return false;
          break;
        case kEntries:
          if (!parse_entries(&out->entries)) return false;
          break;
        default:
          if (!skip_value(/*depth=*/1)) return false;  // a member a later flash may add
          break;
      }
      if (member < kMemberCount) seen[member] = true;
      if (!next_or_close('}', &more)) return false;
    }
  }
  skip_ws();
  if (!at_end()) return fail_syntax("unexpected data after the object");
  for (int m = 0; m < kMemberCount; ++m) {
    if (!seen[m]) {
      error_ = std::string("missing \"") + kNames[m] + "\"";
      return false;
    }
  }
  return true;
}

}  // namespace

bool parse_cache_json(std::string_view text, CacheFileContents* out, std::string* why) {
  CacheFileContents parsed;
  Reader reader(text);
  if (!reader.parse(&parsed)) {
    *why = reader.error();
    return false;
  }
  *out = std::move(parsed);
  return true;
}

}  // namespace flash::detail

#include "json.h"

#include <stdexcept>

namespace ocf {
namespace {

class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  Json ParseDocument() {
    Json value = ParseValue(0);
    SkipSpace();
    if (at_ != text_.size()) Error("text after the value");
    return value;
  }

 private:
  [[noreturn]] void Error(const std::string& what) const {
    throw std::runtime_error("JSON: " + what + " at offset " +
                             std::to_string(at_));
  }

  void SkipSpace() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\t' ||
                                  text_[at_] == '\n' || text_[at_] == '\r')) {
      ++at_;
    }
  }

  bool Consume(const char* word) {
    size_t length = std::char_traits<char>::length(word);
    if (text_.compare(at_, length, word) != 0) return false;
    at_ += length;
    return true;
  }

  Json ParseValue(int depth) {
    if (depth > 512) Error("nesting too deep");
    SkipSpace();
    if (at_ >= text_.size()) Error("unexpected end");
    Json value;
    char c = text_[at_];
    if (c == '{') {
      value.kind = Json::Kind::kObject;
      ParseObject(value, depth);
    } else if (c == '[') {
      value.kind = Json::Kind::kArray;
      ParseArray(value, depth);
    } else if (c == '"') {
      value.kind = Json::Kind::kString;
      value.text = ParseString();
    } else if (Consume("true")) {
      value.kind = Json::Kind::kBool;
      value.boolean = true;
    } else if (Consume("false")) {
      value.kind = Json::Kind::kBool;
    } else if (Consume("null")) {
      value.kind = Json::Kind::kNull;
    } else {
      value.kind = Json::Kind::kNumber;
      value.text = ParseNumber();
    }
    return value;
  }

  void ParseObject(Json& object, int depth) {
    ++at_;
    SkipSpace();
    if (at_ < text_.size() && text_[at_] == '}') {
      ++at_;
      return;
    }
    while (true) {
      SkipSpace();
      if (at_ >= text_.size() || text_[at_] != '"') Error("expected a member name");
      std::string name = ParseString();
      SkipSpace();
      if (at_ >= text_.size() || text_[at_] != ':') Error("expected ':'");
      ++at_;
      object.members.emplace_back(std::move(name), ParseValue(depth + 1));
      SkipSpace();
      if (at_ < text_.size() && text_[at_] == ',') {
        ++at_;
        continue;
      }
      if (at_ < text_.size() && text_[at_] == '}') {
        ++at_;
        return;
      }
      Error("expected ',' or '}'");
    }
  }

  void ParseArray(Json& array, int depth) {
    ++at_;
    SkipSpace();
    if (at_ < text_.size() && text_[at_] == ']') {
      ++at_;
      return;
    }
    while (true) {
      array.items.push_back(ParseValue(depth + 1));
      SkipSpace();
      if (at_ < text_.size() && text_[at_] == ',') {
        ++at_;
        continue;
      }
      if (at_ < text_.size() && text_[at_] == ']') {
        ++at_;
        return;
      }
      Error("expected ',' or ']'");
    }
  }

  std::string ParseNumber() {
    size_t start = at_;
    while (at_ < text_.size() &&
           std::string("+-0123456789.eE").find(text_[at_]) != std::string::npos) {
      ++at_;
    }
    if (at_ == start) Error("unexpected character");
    return text_.substr(start, at_ - start);
  }

  uint32_t ParseHex4() {
    if (at_ + 4 > text_.size()) Error("short \\u escape");
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text_[at_++];
      value <<= 4;
      if (c >= '0' && c <= '9') value |= c - '0';
      else if (c >= 'a' && c <= 'f') value |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') value |= c - 'A' + 10;
      else Error("bad \\u escape");
    }
    return value;
  }

  static void AppendUtf8(std::string& out, uint32_t code) {
    if (code < 0x80) {
      out += char(code);
    } else if (code < 0x800) {
      out += char(0xC0 | (code >> 6));
      out += char(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += char(0xE0 | (code >> 12));
      out += char(0x80 | ((code >> 6) & 0x3F));
      out += char(0x80 | (code & 0x3F));
    } else {
      out += char(0xF0 | (code >> 18));
      out += char(0x80 | ((code >> 12) & 0x3F));
      out += char(0x80 | ((code >> 6) & 0x3F));
      out += char(0x80 | (code & 0x3F));
    }
  }

  uint32_t ParseEscapedCodePoint() {
    uint32_t code = ParseHex4();
    if (code >= 0xD800 && code < 0xDC00) {  // a surrogate pair
      if (!Consume("\\u")) Error("lone surrogate");
      uint32_t low = ParseHex4();
      if (low < 0xDC00 || low >= 0xE000) Error("bad surrogate pair");
      code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    } else if (code >= 0xDC00 && code < 0xE000) {
      Error("lone surrogate");
    }
    return code;
  }

  std::string ParseString() {
    ++at_;
    std::string out;
    while (true) {
      if (at_ >= text_.size()) Error("unterminated string");
      char c = text_[at_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) Error("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ >= text_.size()) Error("unterminated escape");
      char e = text_[at_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': AppendUtf8(out, ParseEscapedCodePoint()); break;
        default: Error("bad escape");
      }
    }
  }

  const std::string& text_;
  size_t at_ = 0;
};

}  // namespace

const Json* Json::Find(const std::string& name) const {
  for (const auto& member : members) {
    if (member.first == name) return &member.second;
  }
  return nullptr;
}

const std::string& Json::StringAt(const std::string& name) const {
  const Json* member = Find(name);
  if (member == nullptr || member->kind != Kind::kString) {
    throw std::runtime_error("request has no string field '" + name + "'");
  }
  return member->text;
}

Json ParseJson(const std::string& text) { return Parser(text).ParseDocument(); }

std::string Quote(const std::string& value) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char c : value) {
    auto byte = static_cast<unsigned char>(c);
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (byte < 0x20 || byte == 0x7F) {
      out += "\\u00";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xF];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace ocf

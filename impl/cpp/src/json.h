// A small JSON (RFC 8259) reader and the string quoting the adapter's
// answers need. Numbers keep their text: the conformance protocol moves
// 64-bit integers as strings, and the request ids it sends are small.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ocf {

struct Json {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  std::string text;  // a string's content, or a number's spelling
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  // The member named `name`, or nullptr (also when this is not an object).
  const Json* Find(const std::string& name) const;
  // The member `name` as a string; throws std::runtime_error if absent or
  // not a string.
  const std::string& StringAt(const std::string& name) const;
};

// Parses one JSON text; throws std::runtime_error naming the position of
// the first error.
Json ParseJson(const std::string& text);

// `value` as a JSON string literal, quotes included.
std::string Quote(const std::string& value);

}  // namespace ocf

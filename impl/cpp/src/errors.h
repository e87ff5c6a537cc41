// The seven error categories of spec/errors.md [R-ERR-001], and the one
// exception type through which every check of this reader fails.
#pragma once

#include <stdexcept>
#include <string>

namespace ocf {

enum class Category {
  kMalformed,
  kInvalid,
  kUnsupportedVersion,
  kUnknownRequiredFeature,
  kIntegrity,
  kLimitExceeded,
  kNotFound,
};

// The category's name as spec/errors.md spells it (MALFORMED, INVALID, ...).
const char* CategoryName(Category category);

// A failed check of the format: the category decides what a caller (the
// conformance adapter) reports; the message is for humans.
class FormatError : public std::runtime_error {
 public:
  FormatError(Category category, const std::string& message)
      : std::runtime_error(message), category_(category) {}
  Category category() const { return category_; }

 private:
  Category category_;
};

// Throws FormatError; `requirement` is the spec id the check enforces.
[[noreturn]] void Fail(Category category, const std::string& requirement,
                       const std::string& message);

}  // namespace ocf

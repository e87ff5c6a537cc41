#include "errors.h"

namespace ocf {

const char* CategoryName(Category category) {
  switch (category) {
    case Category::kMalformed: return "MALFORMED";
    case Category::kInvalid: return "INVALID";
    case Category::kUnsupportedVersion: return "UNSUPPORTED_VERSION";
    case Category::kUnknownRequiredFeature: return "UNKNOWN_REQUIRED_FEATURE";
    case Category::kIntegrity: return "INTEGRITY";
    case Category::kLimitExceeded: return "LIMIT_EXCEEDED";
    case Category::kNotFound: return "NOT_FOUND";
  }
  return "?";
}

void Fail(Category category, const std::string& requirement,
          const std::string& message) {
  throw FormatError(category, std::string(CategoryName(category)) + ": " +
                                  message + " [" + requirement + "]");
}

}  // namespace ocf

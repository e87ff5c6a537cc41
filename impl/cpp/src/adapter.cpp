// The conformance adapter of the C++ implementation: JSON lines on stdin
// and stdout as conformance/protocol.md (version 1) defines them.
#include <charconv>
#include <iostream>
#include <memory>
#include <string>

#include "checkpoint.h"
#include "errors.h"
#include "json.h"
#include "meaning.h"
#include "merge.h"
#include "source.h"
#include "writer.h"

namespace {

constexpr const char* kName = "ocf-cpp";
constexpr const char* kVersion = "0.1.0";

std::string Hello(const std::string& id) {
  return "{\"id\": " + id + ", \"result\": \"hello\", \"name\": \"" + kName + "\", \"version\": \"" + kVersion +
         "\", \"protocol\": 1, \"ops\": [\"read\", \"write\", \"merge\"], \"features\": []}";
}

std::string Read(const std::string& id, const ocf::Json& request) {
  std::unique_ptr<ocf::Checkpoint> checkpoint = ocf::Checkpoint::Open(request.StringAt("path"));
  return "{\"id\": " + id + ", \"result\": \"ok\", " + ocf::DescribeMeaning(*checkpoint) + "}";
}

std::string Write(const std::string& id, const ocf::Json& request) {
  const std::string& layout = request.StringAt("layout");
  if (layout != "file" && layout != "directory") throw std::runtime_error("unknown layout '" + layout + "'");
  ocf::WriteCheckpoint(ocf::ReadSource(request.StringAt("source")), request.StringAt("output"),
                       layout == "file" ? ocf::Layout::kFile : ocf::Layout::kDirectory);
  return "{\"id\": " + id + ", \"result\": \"ok\"}";
}

std::string Merge(const std::string& id, const ocf::Json& request) {
  const ocf::Json* parts = request.Find("parts");
  if (parts == nullptr || parts->kind != ocf::Json::Kind::kNumber) throw std::runtime_error("no 'parts' count");
  // A count that is not an integer, or does not fit, is out of range for
  // the merge, which refuses it (M0).
  int64_t count = -1;
  auto [end, error] = std::from_chars(parts->text.data(), parts->text.data() + parts->text.size(), count);
  if (error != std::errc() || end != parts->text.data() + parts->text.size()) count = -1;
  ocf::MergeParts(request.StringAt("path"), request.StringAt("save_id"), count);
  return "{\"id\": " + id + ", \"result\": \"ok\"}";
}

// The answer to one request line, or "" for bye.
std::string Answer(const std::string& line, bool* bye) {
  std::string id = "null";
  try {
    ocf::Json request = ocf::ParseJson(line);
    const ocf::Json* id_field = request.Find("id");
    if (id_field != nullptr && id_field->kind == ocf::Json::Kind::kNumber) id = id_field->text;
    const std::string& op = request.StringAt("op");
    if (op == "bye") {
      *bye = true;
      return "";
    }
    if (op == "hello") return Hello(id);
    if (op == "read") return Read(id, request);
    if (op == "write") return Write(id, request);
    if (op == "merge") return Merge(id, request);
    return "{\"id\": " + id + ", \"result\": \"skipped\", \"reason\": " +
           ocf::Quote("ocf-cpp does not implement the op '" + op + "'") + "}";
  } catch (const ocf::FormatError& error) {
    return "{\"id\": " + id + ", \"result\": \"error\", \"category\": \"" + ocf::CategoryName(error.category()) +
           "\", \"message\": " + ocf::Quote(error.what()) + "}";
  } catch (const std::exception& error) {
    return "{\"id\": " + id + ", \"result\": \"error\", \"category\": null, \"message\": " +
           ocf::Quote(std::string("not a format error: ") + error.what()) + "}";
  }
}

}  // namespace

int main() {
  std::ios::sync_with_stdio(false);
  std::string line;
  while (std::getline(std::cin, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    bool bye = false;
    std::string answer = Answer(line, &bye);
    if (bye) return 0;
    std::cout << answer << '\n' << std::flush;
  }
  return 0;
}

// Reading a JSON-RPC answer's head with simdjson On-Demand (contract in
// server/internal/answer_head.h).
#include "server/internal/answer_head.h"

#include <simdjson.h>

#include <algorithm>
#include <string>

namespace envforge::server::internal {

namespace ondemand = simdjson::ondemand;

namespace {

Status NotJson(std::string_view what, simdjson::error_code error) {
  return InvalidArgumentError(std::string(what) + ": " + simdjson::error_message(error));
}

// The value's text as it stands in the answer, parsed by nlohmann (a kept member: small).
Result<Json> ToJson(ondemand::value value) {
  ondemand::json_type type;
  if (auto error = value.type().get(type)) return NotJson("answer member", error);
  std::string_view raw;
  simdjson::error_code error = simdjson::SUCCESS;
  if (type == ondemand::json_type::object) {
    ondemand::object object;
    error = value.get_object().get(object);
    if (!error) error = object.raw_json().get(raw);
  } else if (type == ondemand::json_type::array) {
    ondemand::array array;
    error = value.get_array().get(array);
    if (!error) error = array.raw_json().get(raw);
  } else {
    raw = value.raw_json_token();
  }
  if (error) return NotJson("answer member", error);
  return ParseJson(raw, "answer member");
}

// "result" without the skipped members; any other shape of result is kept whole.
Result<Json> ResultHead(ondemand::value value, std::initializer_list<std::string_view> skipped) {
  ondemand::json_type type;
  if (auto error = value.type().get(type)) return NotJson("answer result", error);
  if (type != ondemand::json_type::object) return ToJson(value);
  ondemand::object object;
  if (auto error = value.get_object().get(object)) return NotJson("answer result", error);
  Json head = Json::object();
  for (auto field : object) {
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return NotJson("answer result key", error);
    // A skipped value is never visited: On-Demand steps over it to the next key.
    if (std::find(skipped.begin(), skipped.end(), key) != skipped.end()) continue;
    ondemand::value member;
    if (auto error = field.value().get(member)) return NotJson("answer result member", error);
    auto kept = ToJson(member);
    if (!kept.ok()) return kept.status();
    head[std::string(key)] = std::move(kept).value();
  }
  return head;
}

}  // namespace

Result<Json> ParseAnswerHead(std::string_view text, std::initializer_list<std::string_view> skipped_result_members) {
  // One parser per io thread: it keeps its buffers between answers.
  thread_local ondemand::parser parser;
  simdjson::padded_string padded(text);
  ondemand::document document;
  ondemand::object object;
  // A first pass finds where the object ends (this On-Demand has no end-of-document check), so
  // that text after it is refused as nlohmann's parse refused it.
  std::string_view object_text;
  if (auto error = parser.iterate(padded).get(document)) return NotJson("answer", error);
  if (auto error = document.get_object().get(object)) return NotJson("answer", error);
  if (auto error = object.raw_json().get(object_text)) return NotJson("answer", error);
  const size_t object_end = static_cast<size_t>(object_text.data() - padded.data()) + object_text.size();
  if (text.find_first_not_of(" \t\r\n", object_end) != std::string_view::npos) {
    return InvalidArgumentError("answer: text after the JSON object");
  }
  if (auto error = parser.iterate(padded).get(document)) return NotJson("answer", error);
  if (auto error = document.get_object().get(object)) return NotJson("answer", error);
  Json answer = Json::object();
  for (auto field : object) {
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return NotJson("answer key", error);
    ondemand::value member;
    if (auto error = field.value().get(member)) return NotJson("answer member", error);
    auto kept = key == "result" ? ResultHead(member, skipped_result_members) : ToJson(member);
    if (!kept.ok()) return kept.status();
    answer[std::string(key)] = std::move(kept).value();
  }
  return answer;
}

}  // namespace envforge::server::internal

#include "base/json.h"

#include <string>
#include <utility>

#include "base/preserialized_json.h"

namespace envforge {

Status CheckJsonTextDepth(std::string_view text, int max_depth, std::string_view what) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is, cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '[':
      case '{':
        if (++depth > max_depth) {
          return InvalidArgumentError(std::string(what) + " nests deeper than " + std::to_string(max_depth) +
                                      " levels of arrays and objects (byte " + std::to_string(i) + "); the limit is " +
                                      std::to_string(max_depth));
        }
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;  // an unbalanced bracket is the parser's error to report
        break;
      default: break;
    }
  }
  return Status::Ok();
}

bool JsonDepthWithin(const Json& value, int max_depth) {
  if (!value.is_structured()) return true;
  if (max_depth <= 0) return false;
  for (const Json& item : value) {
    if (!JsonDepthWithin(item, max_depth - 1)) return false;
  }
  return true;
}

namespace {

template <typename JsonType>
Result<JsonType> ParseBounded(std::string_view text, std::string_view what, int max_depth) {
  ENVFORGE_RETURN_IF_ERROR(CheckJsonTextDepth(text, max_depth, what));
  JsonType value = JsonType::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    // Re-parse with exceptions only on the error path to recover the position for the message.
    try {
      JsonType ignored = JsonType::parse(text);
      (void)ignored;
    } catch (const typename JsonType::parse_error& error) {
      return InvalidArgumentError(std::string(what) + " is not valid JSON (byte " + std::to_string(error.byte) + ")");
    } catch (...) {
    }
    return InvalidArgumentError(std::string(what) + " is not valid JSON");
  }
  return value;
}

}  // namespace

Result<Json> ParseJson(std::string_view text, std::string_view what, int max_depth) {
  return ParseBounded<Json>(text, what, max_depth);
}

Result<OrderedJson> ParseOrderedJson(std::string_view text, std::string_view what, int max_depth) {
  return ParseBounded<OrderedJson>(text, what, max_depth);
}

std::string DumpJson(const Json& value) {
  if (auto spliced = DumpSplicingPreserialized(value)) return std::move(*spliced);
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string DumpOrderedJson(const OrderedJson& value) {
  return value.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

}  // namespace envforge

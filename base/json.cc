#include "base/json.h"

namespace envforge {

Result<Json> ParseJson(std::string_view text, std::string_view what) {
  Json value = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    // Re-parse with exceptions only on the error path to recover the position for the message.
    try {
      Json ignored = Json::parse(text);
      (void)ignored;
    } catch (const Json::parse_error& error) {
      return InvalidArgumentError(std::string(what) + " is not valid JSON (byte " +
                                  std::to_string(error.byte) + ")");
    } catch (...) {
    }
    return InvalidArgumentError(std::string(what) + " is not valid JSON");
  }
  return value;
}

std::string DumpJson(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace envforge

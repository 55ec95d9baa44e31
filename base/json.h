// JSON for envforge: nlohmann::json, plus parsing that returns Result instead of throwing.
// Include this only where JSON values are built or read; headers that merely pass JSON around
// may include <nlohmann/json_fwd.hpp>.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "base/status.h"

namespace envforge {

using Json = nlohmann::json;

// Parses text as JSON. On failure the Status names `what` and the byte offset of the error.
Result<Json> ParseJson(std::string_view text, std::string_view what = "JSON");

// Compact dump that never throws: invalid UTF-8 in strings is replaced, not an error.
std::string DumpJson(const Json& value);

}  // namespace envforge

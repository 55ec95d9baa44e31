// The small HTTP pieces the viewer's endpoints share (server/ui_api.h, server/ui_runs.h): JSON
// answers, query strings and bounded integer parameters.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "base/json.h"
#include "base/status.h"
#include "server/ui_api.h"

namespace envforge::server::internal {

UiResponse JsonAnswer(int status, const Json& body);
UiResponse ErrorAnswer(int status, std::string message);  // {"error": message}

// "a=1&b=x%20y+z" -> {a: "1", b: "x y z"} (envforge::PercentDecode, '+' a space); a name without
// '=' has the value "".
std::map<std::string, std::string> ParseQuery(std::string_view query);
// parameters[name] as an integer in [low, high], `fallback` when absent or empty; InvalidArgument
// naming the parameter and the bounds otherwise.
Result<int64_t> IntParameter(const std::map<std::string, std::string>& parameters, const std::string& name,
                             int64_t fallback, int64_t low, int64_t high);

}  // namespace envforge::server::internal

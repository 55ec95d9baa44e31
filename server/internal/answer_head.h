// A JSON-RPC answer read for what a load generator acts on (server/load_client.h): every member
// but the named bulky ones of "result" (a tool's content, a new session's tools and prompt), which
// are skipped rather than parsed.
//
// Why not nlohmann with a discarding callback: its lexer still reads every byte of what it then
// drops, about 70 us for the 8.7 KB answer of a session/create with the trip environment's 15
// tools, and the load client serves hundreds of connections on one io thread, so in a burst each
// answer queued behind the parses of the ones before. simdjson's On-Demand front end indexes the
// text's structure in one pass (about 1.6 us for that answer) and only the members kept are
// turned into Json.
//
// Validation: kept members are parsed in full (ParseJson's rules); skipped ones only as far as
// simdjson's structural pass checks them (valid UTF-8, balanced brackets, closed strings). Enough
// for a load generator; RpcClient (server/rpc_client.h) parses everything.
#pragma once

#include <initializer_list>
#include <string_view>

#include "base/json.h"
#include "base/status.h"

namespace envforge::server::internal {

// The answer as a Json object without result's `skipped_result_members`. InvalidArgument when the
// text is not a JSON object, when a kept member is not valid JSON, or when the text goes on after
// the object.
Result<Json> ParseAnswerHead(std::string_view text, std::initializer_list<std::string_view> skipped_result_members);

}  // namespace envforge::server::internal

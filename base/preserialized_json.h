// Already-serialized JSON carried inside a Json tree, so that a large member which many answers
// share unchanged (an environment's tool list, in every session/create answer) is serialized once:
// copying the node copies its text (one memcpy), not a tree of values, and DumpJson (base/json.h)
// writes the text verbatim where the node sits, the rest of the answer dumped as always.
//
// The node is a binary Json value of a subtype of its own. Nothing but DumpJson knows it: a reader
// of the tree sees bytes, not the value. So put one only into a value that is dumped next and never
// read: an RPC answer on its way to a transport that writes text (server/rpc_service.h,
// RequestContext::answer_written_as_text).
#pragma once

#include <optional>
#include <string>

#include "base/json.h"

namespace envforge {

// A node holding DumpJson(value).
Json PreserializedJson(const Json& value);
bool IsPreserializedJson(const Json& value);

// DumpJson's text of `value` when a preserialized node lies anywhere in it (each node's text in
// its place, every other byte as nlohmann's compact dump writes it); nullopt when none does, which
// costs one walk over the tree.
std::optional<std::string> DumpSplicingPreserialized(const Json& value);

}  // namespace envforge

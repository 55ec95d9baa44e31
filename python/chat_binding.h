// What a model reads and writes, from Python: the engine's DeepSeek-V3.2 chat encoding and parser
// (inference/chat_format.h) and the rollout loop's system prompt, so that training transcripts are
// rendered by the code that renders rollouts.
//
//   import envforge
//   text = envforge.encode_chat([{"role": "system", "content": envforge.DEFAULT_SYSTEM_PROMPT},
//                                {"role": "user", "content": session.prompt},
//                                {"role": "assistant", "tool_calls": [{"name": "f", "arguments": {"x": 1}}]},
//                                {"role": "tool", "content": result.message_text}],
//                               tools=session.tools)
//   envforge.parse_completion(generated_text)   # {"content", "reasoning_content", "tool_calls", ...}
//
// encode_chat(messages, tools=None, thinking=False, drop_thinking=True, add_bos=True) -> str
//   messages: a list of dicts with "role" ("system" | "user" | "assistant" | "tool"), "content"
//   (str; None or absent: ""), "reasoning_content" (assistant only), "tool_calls" (assistant only:
//   each {"name", "arguments", "id"?} or OpenAI's {"id", "type": "function", "function": {"name",
//   "arguments"}}), "tool_call_id" (tool only; not rendered). Other keys are ignored, so messages
//   of `envforge traj show --json` can be passed as they are. Tool-call arguments are a dict
//   (rendered in sorted key order, as the rollout loop renders a parsed call) or the JSON text of
//   an object (rendered in its own key order); None or absent: {}.
//   tools: tool specs as Session.tools gives them (MCP {name, description, inputSchema}) or
//   OpenAI {type: "function", function: {...}}; a string entry is JSON text kept in its key order.
//   drop_thinking is the reference encoder's flag; as there, reasoning before the last user
//   message is never rendered, so it changes nothing today.
//   Returns EncodeChat's text byte for byte. A malformed message (a missing or mistyped field,
//   reasoning or tool calls on a role that has none) or anything EncodeChat refuses (an unknown
//   role, a tool message answering no call, arguments that are not an object) raises ValueError
//   naming the message ("messages[3]: ...").
//
// parse_completion(text, thinking=False) -> dict
//   ParseCompletion of generated text (what follows the prompt): {"content": str,
//   "reasoning_content": str, "tool_calls": [{"name": str, "arguments": dict}], "finished": bool
//   (ended with EOS), "truncated": bool}. Malformed DSML raises ValueError naming the offset.
//
// DEFAULT_SYSTEM_PROMPT: the rollout loop's system message (agents::kDefaultSystemPrompt).
#pragma once

#include <pybind11/pybind11.h>

namespace envforge::python {

void DefineChat(pybind11::module_& module);

}  // namespace envforge::python

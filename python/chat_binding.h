// What a model reads and writes, from Python: the DeepSeek-V3.2 chat encoding of the engine and
// the rollout loop's constants, so that training transcripts are rendered by the same code that
// renders rollouts.
//
//   import envforge
//   text = envforge.encode_chat([{"role": "system", "content": envforge.DEFAULT_SYSTEM_PROMPT},
//                                {"role": "user", "content": prompt}], tools=session.tools)
//
// envforge.DEFAULT_SYSTEM_PROMPT: the rollout loop's system message (agents::kDefaultSystemPrompt).
#pragma once

#include <pybind11/pybind11.h>

namespace envforge::python {

void DefineChat(pybind11::module_& module);

}  // namespace envforge::python

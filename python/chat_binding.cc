// envforge.encode_chat, envforge.parse_completion, envforge.DEFAULT_SYSTEM_PROMPT.
#include "python/chat_binding.h"

#include <string>

#include "agents/rollout.h"

namespace py = pybind11;

namespace envforge::python {

void DefineChat(py::module_& module) {
  module.attr("DEFAULT_SYSTEM_PROMPT") = py::str(std::string(agents::kDefaultSystemPrompt));
}

}  // namespace envforge::python

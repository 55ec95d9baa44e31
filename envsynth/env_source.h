// Writing drafts out as an environment source directory (sandbox/env_pack.h's format), the form
// every candidate is packed, checked, audited and kept in.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "envsynth/proposer.h"

namespace envforge::envsynth {

// tools.py of a toolset: the preamble, then each tool of `toolset` in catalogue order.
std::string ToolsModule(const EnvironmentDraft& environment, const std::set<std::string>& toolset);

// Writes env.json (kind general, the draft's category and description, `provenance`),
// schema.sql, tools.py (ToolsModule) and tasks/<id>/{task.json, solution.py, verifier.py,
// oracle.py} into `dir`, which must not exist yet. Errors: the I/O errors, naming the file.
Status WriteEnvironmentSource(const std::string& dir, const EnvironmentDraft& environment,
                              const std::set<std::string>& toolset, const std::vector<const TaskDraft*>& tasks,
                              const Json& provenance);

}  // namespace envforge::envsynth

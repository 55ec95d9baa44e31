// The prompt templates of envsynth's model stages (data/prompts/): compiled in, or read from
// $ENVFORGE_SYNTH_PROMPTS (or a configured directory) to try a prompt without rebuilding.
#pragma once

#include <map>
#include <string>

#include "base/status.h"

namespace envforge::envsynth {

// The directory prompts are read from: `configured`, else $ENVFORGE_SYNTH_PROMPTS, else "" (use
// the compiled-in copies).
std::string PromptsDirectory(const std::string& configured);

// The bytes of dir/name. NotFound naming the path when it cannot be read.
Result<std::string> ReadPromptFile(const std::string& dir, const std::string& name);

// `text` with every {{name}} of `fields` replaced by its value (values are not scanned again).
std::string FillTemplate(std::string text, const std::map<std::string, std::string>& fields);

}  // namespace envforge::envsynth

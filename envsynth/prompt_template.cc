#include "envsynth/prompt_template.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace envforge::envsynth {

std::string PromptsDirectory(const std::string& configured) {
  if (!configured.empty()) return configured;
  const char* from_env = std::getenv("ENVFORGE_SYNTH_PROMPTS");
  return from_env != nullptr ? from_env : "";
}

Result<std::string> ReadPromptFile(const std::string& dir, const std::string& name) {
  const std::filesystem::path path = std::filesystem::path(dir) / name;
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("no prompt " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string FillTemplate(std::string text, const std::map<std::string, std::string>& fields) {
  for (const auto& [name, value] : fields) {
    const std::string marker = "{{" + name + "}}";
    for (size_t at = text.find(marker); at != std::string::npos; at = text.find(marker, at + value.size())) {
      text.replace(at, marker.size(), value);
    }
  }
  return text;
}

}  // namespace envforge::envsynth

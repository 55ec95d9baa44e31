#include "envsynth/env_source.h"

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace envforge::envsynth {
namespace {

namespace fs = std::filesystem;

Status WriteText(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out.flush()) return ErrnoError("writing " + path.string(), errno);
  return Status::Ok();
}

Status MakeDirectory(const fs::path& path) {
  std::error_code error;
  if (!fs::create_directory(path, error)) {
    return error ? ErrnoError("creating " + path.string(), error.value())
                 : AlreadyExistsError(path.string() + " exists already");
  }
  return Status::Ok();
}

}  // namespace

std::string ToolsModule(const EnvironmentDraft& environment, const std::set<std::string>& toolset) {
  auto trimmed = [](const std::string& text) {
    size_t begin = text.find_first_not_of('\n');
    size_t end = text.find_last_not_of('\n');
    return begin == std::string::npos ? std::string() : text.substr(begin, end - begin + 1);
  };
  std::string out = trimmed(environment.preamble) + "\n";
  for (const auto& [name, source] : environment.tools) {
    if (toolset.count(name) != 0) out += "\n\n" + trimmed(source) + "\n";
  }
  return out;
}

Status WriteEnvironmentSource(const std::string& dir, const EnvironmentDraft& environment,
                              const std::set<std::string>& toolset, const std::vector<const TaskDraft*>& tasks,
                              const Json& provenance) {
  const fs::path root(dir);
  ENVFORGE_RETURN_IF_ERROR(MakeDirectory(root));
  Json manifest = {{"name", environment.name},
                   {"kind", "general"},
                   {"category", environment.category},
                   {"description", environment.description},
                   {"provenance", provenance}};
  ENVFORGE_RETURN_IF_ERROR(WriteText(root / "env.json", manifest.dump(2) + "\n"));
  ENVFORGE_RETURN_IF_ERROR(WriteText(root / "schema.sql", environment.schema_sql));
  ENVFORGE_RETURN_IF_ERROR(WriteText(root / "tools.py", ToolsModule(environment, toolset)));
  ENVFORGE_RETURN_IF_ERROR(MakeDirectory(root / "tasks"));
  for (const TaskDraft* task : tasks) {
    const fs::path task_dir = root / "tasks" / task->id;
    ENVFORGE_RETURN_IF_ERROR(MakeDirectory(task_dir));
    Json task_json = {{"prompt", task->prompt},
                      {"answer_schema", task->answer_schema},
                      {"difficulty", task->difficulty},
                      {"knobs", task->knobs}};
    ENVFORGE_RETURN_IF_ERROR(WriteText(task_dir / "task.json", task_json.dump(2) + "\n"));
    ENVFORGE_RETURN_IF_ERROR(WriteText(task_dir / "solution.py", task->solution));
    ENVFORGE_RETURN_IF_ERROR(WriteText(task_dir / "verifier.py", task->verifier));
    if (!task->oracle.empty()) ENVFORGE_RETURN_IF_ERROR(WriteText(task_dir / "oracle.py", task->oracle));
  }
  return Status::Ok();
}

}  // namespace envforge::envsynth

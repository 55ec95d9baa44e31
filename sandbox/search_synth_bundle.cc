// Synthesized search questions as a packed search environment (search_synth_bundle.h).
#include "sandbox/search_synth_bundle.h"

#include <unistd.h>

#include <filesystem>
#include <set>

#include "base/cleanup_registry.h"
#include "base/fd.h"
#include "sandbox/env_pack.h"

namespace envforge::sandbox {
namespace {

namespace fs = std::filesystem;

Status WriteJson(const fs::path& path, const Json& json) {
  return WriteFileAtomically(path.string(), json.dump(2) + "\n");
}

std::string DefaultDescription(const std::vector<search::SynthQuestion>& questions, const std::string& corpus_path) {
  std::set<int> hops;
  for (const auto& question : questions) hops.insert(question.hops);
  std::string list;
  for (int h : hops) list += (list.empty() ? "" : ", ") + std::to_string(h);
  return std::to_string(questions.size()) + " multi-hop questions (hops " + list +
         ") synthesized offline from the corpus " + fs::path(corpus_path).filename().string() +
         " by envforge search synth";
}

}  // namespace

Status WriteSynthesizedSearchSource(const std::vector<search::SynthQuestion>& questions,
                                    const search::QaSynthOptions& synth_options, const std::string& corpus_path,
                                    const std::string& dir, const SynthBundleOptions& options) {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(dir, ec))) return AlreadyExistsError(dir + " already exists");
  if (!fs::create_directories(fs::path(dir) / "tasks", ec)) return ErrnoError("create " + dir, ec.value());
  Json provenance = options.provenance;
  provenance["generator"] = "envforge search synth";
  provenance["corpus"] = fs::absolute(corpus_path).lexically_normal().string();
  Json env = {
      {"name", options.name},
      {"kind", "search"},
      {"category", "search"},
      {"description", options.description.empty() ? DefaultDescription(questions, corpus_path) : options.description},
      {"provenance", provenance}};
  ENVFORGE_RETURN_IF_ERROR(WriteJson(fs::path(dir) / "env.json", env));
  const fs::path corpus_copy = fs::path(dir) / "corpus.sqlite";
  fs::create_hard_link(corpus_path, corpus_copy, ec);
  if (ec) {
    ec.clear();
    if (!fs::copy_file(corpus_path, corpus_copy, ec)) return ErrnoError("copy " + corpus_path, ec.value());
  }
  for (const search::SynthQuestion& question : questions) {
    const fs::path task_dir = fs::path(dir) / "tasks" / question.id;
    if (!fs::create_directory(task_dir, ec)) return ErrnoError("create " + task_dir.string(), ec.value());
    Json task = {{"prompt", question.prompt},
                 {"answer", question.key.answer},
                 {"aliases", question.key.aliases},
                 {"difficulty", question.difficulty},
                 {"knobs", question.Knobs(synth_options)}};
    ENVFORGE_RETURN_IF_ERROR(WriteJson(task_dir / "task.json", task));
    ENVFORGE_RETURN_IF_ERROR(WriteJson(task_dir / "solution.json", search::ToJson(question.solution)));
  }
  return Status::Ok();
}

Status PackSynthesizedSearchEnvironment(const std::vector<search::SynthQuestion>& questions,
                                        const search::QaSynthOptions& synth_options, const std::string& corpus_path,
                                        const std::string& output_path, const SynthBundleOptions& options) {
  if (questions.empty()) return InvalidArgumentError("search synth: no question to pack");
  std::error_code ec;
  const fs::path parent = fs::absolute(output_path).parent_path();
  if (!fs::is_directory(parent, ec))
    return NotFoundError("search synth: the directory of " + output_path + " does not exist");
  const std::string source = output_path + ".source." + std::to_string(::getpid());
  ScopedCleanupPath cleanup(source, CleanupKind::kTree);
  fs::remove_all(source, ec);
  Status status = WriteSynthesizedSearchSource(questions, synth_options, corpus_path, source, options);
  if (status.ok()) {
    PackOptions pack;
    // The source is removed once packed: the corpus and seed in the provenance reproduce it.
    pack.provenance = {{"synth_seed", synth_options.seed}, {"source_dir", nullptr}};
    status = PackEnvironment(source, output_path, pack);
  }
  fs::remove_all(source, ec);
  return status;
}

}  // namespace envforge::sandbox

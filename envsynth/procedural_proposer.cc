#include "envsynth/procedural_proposer.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "base/cleanup_registry.h"
#include "base/subprocess.h"
#include "envsynth/embedded_generators.h"
#include "sandbox/code/scoped_directory.h"

namespace envforge::envsynth {
namespace {

namespace fs = std::filesystem;

struct EmbeddedFile {
  const char* name;
  const char* text;
};

// The generators compiled in (envsynth/CMakeLists.txt embeds them).
constexpr EmbeddedFile kEmbedded[] = {
    {"propose.py", embedded::kPropose},
    {"synth_common.py", embedded::kSynthCommon},
    {"cat_trip_planning.py", embedded::kCatTripPlanning},
    {"cat_logistics.py", embedded::kCatLogistics},
    {"cat_e_commerce.py", embedded::kCatECommerce},
    {"cat_calendar.py", embedded::kCatCalendar},
    {"cat_inventory.py", embedded::kCatInventory},
    {"cat_course_planning.py", embedded::kCatCoursePlanning},
    {"cat_shop.py", embedded::kCatShop},
    {"policy_envs.py", embedded::kPolicyEnvs},  // cat_shop's generator
};

Status WriteEmbedded(const fs::path& dir) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) return InternalError("creating " + dir.string() + ": " + error.message());
  for (const EmbeddedFile& file : kEmbedded) {
    std::ofstream out(dir / file.name, std::ios::binary);
    out << file.text;
    if (!out.flush()) return InternalError("writing the generator " + (dir / file.name).string());
  }
  return Status::Ok();
}

Result<std::string> StringField(const Json& reply, const char* key, const std::string& what) {
  auto it = reply.find(key);
  if (it == reply.end() || !it->is_string())
    return InternalError(what + ": the generator's reply has no string '" + key + "'");
  return it->get<std::string>();
}

Result<std::vector<std::string>> StringList(const Json& reply, const char* key, const std::string& what) {
  auto it = reply.find(key);
  if (it == reply.end() || !it->is_array())
    return InternalError(what + ": the generator's reply has no list '" + key + "'");
  std::vector<std::string> out;
  for (const Json& item : *it) {
    if (!item.is_string()) return InternalError(what + ": '" + key + "' holds a non-string");
    out.push_back(item.get<std::string>());
  }
  return out;
}

class ProceduralProposer final : public Proposer {
 public:
  ProceduralProposer(std::string python, fs::path dir, bool owned)
      : python_(std::move(python)), dir_(std::move(dir)), owned_(owned ? dir_ : fs::path()) {}

  std::string name() const override { return "procedural"; }

  // Asked once: it imports every generator, and the loop asks per environment.
  Result<std::vector<std::pair<std::string, int64_t>>> Categories() override {
    if (!categories_.empty()) return categories_;
    ENVFORGE_ASSIGN_OR_RETURN(Json reply, Call({"categories"}, "listing categories"));
    for (const Json& category : reply.value("categories", Json::array())) {
      categories_.emplace_back(category.value("id", ""), category.value("max_level", int64_t{0}));
    }
    return categories_;
  }

  Result<EnvironmentDraft> ProposeEnvironment(const std::string& category, uint64_t seed) override {
    const std::string what = "environment " + category + " seed " + std::to_string(seed);
    ENVFORGE_ASSIGN_OR_RETURN(Json reply,
                              Call({"environment", "--category", category, "--seed", std::to_string(seed)}, what));
    EnvironmentDraft draft;
    draft.category = category;
    draft.seed = seed;
    ENVFORGE_ASSIGN_OR_RETURN(draft.name, StringField(reply, "name", what));
    ENVFORGE_ASSIGN_OR_RETURN(draft.description, StringField(reply, "description", what));
    ENVFORGE_ASSIGN_OR_RETURN(draft.schema_sql, StringField(reply, "schema_sql", what));
    ENVFORGE_ASSIGN_OR_RETURN(draft.preamble, StringField(reply, "preamble", what));
    ENVFORGE_ASSIGN_OR_RETURN(draft.base_tools, StringList(reply, "base_tools", what));
    const Json& tools = reply.value("tools", Json::array());
    if (!tools.is_array() || tools.empty())
      return InternalError(what + ": the generator's reply has no tool catalogue");
    for (const Json& tool : tools) {
      if (!tool.is_object() || !tool.value("name", Json()).is_string() || !tool.value("source", Json()).is_string()) {
        return InternalError(what + ": a catalogue entry is not {\"name\", \"source\"}");
      }
      draft.tools.emplace_back(tool["name"].get<std::string>(), tool["source"].get<std::string>());
    }
    return draft;
  }

  Result<TaskDraft> ProposeTask(const EnvironmentDraft& environment, int64_t lineage, int64_t level, int64_t attempt,
                                const RepairRequest* /*repair: the generator redraws by attempt*/) override {
    const std::string what =
        "task of " + environment.name + " lineage " + std::to_string(lineage) + " level " + std::to_string(level);
    ENVFORGE_ASSIGN_OR_RETURN(Json reply, Call({"task", "--category", environment.category, "--seed",
                                                std::to_string(environment.seed), "--lineage", std::to_string(lineage),
                                                "--level", std::to_string(level), "--attempt", std::to_string(attempt)},
                                               what));
    TaskDraft task;
    task.lineage = lineage;
    task.level = level;
    task.attempt = attempt;
    ENVFORGE_ASSIGN_OR_RETURN(task.id, StringField(reply, "id", what));
    ENVFORGE_ASSIGN_OR_RETURN(task.prompt, StringField(reply, "prompt", what));
    ENVFORGE_ASSIGN_OR_RETURN(task.solution, StringField(reply, "solution", what));
    ENVFORGE_ASSIGN_OR_RETURN(task.verifier, StringField(reply, "verifier", what));
    ENVFORGE_ASSIGN_OR_RETURN(task.oracle, StringField(reply, "oracle", what));
    ENVFORGE_ASSIGN_OR_RETURN(task.tools, StringList(reply, "tools", what));
    task.answer_schema = reply.value("answer_schema", Json());
    task.knobs = reply.value("knobs", Json::object());
    task.difficulty = reply.value("difficulty", int64_t{1});
    if (!task.answer_schema.is_object())
      return InternalError(what + ": the generator's reply has no answer_schema object");
    return task;
  }

  Result<EnvironmentDraft> RepairEnvironment(const EnvironmentDraft& environment,
                                             const RepairRequest& repair) override {
    return FailedPreconditionError("the procedural generator of " + environment.category +
                                   " made an environment that fails (" + repair.attribution +
                                   "): " + (repair.reasons.empty() ? std::string() : repair.reasons.front()));
  }

 private:
  Result<Json> Call(std::vector<std::string> words, const std::string& what) {
    std::vector<std::string> argv = {python_, "-B", (dir_ / "propose.py").string()};
    argv.insert(argv.end(), words.begin(), words.end());
    CommandOptions options;
    options.timeout = std::chrono::seconds(120);
    ENVFORGE_ASSIGN_OR_RETURN(CommandOutput output, RunCommand(argv, options));
    if (output.timed_out) return InternalError(what + ": the procedural generator ran past 120 s");
    auto reply = ParseJson(output.stdout_text, "procedural generator reply");
    if (output.exit_code == 2 && reply.ok() && reply->contains("error")) {
      const std::string message = reply->value("error", std::string());
      if (message.rfind("unknown category", 0) == 0) return NotFoundError(message);
      return InvalidArgumentError(what + ": " + message);
    }
    if (output.exit_code != 0 || !reply.ok() || !reply->is_object()) {
      return InternalError(what + ": the procedural generator failed (exit " + std::to_string(output.exit_code) +
                           "): " + output.stderr_text.substr(0, 2000));
    }
    return std::move(reply).value();
  }

  std::string python_;
  fs::path dir_;
  std::vector<std::pair<std::string, int64_t>> categories_;
  sandbox::code::ScopedDirectory owned_;
};

}  // namespace

Result<std::unique_ptr<Proposer>> OpenProceduralProposer(const ProceduralOptions& options) {
  std::string dir = options.generators_dir;
  if (dir.empty()) {
    if (const char* from_env = std::getenv("ENVFORGE_SYNTH_PROCEDURAL"); from_env != nullptr && *from_env != '\0')
      dir = from_env;
  }
  if (!dir.empty()) {
    std::error_code error;
    if (!fs::is_regular_file(fs::path(dir) / "propose.py", error)) {
      return NotFoundError("no propose.py in the procedural generators directory " + dir);
    }
    return std::unique_ptr<Proposer>(new ProceduralProposer(options.python, dir, false));
  }
  // The generators of runs that were SIGKILLed (their destructor never ran) are swept first.
  constexpr std::string_view kScratchPrefix = "envforge-synth-generators";
  SweepDeadProcessEntries(fs::temp_directory_path().string(), [&](std::string_view name) {
    return PidOfProcessName(name, std::string(kScratchPrefix) + "-");
  });
  fs::path scratch = sandbox::code::UniqueScratchPath(fs::temp_directory_path(), std::string(kScratchPrefix));
  ENVFORGE_RETURN_IF_ERROR(WriteEmbedded(scratch));
  return std::unique_ptr<Proposer>(new ProceduralProposer(options.python, scratch, true));
}

}  // namespace envforge::envsynth

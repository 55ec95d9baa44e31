#include "envsynth/llm_proposer.h"

#include <cctype>

#include "envsynth/embedded_prompts.h"
#include "envsynth/prompt_template.h"

namespace envforge::envsynth {
namespace {

constexpr const char* kSystemPrompt =
    "You write environments for training tool-using agents: SQLite data, Python tools, tasks with a gold solution, a "
    "verifier and an oracle. You answer with the requested files as fenced code blocks, nothing else.";

struct Prompts {
  std::string environment, task, repair_task, repair_environment;
};

Result<Prompts> LoadPrompts(const std::string& configured) {
  const std::string dir = PromptsDirectory(configured);
  if (dir.empty()) {
    return Prompts{embedded::kSynthEnvironment, embedded::kSynthTask, embedded::kSynthRepairTask,
                   embedded::kSynthRepairEnvironment};
  }
  Prompts prompts;
  ENVFORGE_ASSIGN_OR_RETURN(prompts.environment, ReadPromptFile(dir, "synth_environment.md"));
  ENVFORGE_ASSIGN_OR_RETURN(prompts.task, ReadPromptFile(dir, "synth_task.md"));
  ENVFORGE_ASSIGN_OR_RETURN(prompts.repair_task, ReadPromptFile(dir, "synth_repair_task.md"));
  ENVFORGE_ASSIGN_OR_RETURN(prompts.repair_environment, ReadPromptFile(dir, "synth_repair_environment.md"));
  return prompts;
}

std::string Sanitize(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c)) {
      out += static_cast<char>(std::tolower(c));
    } else if (!out.empty() && out.back() != '_') {
      out += '_';
    }
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out.substr(0, 60);
}

std::string Block(const std::string& language, const std::string& name, const std::string& text) {
  return "```" + language + " " + name + "\n" + text + (text.empty() || text.back() == '\n' ? "" : "\n") + "```\n";
}

std::string TaskFiles(const TaskDraft& task) {
  Json task_json = {
      {"id", task.id}, {"prompt", task.prompt}, {"answer_schema", task.answer_schema}, {"knobs", task.knobs}};
  std::string out = Block("json", "task.json", task_json.dump(2)) + Block("python", "solution.py", task.solution) +
                    Block("python", "verifier.py", task.verifier);
  if (!task.oracle.empty()) out += Block("python", "oracle.py", task.oracle);
  for (const auto& [name, source] : task.new_tools) out += Block("python", "tools/" + name + ".py", source);
  return out;
}

std::string EnvironmentFiles(const EnvironmentDraft& env, const std::string& tools_py) {
  Json env_json = {{"name", env.name}, {"description", env.description}};
  return Block("json", "env.json", env_json.dump(2)) + Block("sql", "schema.sql", env.schema_sql) +
         Block("python", "tools.py", tools_py);
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += "- " + line + "\n";
  return out;
}

uint64_t SeedFor(uint64_t seed, int64_t lineage, int64_t level, int64_t attempt) {
  uint64_t h = seed * 0x9e3779b97f4a7c15ULL;
  for (int64_t part : {lineage, level, attempt}) h = (h ^ static_cast<uint64_t>(part + 1)) * 0xbf58476d1ce4e5b9ULL;
  return h >> 1;
}

class LlmProposer final : public Proposer {
 public:
  LlmProposer(inference::Backend& backend, LlmProposerOptions options, Prompts prompts)
      : backend_(backend), options_(std::move(options)), prompts_(std::move(prompts)) {}

  std::string name() const override { return "llm:" + options_.backend_spec; }

  Result<std::vector<std::pair<std::string, int64_t>>> Categories() override {
    return std::vector<std::pair<std::string, int64_t>>{};  // any category
  }

  Result<EnvironmentDraft> ProposeEnvironment(const std::string& category, uint64_t seed) override {
    const std::string prompt =
        FillTemplate(prompts_.environment, {{"category", category}, {"seed", std::to_string(seed)}});
    ENVFORGE_ASSIGN_OR_RETURN(auto files, Ask(prompt, {"env.json", "schema.sql", "tools.py"}, SeedFor(seed, -1, 0, 0)));
    return MakeEnvironment(category, seed, files);
  }

  Result<EnvironmentDraft> RepairEnvironment(const EnvironmentDraft& env, const RepairRequest& repair) override {
    const std::string prompt =
        FillTemplate(prompts_.repair_environment, {{"category", env.category},
                                                   {"attribution", repair.attribution},
                                                   {"reasons", Joined(repair.reasons)},
                                                   {"environment_files", EnvironmentFiles(env, env.preamble)}});
    ENVFORGE_ASSIGN_OR_RETURN(
        auto files, Ask(prompt, {"env.json", "schema.sql", "tools.py"}, SeedFor(env.seed, -1, 0, env.attempt + 1)));
    return MakeEnvironment(env.category, env.seed, files);
  }

  Result<TaskDraft> ProposeTask(const EnvironmentDraft& env, int64_t lineage, int64_t level, int64_t attempt,
                                const RepairRequest* repair) override {
    std::string prompt;
    if (repair != nullptr && repair->previous != nullptr) {
      prompt = FillTemplate(prompts_.repair_task, {{"lineage", std::to_string(lineage)},
                                                   {"level", std::to_string(level)},
                                                   {"stage", repair->stage.empty() ? "validation" : repair->stage},
                                                   {"attribution", repair->attribution},
                                                   {"reasons", Joined(repair->reasons)},
                                                   {"task_files", TaskFiles(*repair->previous)}});
    } else {
      auto previous = last_by_lineage_.find(env.name + "/" + std::to_string(lineage));
      std::string previous_text;
      if (previous != last_by_lineage_.end()) {
        previous_text = "The previous level of this task, to be made harder:\n\n" + TaskFiles(previous->second) + "\n";
      }
      prompt = FillTemplate(prompts_.task, {{"env_name", env.name},
                                            {"category", env.category},
                                            {"schema_sql", env.schema_sql},
                                            {"tools_py", ToolsText(env)},
                                            {"previous_task", previous_text},
                                            {"lineage", std::to_string(lineage)},
                                            {"level", std::to_string(level)}});
    }
    ENVFORGE_ASSIGN_OR_RETURN(auto files, Ask(prompt, {"task.json", "solution.py", "verifier.py"},
                                              SeedFor(env.seed, lineage, level, attempt)));
    ENVFORGE_ASSIGN_OR_RETURN(TaskDraft task, MakeTask(env, lineage, level, attempt, files));
    last_by_lineage_[env.name + "/" + std::to_string(lineage)] = task;
    return task;
  }

  ProposalCost TakeCost() override {
    ProposalCost cost = cost_;
    cost_ = {};
    return cost;
  }

 private:
  static std::string ToolsText(const EnvironmentDraft& env) {
    std::string out = env.preamble;
    for (const auto& [name, source] : env.tools) out += "\n\n" + source;
    return out;
  }

  // One conversation: the prompt, then at most format_retries corrections of a response that
  // lacks a required file.
  Result<std::map<std::string, std::string>> Ask(const std::string& prompt, const std::vector<std::string>& required,
                                                 uint64_t seed) {
    inference::CompletionRequest request;
    request.messages = {{"system", kSystemPrompt}, {"user", prompt}};
    request.max_tokens = options_.max_tokens;
    request.sampling.temperature = options_.temperature;
    request.sampling.seed = seed;
    request.tool_choice = "none";
    std::string problem;
    for (int64_t round = 0; round <= options_.format_retries; ++round) {
      ENVFORGE_ASSIGN_OR_RETURN(inference::CompletionResult result, backend_.Complete(request));
      cost_.model_calls += 1;
      cost_.tokens += result.prompt_tokens + result.completion_tokens;
      if (result.choices.empty()) return InternalError("the backend returned no choice");
      const inference::Completion& choice = result.choices.front();
      const std::string text = choice.message.content.empty() ? choice.text : choice.message.content;
      auto files = ParseResponseFiles(text);
      problem = files.ok() ? std::string() : files.status().message();
      if (files.ok()) {
        for (const std::string& name : required) {
          if (files->count(name) == 0)
            problem += (problem.empty() ? "" : "; ") + ("the response has no " + name + " block");
        }
      }
      if (problem.empty()) return std::move(files).value();
      request.messages.push_back({"assistant", text});
      request.messages.push_back(
          {"user", "Your answer could not be read: " + problem +
                       ". Answer again with every requested file, each as one fenced block whose info "
                       "string is the language and the file name."});
      request.sampling.seed += 1;
    }
    return InvalidArgumentError("the model's response could not be read after " +
                                std::to_string(options_.format_retries + 1) + " tries: " + problem);
  }

  Result<EnvironmentDraft> MakeEnvironment(const std::string& category, uint64_t seed,
                                           const std::map<std::string, std::string>& files) {
    auto env_json = ParseJson(files.at("env.json"), "env.json");
    if (!env_json.ok() || !env_json->is_object()) return InvalidArgumentError("env.json is not a JSON object");
    EnvironmentDraft env;
    env.category = category;
    env.seed = seed;
    std::string base = Sanitize(env_json->value("name", category));
    env.name = (base.empty() ? Sanitize(category) : base) + "_" + std::to_string(seed);
    env.description = env_json->value("description", "");
    if (env.description.empty()) env.description = "A " + category + " environment.";
    env.schema_sql = files.at("schema.sql");
    env.preamble = files.at("tools.py");
    return env;
  }

  Result<TaskDraft> MakeTask(const EnvironmentDraft& env, int64_t lineage, int64_t level, int64_t attempt,
                             const std::map<std::string, std::string>& files) {
    auto task_json = ParseJson(files.at("task.json"), "task.json");
    if (!task_json.ok() || !task_json->is_object()) return InvalidArgumentError("task.json is not a JSON object");
    TaskDraft task;
    task.lineage = lineage;
    task.level = level;
    task.attempt = attempt;
    task.difficulty = std::min<int64_t>(std::max<int64_t>(level, 1), 5);
    task.prompt = task_json->value("prompt", "");
    task.answer_schema = task_json->value("answer_schema", Json());
    if (task.prompt.empty() || !task.answer_schema.is_object()) {
      return InvalidArgumentError("task.json needs a non-empty \"prompt\" and an \"answer_schema\" object");
    }
    task.knobs = task_json->value("knobs", Json::object());
    if (!task.knobs.is_object()) task.knobs = Json::object();
    task.knobs["level"] = level;
    task.knobs["lineage"] = lineage;
    const std::string suffix = "_l" + std::to_string(level) + "_" + std::to_string(lineage);
    std::string id = Sanitize(task_json->value("id", env.category));
    if (id.size() < suffix.size() || id.compare(id.size() - suffix.size(), suffix.size(), suffix) != 0) id += suffix;
    task.id = id.front() == '_' ? "task" + id : id;
    task.solution = files.at("solution.py");
    task.verifier = files.at("verifier.py");
    if (auto oracle = files.find("oracle.py"); oracle != files.end()) task.oracle = oracle->second;
    for (const auto& [path, source] : files) {
      if (path.rfind("tools/", 0) != 0 || path.size() <= 9 || path.compare(path.size() - 3, 3, ".py") != 0) continue;
      const std::string tool = path.substr(6, path.size() - 9);
      if (tool.empty() || Sanitize(tool) != tool || source.find("def " + tool + "(") == std::string::npos) {
        return InvalidArgumentError(path + " must define one function named after the file");
      }
      task.new_tools.emplace_back(tool, source);
      task.tools.push_back(tool);
    }
    return task;
  }

  inference::Backend& backend_;
  LlmProposerOptions options_;
  Prompts prompts_;
  ProposalCost cost_;
  std::map<std::string, TaskDraft> last_by_lineage_;  // "<env>/<lineage>" -> its last version
};

// The file name of a fence's info string: its last word when that word names a file.
std::string FileOfInfo(const std::string& info) {
  std::istringstream words(info);
  std::string word, last;
  while (words >> word) last = word;
  if (last.rfind("file=", 0) == 0) last = last.substr(5);
  return last.find('.') != std::string::npos ? last : std::string();
}

}  // namespace

Result<std::map<std::string, std::string>> ParseResponseFiles(const std::string& text) {
  std::map<std::string, std::string> files;
  auto as_json = ParseJson(text, "response");
  if (as_json.ok() && as_json->is_object() && as_json->contains("files") && (*as_json)["files"].is_object()) {
    for (const auto& [name, value] : (*as_json)["files"].items()) {
      if (value.is_string()) files[name] = value.get<std::string>();
    }
    if (files.empty()) return InvalidArgumentError("the response's \"files\" object holds no text file");
    return files;
  }
  std::istringstream lines(text);
  std::string line, current, body;
  bool inside = false;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!inside && line.rfind("```", 0) == 0) {
      inside = true;
      current = FileOfInfo(line.substr(3));
      body.clear();
    } else if (inside && line.rfind("```", 0) == 0 && line.find_first_not_of('`') == std::string::npos) {
      inside = false;
      if (!current.empty()) files[current] = body;
    } else if (inside) {
      body += line + "\n";
    }
  }
  if (inside)
    return InvalidArgumentError("a fenced block (" + (current.empty() ? std::string("unnamed") : current) +
                                ") is never closed");
  if (files.empty()) return InvalidArgumentError("the response holds no fenced block naming a file");
  return files;
}

Result<std::unique_ptr<Proposer>> OpenLlmProposer(inference::Backend& backend, const LlmProposerOptions& options) {
  ENVFORGE_ASSIGN_OR_RETURN(Prompts prompts, LoadPrompts(options.prompts_dir));
  return std::unique_ptr<Proposer>(new LlmProposer(backend, options, std::move(prompts)));
}

}  // namespace envforge::envsynth

// Building the nbformat 4.5 notebook of an interpreter episode (agents/notebook_export.h): one
// pass over the steps in step order, the recorded conversation (rollouts) merged in by the tool
// message that answered each step.
#include "agents/notebook_export.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "toolsets/interpreter_tools.h"

namespace envforge::agents {
namespace {

using toolsets::Outcome;

using toolsets::kExecuteTool;
using toolsets::kInterruptTool;
using toolsets::kRestartTool;

// Tool arguments and results shown in a markdown cell are cut to this many bytes each.
constexpr size_t kMaxShownBytes = 4000;

const Json* Member(const Json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// A string member, or "" when it is absent or not a string.
std::string StringMember(const Json& object, const char* key) {
  const Json* value = Member(object, key);
  return value != nullptr && value->is_string() ? value->get<std::string>() : std::string();
}

// A string as itself, null or absent as "", anything else as its compact JSON.
std::string TextOf(const Json* value) {
  if (value == nullptr || value->is_null()) return "";
  if (value->is_string()) return value->get<std::string>();
  return DumpJson(*value);
}

// nbformat's multiline_string: a string, or a list of strings (lines keeping their "\n") that
// joins into one. nullopt for any other value.
std::optional<std::string> MultilineText(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (!value.is_array()) return std::nullopt;
  std::string text;
  for (const Json& line : value) {
    if (!line.is_string()) return std::nullopt;
    text += line.get_ref<const std::string&>();
  }
  return text;
}

bool IsExecutionCount(const Json& value) {
  return value.is_number_unsigned() || (value.is_number_integer() && value.get<int64_t>() >= 0);
}

// MIME types whose value may be any JSON (the nbformat schema's "^application/(.*\+)?json$").
bool IsJsonMime(std::string_view mime) {
  return mime.starts_with("application/") && (mime == "application/json" || mime.ends_with("+json"));
}

Json KeptData(const Json* data) {
  Json kept = Json::object();
  if (data == nullptr || !data->is_object()) return kept;
  for (auto it = data->begin(); it != data->end(); ++it) {
    if (IsJsonMime(it.key())) {
      kept[it.key()] = it.value();
    } else if (auto text = MultilineText(it.value())) {
      kept[it.key()] = std::move(*text);
    }
  }
  return kept;
}

Json ErrorOutput(const std::string& ename, const std::string& evalue) {
  // Jupyter front ends show an error output by its traceback: an empty one would show nothing.
  return Json{{"output_type", "error"},
              {"ename", ename},
              {"evalue", evalue},
              {"traceback", Json::array({ename + ": " + evalue})}};
}

// The nbformat fields of one recorded output; nullopt for what is not an nbformat 4 output.
std::optional<Json> KeptOutput(const Json& output, const Json& execution_count) {
  const std::string kind = StringMember(output, "output_type");
  if (kind == "stream") {
    const std::string name = StringMember(output, "name") == "stderr" ? "stderr" : "stdout";
    const Json* text = Member(output, "text");
    std::string body = text == nullptr ? std::string() : MultilineText(*text).value_or(TextOf(text));
    return Json{{"output_type", "stream"}, {"name", name}, {"text", std::move(body)}};
  }
  if (kind == "execute_result" || kind == "display_data") {
    Json kept = Json::object();
    kept["output_type"] = kind;
    if (kind == "execute_result") {
      const Json* count = Member(output, "execution_count");
      kept["execution_count"] = count != nullptr && IsExecutionCount(*count) ? *count : execution_count;
    }
    kept["data"] = KeptData(Member(output, "data"));
    const Json* metadata = Member(output, "metadata");
    kept["metadata"] = metadata != nullptr && metadata->is_object() ? *metadata : Json::object();
    return kept;
  }
  if (kind == "error") {
    Json traceback = Json::array();
    if (const Json* lines = Member(output, "traceback"); lines != nullptr && !lines->is_null()) {
      if (lines->is_array()) {
        for (const Json& line : *lines) traceback.push_back(TextOf(&line));
      } else {
        traceback.push_back(TextOf(lines));
      }
    }
    return Json{{"output_type", "error"},
                {"ename", TextOf(Member(output, "ename"))},
                {"evalue", TextOf(Member(output, "evalue"))},
                {"traceback", std::move(traceback)}};
  }
  return std::nullopt;
}

// The ename of a call that failed without outputs.
std::string ErrorNameOf(Outcome outcome) {
  switch (outcome) {
    case Outcome::kInvalidCall: return "InvalidCall";
    case Outcome::kInfraError: return "InfraError";
    case Outcome::kTimeout: return "ExecutionTimeout";
    case Outcome::kCrashed: return "KernelCrashed";
    case Outcome::kToolError:
    case Outcome::kOk: break;
  }
  return "ToolError";
}

std::string Cut(std::string text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t keep = max_bytes;
  while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80) --keep;  // whole UTF-8
  return text.substr(0, keep) + "\n... (" + std::to_string(text.size() - keep) + " more bytes)";
}

// A fenced code block that `text` cannot close early: the fence is longer than any run of
// backticks inside it.
std::string Fenced(const std::string& text, const std::string& info = "") {
  size_t longest = 0, run = 0;
  for (char c : text) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(std::max<size_t>(3, longest + 1), '`');
  return fence + info + "\n" + text + (text.empty() || text.back() == '\n' ? "" : "\n") + fence;
}

std::string ScoreText(double score) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g", score);
  return text;
}

// "**Verdict:** passed, score 1" and the reasons as a list.
std::string VerdictMarkdown(const Json& verdict) {
  if (!verdict.is_object()) return "**Verdict:** none recorded";
  std::string text = "**Verdict:** ";
  const Json* passed = Member(verdict, "passed");
  text += passed != nullptr && passed->is_boolean() ? (passed->get<bool>() ? "passed" : "failed") : "unknown";
  if (const Json* score = Member(verdict, "score"); score != nullptr && score->is_number()) {
    text += ", score " + ScoreText(score->get<double>());
  }
  if (std::string version = StringMember(verdict, "verifier_version"); !version.empty()) {
    text += " (verifier `" + version.substr(0, 12) + "`)";
  }
  if (const Json* reasons = Member(verdict, "reasons"); reasons != nullptr && reasons->is_array()) {
    if (!reasons->empty()) text += "\n";
    for (const Json& reason : *reasons) text += "\n- " + TextOf(&reason);
  }
  return text;
}

std::string AnswerMarkdown(const std::string& answer) { return "**Submitted answer**\n\n" + Fenced(answer, "text"); }

class NotebookBuilder {
 public:
  explicit NotebookBuilder(const Episode& episode) : episode_(episode) {
    for (const MessageRecord& message : episode.messages) {
      if (message.role == "tool" && message.step >= 0 && !message_of_step_.contains(message.step)) {
        message_of_step_[message.step] = message.index;
      }
    }
  }

  Json Build() {
    for (const StepRecord& step : episode_.steps) {
      if (auto link = message_of_step_.find(step.step); link != message_of_step_.end())
        FlushMessagesBefore(link->second);
      AddStep(step);
    }
    FlushMessagesBefore(std::nullopt);
    while (next_event_ < episode_.context_events.size()) AddContextEvent(episode_.context_events[next_event_++]);
    const EpisodeSummary& summary = episode_.summary;
    if (!submitted_ && summary.answer) {
      AddMarkdown("answer",
                  AnswerMarkdown(*summary.answer) + "\n\n" + VerdictMarkdown(summary.verdict.value_or(Json())),
                  Json{{"answer", true}});
    }
    Json notebook = Json::object();
    notebook["nbformat"] = 4;
    notebook["nbformat_minor"] = 5;
    notebook["metadata"] = Metadata();
    notebook["cells"] = std::move(cells_);
    return notebook;
  }

 private:
  Json Metadata() const {
    const EpisodeSummary& summary = episode_.summary;
    Json envforge = Json::object();
    envforge["episode_id"] = summary.id;
    envforge["env"] = summary.start.env_name;
    envforge["env_id"] = summary.start.env_id;
    envforge["task_id"] = summary.start.task_id.empty() ? Json() : Json(summary.start.task_id);
    envforge["task_version"] = summary.start.task_version.empty() ? Json() : Json(summary.start.task_version);
    envforge["kind"] = summary.start.kind;
    if (!summary.start.model.empty()) envforge["model"] = summary.start.model;
    if (!summary.start.rollout_id.empty()) envforge["rollout_id"] = summary.start.rollout_id;
    if (summary.start.sample_index >= 0) envforge["sample_index"] = summary.start.sample_index;
    envforge["steps"] = summary.steps;
    envforge["outcome"] = summary.outcome ? Json(std::string(EpisodeOutcomeName(*summary.outcome))) : Json();
    Json reward, passed;
    if (summary.verdict && summary.verdict->is_object()) {
      if (const Json* score = Member(*summary.verdict, "score"); score != nullptr && score->is_number())
        reward = *score;
      if (const Json* flag = Member(*summary.verdict, "passed"); flag != nullptr && flag->is_boolean()) passed = *flag;
    }
    envforge["reward"] = std::move(reward);
    envforge["passed"] = std::move(passed);
    Json metadata = Json::object();
    metadata["kernelspec"] = Json{{"name", "python3"}, {"display_name", "Python 3"}, {"language", "python"}};
    metadata["language_info"] = Json{{"name", "python"}};
    metadata["envforge"] = std::move(envforge);
    return metadata;
  }

  // A cell id unique in the notebook, from [A-Za-z0-9-_] (nbformat 4.5).
  std::string UniqueId(const std::string& base) {
    std::string id = base;
    for (int n = 2; !ids_.insert(id).second; ++n) id = base + "-" + std::to_string(n);
    return id;
  }

  static Json CellMetadata(Json origin) {
    Json metadata = Json::object();
    metadata["envforge"] = std::move(origin);
    return metadata;
  }

  void AddMarkdown(const std::string& id, std::string source, Json origin) {
    Json cell = Json::object();
    cell["cell_type"] = "markdown";
    cell["id"] = UniqueId(id);
    cell["metadata"] = CellMetadata(std::move(origin));
    cell["source"] = std::move(source);
    cells_.push_back(std::move(cell));
  }

  static Json StepOrigin(const StepRecord& step) {
    Json origin = Json::object();
    origin["step"] = step.step;
    origin["tool"] = step.tool;
    origin["outcome"] = std::string(toolsets::OutcomeName(step.result.outcome));
    if (!step.result.limit.empty()) origin["limit"] = step.result.limit;
    return origin;
  }

  static std::string StepId(const StepRecord& step) { return "step-" + std::to_string(step.step); }

  void AddStep(const StepRecord& step) {
    if (step.tool == kExecuteTool) return AddExecute(step);
    const toolsets::ToolResult& result = step.result;
    std::string failure;
    if (!result.ok()) {
      failure = " (" + std::string(toolsets::OutcomeName(result.outcome)) +
                (result.message.empty() ? "" : ": " + result.message) + ")";
    }
    if (step.tool == kRestartTool) {
      return AddMarkdown(StepId(step), result.ok() ? "*kernel restarted*" : "*kernel restart failed*" + failure,
                         StepOrigin(step));
    }
    if (step.tool == kInterruptTool) {
      const Json* interrupted = Member(result.content, "interrupted");
      const bool idle = interrupted != nullptr && *interrupted == false;
      return AddMarkdown(StepId(step),
                         !result.ok() ? "*kernel interrupt failed*" + failure
                                      : (idle ? "*interrupt: nothing was running*" : "*kernel interrupted*"),
                         StepOrigin(step));
    }
    if (step.tool == toolsets::kSubmitResultTool) {
      submitted_ = true;
      const Json* answer = Member(step.arguments, "answer_text");
      const bool text_answer = answer != nullptr && answer->is_string();
      std::string text = AnswerMarkdown(text_answer ? answer->get<std::string>() : DumpJson(step.arguments));
      text += "\n\n";
      text += result.ok() ? VerdictMarkdown(result.content) : "**Not scored**" + failure;
      return AddMarkdown(StepId(step), std::move(text), StepOrigin(step));
    }
    std::string text = "*tool call* `" + step.tool + "`" + failure + "\n\n";
    text += Fenced(Cut(DumpJson(step.arguments), kMaxShownBytes), "json");
    if (result.ok() && !result.content.is_null())
      text += "\n\n" + Fenced(Cut(DumpJson(result.content), kMaxShownBytes), "json");
    AddMarkdown(StepId(step), std::move(text), StepOrigin(step));
  }

  void AddExecute(const StepRecord& step) {
    const toolsets::ToolResult& result = step.result;
    const Json& content = result.content;
    const std::string status = StringMember(content, "status");
    Json execution_count;
    if (const Json* count = Member(content, "execution_count"); count != nullptr && IsExecutionCount(*count)) {
      execution_count = *count;
    }
    Json outputs = Json::array();
    bool has_outputs = false, has_error = false;
    if (const Json* recorded = Member(content, "outputs"); recorded != nullptr && recorded->is_array()) {
      has_outputs = true;
      for (const Json& output : *recorded) {
        std::optional<Json> kept = KeptOutput(output, execution_count);
        if (!kept) continue;
        has_error = has_error || (*kept)["output_type"] == "error";
        outputs.push_back(std::move(*kept));
      }
    }
    // The result's message, else `fallback`, with the limit that stopped the cell.
    auto said = [&result](const char* fallback) {
      return (result.message.empty() ? std::string(fallback) : result.message) +
             (result.limit.empty() ? "" : " (limit " + result.limit + ")");
    };
    if (result.outcome == Outcome::kCrashed || status == "crashed") {
      outputs.push_back(ErrorOutput("KernelCrashed", said("the kernel died while running this cell")));
    } else if (result.outcome == Outcome::kTimeout || status == "timeout") {
      if (!has_error) outputs.push_back(ErrorOutput("ExecutionTimeout", said("the cell ran past its time limit")));
    } else if (!result.ok() && !has_outputs) {
      outputs.push_back(
          ErrorOutput(ErrorNameOf(result.outcome),
                      result.message.empty() ? std::string(toolsets::OutcomeName(result.outcome)) : result.message));
    }
    Json origin = StepOrigin(step);
    if (!status.empty()) origin["status"] = status;
    if (const Json* truncated = Member(content, "truncated"); truncated != nullptr && *truncated == true) {
      origin["truncated"] = true;
    }

    Json cell = Json::object();
    cell["cell_type"] = "code";
    cell["id"] = UniqueId(StepId(step));
    cell["metadata"] = CellMetadata(std::move(origin));
    cell["execution_count"] = std::move(execution_count);
    const Json* code = Member(step.arguments, "code");
    cell["source"] = code != nullptr && code->is_string() ? code->get<std::string>() : std::string();
    cell["outputs"] = std::move(outputs);
    cells_.push_back(std::move(cell));
    // A kernel that did not come back from the timeout's interrupt was replaced: its state is gone.
    if (const Json* restarted = Member(content, "restarted"); restarted != nullptr && *restarted == true) {
      AddMarkdown(StepId(step) + "-restart",
                  "*kernel restarted: it did not come back from the interrupt; its state is gone*", StepOrigin(step));
    }
  }

  void AddContextEvent(const ContextEventRecord& event) {
    std::string text = "*context reset (" + event.strategy + "): " + std::to_string(event.messages_dropped) +
                       " messages dropped, " + std::to_string(event.tokens_before) + " -> " +
                       std::to_string(event.tokens_after) + " tokens*";
    if (!event.summary.empty()) text += "\n\n**Summary**\n\n" + event.summary;
    AddMarkdown("context-" + std::to_string(event.seq), std::move(text), Json{{"context_event", event.seq}});
  }

  // The messages up to (not including) index `end` (all when nullopt) that have not been shown.
  void FlushMessagesBefore(std::optional<int64_t> end) {
    const auto& messages = episode_.messages;
    for (; next_message_ < messages.size(); ++next_message_) {
      const MessageRecord& message = messages[next_message_];
      if (end && message.index >= *end) return;
      AddMessage(message);
    }
  }

  void AddMessage(const MessageRecord& message) {
    if (message.role == "system") {
      // A later system message starts the conversation the rollout loop records again after a
      // context event (agents/episode.cc, RecordContext): show the event, not the repeat.
      if (seen_system_) {
        replaying_ = true;
        if (next_event_ < episode_.context_events.size()) AddContextEvent(episode_.context_events[next_event_++]);
      }
      seen_system_ = true;
      return;
    }
    if (message.role != "user" && message.role != "assistant") return;  // tool results are the step cells
    const std::string key = message.role + '\x1f' + message.content + '\x1f' + DumpJson(message.tool_calls);
    const bool repeated = !shown_.insert(key).second;
    if (replaying_ &&
        (repeated || (message.role == "user" && !prompt_.empty() && message.content.starts_with(prompt_))))
      return;
    if (message.content.empty()) return;
    const Json origin = Json{{"message", message.index}, {"role", message.role}};
    const std::string id = "message-" + std::to_string(message.index);
    if (message.role == "assistant") return AddMarkdown(id, message.content, origin);
    if (!prompt_shown_) {
      prompt_shown_ = true;
      prompt_ = message.content;
      const std::string& task = episode_.summary.start.task_id;
      return AddMarkdown(id, "## Task" + (task.empty() ? "" : " `" + task + "`") + "\n\n" + message.content, origin);
    }
    AddMarkdown(id, "**User**\n\n" + message.content, origin);
  }

  const Episode& episode_;
  std::map<int64_t, int64_t> message_of_step_;  // step -> index of the tool message answering it
  size_t next_message_ = 0;                     // position in episode_.messages
  size_t next_event_ = 0;                       // position in episode_.context_events
  bool seen_system_ = false;
  bool replaying_ = false;  // past a context event: repeated messages are not shown again
  bool prompt_shown_ = false;
  bool submitted_ = false;
  std::string prompt_;
  std::set<std::string> shown_;  // role, content and tool calls of every user/assistant message
  std::set<std::string> ids_;
  Json cells_ = Json::array();
};

}  // namespace

Result<Json> EpisodeToNotebook(const Episode& episode) {
  bool interpreter = false;
  std::set<std::string> tools;
  for (const StepRecord& step : episode.steps) {
    interpreter = interpreter || step.tool == kExecuteTool;
    tools.insert(step.tool);
  }
  if (!interpreter) {
    std::string called;
    for (const std::string& tool : tools) called += (called.empty() ? "" : ", ") + tool;
    return InvalidArgumentError("episode " + episode.summary.id + " has no execute call: not an interpreter episode (" +
                                (called.empty() ? "no tool calls" : "tools called: " + called) + ")");
  }
  try {
    return NotebookBuilder(episode).Build();
  } catch (const Json::exception& error) {
    return InternalError("episode " + episode.summary.id + ": building its notebook failed: " + error.what());
  }
}

Result<std::string> EpisodeToNotebookText(const Episode& episode) {
  ENVFORGE_ASSIGN_OR_RETURN(Json notebook, EpisodeToNotebook(episode));
  try {
    return notebook.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
  } catch (const Json::exception& error) {
    return InternalError("episode " + episode.summary.id + ": writing its notebook failed: " + error.what());
  }
}

}  // namespace envforge::agents

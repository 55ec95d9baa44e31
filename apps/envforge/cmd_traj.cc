// envforge traj ls|show|export, and envforge replay: browsing a trajectory store
// (agents/trajectory_store.h), exporting it (JSON lines, or interpreter episodes as notebooks:
// agents/notebook_export.h) and replaying one episode (agents/replay.h).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "agents/notebook_export.h"
#include "agents/replay.h"
#include "agents/trajectory_store.h"
#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "apps/envforge/solve_task.h"
#include "base/fd.h"
#include "base/json.h"
#include "sandbox/session_manager.h"

namespace envforge::cli {
namespace {

using agents::Episode;
using agents::EpisodeSummary;

// One line of at most `max_chars` characters (newlines shown as spaces).
std::string Excerpt(std::string text, size_t max_chars) {
  for (char& c : text) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  if (text.size() > max_chars) text = text.substr(0, max_chars - 3) + "...";
  return text;
}

// What a model saw from a result: its content when ok, else the message.
std::string Observation(const toolsets::ToolResult& result, size_t max_chars) {
  return Excerpt(result.ok() || result.message.empty() ? DumpJson(result.content) : result.message, max_chars);
}

std::string FormatTime(int64_t micros) {
  std::time_t seconds = static_cast<std::time_t>(micros / 1'000'000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &utc);
  return text;
}

std::string VerdictText(const std::optional<Json>& verdict) {
  if (!verdict || !verdict->is_object() || !verdict->contains("passed")) return "-";
  const Json& v = *verdict;
  char text[48];
  std::snprintf(text, sizeof(text), "%s %.3g", v["passed"] == true ? "pass" : "fail", v.value("score", 0.0));
  return text;
}

std::string OutcomeText(const EpisodeSummary& summary) {
  return summary.outcome ? std::string(agents::EpisodeOutcomeName(*summary.outcome)) : "open";
}

// --env/--task/--outcome/--rollout/--kind of ls and export.
Result<agents::ListFilter> FilterFrom(const ParsedArgs& parsed) {
  agents::ListFilter filter;
  filter.env_id = parsed.OptionOr("--env");
  filter.task_id = parsed.OptionOr("--task");
  filter.rollout_id = parsed.OptionOr("--rollout");
  filter.kind = parsed.OptionOr("--kind");
  if (auto outcome = parsed.Option("--outcome")) {
    filter.outcome = agents::EpisodeOutcomeFromName(*outcome);
    if (!filter.outcome) {
      std::string names;
      for (auto known : agents::AllEpisodeOutcomes()) {
        names += (names.empty() ? "" : ", ") + std::string(agents::EpisodeOutcomeName(known));
      }
      return InvalidArgumentError("--outcome must be one of " + names + "; got '" + *outcome + "'");
    }
  }
  if (!filter.kind.empty() && filter.kind != "served" && filter.kind != "rollout") {
    return InvalidArgumentError("--kind must be served or rollout; got '" + filter.kind + "'");
  }
  return filter;
}

// --env/--task/--outcome/--rollout/--kind of ls and export (read by FilterFrom).
std::vector<OptionDecl> FilterOptions() {
  return {{.name = "--env", .metavar = "E", .help = "only episodes of this environment"},
          {.name = "--task", .metavar = "T", .help = "only episodes of this task"},
          {.name = "--outcome", .metavar = "O", .help = "only episodes that ended so (submitted, crashed, ...)"},
          {.name = "--rollout", .metavar = "R", .help = "only episodes of this rollout"},
          {.name = "--kind", .metavar = "served|rollout", .help = "only episodes of this kind"}};
}

int List(const ParsedArgs& parsed) {
  auto filter = FilterFrom(parsed);
  if (!filter.ok()) return Fail(filter.status(), kExitUsage);
  auto limit = parsed.IntOption("--limit", 1, 1'000'000);
  if (!limit.ok()) return Fail(limit.status(), kExitUsage);
  filter->limit = *limit;
  auto reader = agents::TrajectoryReader::Open(parsed.positional[0]);
  if (!reader.ok()) return Fail(reader.status(), ExitCodeFor(reader.status()));
  auto episodes = (*reader)->List(*filter);
  if (!episodes.ok()) return Fail(episodes.status(), ExitCodeFor(episodes.status()));
  if (parsed.Has("--json")) {
    Json list = Json::array();
    for (const auto& summary : *episodes) list.push_back(agents::EpisodeSummaryToJson(summary));
    std::printf("%s\n", list.dump(2, ' ', false, Json::error_handler_t::replace).c_str());
    return kExitOk;
  }
  std::printf("%-26s  %-7s  %-20s  %-24s  %5s  %-17s  %-9s  %-19s  %s\n", "ID", "KIND", "ENV", "TASK", "STEPS",
              "OUTCOME", "VERDICT", "STARTED (UTC)", "BACKEND");
  for (const auto& summary : *episodes) {
    std::printf("%-26s  %-7s  %-20s  %-24s  %5lld  %-17s  %-9s  %-19s  %s\n", summary.id.c_str(),
                Excerpt(summary.start.kind, 7).c_str(), Excerpt(summary.start.env_name, 20).c_str(),
                Excerpt(summary.start.task_id.empty() ? "-" : summary.start.task_id, 24).c_str(),
                static_cast<long long>(summary.steps), OutcomeText(summary).c_str(),
                VerdictText(summary.verdict).c_str(), FormatTime(summary.started_at_us).c_str(),
                summary.start.backend.empty() ? "-" : Excerpt(summary.start.backend, 60).c_str());
  }
  auto counts = (*reader)->Count();
  if (counts.ok() && counts->episodes > static_cast<int64_t>(episodes->size())) {
    std::printf("(%zu shown of %lld episodes in the store)\n", episodes->size(),
                static_cast<long long>(counts->episodes));
  }
  return kExitOk;
}

void PrintVerdict(const EpisodeSummary& s) {
  std::printf("  outcome  %s\n", OutcomeText(s).c_str());
  if (s.answer) std::printf("  answer   %s\n", Excerpt(*s.answer, 200).c_str());
  if (s.verdict) {
    std::printf("  verdict  %s (verifier %s)\n", VerdictText(s.verdict).c_str(),
                s.verdict->value("verifier_version", s.start.verifier_version).c_str());
    for (const auto& reason : s.verdict->value("reasons", Json::array())) {
      std::printf("           - %s\n",
                  Excerpt(reason.is_string() ? reason.get<std::string>() : DumpJson(reason), 200).c_str());
    }
  }
}

void PrintHeader(const EpisodeSummary& s, bool verdict) {
  std::printf("episode %s\n", s.id.c_str());
  std::printf("  env      %s (version %s)\n", s.start.env_name.c_str(), s.start.env_id.c_str());
  if (!s.start.task_id.empty()) {
    std::printf("  task     %s (version %s)\n", s.start.task_id.c_str(), s.start.task_version.c_str());
  }
  if (!s.start.parent_id.empty()) {
    std::printf("  forked   from %s at step %lld\n", s.start.parent_id.c_str(),
                static_cast<long long>(s.start.fork_step));
  }
  if (s.start.kind != "served") {
    std::printf("  kind     %s", s.start.kind.c_str());
    if (!s.start.rollout_id.empty()) std::printf(" (rollout %s", s.start.rollout_id.c_str());
    if (s.start.sample_index >= 0) {
      std::printf("%s sample %lld", s.start.rollout_id.empty() ? " (" : ",",
                  static_cast<long long>(s.start.sample_index));
    }
    if (!s.start.rollout_id.empty() || s.start.sample_index >= 0) std::printf(")");
    std::printf("\n");
  }
  if (!s.start.backend.empty()) std::printf("  backend  %s\n", s.start.backend.c_str());
  if (!s.start.model.empty()) std::printf("  model    %s\n", s.start.model.c_str());
  if (!s.start.sampling.is_null()) std::printf("  sampling %s\n", DumpJson(s.start.sampling).c_str());
  if (s.start.seed) std::printf("  seed     %lld\n", static_cast<long long>(*s.start.seed));
  std::printf("  client   %s\n", s.start.client.c_str());
  std::printf("  started  %s UTC", FormatTime(s.started_at_us).c_str());
  if (s.ended_at_us) std::printf(", ended %s UTC", FormatTime(*s.ended_at_us).c_str());
  std::printf("\n");
  if (verdict) PrintVerdict(s);
}

void PrintSteps(const Episode& episode) {
  std::printf("\nsteps (%zu):\n", episode.steps.size());
  for (const auto& step : episode.steps) {
    std::printf("  #%-3lld %s %s -> %s%s%s  (%.1f ms)\n", static_cast<long long>(step.step), step.tool.c_str(),
                Excerpt(DumpJson(step.arguments), 160).c_str(),
                std::string(toolsets::OutcomeName(step.result.outcome)).c_str(),
                step.result.limit.empty() ? "" : " limit=", step.result.limit.c_str(), step.duration_us / 1000.0);
    std::printf("        %s\n", Observation(step.result, 200).c_str());
  }
}

// Reasoning is dimmed on a terminal (and never where NO_COLOR is set or output is piped).
struct Style {
  const char* dim = "";
  const char* reset = "";
  static Style ForStdout() {
    if (::isatty(STDOUT_FILENO) == 1 && std::getenv("NO_COLOR") == nullptr) return {"\033[2m", "\033[0m"};
    return {};
  }
};

// Every line of `text` behind `prefix` (an empty text prints nothing).
void PrintIndented(const std::string& text, const std::string& prefix, const Style& style = {}) {
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::printf("%s%s%s%s\n", style.dim, prefix.c_str(), text.substr(begin, end - begin).c_str(), style.reset);
    begin = end + 1;
  }
}

std::string TurnLine(const agents::ModelTurnRecord& turn) {
  std::string line = "turn " + std::to_string(turn.turn);
  if (!turn.finish_reason.empty()) line += ", finish " + turn.finish_reason;
  if (turn.prompt_tokens > 0 || !turn.input_tokens.empty()) {
    line += ", prompt " + std::to_string(turn.prompt_tokens) + " tokens (reused " + std::to_string(turn.reused_tokens) +
            ", fed " + std::to_string(turn.input_tokens.size()) + ")";
  }
  line += ", " + std::to_string(turn.output_tokens.size()) + " generated";
  char ms[32];
  std::snprintf(ms, sizeof(ms), ", %.1f ms", turn.duration_us / 1000.0);
  return line + ms;
}

void PrintContextEvent(const agents::ContextEventRecord& event) {
  std::printf("-- context event %lld after turn %lld: %s, %lld -> %lld tokens, %lld messages dropped\n",
              static_cast<long long>(event.seq), static_cast<long long>(event.turn), event.strategy.c_str(),
              static_cast<long long>(event.tokens_before), static_cast<long long>(event.tokens_after),
              static_cast<long long>(event.messages_dropped));
  if (!event.summary.empty()) {
    std::printf("   summary:\n");
    PrintIndented(event.summary, "     ");
  }
}

void PrintToolCalls(const Json& calls) {
  if (!calls.is_array()) return;
  for (const Json& call : calls) {
    const Json arguments = call.value("arguments", Json());
    std::string text = arguments.is_string() ? arguments.get<std::string>() : DumpJson(arguments);
    std::printf("    -> call %s %s", call.value("name", std::string("?")).c_str(), text.c_str());
    std::string id = call.value("id", std::string());
    std::printf("%s%s%s\n", id.empty() ? "" : "  [", id.c_str(), id.empty() ? "" : "]");
  }
}

// The tool a tool message answered: its step's tool, else the call with its id.
std::string ToolNameOf(const agents::MessageRecord& message, const Episode& episode) {
  for (const auto& step : episode.steps) {
    if (message.step >= 0 && step.step == message.step) return step.tool;
  }
  for (const auto& other : episode.messages) {
    if (!other.tool_calls.is_array()) continue;
    for (const Json& call : other.tool_calls) {
      if (!message.tool_call_id.empty() && call.value("id", std::string()) == message.tool_call_id) {
        return call.value("name", std::string());
      }
    }
  }
  return "";
}

void PrintMessage(const agents::MessageRecord& message, const agents::ModelTurnRecord* turn, const Episode& episode,
                  const Style& style) {
  std::printf("\n[%lld] %s", static_cast<long long>(message.index), message.role.c_str());
  if (message.role == "tool") {
    std::string tool = ToolNameOf(message, episode);
    if (!tool.empty()) std::printf(" %s", tool.c_str());
    if (!message.tool_call_id.empty()) std::printf(" [%s]", message.tool_call_id.c_str());
    std::printf(" -> %s", message.tool_outcome.empty() ? "?" : message.tool_outcome.c_str());
    if (message.step >= 0) std::printf(" (step %lld)", static_cast<long long>(message.step));
  }
  if (turn != nullptr) std::printf("  (%s)", TurnLine(*turn).c_str());
  std::printf("\n");
  if (!message.reasoning_content.empty()) {
    std::printf("%s    reasoning:%s\n", style.dim, style.reset);
    PrintIndented(message.reasoning_content, "    | ", style);
  }
  PrintIndented(message.content, "    ");
  PrintToolCalls(message.tool_calls);
  if (turn != nullptr && !turn->parse_error.empty()) {
    std::printf("    parse error: %s\n", turn->parse_error.c_str());
    std::printf("    raw text:\n");
    PrintIndented(turn->raw_text, "      ");
  }
}

// Where a context event goes in the conversation: before the first message recorded after it
// (the rollout loop records the conversation it restarts with again, after the event), found by
// time among the messages after its turn's assistant message; without timestamps, before the
// next turn's assistant message. -1: after every message.
int64_t MessageAfterEvent(const agents::ContextEventRecord& event, const Episode& episode,
                          const std::map<int64_t, int64_t>& message_of_turn) {
  auto own = message_of_turn.find(event.turn);
  int64_t after = own == message_of_turn.end() ? -1 : own->second;
  if (event.created_at_us != 0) {
    for (const auto& message : episode.messages) {
      if (message.index > after && message.created_at_us > event.created_at_us) return message.index;
    }
  }
  auto next = message_of_turn.find(event.turn + 1);
  return next == message_of_turn.end() ? -1 : next->second;
}

// A rollout: the conversation as the model saw it, with each model turn's tokens and each
// context event where it happened, then the verdict.
void PrintConversation(const Episode& episode) {
  Style style = Style::ForStdout();
  std::map<int64_t, const agents::ModelTurnRecord*> turn_of_message;
  std::map<int64_t, int64_t> message_of_turn;
  for (const auto& turn : episode.model_turns) {
    turn_of_message[turn.message_index] = &turn;
    message_of_turn[turn.turn] = turn.message_index;
  }
  std::map<int64_t, std::vector<const agents::ContextEventRecord*>> events_before;  // by message index
  std::vector<const agents::ContextEventRecord*> trailing_events;
  for (const auto& event : episode.context_events) {
    int64_t before = MessageAfterEvent(event, episode, message_of_turn);
    if (before >= 0) {
      events_before[before].push_back(&event);
    } else {
      trailing_events.push_back(&event);
    }
  }
  auto count = [](size_t n, const char* noun) { return std::to_string(n) + " " + noun + (n == 1 ? "" : "s"); };
  std::printf("\nconversation (%s, %s, %s):\n", count(episode.messages.size(), "message").c_str(),
              count(episode.model_turns.size(), "model turn").c_str(),
              count(episode.context_events.size(), "context event").c_str());
  std::set<int64_t> shown_turns;
  for (const auto& message : episode.messages) {
    for (const auto* event : events_before[message.index]) {
      std::printf("\n");
      PrintContextEvent(*event);
    }
    auto turn = turn_of_message.find(message.index);
    const agents::ModelTurnRecord* record = turn == turn_of_message.end() ? nullptr : turn->second;
    if (record != nullptr) shown_turns.insert(record->turn);
    PrintMessage(message, record, episode, style);
  }
  for (const auto* event : trailing_events) {
    std::printf("\n");
    PrintContextEvent(*event);
  }
  for (const auto& turn : episode.model_turns) {
    if (shown_turns.count(turn.turn) == 0) {
      std::printf("\n(model turn without a recorded message: %s; message %lld)\n", TurnLine(turn).c_str(),
                  static_cast<long long>(turn.message_index));
    }
  }
  std::printf("\n%zu tool steps recorded (envforge replay re-runs them)\n\nverdict:\n", episode.steps.size());
  PrintVerdict(episode.summary);
}

int Show(const ParsedArgs& parsed) {
  auto reader = agents::TrajectoryReader::Open(parsed.positional[0]);
  if (!reader.ok()) return Fail(reader.status(), ExitCodeFor(reader.status()));
  auto episode = (*reader)->Get(parsed.positional[1]);
  if (!episode.ok()) return Fail(episode.status(), ExitCodeFor(episode.status()));
  if (parsed.Has("--json")) {
    std::printf("%s\n", agents::EpisodeToJson(*episode).dump(2, ' ', false, Json::error_handler_t::replace).c_str());
    return kExitOk;
  }
  bool conversation = !episode->messages.empty() || episode->summary.start.kind == "rollout";
  PrintHeader(episode->summary, /*verdict=*/!conversation);
  if (conversation) {
    PrintConversation(*episode);
  } else {
    PrintSteps(*episode);
  }
  return kExitOk;
}

constexpr const char* kExportPrefix = "envforge traj export";

// A file name for an episode id: ids are "t-" + hex, but a store is a file anyone can write.
std::string NotebookFileName(const std::string& id) {
  std::string name = id.empty() ? "episode" : id;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  }
  if (name[0] == '.') name[0] = '_';
  return name + ".ipynb";
}

// --ipynb: one DIR/<episode-id>.ipynb per selected interpreter episode, oldest first, each written
// atomically; an episode without execute calls is skipped with a warning. Exit 2 when none was
// written.
int ExportNotebooks(const agents::TrajectoryReader& reader, const std::vector<EpisodeSummary>& episodes,
                    const std::string& directory) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(directory, ec) && !fs::is_directory(directory, ec)) {
    return Fail(InvalidArgumentError("-o " + directory + " is not a directory"), kExitUsage, kExportPrefix);
  }
  if (fs::create_directories(directory, ec); ec) {
    Status status = ErrnoError("cannot create " + directory, ec.value());
    return Fail(status, ExitCodeFor(status), kExportPrefix);
  }
  size_t written = 0, skipped = 0;
  for (auto it = episodes.rbegin(); it != episodes.rend(); ++it) {
    auto episode = reader.Get(it->id);
    if (!episode.ok()) return Fail(episode.status(), ExitCodeFor(episode.status()), kExportPrefix);
    auto text = agents::EpisodeToNotebookText(*episode);
    if (!text.ok()) {
      if (text.status().code() != StatusCode::kInvalidArgument) {
        return Fail(text.status(), ExitCodeFor(text.status()), kExportPrefix);
      }
      std::fprintf(stderr, "%s: warning: %s; skipped\n", kExportPrefix, text.status().message().c_str());
      ++skipped;
      continue;
    }
    const std::string path = (fs::path(directory) / NotebookFileName(it->id)).string();
    Status status = WriteFileAtomically(path, *text);
    if (!status.ok()) return Fail(status, ExitCodeFor(status), kExportPrefix);
    std::printf("%s\n", path.c_str());
    ++written;
  }
  if (written == 0) {
    return Fail(
        InvalidArgumentError(episodes.empty() ? "no episode matches; no notebook written"
                                              : "none of the " + std::to_string(episodes.size()) +
                                                    " selected episodes is an interpreter episode (execute calls); "
                                                    "no notebook written"),
        kExitUsage, kExportPrefix);
  }
  std::fprintf(stderr, "exported %zu notebook%s to %s", written, written == 1 ? "" : "s", directory.c_str());
  if (skipped > 0)
    std::fprintf(stderr, " (%zu episode%s without execute calls skipped)", skipped, skipped == 1 ? "" : "s");
  std::fprintf(stderr, "\n");
  return kExitOk;
}

int Export(const ParsedArgs& parsed) {
  const bool notebooks = parsed.Has("--ipynb");
  if (notebooks && parsed.Has("--jsonl")) {
    return Fail(InvalidArgumentError("--ipynb and --jsonl exclude each other"), kExitUsage, kExportPrefix);
  }
  if (notebooks && parsed.Option("-o").value_or(parsed.OptionOr("--output")).empty()) {
    return Fail(InvalidArgumentError("--ipynb needs -o DIR (one notebook per episode is written there)"), kExitUsage,
                kExportPrefix);
  }
  auto filter = FilterFrom(parsed);
  if (!filter.ok()) return Fail(filter.status(), kExitUsage);
  filter->limit = 0;  // every matching episode
  auto reader = agents::TrajectoryReader::Open(parsed.positional[0]);
  if (!reader.ok()) return Fail(reader.status(), ExitCodeFor(reader.status()));
  auto episodes = (*reader)->List(*filter);
  if (!episodes.ok()) return Fail(episodes.status(), ExitCodeFor(episodes.status()));
  if (notebooks) return ExportNotebooks(**reader, *episodes, parsed.Option("-o").value_or(parsed.OptionOr("--output")));

  // A named output is written beside itself and renamed at the end: never a half-written file.
  std::string output = parsed.Option("-o").value_or(parsed.OptionOr("--output"));
  std::string temporary = output.empty() ? "" : output + ".tmp." + std::to_string(::getpid());
  std::ofstream file;
  if (!output.empty()) {
    file.open(temporary, std::ios::binary | std::ios::trunc);
    if (!file) return Fail(InvalidArgumentError("cannot write " + output), kExitUsage);
  }
  // Oldest first: the order episodes were recorded in.
  for (auto it = episodes->rbegin(); it != episodes->rend(); ++it) {
    auto episode = (*reader)->Get(it->id);
    if (!episode.ok()) {
      if (!output.empty()) std::filesystem::remove(temporary);
      return Fail(episode.status(), ExitCodeFor(episode.status()));
    }
    std::string line = DumpJson(agents::EpisodeToJson(*episode)) + "\n";
    if (output.empty()) {
      std::fwrite(line.data(), 1, line.size(), stdout);
    } else {
      file << line;
    }
  }
  if (!output.empty()) {
    file.close();
    std::error_code ec;
    if (!file || (std::filesystem::rename(temporary, output, ec), ec)) {
      std::filesystem::remove(temporary, ec);
      return Fail(InternalError("cannot write " + output), kExitInfra);
    }
    std::fprintf(stderr, "exported %zu episodes to %s\n", episodes->size(), output.c_str());
  }
  return kExitOk;
}

// --- replay ------------------------------------------------------------------------------------

void PrintSide(const char* field, const std::string& recorded, const std::string& replayed) {
  std::printf("  %-9s recorded: %s\n  %-9s replayed: %s\n", field, recorded.c_str(), "", replayed.c_str());
}

std::string VerdictLine(const Json& verdict, const std::string& version) {
  if (!verdict.is_object() || !verdict.contains("passed")) return "none";
  char text[64];
  std::snprintf(text, sizeof(text), "%s (score %.3g)", verdict["passed"] == true ? "PASSED" : "FAILED",
                verdict.value("score", 0.0));
  return std::string(text) + ", verifier " + (version.empty() ? "?" : version.substr(0, 12));
}

void PrintReport(const agents::ReplayReport& report) {
  std::printf("replay of %s: %s, task %s, on %s%s\n", report.episode_id.c_str(), report.env_name.c_str(),
              report.task_id.empty() ? "-" : report.task_id.c_str(), report.env_path.c_str(),
              report.version_drift ? " (VERSION DRIFT: not the recorded version)" : "");
  size_t diverged = 0;
  for (const auto& step : report.steps) {
    std::string differences;
    for (const auto& field : step.differences) differences += (differences.empty() ? "" : ", ") + field;
    if (step.status != agents::StepStatus::kMatch) ++diverged;
    std::printf("  step %-4lld %-32s %s%s%s%s\n", static_cast<long long>(step.step), step.tool.c_str(),
                std::string(agents::StepStatusName(step.status)).c_str(), differences.empty() ? "" : " (",
                differences.c_str(), differences.empty() ? "" : ")");
  }
  if (report.first_divergence) {
    const auto& step = report.steps[*report.first_divergence];
    std::printf("\nfirst divergent step: %lld, %s %s%s\n", static_cast<long long>(step.step), step.tool.c_str(),
                Excerpt(DumpJson(step.arguments), 200).c_str(),
                step.episode_id != report.episode_id ? (" (recorded by parent " + step.episode_id + ")").c_str() : "");
    PrintSide("outcome", std::string(toolsets::OutcomeName(step.recorded.outcome)),
              std::string(toolsets::OutcomeName(step.replayed.outcome)));
    PrintSide("content", Observation(step.recorded, 300), Observation(step.replayed, 300));
    if (!step.recorded.ok() || !step.replayed.ok()) PrintSide("message", step.recorded.message, step.replayed.message);
  }
  const auto& verdict = report.verdict;
  std::printf("\nverdict: %s", std::string(agents::VerdictStatusName(verdict.status)).c_str());
  if (!verdict.note.empty()) std::printf(" (%s)", verdict.note.c_str());
  std::printf("\n  recorded: %s\n", VerdictLine(verdict.recorded, verdict.recorded_verifier_version).c_str());
  if (!verdict.replayed.is_null()) {
    std::printf("  replayed: %s, by %s\n", VerdictLine(verdict.replayed, verdict.replayed_verifier_version).c_str(),
                verdict.scored_with.c_str());
    if (verdict.reasons_differ) {
      for (const auto& reason : verdict.replayed.value("reasons", Json::array())) {
        std::printf("    - %s\n", Excerpt(reason.get<std::string>(), 200).c_str());
      }
    }
  }
  std::printf("\n%zu of %zu steps match; verdict %s%s\n", report.steps.size() - diverged, report.steps.size(),
              std::string(agents::VerdictStatusName(verdict.status)).c_str(),
              report.matches() ? ": the episode replays identically" : "");
}

}  // namespace

namespace {

int Replay(const ParsedArgs& parsed) {
  agents::ReplayOptions options;
  options.envs = parsed.OptionOr("--envs");  // required by the declaration
  options.verifier_of = parsed.OptionOr("--verifier-of");
  options.allow_version_drift = parsed.Has("--allow-version-drift");
  options.live_search = parsed.Has("--live-search");
  auto reader = agents::TrajectoryReader::Open(parsed.positional[0]);
  if (!reader.ok()) return Fail(reader.status(), ExitCodeFor(reader.status()));
  auto episode = (*reader)->Get(parsed.positional[1]);
  if (!episode.ok()) return Fail(episode.status(), ExitCodeFor(episode.status()));
  agents::TrajectoryReader* store = reader->get();
  options.load_episode = [store](const std::string& id) { return store->Get(id); };

  RaiseFileLimit();
  auto manager_options = ManagerOptionsFromLimitsOption(parsed.Option("--limits"));
  if (!manager_options.ok()) return Fail(manager_options.status(), kExitUsage);
  auto manager = sandbox::SessionManager::Create(std::move(*manager_options));
  if (!manager.ok()) return Fail(manager.status(), kExitInfra);
  auto report = agents::Replay(*episode, **manager, options);
  if (!report.ok()) {
    // A version mismatch (FailedPrecondition) is the user's input (the wrong bundle): exit 2.
    return Fail(report.status(), ExitCodeFor(report.status()));
  }
  if (parsed.Has("--json")) {
    std::printf("%s\n",
                agents::ReplayReportToJson(*report).dump(2, ' ', false, Json::error_handler_t::replace).c_str());
  } else {
    PrintReport(*report);
  }
  if (report->infra_error()) return kExitInfra;
  bool diverged = std::any_of(report->steps.begin(), report->steps.end(), [](const agents::StepComparison& s) {
    return s.status == agents::StepStatus::kDiverged;
  });
  if (diverged || report->verdict.status == agents::VerdictStatus::kChanged) return kExitCheckFailed;
  if (report->verdict.status == agents::VerdictStatus::kDefect) return kExitInfra;
  return kExitOk;
}

}  // namespace

std::vector<Command> TrajCommands() {
  auto with_filters = [](std::vector<OptionDecl> options) {
    std::vector<OptionDecl> all = FilterOptions();
    all.insert(all.end(), options.begin(), options.end());
    return all;
  };
  return {
      {{.name = "traj ls",
        .positionals = "FILE.sqlite",
        .summary = "recorded episodes, newest first: id, kind (served | rollout), env, task, steps, outcome, verdict, "
                   "start time, backend",
        .options = with_filters({{.name = "--limit", .metavar = "N", .help = "episodes listed", .default_text = "50"},
                                 JsonOption("the episodes as JSON")}),
        .min_positional = 1,
        .max_positional = 1},
       List},
      {{.name = "traj show",
        .positionals = "FILE.sqlite ID",
        .summary =
            "one episode (ID or a unique prefix of 6+ hex digits): versions, answer, verdict, each step's call and "
            "result",
        .details =
            "A rollout: its whole conversation (reasoning, tool calls, typed results, model turns' tokens, context "
            "events), then the verdict.",
        .options = {JsonOption("the episode as JSON")},
        .min_positional = 2,
        .max_positional = 2},
       Show},
      {{.name = "traj export",
        .positionals = "FILE.sqlite",
        .summary = "every episode as one JSON line, oldest first, with messages, model turns and the token-exact "
                   "\"tokens\" segments; or (--ipynb -o DIR) each interpreter episode as a Jupyter notebook",
        .details =
            "--ipynb -o DIR: each interpreter episode (execute calls) as DIR/<episode-id>.ipynb (nbformat 4.5; DIR "
            "is created): code cells with their outputs, the prompt, model text, restarts and the verdict as "
            "markdown; other episodes are skipped with a warning; exit 2 when no notebook was written.",
        .options = with_filters(
            {{.name = "-o",
              .metavar = "OUT",
              .help = "the file written; with --ipynb, the directory",
              .default_text = "stdout",
              .computed = true},
             {.name = "--output", .metavar = "OUT", .help = "the same as -o"},
             {.name = "--jsonl", .help = "JSON lines (the default)"},
             {.name = "--ipynb", .help = "Jupyter notebooks, one per interpreter episode (needs -o DIR)"}}),
        .min_positional = 1,
        .max_positional = 1},
       Export},
      {{.name = "replay",
        .positionals = "FILE.sqlite ID",
        .summary = "re-run the episode's calls on a fresh session of the recorded env version, diff each observation, "
                   "re-judge the answer",
        .details = "Search episodes get their recorded search/open/find responses back (--live-search: ask the backend "
                   "and diff what it answers today).\n"
                   "Exit 0 identical, 1 diverged or verdict changed, 2 bad input, 3 infra.",
        .options = {{.name = "--envs",
                     .metavar = "DIR|X.envdb",
                     .help = "where the recorded environment is",
                     .required = true},
                    {.name = "--verifier-of", .metavar = "OTHER.envdb", .help = "re-judge with OTHER's verifier"},
                    {.name = "--allow-version-drift",
                     .help = "replay on an environment version other than the recorded one"},
                    {.name = "--live-search",
                     .help = "search episodes: ask the backend instead of replaying the recorded responses"},
                    LimitsOption(),
                    JsonOption("the report as JSON")},
        .min_positional = 2,
        .max_positional = 2},
       Replay},
  };
}

}  // namespace envforge::cli

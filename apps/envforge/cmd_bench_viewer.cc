// envforge bench viewer: the trajectory viewer's figures on a large store (issue 17). Writes a
// synthetic store through agents::TrajectoryStore (N short episodes over several environments,
// tasks, outcomes and kinds, and one long rollout with its conversation), serves it in-process
// with the viewer on an ephemeral port, and measures through real HTTP requests: the list's
// first page, page flips deep into the table, filtered pages, one long episode; then, when
// Debian's Chromium is installed, the browser's render of the list and of the long episode.
// Every page's row count is checked against what the generator wrote. Figures, never a test.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "agents/trajectory_store.h"
#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "apps/envforge/percentiles.h"
#include "apps/envforge/progress.h"
#include "base/fd.h"
#include "base/json.h"
#include "base/subprocess.h"
#include "server/http_server.h"
#include "server/rpc_service.h"
#include "server/ui_api.h"

namespace envforge::cli {
namespace {

namespace fs = std::filesystem;
using agents::EpisodeOutcome;
using Clock = std::chrono::steady_clock;

constexpr int kEnvironments = 8;
constexpr int kTasksPerEnvironment = 40;
constexpr int kShortSteps = 3;
constexpr int64_t kPageSize = 50;  // the page's default
constexpr const char* kLongEnv = "bench_long";
constexpr const char* kLongTask = "long_task";

// The synthetic episode i (0-based, in write order): a pure function, so a reused store needs no
// side table for the expected row counts.
struct Synthetic {
  std::string env;
  std::string task;
  EpisodeOutcome outcome;
  std::string kind;
};

std::string EnvName(int env) { return "bench_env_" + std::to_string(env); }
std::string TaskId(int env, int task) { return "env" + std::to_string(env) + "_task" + std::to_string(task); }

Synthetic Describe(long long i) {
  const int env = static_cast<int>(i % kEnvironments);
  const int task = static_cast<int>((i / kEnvironments) % kTasksPerEnvironment);
  const long long slot = i % 20;  // 70% submitted, 15% max_turns, 10% closed, 5% crashed
  const EpisodeOutcome outcome = slot < 14   ? EpisodeOutcome::kSubmitted
                                 : slot < 17 ? EpisodeOutcome::kMaxTurns
                                 : slot < 19 ? EpisodeOutcome::kClosed
                                             : EpisodeOutcome::kCrashed;
  return Synthetic{EnvName(env), TaskId(env, task), outcome, i % 4 == 0 ? "served" : "rollout"};
}

Synthetic DescribeLong() { return Synthetic{kLongEnv, kLongTask, EpisodeOutcome::kSubmitted, "rollout"}; }

// A page's filter, as the API takes it and as a predicate over the synthetic episodes.
struct PageFilter {
  std::string env, task, outcome, kind;
  bool Matches(const Synthetic& episode) const {
    return (env.empty() || env == episode.env) && (task.empty() || task == episode.task) &&
           (outcome.empty() || outcome == agents::EpisodeOutcomeName(episode.outcome)) &&
           (kind.empty() || kind == episode.kind);
  }
  bool Matches(const Json& summary) const {
    return (env.empty() || summary["env_name"] == env) && (task.empty() || summary["task_id"] == task) &&
           (outcome.empty() || summary["outcome"] == outcome) && (kind.empty() || summary["kind"] == kind);
  }
  std::string Query() const {
    std::string query;
    for (const auto& [name, value] : {std::pair{"env", env}, {"task", task}, {"outcome", outcome}, {"kind", kind}}) {
      if (!value.empty()) query += std::string(name) + "=" + value + "&";
    }
    return query;
  }
};

long long CountMatching(long long episodes, const PageFilter& filter) {
  long long count = filter.Matches(DescribeLong()) ? 1 : 0;
  for (long long i = 0; i < episodes; ++i) count += filter.Matches(Describe(i)) ? 1 : 0;
  return count;
}

toolsets::ToolResult OkResult(Json content) {
  toolsets::ToolResult result;
  result.content = std::move(content);
  return result;
}

void WriteShortEpisode(agents::TrajectoryStore& store, long long i) {
  const Synthetic described = Describe(i);
  agents::EpisodeStart start;
  start.env_id = "sha256:" + described.env;
  start.env_name = described.env;
  start.task_id = described.task;
  start.task_version = "1";
  start.verifier_version = "1";
  start.seed = i;
  start.client = "bench viewer";
  start.kind = described.kind;
  if (described.kind == "rollout") {
    start.backend = "scripted:bench";
    start.model = "bench-model";
    start.rollout_id = "rollout-" + std::to_string(i / 1000);
    start.sample_index = i % 1000;
  }
  const std::string id = store.BeginEpisode(std::move(start));
  for (int step = 0; step < kShortSteps; ++step) {
    agents::StepRecord record;
    record.step = step;
    record.tool = step == 0 ? "list_tables" : "query";
    record.arguments = Json{{"sql", "SELECT name, price FROM items WHERE id = " + std::to_string(i + step)}};
    record.result = OkResult(Json{{"rows", Json::array({Json::array({"item " + std::to_string(i), 12.5 + step})})}});
    record.duration_us = 800 + step * 100;
    store.RecordStep(id, std::move(record));
  }
  if (described.outcome == EpisodeOutcome::kSubmitted) {
    store.RecordSubmit(id, std::to_string(i % 97),
                       Json{{"passed", i % 3 != 0},
                            {"score", i % 3 != 0 ? 1.0 : 0.0},
                            {"reasons", Json::array()},
                            {"verifier_version", "1"}});
  }
  store.EndEpisode(id, described.outcome);
}

// The long rollout: a system and a user message, then per step an assistant message calling a
// tool (with its model turn: token ids continuing one context) and the tool's result; every
// tenth result is long enough for the page to fold it. Returns its id.
std::string WriteLongEpisode(agents::TrajectoryStore& store, long long steps) {
  agents::EpisodeStart start;
  start.env_id = std::string("sha256:") + kLongEnv;
  start.env_name = kLongEnv;
  start.task_id = kLongTask;
  start.task_version = "1";
  start.verifier_version = "1";
  start.client = "bench viewer";
  start.kind = "rollout";
  start.backend = "scripted:bench";
  start.model = "bench-model";
  start.rollout_id = "rollout-long";
  start.sample_index = 0;
  const std::string id = store.BeginEpisode(std::move(start));
  int64_t index = 0;
  auto message = [&](std::string role, std::string content) {
    agents::MessageRecord record;
    record.index = index++;
    record.role = std::move(role);
    record.content = std::move(content);
    return record;
  };
  store.RecordMessage(id, message("system", "You are an agent with database tools. Answer with submit_result."));
  store.RecordMessage(id, message("user", "Find the cheapest item in every category and sum their prices."));
  int64_t context = 0;
  for (long long step = 0; step < steps; ++step) {
    const std::string call_id = "call_" + std::to_string(step);
    const Json arguments{{"sql", "SELECT category, min(price) FROM items WHERE category_id = " + std::to_string(step) +
                                     " GROUP BY category"}};
    agents::MessageRecord assistant = message("assistant", "");
    assistant.reasoning_content = "Category " + std::to_string(step) + " next; the previous one is done.";
    assistant.tool_calls = Json::array({Json{{"id", call_id}, {"name", "query"}, {"arguments", arguments}}});
    agents::ModelTurnRecord turn;
    turn.turn = step;
    turn.message_index = assistant.index;
    for (int t = 0; t < 40; ++t) turn.input_tokens.push_back(1000 + static_cast<int32_t>((step * 40 + t) % 30000));
    for (int t = 0; t < 30; ++t) {
      turn.output_tokens.push_back(2000 + static_cast<int32_t>((step * 30 + t) % 30000));
      turn.logprobs.push_back(-0.05 * (t % 7));
      turn.kept_counts.push_back(1 + t % 5);
    }
    turn.reused_tokens = context;
    turn.prompt_tokens = context + static_cast<int64_t>(turn.input_tokens.size());
    context = turn.prompt_tokens + static_cast<int64_t>(turn.output_tokens.size());
    turn.finish_reason = "tool_calls";
    turn.raw_text = arguments.dump();
    turn.duration_us = 150'000;
    store.RecordMessage(id, std::move(assistant));
    store.RecordModelTurn(id, std::move(turn));

    agents::StepRecord record;
    record.step = step;
    record.tool = "query";
    record.arguments = arguments;
    Json rows = Json::array();
    const int row_count = step % 10 == 9 ? 120 : 4;  // 120 rows: several KB, folded by the page
    for (int r = 0; r < row_count; ++r) rows.push_back(Json::array({"category " + std::to_string(step), 3.25 + r}));
    record.result = OkResult(Json{{"rows", rows}});
    record.duration_us = 1200;
    agents::MessageRecord tool = message("tool", record.result.content.dump());
    tool.tool_call_id = call_id;
    tool.tool_outcome = "ok";
    tool.step = step;
    store.RecordStep(id, std::move(record));
    store.RecordMessage(id, std::move(tool));
  }
  store.RecordMessage(id, message("assistant", "The sum is 650."));
  store.RecordSubmit(id, "650",
                     Json{{"passed", true}, {"score", 1.0}, {"reasons", Json::array()}, {"verifier_version", "1"}});
  store.EndEpisode(id, EpisodeOutcome::kSubmitted);
  return id;
}

// Writes the store: the short episodes (a flush every 10,000 keeps the queue bounded), then the
// long one last, so it is the newest (the first row of the list, as a just-finished rollout is).
Result<std::string> WriteStore(const std::string& path, long long episodes, long long steps) {
  agents::TrajectoryStoreOptions options;
  options.batch_max_records = 8192;
  options.flush_deadline = std::chrono::minutes(10);
  ENVFORGE_ASSIGN_OR_RETURN(std::unique_ptr<agents::TrajectoryStore> store,
                            agents::TrajectoryStore::Open(path, options));
  Progress progress("writing episodes", static_cast<size_t>(episodes));
  for (long long i = 0; i < episodes; ++i) {
    WriteShortEpisode(*store, i);
    if ((i + 1) % 10'000 == 0) {
      ENVFORGE_RETURN_IF_ERROR(store->Flush());
      progress.Update(static_cast<size_t>(i + 1));
    }
  }
  std::string long_id = WriteLongEpisode(*store, steps);
  ENVFORGE_RETURN_IF_ERROR(store->Flush());
  progress.Finish();
  if (store->Stats().write_errors != 0)
    return InternalError("the store rejected records: " + store->Stats().last_error);
  return long_id;
}

// A keep-alive HTTP/1.1 client on one loopback connection: GET, Content-Length bodies only (what
// the server sends).
class HttpClient {
 public:
  struct Response {
    int status = 0;
    std::string body;
  };

  static Result<HttpClient> Connect(uint16_t port) {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return InternalError("socket failed");
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
      return UnavailableError("cannot connect to 127.0.0.1:" + std::to_string(port));
    }
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return HttpClient(std::move(fd));
  }

  Result<Response> Get(const std::string& target) {
    ENVFORGE_RETURN_IF_ERROR(WriteFull(fd_.get(), "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    size_t header_end;
    while ((header_end = buffer_.find("\r\n\r\n")) == std::string::npos) ENVFORGE_RETURN_IF_ERROR(ReadMore());
    const std::string header = buffer_.substr(0, header_end);
    Response response;
    std::string lower = header;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    const size_t length_at = lower.find("\r\ncontent-length:");
    size_t length = 0;
    bool parsed = header.starts_with("HTTP/1.1 ") && header.size() >= 12 &&
                  std::from_chars(header.data() + 9, header.data() + 12, response.status).ec == std::errc() &&
                  length_at != std::string::npos;
    if (parsed) {
      const char* digits = lower.c_str() + length_at + 17;
      while (*digits == ' ') ++digits;
      parsed = std::from_chars(digits, lower.data() + lower.size(), length).ec == std::errc();
    }
    if (!parsed) {
      return InternalError("not an HTTP response with a Content-Length to " + target + ": " + header.substr(0, 200));
    }
    while (buffer_.size() < header_end + 4 + length) ENVFORGE_RETURN_IF_ERROR(ReadMore());
    response.body = buffer_.substr(header_end + 4, length);
    buffer_.erase(0, header_end + 4 + length);
    return response;
  }

 private:
  explicit HttpClient(UniqueFd fd) : fd_(std::move(fd)) {}
  Status ReadMore() {
    char chunk[65536];
    const ssize_t n = ::read(fd_.get(), chunk, sizeof(chunk));
    if (n <= 0) return UnavailableError("the server closed the connection");
    buffer_.append(chunk, static_cast<size_t>(n));
    return Status::Ok();
  }

  UniqueFd fd_;
  std::string buffer_;
};

// One measured request: its figures and whether its answer was right.
struct Probe {
  std::string name;
  std::string target;
  long long expected_rows = -1;  // -1: not a page
  PageFilter filter;
};

Result<Json> Measure(HttpClient& client, const Probe& probe, long long repeat, bool* all_right) {
  std::vector<double> ms;
  Json answer;
  size_t bytes = 0;
  for (long long r = 0; r <= repeat; ++r) {  // the first is a warm-up
    const auto start = Clock::now();
    ENVFORGE_ASSIGN_OR_RETURN(HttpClient::Response response, client.Get(probe.target));
    const double elapsed = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (response.status != 200) {
      return InternalError(probe.target + " answered " + std::to_string(response.status) + ": " +
                           response.body.substr(0, 200));
    }
    if (r > 0) ms.push_back(elapsed);
    bytes = response.body.size();
    if (r == repeat && probe.target.starts_with("/ui/api/")) {
      ENVFORGE_ASSIGN_OR_RETURN(answer, ParseJson(response.body, probe.target));
    }
  }
  Json figures{{"name", probe.name}, {"target", probe.target}, {"ms", Percentiles(ms)}, {"bytes", bytes}};
  if (probe.expected_rows >= 0) {
    const Json& episodes = answer["episodes"];
    const bool rows_match =
        std::all_of(episodes.begin(), episodes.end(), [&](const Json& e) { return probe.filter.Matches(e); });
    const bool right = static_cast<long long>(episodes.size()) == probe.expected_rows && rows_match;
    figures["rows"] = episodes.size();
    figures["expected_rows"] = probe.expected_rows;
    figures["rows_match_filter"] = rows_match;
    figures["right"] = right;
    *all_right = *all_right && right;
  } else if (answer.contains("steps") && answer["steps"].is_array()) {
    figures["steps"] = answer["steps"].size();
    figures["messages"] = answer["messages"].size();
  }
  return figures;
}

size_t Occurrences(const std::string& text, const std::string& part) {
  size_t count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++count;
  return count;
}

// Headless Chromium's wall time to start, load `url`, run the page's scripts and dump the DOM
// (into *dom).
Result<double> ChromiumMs(const std::string& url, std::string* dom) {
  CommandOptions options;
  options.timeout = std::chrono::seconds(120);
  const auto start = Clock::now();
  ENVFORGE_ASSIGN_OR_RETURN(
      CommandOutput output,
      RunCommand({"/usr/bin/chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--virtual-time-budget=5000", "--window-size=1280,900", "--dump-dom", url},
                 options));
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (output.exit_code != 0) {
    return InternalError("chromium exited " + std::to_string(output.exit_code) + " on " + url + ": " +
                         output.stderr_text.substr(0, 300));
  }
  *dom = std::move(output.stdout_text);
  return ms;
}

// Chromium's start varies by tens of milliseconds, more on a loaded machine: each run loads a
// blank page, the list and the episode one after another, and a page's render time is the
// median over runs of (page - blank page of the same run).
Result<Json> MeasureBrowser(uint16_t port, const std::string& long_id, long long steps, long long runs,
                            bool* all_right) {
  const std::string base = "http://127.0.0.1:" + std::to_string(port) + "/ui/";
  std::vector<double> blank_ms, list_ms, episode_ms, list_render, episode_render;
  std::string dom;
  size_t rows = 0, rendered_steps = 0;
  for (long long run = 0; run < runs; ++run) {
    ENVFORGE_ASSIGN_OR_RETURN(double blank, ChromiumMs("about:blank", &dom));
    ENVFORGE_ASSIGN_OR_RETURN(double list, ChromiumMs(base, &dom));
    rows = Occurrences(dom, "<tr data-id=");
    ENVFORGE_ASSIGN_OR_RETURN(double episode, ChromiumMs(base + "#/episode/" + long_id, &dom));
    rendered_steps = Occurrences(dom, "<li class=\"tool-ok\"") + Occurrences(dom, "<li class=\"tool-error\"");
    blank_ms.push_back(blank);
    list_ms.push_back(list);
    episode_ms.push_back(episode);
    list_render.push_back(list - blank);
    episode_render.push_back(episode - blank);
  }
  const bool right = static_cast<long long>(rows) == kPageSize && static_cast<long long>(rendered_steps) == steps;
  *all_right = *all_right && right;
  return Json{{"runs", runs},
              {"blank_page_ms", Percentiles(blank_ms)},
              {"list_page_ms", Percentiles(list_ms)},
              {"episode_page_ms", Percentiles(episode_ms)},
              {"list_render_ms", Quantile(list_render, 0.5)},
              {"episode_render_ms", Quantile(episode_render, 0.5)},
              {"list_rows_in_dom", rows},
              {"episode_steps_in_dom", rendered_steps},
              {"right", right}};
}

void PrintTable(const Json& figures) {
  const Json& store = figures["store"];
  std::printf("store %s: %lld episodes (%lld short of %d steps, one of %lld steps)%s\n",
              store["path"].get<std::string>().c_str(), store["episodes"].get<long long>(),
              store["episodes"].get<long long>() - 1, kShortSteps, figures["long_episode_steps"].get<long long>(),
              store["reused"] == true ? ", reused" : "");
  if (store["reused"] == false) {
    std::printf("  written in %.1f s (%.0f episodes/s)\n", store["write_s"].get<double>(),
                store["episodes"].get<double>() / std::max(store["write_s"].get<double>(), 1e-9));
  }
  std::printf("  %-26s %9s %9s %9s %9s  %s\n", "request (ms)", "p50", "p99", "max", "bytes", "rows");
  for (const Json& probe : figures["requests"]) {
    std::string rows;
    if (probe.contains("rows")) {
      rows = std::to_string(probe["rows"].get<long long>()) + "/" +
             std::to_string(probe["expected_rows"].get<long long>()) + (probe["right"] == true ? "" : "  WRONG");
    } else if (probe.contains("steps")) {
      rows = std::to_string(probe["steps"].get<long long>()) + " steps, " +
             std::to_string(probe["messages"].get<long long>()) + " messages";
    }
    const Json& ms = probe["ms"];
    std::printf("  %-26s %9.3f %9.3f %9.3f %9lld  %s\n", probe["name"].get<std::string>().c_str(),
                ms["p50"].get<double>(), ms["p99"].get<double>(), ms["max"].get<double>(),
                probe["bytes"].get<long long>(), rows.c_str());
  }
  const Json& browser = figures["browser"];
  if (browser.is_null()) {
    std::printf("  browser: %s\n", figures["browser_skipped"].get<std::string>().c_str());
    return;
  }
  std::printf("  headless Chromium, %lld runs (a blank page: p50 %.0f ms, taken off run by run):\n",
              browser["runs"].get<long long>(), browser["blank_page_ms"]["p50"].get<double>());
  std::printf("    list page render          %6.0f ms   %lld rows in the DOM\n",
              browser["list_render_ms"].get<double>(), browser["list_rows_in_dom"].get<long long>());
  std::printf("    %5lld-step episode render %6.0f ms   %lld steps in the DOM\n",
              figures["long_episode_steps"].get<long long>(), browser["episode_render_ms"].get<double>(),
              browser["episode_steps_in_dom"].get<long long>());
}

int Viewer(const ParsedArgs& parsed) {
  auto episodes = parsed.IntOption("--episodes", 100, 10'000'000);
  auto steps = parsed.IntOption("--steps", 1, 100'000);
  auto repeat = parsed.IntOption("--repeat", 1, 10'000);
  auto browser_runs = parsed.IntOption("--browser-runs", 1, 1000);
  for (const auto* r : {&episodes, &steps, &repeat, &browser_runs}) {
    if (!r->ok()) return Fail(r->status(), kExitUsage);
  }

  // 1. The store: a temporary one, or --store F (reused when it exists).
  const std::optional<std::string> kept = parsed.Option("--store");
  const fs::path scratch = fs::temp_directory_path() / ("envforge-bench-viewer-" + std::to_string(::getpid()));
  const std::string path = kept ? *kept : (scratch / "trajectories.sqlite").string();
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ignored;
      if (!dir.empty()) fs::remove_all(dir, ignored);
    }
  } cleanup{kept ? fs::path() : scratch};
  std::error_code made;
  if (!kept && !fs::create_directories(scratch, made)) {
    return Fail(InternalError("cannot create " + scratch.string() + ": " + made.message()), kExitInfra);
  }
  const bool reused = kept && fs::exists(*kept);
  std::string long_id;
  double write_s = 0;
  if (reused) {
    auto reader = agents::TrajectoryReader::Open(path);
    if (!reader.ok()) return Fail(reader.status().WithContext("--store"), ExitCodeFor(reader.status()));
    auto counts = (*reader)->Count();
    if (!counts.ok()) return Fail(counts.status().WithContext("--store"), ExitCodeFor(counts.status()));
    agents::ListFilter long_only;
    long_only.env_id = kLongEnv;
    long_only.limit = 2;
    auto long_ones = (*reader)->List(long_only);
    if (!long_ones.ok()) return Fail(long_ones.status().WithContext("--store"), ExitCodeFor(long_ones.status()));
    if (counts->episodes != *episodes + 1 || long_ones->size() != 1 || (*long_ones)[0].steps != *steps) {
      return Fail(InvalidArgumentError("--store " + path + " holds " + std::to_string(counts->episodes) +
                                       " episodes, not one written by envforge bench viewer --episodes " +
                                       std::to_string(*episodes) + " --steps " + std::to_string(*steps) +
                                       " (remove it, or pass the numbers it was written with)"),
                  kExitUsage);
    }
    long_id = (*long_ones)[0].id;
  } else {
    const auto start = Clock::now();
    auto written = WriteStore(path, *episodes, *steps);
    if (!written.ok()) return Fail(written.status().WithContext("writing " + path), kExitInfra);
    write_s = std::chrono::duration<double>(Clock::now() - start).count();
    long_id = *written;
  }

  // 2. The viewer, in-process, on an ephemeral port: what `envforge view F` serves.
  auto ui = server::UiApi::Open(path);
  if (!ui.ok()) return Fail(ui.status().WithContext("envforge bench viewer"), ExitCodeFor(ui.status()));
  server::HttpServerOptions http_options;
  http_options.port = 0;
  http_options.ui = ui->get();
  auto service = server::RpcService::Create(server::RpcServiceOptions{});
  if (!service.ok()) return Fail(service.status().WithContext("envforge bench viewer"), kExitInfra);
  auto server = server::HttpServer::Create(**service, http_options);
  if (!server.ok()) return Fail(server.status().WithContext("envforge bench viewer"), kExitInfra);
  (*server)->Start();
  auto client = HttpClient::Connect((*server)->port());
  if (!client.ok()) return Fail(client.status(), kExitInfra);

  // 3. The requests. Offsets scale with the store: 0, 1%, 10%, 50% and 99% of it (0, 1k, 10k,
  // 50k and 99k on 100,000 episodes).
  const long long total = *episodes + 1;
  std::vector<Probe> probes;
  probes.push_back({"page assets (/ui/)", "/ui/", -1, {}});
  probes.push_back({"counts", "/ui/api/counts", -1, {}});
  auto page = [&](const std::string& name, const PageFilter& filter, long long offset) {
    const long long matching = CountMatching(*episodes, filter);
    const std::string target = "/ui/api/episodes?" + filter.Query() + "limit=" + std::to_string(kPageSize) +
                               "&offset=" + std::to_string(offset);
    probes.push_back({name, target, std::clamp<long long>(matching - offset, 0, kPageSize), filter});
  };
  for (long long percent : {0, 1, 10, 50, 99}) {
    const long long offset = *episodes * percent / 100;
    page("page at offset " + std::to_string(offset), {}, offset);
  }
  page("env=" + EnvName(3), {.env = EnvName(3)}, 0);
  const long long env_matching = CountMatching(*episodes, {.env = EnvName(3)});
  page("env=" + EnvName(3) + " last page", {.env = EnvName(3)}, std::max<long long>(env_matching - kPageSize, 0));
  page("task=" + TaskId(3, 7), {.task = TaskId(3, 7)}, 0);
  page("outcome=submitted", {.outcome = "submitted"}, 0);
  page("outcome=crashed", {.outcome = "crashed"}, 0);
  page("kind=served", {.kind = "served"}, 0);
  page("env=no_such_env (none)", {.env = "no_such_env"}, 0);
  probes.push_back({"episode " + std::to_string(*steps) + " steps", "/ui/api/episodes/" + long_id, -1, {}});

  bool all_right = true;
  Json requests = Json::array();
  for (const Probe& probe : probes) {
    auto figures = Measure(*client, probe, *repeat, &all_right);
    if (!figures.ok()) return Fail(figures.status().WithContext("envforge bench viewer"), kExitInfra);
    requests.push_back(std::move(*figures));
  }

  // 4. The browser, when there is one.
  Json browser;
  std::string browser_skipped;
  if (parsed.Has("--no-browser")) {
    browser_skipped = "skipped (--no-browser)";
  } else if (::access("/usr/bin/chromium", X_OK) != 0) {
    browser_skipped = "skipped (no /usr/bin/chromium)";
  } else {
    auto measured = MeasureBrowser((*server)->port(), long_id, *steps, *browser_runs, &all_right);
    if (!measured.ok()) return Fail(measured.status().WithContext("envforge bench viewer"), kExitInfra);
    browser = std::move(*measured);
  }
  (*server)->Stop();

  Json figures{{"store",
                {{"path", kept ? path : std::string("(temporary)")},
                 {"episodes", total},
                 {"reused", reused},
                 {"write_s", reused ? Json() : Json(write_s)}}},
               {"long_episode_id", long_id},
               {"long_episode_steps", *steps},
               {"page_size", kPageSize},
               {"repeat", *repeat},
               {"requests", std::move(requests)},
               {"browser", browser},
               {"all_right", all_right}};
  if (!browser_skipped.empty()) figures["browser_skipped"] = browser_skipped;
  if (parsed.Has("--json")) {
    std::printf("%s\n", figures.dump(2).c_str());
  } else {
    PrintTable(figures);
  }
  return all_right ? kExitOk : kExitCheckFailed;
}

}  // namespace

std::vector<Command> BenchViewerCommands() {
  return {
      {{.name = "bench viewer",
        .summary = "the trajectory viewer on a synthetic store of N episodes: /ui/api pages and one long episode "
                   "(p50/p99 over real HTTP); list and episode render in headless Chromium",
        .details =
            "Writes a synthetic trajectory store (N short episodes and one of --steps steps with its conversation; "
            "--store F keeps it, and reuses F when it exists), serves it with the viewer and measures /ui/api "
            "through real HTTP requests: the first page, pages deep in the table, filtered pages, the long episode "
            "(p50/p99 over --repeat requests); with /usr/bin/chromium, the list page's and the long episode's "
            "render in headless Chromium (median over --browser-runs runs of the page's time less a blank page's). "
            "Each page's row count and the rendered DOM's rows and steps are checked; exit 1 when one is wrong.",
        .options =
            {{.name = "--episodes",
              .metavar = "N",
              .help = "short episodes in the store (at least 100)",
              .default_text = "100000"},
             {.name = "--steps", .metavar = "N", .help = "steps of the long episode", .default_text = "200"},
             {.name = "--store", .metavar = "F.sqlite", .help = "keep the store there (reused when it exists)"},
             {.name = "--repeat", .metavar = "N", .help = "requests per measured page", .default_text = "20"},
             {.name = "--browser-runs", .metavar = "N", .help = "headless Chromium runs per page", .default_text = "5"},
             {.name = "--no-browser", .help = "skip the render in Chromium"},
             JsonOption("the figures as JSON")}},
       Viewer},
  };
}

}  // namespace envforge::cli

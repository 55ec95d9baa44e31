// envforge bench burst: bursts of session creation against a running `envforge serve`.
//
// Each round, C clients (server/load_client.h, one connection each) connect first; once all are
// connected every one of them sends session/create at the same moment; the sessions are closed
// once every create was answered.
// The rounds are --pause-ms apart, the time a server has to refill what a burst took (its warm
// sessions, `envforge serve --warm-sessions`). Reported per round and over all rounds: the
// create latency (p50, p99, max; from writing the request to reading the answer), the creates
// that failed (a session that could not start is a failure: exit 1) and the close latency. A round
// in which no create was answered ends the run (the rounds left count as failed).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "apps/envforge/load_target.h"
#include "apps/envforge/percentiles.h"
#include "base/json.h"
#include "server/load_client.h"
#include "server/rpc_client.h"

namespace envforge::cli {
namespace {

struct BurstConfig {
  std::string url;
  server::LoadOptions load;
  size_t rounds = 10;
  std::chrono::milliseconds pause{3000};
};

Result<BurstConfig> BurstConfigFrom(const ParsedArgs& parsed) {
  BurstConfig config;
  config.url = *parsed.Option("--url");  // required by the declaration
  server::LoadOptions& load = config.load;
  ENVFORGE_RETURN_IF_ERROR(LoadTargetFrom(parsed, &load));
  ENVFORGE_ASSIGN_OR_RETURN(long long clients, parsed.IntOption("--clients", 1, 20'000));
  ENVFORGE_ASSIGN_OR_RETURN(long long rounds, parsed.IntOption("--rounds", 1, 10'000));
  ENVFORGE_ASSIGN_OR_RETURN(long long pause_ms, parsed.IntOption("--pause-ms", 0, 3'600'000));
  load.sessions = load.concurrency = static_cast<size_t>(clients);
  load.steps = 0;
  load.submit = false;
  load.connect_first = true;
  load.hold_sessions = true;
  load.tool = std::string("none: a burst makes no tools/call");  // the load client requires a name
  config.rounds = static_cast<size_t>(rounds);
  config.pause = std::chrono::milliseconds(pause_ms);
  return config;
}

// One create and close first: the environment's zygote starts, and with it its warm sessions.
Status WarmUp(const server::LoadOptions& load) {
  ENVFORGE_ASSIGN_OR_RETURN(auto control,
                            server::RpcClient::Connect("http://" + load.host_header + "/rpc", {.token = load.token}));
  auto created = control->Call("session/create", Json{{"env", load.env}, {"task", load.task}});
  if (!created.ok()) return created.status().WithContext("warm-up session");
  (void)control->Call("session/close", Json{{"session", created->value("session", "")}});
  return Status::Ok();
}

struct RoundResult {
  Json report;
  std::vector<double> create_ms;
  size_t failed = 0;
};

Result<RoundResult> RunRound(const BurstConfig& config, size_t round) {
  ENVFORGE_ASSIGN_OR_RETURN(auto run, server::LoadRun::Create(config.load));
  run->Run(nullptr);
  server::LoadStats stats = run->Stats();
  RoundResult result;
  result.create_ms = stats.latency_ms["session/create"];
  size_t created = 0;
  for (const auto& episode : run->episodes()) created += episode.created;
  result.failed = config.load.sessions - created;
  result.report = Json{{"round", round + 1},
                       {"created", created},
                       {"failed", result.failed},
                       {"create_ms", Percentiles(result.create_ms)},
                       {"close_ms", Percentiles(stats.latency_ms["session/close"])},
                       {"errors", stats.errors}};
  return result;
}

void PrintRound(const Json& round) {
  const Json& create = round["create_ms"];
  std::fprintf(stderr, "bench burst: round %s: %s created, %s failed; create p50 %s ms, p99 %s ms, max %s ms\n",
               round["round"].dump().c_str(), round["created"].dump().c_str(), round["failed"].dump().c_str(),
               create["p50"].dump().c_str(), create["p99"].dump().c_str(), create["max"].dump().c_str());
}

int BenchBurst(const ParsedArgs& parsed) {
  const char* prefix = "envforge bench burst";
  auto config = BurstConfigFrom(parsed);
  if (!config.ok()) return Fail(config.status(), kExitUsage, prefix);
  if (Status warm = WarmUp(config->load); !warm.ok()) return Fail(warm, ExitCodeFor(warm), prefix);
  std::vector<double> all_creates;
  size_t failed = 0;
  Json rounds = Json::array();
  for (size_t round = 0; round < config->rounds; ++round) {
    std::this_thread::sleep_for(config->pause);
    auto result = RunRound(*config, round);
    if (!result.ok()) return Fail(result.status(), ExitCodeFor(result.status()), prefix);
    PrintRound(result->report);
    all_creates.insert(all_creates.end(), result->create_ms.begin(), result->create_ms.end());
    failed += result->failed;
    const bool none_created = result->report["created"] == 0;
    rounds.push_back(std::move(result->report));
    if (none_created) {
      // Nothing answered a single create: the server is gone or refusing; more rounds would only
      // wait out the clients' connection retries.
      std::fprintf(stderr, "bench burst: round %zu created nothing; stopping\n", round + 1);
      failed += (config->rounds - round - 1) * config->load.sessions;
      break;
    }
  }
  Json report{{"url", config->url},
              {"transport", config->load.websocket ? "ws" : "http"},
              {"env", config->load.env},
              {"task", config->load.task},
              {"clients", config->load.sessions},
              {"pause_ms", config->pause.count()},
              {"rounds", rounds},
              {"create_ms", Percentiles(all_creates)},
              {"failed", failed}};
  if (parsed.Has("--json")) {
    std::printf("%s\n", report.dump(2, ' ', false, Json::error_handler_t::replace).c_str());
  } else {
    const Json& create = report["create_ms"];
    std::printf("%zu rounds of %zu creates at once: create p50 %s ms, p99 %s ms, max %s ms; %zu failed\n",
                config->rounds, config->load.sessions, create["p50"].dump().c_str(), create["p99"].dump().c_str(),
                create["max"].dump().c_str(), failed);
  }
  return failed == 0 ? kExitOk : kExitCheckFailed;
}

}  // namespace

std::vector<Command> BenchBurstCommands() {
  return {
      {{.name = "bench burst",
        .summary = "bursts of session creation against a running server: create latency per round, failures",
        .details = "Each round, C clients connect first; once all are connected they send session/create at the same "
                   "moment; the sessions are closed once every create was answered. Rounds are --pause-ms apart (a "
                   "server refills its warm sessions meanwhile: envforge serve --warm-sessions). A round in which no "
                   "create was answered ends the run. Exit 1 when a create failed.",
        .options = WithLoadTarget(
            {{.name = "--clients",
              .metavar = "C",
              .help = "creates at once (one connection each)",
              .default_text = "256"},
             {.name = "--rounds", .metavar = "K", .help = "bursts", .default_text = "10"},
             {.name = "--pause-ms", .metavar = "MS", .help = "before each burst", .default_text = "3000"},
             JsonOption("the figures as JSON")})},
       BenchBurst},
  };
}

}  // namespace envforge::cli

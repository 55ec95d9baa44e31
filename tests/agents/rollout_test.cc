// The rollout loop on real sandbox sessions (tests/fixtures/envs/rollout_lab): the scripted backend
// drives every episode outcome and every context strategy deterministically; the embedded tiny
// model plays real episodes end to end with its prompt prefilled once for all of them.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <memory>

#include "agents/context_manager.h"
#include "agents/episode.h"
#include "agents/replay.h"
#include "agents/rollout.h"
#include "base/json.h"
#include "base/sqlite.h"
#include "base/subprocess.h"
#include "inference/backend.h"
#include "inference/model.h"
#include "sandbox/env_pack.h"
#include "sandbox/session_manager.h"
#include "tests/agents/agents_test_util.h"

namespace envforge::agents {
namespace {

using testing::TempDir;

const std::string& LabBundle() {
  static TempDir dir;
  static std::string path = [] {
    std::string out = dir / "rollout_lab.envdb";
    Status packed = sandbox::PackEnvironment(testing::SourceDir() + "/tests/fixtures/envs/rollout_lab", out);
    INFO(packed.ToString());
    REQUIRE(packed.ok());
    return out;
  }();
  return path;
}

const std::string& TinyModelDir() {
  static TempDir dir;
  static std::string path = [] {
    std::string out = dir / "tiny";
    CommandOptions options;
    options.timeout = std::chrono::seconds(180);
    auto made = RunCommand({"/usr/bin/python3", testing::SourceDir() + "/scripts/make_tiny_model.py", "--out", out,
                            "--preset", "tiny", "--dtype", "fp32"},
                           options);
    REQUIRE(made.ok());
    INFO(made->stderr_text);
    REQUIRE(made->exit_code == 0);
    return out;
  }();
  return path;
}

struct Lab {
  std::unique_ptr<sandbox::SessionManager> manager;
  std::string env_id;
  TempDir scratch;
  Lab() {
    auto created = sandbox::SessionManager::Create({});
    REQUIRE(created.ok());
    manager = std::move(*created);
    auto opened = manager->OpenEnvironment(LabBundle());
    REQUIRE(opened.ok());
    env_id = *opened;
  }
  std::unique_ptr<inference::Backend> Scripted(const std::string& lines, int64_t window = 4096) {
    std::string path = scratch / ("script" + std::to_string(scripts++) + ".jsonl");
    std::ofstream(path) << lines;
    inference::BackendOptions options;
    options.context_window = window;
    auto backend = inference::OpenBackend("scripted:" + path, options);
    INFO(backend.status().ToString());
    REQUIRE(backend.ok());
    return std::move(*backend);
  }
  TaskRollout Run(inference::Backend& backend, RolloutOptions options) {
    RolloutRunner runner(*manager, backend, std::move(options));
    auto result = runner.Run(env_id, {"vault_code"});
    INFO(result.status().ToString());
    REQUIRE(result.ok());
    REQUIRE(result->size() == 1);
    return std::move((*result)[0]);
  }
  int scripts = 0;
};

constexpr const char* kLookup = R"({"tool_calls": [{"name": "lookup", "arguments": {"name": "alpha"}}]})";
constexpr const char* kSubmitRight =
    R"({"tool_calls": [{"name": "submit_result", "arguments": {"answer_text": "{\"code\": 4211}"}}]})";
constexpr const char* kSubmitWrong =
    R"({"tool_calls": [{"name": "submit_result", "arguments": {"answer_text": "{\"code\": 1}"}}]})";
constexpr const char* kGarbage =
    R"({"text": "<｜DSML｜function_calls>\n<｜DSML｜invoke>\n</｜DSML｜function_calls><｜end▁of▁sentence｜>"})";

std::string Lines(std::initializer_list<std::string> lines, int script = 0) {
  std::string text;
  for (const std::string& line : lines) {
    Json body = Json::parse(line);
    body["script"] = script;
    text += body.dump() + "\n";
  }
  return text;
}

TEST_SUITE("agents.rollout") {
  TEST_CASE("submitted episodes carry the verdict; pass@k counts passes and leaves infra errors unscored") {
    Lab lab;
    auto backend = lab.Scripted(Lines({kLookup, kSubmitRight}, 0) + Lines({kLookup, kSubmitWrong}, 1) +
                                Lines({R"({"error": "unavailable", "message": "model server down"})"}, 2));
    RolloutOptions options;
    options.n = 6;
    TaskRollout task = lab.Run(*backend, options);
    REQUIRE(task.episodes.size() == 6);
    CHECK(task.outcomes["submitted"] == 4);
    CHECK(task.outcomes["infra_error"] == 2);
    CHECK(task.scored == 4);
    CHECK(task.passed == 2);
    REQUIRE(task.pass_at_k.size() == 3);  // k = 1, 2, 4
    CHECK(task.pass_at_k[0] == std::pair<int64_t, double>{1, 0.5});
    CHECK(task.pass_at_k[1].second == doctest::Approx(1.0 - 1.0 / 6.0));
    CHECK(task.pass_at_k[2].second == 1.0);
    for (const EpisodeResult& episode : task.episodes) {
      if (episode.outcome != RolloutOutcome::kSubmitted) {
        CHECK(episode.detail.find("model server down") != std::string::npos);
        continue;
      }
      CHECK(episode.turns == 2);
      CHECK(episode.tool_calls == 2);
      CHECK(episode.verdict["passed"] == episode.passed);
      CHECK(episode.answer_text.find("\"code\"") != std::string::npos);
    }
  }

  TEST_CASE("max_turns, max_tokens, timeout and crashed end episodes with their outcome") {
    Lab lab;
    SUBCASE("max_turns") {
      auto backend = lab.Scripted(Lines({kLookup, kLookup, kLookup}));
      RolloutOptions options;
      options.max_turns = 2;
      TaskRollout task = lab.Run(*backend, options);
      CHECK(task.episodes[0].outcome == RolloutOutcome::kMaxTurns);
      CHECK(task.episodes[0].turns == 2);
      CHECK(task.scored == 1);
      CHECK(task.passed == 0);
    }
    SUBCASE("max_tokens") {
      Json big = Json::parse(kLookup);
      big["completion_tokens"] = 600;
      auto backend = lab.Scripted(Lines({big.dump(), big.dump(), big.dump()}));
      RolloutOptions options;
      options.max_tokens = 1000;
      TaskRollout task = lab.Run(*backend, options);
      CHECK(task.episodes[0].outcome == RolloutOutcome::kMaxTokens);
      CHECK(task.episodes[0].generated_tokens == 1200);
    }
    SUBCASE("timeout") {
      Json slow = Json::parse(kLookup);
      slow["sleep_ms"] = 1200;
      auto backend = lab.Scripted(Lines({slow.dump(), kSubmitRight}));
      RolloutOptions options;
      options.episode_timeout = std::chrono::milliseconds(1000);
      TaskRollout task = lab.Run(*backend, options);
      CHECK(task.episodes[0].outcome == RolloutOutcome::kTimeout);
    }
    SUBCASE("crashed: the session dies under a tool call; the other episodes go on") {
      auto backend = lab.Scripted(Lines({R"({"tool_calls": [{"name": "self_destruct"}]})"}, 0) +
                                  Lines({kLookup, kSubmitRight}, 1));
      RolloutOptions options;
      options.n = 4;
      TaskRollout task = lab.Run(*backend, options);
      CHECK(task.outcomes["crashed"] == 2);
      CHECK(task.outcomes["submitted"] == 2);
      CHECK(task.passed == 2);
      for (const EpisodeResult& episode : task.episodes) {
        if (episode.outcome == RolloutOutcome::kCrashed) CHECK(episode.detail.find("session") != std::string::npos);
      }
    }
  }

  TEST_CASE("malformed calls: bad DSML, unknown tools and bad arguments are counted; K in a row end the episode") {
    Lab lab;
    const std::string unknown = R"({"tool_calls": [{"name": "open_vault", "arguments": {}}]})";
    const std::string bad_arguments = R"({"tool_calls": [{"name": "lookup", "arguments": {"name": 5}}]})";
    const std::string no_call = R"({"content": "I think the code is 4211."})";
    SUBCASE("three in a row") {
      auto backend = lab.Scripted(Lines({kGarbage, unknown, bad_arguments, kSubmitRight}));
      TaskRollout task = lab.Run(*backend, {});
      CHECK(task.episodes[0].outcome == RolloutOutcome::kInvalidCalls);
      CHECK(task.episodes[0].invalid_calls == 3);
      CHECK(task.episodes[0].turns == 3);
    }
    SUBCASE("a valid call resets the count") {
      auto backend = lab.Scripted(Lines({kGarbage, no_call, kLookup, unknown, bad_arguments, kSubmitRight}));
      TaskRollout task = lab.Run(*backend, {});
      CHECK(task.episodes[0].outcome == RolloutOutcome::kSubmitted);
      CHECK(task.episodes[0].passed);
      CHECK(task.episodes[0].invalid_calls == 4);
    }
    SUBCASE("a custom limit") {
      auto backend = lab.Scripted(Lines({no_call, kSubmitRight}));
      RolloutOptions options;
      options.max_invalid_calls = 1;
      TaskRollout task = lab.Run(*backend, options);
      CHECK(task.episodes[0].outcome == RolloutOutcome::kInvalidCalls);
    }
  }

  TEST_CASE("a model's bytes that are not UTF-8 reach its tool messages replaced, never as an exception") {
    // Seen with policy-small sampling "\xecget_product" as a tool name: the unknown-tool message
    // quotes it, and the strict dump of that message ended the whole rollout process.
    toolsets::ToolResult unknown;
    unknown.outcome = toolsets::Outcome::kInvalidCall;
    unknown.message = "unknown tool '\xecget_product'; tools: lookup";
    std::string text = ToolMessageText(unknown);
    auto parsed = ParseJson(text);
    REQUIRE(parsed.ok());
    CHECK((*parsed)["outcome"] == "invalid_call");
    CHECK((*parsed)["message"] == "unknown tool '\xef\xbf\xbdget_product'; tools: lookup");
    toolsets::ToolResult ok;
    ok.content = Json{{"name", "Li\xecro"}};
    CHECK(ToolMessageText(ok) == "{\"name\":\"Li\xef\xbf\xbdro\"}");

    Lab lab;
    auto backend = lab.Scripted(Lines({kSubmitRight}));
    inference::ChatMessage call_turn;
    call_turn.role = "assistant";
    call_turn.tool_calls.push_back({"call_0", "\xecget_product", Json{{"name", "\xec"}}});
    CHECK(EstimateTokens(*backend, {call_turn}) > 8);
  }

  TEST_CASE("context management: each strategy frees the window and the episode goes on") {
    Lab lab;
    const std::string manual = R"({"tool_calls": [{"name": "read_manual", "arguments": {"pages": 4}}]})";
    const std::string page = R"({"tool_calls": [{"name": "read_manual", "arguments": {"pages": 1}}]})";
    RolloutOptions options;
    SUBCASE("discard-all") {
      options.context_strategy = ContextStrategy::kDiscardAll;
      auto backend = lab.Scripted(Lines({manual, kLookup, kSubmitRight}), 1000);
      TaskRollout task = lab.Run(*backend, options);
      CHECK(task.episodes[0].outcome == RolloutOutcome::kSubmitted);
      CHECK(task.episodes[0].passed);
      CHECK(task.episodes[0].context_events == 1);
    }
    SUBCASE("discard75 keeps the latest quarter of the turns") {
      options.context_strategy = ContextStrategy::kDiscard75;
      // Three small turns, then a page that passes 80% of 500 tokens: three of the four turns go.
      auto backend = lab.Scripted(Lines({kLookup, kLookup, kLookup, page, kSubmitRight}), 500);
      TaskRollout task = lab.Run(*backend, options);
      CHECK(task.episodes[0].outcome == RolloutOutcome::kSubmitted);
      CHECK(task.episodes[0].context_events >= 1);
    }
    SUBCASE("summary restarts from the task and the backend's summary") {
      options.context_strategy = ContextStrategy::kSummary;
      auto backend = lab.Scripted(Lines({manual, kSubmitRight}) +
                                      R"({"when": "Summarize your progress", "content": "alpha is 4211"})"
                                      "\n",
                                  1000);
      TaskRollout task = lab.Run(*backend, options);
      CHECK(task.episodes[0].outcome == RolloutOutcome::kSubmitted);
      CHECK(task.episodes[0].context_events == 1);
    }
    SUBCASE("none: the next turn no longer fits") {
      auto backend = lab.Scripted(Lines({manual, kSubmitRight}), 1000);
      TaskRollout task = lab.Run(*backend, options);
      CHECK(task.episodes[0].outcome == RolloutOutcome::kContextExhausted);
    }
    SUBCASE("a window too small for the task itself") {
      options.context_strategy = ContextStrategy::kDiscardAll;
      auto backend = lab.Scripted(Lines({kLookup, kSubmitRight}), 40);
      TaskRollout task = lab.Run(*backend, options);
      CHECK(task.episodes[0].outcome == RolloutOutcome::kContextExhausted);
    }
  }

  TEST_CASE("bad requests fail before any episode") {
    Lab lab;
    auto backend = lab.Scripted(Lines({kSubmitRight}));
    RolloutOptions options;
    options.n = 0;
    RolloutRunner zero(*lab.manager, *backend, options);
    CHECK(zero.Run(lab.env_id, {}).status().code() == StatusCode::kInvalidArgument);
    RolloutRunner runner(*lab.manager, *backend, {});
    auto unknown = runner.Run(lab.env_id, {"no_such_task"});
    CHECK(unknown.status().code() == StatusCode::kNotFound);
    CHECK(unknown.status().message().find("no_such_task") != std::string::npos);
  }

  TEST_CASE(
      "the embedded tiny model plays real episodes; their shared prompt is prefilled once and no turn is recomputed") {
    Lab lab;
    auto backend = inference::OpenBackend("embedded:" + TinyModelDir(), {});
    INFO(backend.status().ToString());
    REQUIRE(backend.ok());
    RolloutOptions options;
    options.n = 6;
    options.max_turns = 3;
    options.max_tokens_per_turn = 12;
    options.sampling.seed = 5;
    TaskRollout task = lab.Run(**backend, options);
    int64_t prefilled = 0, fed = 0, first_prompt = 0;
    for (const EpisodeResult& episode : task.episodes) {
      CHECK(episode.outcome != RolloutOutcome::kInfraError);
      CHECK(episode.turns >= 1);
      CHECK(episode.generated_tokens > 0);
      prefilled += episode.prefilled_tokens;
      fed += episode.new_prompt_tokens;
    }
    Json stats = (*backend)->Stats();
    // Every prompt token new to an episode was fed once; the first prompt, common to all six, ran
    // through the model once.
    first_prompt = (fed - prefilled) / (options.n - 1);
    CHECK(first_prompt > 20);
    CHECK(stats["prefill_tokens"].get<int64_t>() == prefilled);
    CHECK(stats["continuations_missed"] == 0);

    // The same seed replays the same episodes.
    TaskRollout again = lab.Run(**backend, options);
    for (size_t i = 0; i < task.episodes.size(); ++i) {
      CHECK(again.episodes[i].outcome == task.episodes[i].outcome);
      CHECK(again.episodes[i].generated_tokens == task.episodes[i].generated_tokens);
    }
  }

  TEST_CASE("episodes are recorded token-exactly: messages, model turns, tool steps, verdict; a rollout replays") {
    Lab lab;
    TempDir dir;
    auto store = TrajectoryStore::Open(dir / "rollouts.sqlite");
    REQUIRE(store.ok());

    auto embedded = inference::OpenBackend("embedded:" + TinyModelDir(), {});
    REQUIRE(embedded.ok());
    RolloutOptions options;
    options.n = 3;
    options.max_turns = 3;
    options.max_tokens_per_turn = 10;
    options.store = store->get();
    TaskRollout played = lab.Run(**embedded, options);
    auto scripted = lab.Scripted(Lines({kLookup, kSubmitRight}));
    options.n = 1;
    TaskRollout submitted = lab.Run(*scripted, options);
    REQUIRE((*store)->Flush().ok());

    for (const EpisodeResult& result : played.episodes) {
      auto episode = (*store)->Get(result.episode_id);
      REQUIRE(episode.ok());
      CHECK(episode->summary.start.kind == "rollout");
      CHECK(episode->summary.start.backend == "embedded:" + TinyModelDir());
      CHECK(episode->summary.start.sample_index == result.sample_index);
      CHECK(episode->summary.outcome == EpisodeOutcome::kInvalidCalls);
      REQUIRE(static_cast<int64_t>(episode->model_turns.size()) == result.turns);
      CHECK(episode->messages.size() == 2 + 2 * episode->model_turns.size() - 1);
      CHECK(episode->messages[1].content.find("alpha") != std::string::npos);
      Json segments = TokenSegmentsToJson(episode->model_turns);
      REQUIRE(segments.size() == 1);  // one context: every turn continued the previous one
      CHECK(segments[0]["consistent"] == true);
      const ModelTurnRecord& last = episode->model_turns.back();
      CHECK(segments[0]["ids"].size() == last.prompt_tokens + last.output_tokens.size());
      int64_t generated = 0;
      for (const Json& bit : segments[0]["mask"]) generated += bit.get<int64_t>();
      CHECK(generated == result.generated_tokens);
    }

    auto episode = (*store)->Get(submitted.episodes[0].episode_id);
    REQUIRE(episode.ok());
    CHECK(episode->summary.outcome == EpisodeOutcome::kSubmitted);
    REQUIRE(episode->steps.size() == 2);
    CHECK(episode->steps[0].tool == "lookup");
    CHECK(episode->steps[1].tool == "submit_result");
    REQUIRE(episode->summary.verdict.has_value());
    CHECK((*episode->summary.verdict)["passed"] == true);
    CHECK(episode->messages.back().role == "tool");
    CHECK(episode->messages.back().tool_outcome == "ok");
    ReplayOptions replay_options;
    replay_options.envs = LabBundle();
    auto report = Replay(*episode, *lab.manager, replay_options);
    INFO(report.status().ToString());
    REQUIRE(report.ok());
    CHECK(report->matches());
  }

  TEST_CASE("keep routing and kept sets: recorded per turn end to end, equal to a full prefill's; off stores NULLs") {
    Lab lab;
    TempDir dir;
    const std::string path = dir / "rollouts.sqlite";
    auto store = TrajectoryStore::Open(path);
    REQUIRE(store.ok());
    auto backend = inference::OpenBackend("embedded:" + TinyModelDir(), {});
    REQUIRE(backend.ok());
    RolloutOptions options;
    options.n = 2;
    options.max_turns = 3;
    options.max_tokens_per_turn = 8;
    options.sampling.top_k = 5;
    options.sampling.seed = 11;
    options.store = store->get();
    options.record_routing = true;
    options.record_kept_sets = true;
    TaskRollout on = lab.Run(**backend, options);
    options.n = 1;
    options.record_routing = false;
    options.record_kept_sets = false;
    TaskRollout off = lab.Run(**backend, options);
    REQUIRE((*store)->Flush().ok());

    auto model = inference::Model::Load(TinyModelDir());
    REQUIRE(model.ok());
    const int64_t width = (*model)->config().routing_width();
    for (const EpisodeResult& result : on.episodes) {
      auto episode = (*store)->Get(result.episode_id);
      REQUIRE(episode.ok());
      CHECK(episode->summary.start.sampling["record_routing"] == true);
      REQUIRE(episode->model_turns.size() >= 2);
      Json segments = TokenSegmentsToJson(episode->model_turns);
      REQUIRE(segments.size() == 1);
      const Json& segment = segments[0];
      CHECK(segment["consistent"] == true);
      const Json& ids = segment["ids"];
      REQUIRE(segment["routing"].size() == ids.size());
      REQUIRE(segment["kept"].size() == ids.size());
      // Every position but the last (never fed) was routed, as a fresh prefill of them routes it.
      std::vector<int32_t> fed;
      for (size_t p = 0; p + 1 < ids.size(); ++p) fed.push_back(ids[p].get<int32_t>());
      std::vector<int16_t> expected;
      auto cache = (*model)->NewCache();
      inference::SequenceInput input{cache.get(), fed};
      std::vector<float> logits;
      inference::ForwardOptions forward;
      forward.record_routing = &expected;
      REQUIRE((*model)->Forward(std::span<const inference::SequenceInput>(&input, 1), &logits, forward).ok());
      std::vector<int16_t> recorded;
      for (size_t p = 0; p + 1 < ids.size(); ++p) {
        REQUIRE(segment["routing"][p].size() == static_cast<size_t>(width));
        for (const Json& expert : segment["routing"][p]) recorded.push_back(expert.get<int16_t>());
      }
      CHECK(recorded == expected);
      CHECK(segment["routing"].back().is_null());
      // Kept sets at every output token (top_k 5 truncates every draw), none at the inputs.
      for (size_t p = 0; p < ids.size(); ++p) {
        const Json& kept = segment["kept"][p];
        if (segment["mask"][p] == 0) {
          CHECK(kept.is_null());
          continue;
        }
        REQUIRE(kept.is_array());
        CHECK(kept.size() == 5);
        CHECK(std::find(kept.begin(), kept.end(), ids[p]) != kept.end());
      }
    }

    const std::string off_id = off.episodes[0].episode_id;
    auto episode = (*store)->Get(off_id);
    REQUIRE(episode.ok());
    for (const ModelTurnRecord& turn : episode->model_turns) {
      CHECK(turn.routing_width == 0);
      CHECK(turn.routing.empty());
      CHECK(turn.kept_vocab == 0);
      CHECK(turn.kept_ids.empty());
    }
    Json segments = TokenSegmentsToJson(episode->model_turns);
    REQUIRE(!segments.empty());
    CHECK(!segments[0].contains("routing"));
    CHECK(!segments[0].contains("kept"));
    auto db = Database::Open(path, Database::Mode::kReadOnly);
    REQUIRE(db.ok());
    auto stored = db->Prepare(
        "SELECT count(*) FROM model_turns WHERE episode_id = ? AND (routing_start IS NOT NULL OR routing_width IS NOT "
        "NULL OR routing IS NOT NULL OR kept_vocab IS NOT NULL OR kept_ids IS NOT NULL)");
    REQUIRE(stored.ok());
    REQUIRE(stored->Bind(1, off_id).ok());
    REQUIRE(stored->Step().value());
    CHECK(stored->ColumnInt(0) == 0);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::agents

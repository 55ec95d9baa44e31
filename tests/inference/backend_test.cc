// The Backend seam: the scripted backend's scripts, and the embedded backend on the tiny model --
// n choices equal the Generator's samples, concurrent callers share one prompt prefill and get the
// tokens they would get alone, a continued conversation feeds only its new tokens and samples what
// a full prefill of the same tokens samples, stop strings, streaming pieces, top logprobs and the
// context window.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "inference/backend.h"
#include "inference/generator.h"
#include "tests/inference/model_test_util.h"

namespace envforge::inference {
namespace {

using model_testing::TempDir;
using model_testing::TinyModel;

std::unique_ptr<Backend> MustOpen(const std::string& spec, BackendOptions options = {}) {
  auto backend = OpenBackend(spec, options);
  INFO(backend.status().ToString());
  REQUIRE(backend.ok());
  return std::move(*backend);
}

CompletionResult MustComplete(Backend& backend, const CompletionRequest& request) {
  auto result = backend.Complete(request);
  INFO(result.status().ToString());
  REQUIRE(result.ok());
  return std::move(*result);
}

std::string WriteScript(const TempDir& dir, const std::string& text) {
  std::string path = dir / "script.jsonl";
  std::ofstream(path) << text;
  return path;
}

CompletionRequest ChatRequest(std::string user) {
  CompletionRequest request;
  request.messages = {{"system", "You are terse."}, {"user", std::move(user)}};
  return request;
}

// A fresh prefill of `context` in one Forward: the routing and the logits of every position.
struct FullPrefill {
  std::vector<int16_t> routing;
  std::vector<float> logits;
};
FullPrefill Prefill(Model& model, const std::vector<int32_t>& context) {
  FullPrefill out;
  auto cache = model.NewCache();
  SequenceInput input{cache.get(), context};
  ForwardOptions options;
  options.all_logits = true;
  options.record_routing = &out.routing;
  Status status = model.Forward(std::span<const SequenceInput>(&input, 1), &out.logits, options);
  INFO(status.ToString());
  REQUIRE(status.ok());
  return out;
}

// The positions [start, end) of a full prefill's routing.
std::vector<int16_t> RoutingAt(const FullPrefill& full, int64_t width, int64_t start, int64_t end) {
  return std::vector<int16_t>(full.routing.begin() + start * width, full.routing.begin() + end * width);
}

// A choice's kept sets: exactly kept_counts[i] ids per token (every draw truncated by top_k < the
// vocabulary), holding the sampled token, and as a set the kept_counts[i] highest logits the full
// prefill gives at the position before the token (`first_position`: the first token's).
void CheckKeptSets(const Completion& choice, const FullPrefill& full, int64_t vocab, int64_t first_position) {
  REQUIRE(choice.kept_vocab == vocab);
  size_t offset = 0;
  for (size_t i = 0; i < choice.tokens.size(); ++i) {
    CAPTURE(i);
    const auto count = static_cast<size_t>(choice.kept_counts[i]);
    REQUIRE(count < static_cast<size_t>(vocab));
    REQUIRE(offset + count <= choice.kept_ids.size());
    std::vector<int32_t> kept(choice.kept_ids.begin() + static_cast<std::ptrdiff_t>(offset),
                              choice.kept_ids.begin() + static_cast<std::ptrdiff_t>(offset + count));
    offset += count;
    CHECK(std::find(kept.begin(), kept.end(), choice.tokens[i]) != kept.end());
    const float* row = full.logits.data() + (first_position + static_cast<int64_t>(i)) * vocab;
    std::vector<int32_t> top(static_cast<size_t>(vocab));
    for (size_t id = 0; id < top.size(); ++id) top[id] = static_cast<int32_t>(id);
    std::stable_sort(top.begin(), top.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    top.resize(count);
    std::sort(top.begin(), top.end());
    std::sort(kept.begin(), kept.end());
    CHECK(kept == top);
  }
  CHECK(offset == choice.kept_ids.size());
}

TEST_SUITE("inference.backend") {
  TEST_CASE("ReplyJsonObject finds the object in prose and fences and refuses what is not one") {
    CHECK((*ReplyJsonObject(R"({"question": "q"})"))["question"] == "q");
    CHECK((*ReplyJsonObject("Sure.\n```json\n{\"a\": {\"b\": 1}}\n```\nDone."))["a"]["b"] == 1);
    for (const char* bad : {"no object here", "{\"a\": }", "} backwards {"}) {
      auto refused = ReplyJsonObject(bad);
      CHECK(refused.status().code() == StatusCode::kInvalidArgument);
    }
    CHECK(ReplyJsonObject(std::string(200, '{') + std::string(200, '}')).status().code() ==
          StatusCode::kInvalidArgument);  // nested past the depth limit
  }

  TEST_CASE("ToOpenAiTools: MCP, Chat Completions and the Responses API's flat form become function tools") {
    const OrderedJson schema = OrderedJson::parse(R"({"type": "object", "properties": {"q": {"type": "string"}}})");
    const OrderedJson chat = {{"type", "function"}, {"function", {{"name", "search"}, {"parameters", schema}}}};
    const OrderedJson tools = OrderedJson::array({
        {{"name", "mcp_tool"}, {"description", "d"}, {"inputSchema", schema}},
        chat,
        {{"type", "function"}, {"name", "flat"}, {"parameters", schema}, {"strict", true}},
        {{"name", "bare"}},
    });
    const OrderedJson out = ToOpenAiTools(tools);
    REQUIRE(out.size() == 4);
    CHECK(out[0]["function"]["name"] == "mcp_tool");
    CHECK(out[0]["function"]["parameters"] == schema);
    CHECK(out[1] == chat);
    CHECK(out[2]["type"] == "function");
    CHECK(out[2]["function"]["name"] == "flat");
    CHECK(out[2]["function"]["parameters"] == schema);
    CHECK(out[2]["function"]["strict"] == true);
    CHECK(out[3]["function"]["parameters"] == OrderedJson::object());
  }

  TEST_CASE("backend specs: unknown schemes and malformed specs are refused by name") {
    for (const char* spec : {"nonsense", "grpc:host", "embedded:", ":x"}) {
      auto backend = OpenBackend(spec, {});
      CHECK(backend.status().code() == StatusCode::kInvalidArgument);
      CHECK(backend.status().message().find(spec[0] == ':' ? "SCHEME" : "") != std::string::npos);
    }
    CHECK(OpenBackend("grpc:host", {}).status().message().find("unknown backend scheme 'grpc'") != std::string::npos);
    CHECK(OpenBackend("scripted:/no/such/file.jsonl", {}).status().code() == StatusCode::kNotFound);
    TempDir dir;
    auto bad = OpenBackend("scripted:" + WriteScript(dir, "{\"content\": \"ok\"}\n[1, 2]\n"), {});
    CHECK(bad.status().code() == StatusCode::kInvalidArgument);
    CHECK(bad.status().message().find(":2: a line must be a JSON object") != std::string::npos);
    auto bad_member = OpenBackend("scripted:" + WriteScript(dir, "{\"tool_calls\": [{\"arguments\": {}}]}\n"), {});
    CHECK(bad_member.status().message().find("each tool call needs a string 'name'") != std::string::npos);
    auto no_model = OpenBackend("embedded:" + TinyModel("fp32"), {});  // no tokenizer.json
    CHECK(no_model.status().code() == StatusCode::kInvalidArgument);
    CHECK(no_model.status().message().find("no tokenizer.json") != std::string::npos);
  }

  TEST_CASE("scripted: conversations walk their scripts; when-lines answer any conversation; errors and the end") {
    TempDir dir;
    std::string path = WriteScript(dir, R"(# two scripts, a summary line and an error
{"script": 0, "tool_calls": [{"name": "search", "arguments": {"q": "x"}}]}
{"script": 0, "content": "done"}
{"script": 1, "text": "<｜DSML｜function_calls>\n<｜DSML｜invoke>\n</｜DSML｜function_calls><｜end▁of▁sentence｜>"}
{"script": 1, "error": "unavailable", "message": "server fell over"}
{"when": "Summarize", "content": "the summary"}
)");
    auto backend = MustOpen("scripted:" + path);
    CompletionResult first = MustComplete(*backend, ChatRequest("task"));
    REQUIRE(first.choices.size() == 1);
    CHECK(first.choices[0].message.tool_calls.size() == 1);
    CHECK(first.choices[0].message.tool_calls[0].arguments == Json{{"q", "x"}});
    CHECK(first.choices[0].finish_reason == "tool_calls");
    CompletionResult other = MustComplete(*backend, ChatRequest("task"));  // conversation 1: script 1
    CHECK(!other.choices[0].parse_error.empty());
    CompletionRequest summary = ChatRequest("Summarize your progress");
    CHECK(MustComplete(*backend, summary).choices[0].message.content == "the summary");
    CompletionRequest next = ChatRequest("task");
    next.continue_from = first.choices[0].cache_handle;
    CompletionResult second = MustComplete(*backend, next);
    CHECK(second.choices[0].message.content == "done");
    CHECK(second.choices[0].finish_reason == "stop");
    next.continue_from = second.choices[0].cache_handle;
    auto past_end = backend->Complete(next);
    CHECK(past_end.status().code() == StatusCode::kUnavailable);
    CHECK(past_end.status().message().find("script 0 has no response for turn 2") != std::string::npos);
    CompletionRequest failing = ChatRequest("task");
    failing.continue_from = other.choices[0].cache_handle;
    auto error = backend->Complete(failing);
    CHECK(error.status().code() == StatusCode::kUnavailable);
    CHECK(error.status().message().find("server fell over") != std::string::npos);
  }

  TEST_CASE("scripted: when-lines sharing a TEXT answer its requests in turn; a lone when-line always answers") {
    TempDir dir;
    std::string path = WriteScript(dir, R"({"content": "script"}
{"when": "Task A", "content": "right"}
{"when": "Task A", "content": "wrong"}
{"when": "Task B", "content": "only"}
)");
    auto backend = MustOpen("scripted:" + path);
    std::vector<std::string> answers;
    for (int i = 0; i < 5; ++i)
      answers.push_back(MustComplete(*backend, ChatRequest("Task A: do it")).choices[0].message.content);
    CHECK(answers == std::vector<std::string>{"right", "wrong", "right", "wrong", "right"});
    for (int i = 0; i < 3; ++i)
      CHECK(MustComplete(*backend, ChatRequest("Task B")).choices[0].message.content == "only");
    CHECK(MustComplete(*backend, ChatRequest("Task C")).choices[0].message.content == "script");
  }

  TEST_CASE(
      "embedded: n choices are the Generator's samples; concurrent callers share one prefill and batching changes "
      "nothing") {
    std::string dir = TinyModel("fp32", "v32", /*tokenizer=*/true);
    auto backend = MustOpen("embedded:" + dir);
    CompletionRequest request;
    request.raw = true;
    request.prompt_text = "The quick brown fox";
    request.n = 3;
    request.max_tokens = 12;
    request.sampling.seed = 7;
    CompletionResult result = MustComplete(*backend, request);
    REQUIRE(result.choices.size() == 3);

    auto model = Model::Load(dir);
    REQUIRE(model.ok());
    Generator generator(**model);
    GenerateOptions options;
    options.n = 3;
    options.max_tokens = 12;
    options.sampling.seed = 7;
    auto expected = generator.GenerateText("The quick brown fox", options);
    REQUIRE(expected.ok());
    for (size_t i = 0; i < 3; ++i) {
      CHECK(result.choices[i].tokens == expected->samples[i].tokens);
      CHECK(result.choices[i].text == expected->samples[i].text);
    }
    CHECK(result.prompt_tokens == static_cast<int64_t>(expected->prompt.size()));

    // Eight callers at once, same chat prompt, different seeds: one prefill (or a prompt-cache hit)
    // serves all of them, and each gets exactly what it gets alone.
    auto fresh = MustOpen("embedded:" + dir);
    std::vector<CompletionResult> together(8);
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i) {
      threads.emplace_back([&, i] {
        CompletionRequest chat = ChatRequest("Find the cheapest hotel in Paris.");
        chat.max_tokens = 10;
        chat.sampling.seed = 100 + static_cast<uint64_t>(i);
        auto answer = fresh->Complete(chat);
        if (answer.ok()) together[static_cast<size_t>(i)] = std::move(*answer);
      });
    }
    for (auto& thread : threads) thread.join();
    Json stats = fresh->Stats();
    const int64_t prompt = together[0].prompt_tokens;
    CHECK(prompt > 10);
    CHECK(stats["prefill_tokens"].get<int64_t>() == prompt);
    // Where the engine's time went: both parts ran, a decode step per token at least.
    CHECK(stats["prefill_seconds"].get<double>() > 0);
    CHECK(stats["decode_seconds"].get<double>() > 0);
    CHECK(stats["decode_steps"].get<int64_t>() >= 9);  // 10 tokens each; the first comes from the prefill
    CHECK(stats["decode_steps"].get<int64_t>() <= stats["decode_tokens"].get<int64_t>());
    // The model's own split of those seconds.
    CHECK(stats["attention_seconds"].get<double>() > 0);
    CHECK(stats["rest_seconds"].get<double>() > 0);
    CHECK(stats["attention_seconds"].get<double>() + stats["rest_seconds"].get<double>() <=
          stats["prefill_seconds"].get<double>() + stats["decode_seconds"].get<double>() + 1e-3);
    // Which weights played: the checkpoint's content hash, whatever the directory is called.
    auto checkpoint = Checkpoint::Open(dir);
    REQUIRE(checkpoint.ok());
    CHECK(fresh->WeightsSha256() == (*checkpoint)->ContentSha256());
    CHECK(fresh->WeightsSha256().size() == 64);
    for (int i = 0; i < 8; ++i) {
      REQUIRE(together[static_cast<size_t>(i)].choices.size() == 1);
      CompletionRequest alone = ChatRequest("Find the cheapest hotel in Paris.");
      alone.max_tokens = 10;
      alone.sampling.seed = 100 + static_cast<uint64_t>(i);
      CHECK(MustComplete(*backend, alone).choices[0].tokens == together[static_cast<size_t>(i)].choices[0].tokens);
    }
  }

  TEST_CASE("embedded: a continued conversation feeds only its new tokens and samples what a full prefill samples") {
    std::string dir = TinyModel("fp32", "v32", /*tokenizer=*/true);
    auto backend = MustOpen("embedded:" + dir);
    CompletionRequest first = ChatRequest("Plan a trip to Rome.");
    first.max_tokens = 6;
    first.sampling.seed = 3;
    CompletionResult one = MustComplete(*backend, first);
    const Completion& turn1 = one.choices[0];
    REQUIRE(!turn1.cache_handle.empty());
    CHECK(turn1.prefilled_tokens == turn1.prompt_tokens);
    CHECK(turn1.reused_tokens == 0);

    CompletionRequest second = first;
    second.messages.push_back(turn1.message);
    second.messages.push_back({"user", "Now in one word."});
    second.continue_from = turn1.cache_handle;
    second.sampling.seed = 4;
    CompletionResult two = MustComplete(*backend, second);
    const Completion& turn2 = two.choices[0];
    CHECK(turn2.reused_tokens == turn1.prompt_tokens + turn1.completion_tokens);
    CHECK(turn2.prefilled_tokens == static_cast<int64_t>(turn2.new_prompt_tokens.size()));
    CHECK(turn2.prompt_tokens == turn2.reused_tokens + static_cast<int64_t>(turn2.new_prompt_tokens.size()));
    CHECK(backend->Stats()["continuations_reused"] == 1);

    // The same context, prefilled in one go by the Generator, samples the same tokens.
    auto model = Model::Load(dir);
    REQUIRE(model.ok());
    const Tokenizer& tokenizer = *(*model)->tokenizer();
    auto prompt_text = EncodeChat(first.messages, {});
    REQUIRE(prompt_text.ok());
    std::vector<int32_t> context = tokenizer.Encode(*prompt_text);
    context.insert(context.end(), turn1.tokens.begin(), turn1.tokens.end());
    context.insert(context.end(), turn2.new_prompt_tokens.begin(), turn2.new_prompt_tokens.end());
    CHECK(static_cast<int64_t>(context.size()) == turn2.prompt_tokens);
    Generator generator(**model);
    GenerateOptions options;
    options.max_tokens = first.max_tokens;
    options.sampling.seed = 4;
    auto expected = generator.Generate(context, options);
    REQUIRE(expected.ok());
    CHECK(turn2.tokens == expected->samples[0].tokens);

    // A conversation that does not extend the handle's (edited history) prefills again.
    CompletionRequest edited = second;
    edited.messages[1].content = "Plan a trip to Oslo.";
    edited.continue_from = turn2.cache_handle;
    CompletionResult three = MustComplete(*backend, edited);
    CHECK(three.choices[0].reused_tokens == 0);
    CHECK(backend->Stats()["continuations_missed"] == 1);
  }

  TEST_CASE("embedded: stop strings cut the text, streamed pieces add up to it, top logprobs, the context window") {
    std::string dir = TinyModel("fp32", "v32", /*tokenizer=*/true);
    auto backend = MustOpen("embedded:" + dir);
    CompletionRequest request;
    request.raw = true;
    request.prompt_text = "Once upon a time";
    request.max_tokens = 24;
    request.sampling.seed = 11;
    request.logprobs = true;
    request.top_logprobs = 3;
    CompletionResult plain = MustComplete(*backend, request);
    const Completion& full = plain.choices[0];
    REQUIRE(full.top_logprobs.size() == full.tokens.size());
    for (const auto& alternatives : full.top_logprobs) {
      REQUIRE(alternatives.size() == 3);
      CHECK(alternatives[0].logprob >= alternatives[1].logprob);
      CHECK(alternatives[1].logprob >= alternatives[2].logprob);
      CHECK(alternatives[0].logprob <= 0);
    }
    REQUIRE(full.text.size() > 8);

    std::string streamed;
    CompletionRequest streaming = request;
    streaming.on_text = [&](int64_t, std::string_view piece) { streamed += piece; };
    CHECK(MustComplete(*backend, streaming).choices[0].text == full.text);
    CHECK(streamed == full.text);

    std::string stop = full.text.substr(full.text.size() / 2, 3);
    CompletionRequest stopping = request;
    stopping.stop = {stop};
    CompletionResult cut = MustComplete(*backend, stopping);
    CHECK(cut.choices[0].finish_reason == "stop");
    CHECK(cut.choices[0].text == full.text.substr(0, full.text.find(stop)));

    BackendOptions small;
    small.context_window = 4;
    auto tight = MustOpen("embedded:" + dir, small);
    auto refused = tight->Complete(request);
    CHECK(refused.status().code() == StatusCode::kResourceExhausted);
    CHECK(refused.status().message().rfind("context length exceeded", 0) == 0);
  }

  TEST_CASE("embedded: keep routing and kept sets of two turns equal a fresh full prefill of the same tokens") {
    std::string dir = TinyModel("fp32", "v32", /*tokenizer=*/true);
    auto backend = MustOpen("embedded:" + dir);
    auto model = Model::Load(dir);
    REQUIRE(model.ok());
    const int64_t width = (*model)->config().routing_width(), vocab = (*model)->config().vocab_size;
    REQUIRE(width == 4);
    CompletionRequest first = ChatRequest("Plan a trip to Lyon.");
    first.max_tokens = 7;
    first.sampling.seed = 8;
    first.sampling.top_k = 6;
    first.record_routing = true;
    first.record_kept_sets = true;
    const Completion turn1 = MustComplete(*backend, first).choices[0];
    REQUIRE(turn1.tokens.size() > 1);
    CHECK(turn1.routing_start == 0);
    CHECK(turn1.routing_width == width);
    // The prompt and every generated token but the last (never fed this turn).
    const int64_t fed1 = turn1.prompt_tokens + turn1.completion_tokens - 1;
    CHECK(static_cast<int64_t>(turn1.routing.size()) == fed1 * width);

    CompletionRequest second = first;
    second.messages.push_back(turn1.message);
    second.messages.push_back({"user", "And the trains?"});
    second.continue_from = turn1.cache_handle;
    second.sampling.seed = 9;
    const Completion turn2 = MustComplete(*backend, second).choices[0];
    REQUIRE(turn2.reused_tokens == turn1.prompt_tokens + turn1.completion_tokens);
    // A continued turn starts with the previous turn's last token, which only it fed.
    CHECK(turn2.routing_start == turn2.reused_tokens - 1);
    const int64_t end2 = turn2.prompt_tokens + turn2.completion_tokens - 1;
    CHECK(static_cast<int64_t>(turn2.routing.size()) == (end2 - turn2.routing_start) * width);

    // The whole context, prefilled in one go.
    auto prompt_text = EncodeChat(first.messages, {});
    REQUIRE(prompt_text.ok());
    std::vector<int32_t> context = (*model)->tokenizer()->Encode(*prompt_text);
    context.insert(context.end(), turn1.tokens.begin(), turn1.tokens.end());
    context.insert(context.end(), turn2.new_prompt_tokens.begin(), turn2.new_prompt_tokens.end());
    context.insert(context.end(), turn2.tokens.begin(), turn2.tokens.end() - 1);
    REQUIRE(static_cast<int64_t>(context.size()) == end2);
    FullPrefill full = Prefill(**model, context);
    CHECK(turn1.routing == RoutingAt(full, width, 0, fed1));
    CHECK(turn2.routing == RoutingAt(full, width, turn2.routing_start, end2));
    CheckKeptSets(turn1, full, vocab, turn1.prompt_tokens - 1);
    CheckKeptSets(turn2, full, vocab, turn2.prompt_tokens - 1);
  }

  TEST_CASE("embedded: shared prefills and the prompt cache hand their routing on; off records nothing") {
    std::string dir = TinyModel("fp32", "v32", /*tokenizer=*/true);
    auto backend = MustOpen("embedded:" + dir);
    CompletionRequest plain = ChatRequest("Book a table for two.");
    plain.max_tokens = 4;
    plain.sampling.top_k = 3;
    // Off: nothing recorded (and the prompt cache gets an entry without routing).
    const Completion off = MustComplete(*backend, plain).choices[0];
    CHECK(off.routing_width == 0);
    CHECK(off.routing.empty());
    CHECK(off.kept_vocab == 0);
    CHECK(off.kept_ids.empty());
    CHECK(!off.kept_counts.empty());

    // A recording request cannot use that entry: it prefills, and its n choices share the routing.
    CompletionRequest recording = plain;
    recording.record_routing = true;
    recording.n = 2;
    CompletionResult first = MustComplete(*backend, recording);
    CHECK(first.choices[0].prefilled_tokens == first.prompt_tokens);
    const int64_t width = first.choices[0].routing_width;
    const auto prompt_part = static_cast<size_t>(first.prompt_tokens * width);
    for (const Completion& choice : first.choices) {
      REQUIRE(static_cast<int64_t>(choice.routing.size()) ==
              (choice.prompt_tokens + choice.completion_tokens - 1) * width);
      CHECK(std::equal(choice.routing.begin(), choice.routing.begin() + prompt_part, first.choices[0].routing.begin()));
      CHECK(choice.kept_ids.empty());  // not asked for
    }
    // Now the prompt cache holds routing: a hit (no prefill) copies it.
    recording.n = 1;
    recording.sampling.seed = 21;
    const Completion hit = MustComplete(*backend, recording).choices[0];
    CHECK(hit.prefilled_tokens == 0);
    REQUIRE(hit.routing.size() >= prompt_part);
    CHECK(std::equal(hit.routing.begin(), hit.routing.begin() + prompt_part, first.choices[0].routing.begin()));
    CHECK(backend->Stats()["prompt_cache_hits"].get<int64_t>() >= 1);

    // Other backends record nothing.
    TempDir scripts;
    auto scripted = MustOpen("scripted:" + WriteScript(scripts, "{\"content\": \"ok\"}\n"));
    CompletionRequest asked = ChatRequest("x");
    asked.record_routing = true;
    asked.record_kept_sets = true;
    const Completion none = MustComplete(*scripted, asked).choices[0];
    CHECK(none.routing_width == 0);
    CHECK(none.routing.empty());
    CHECK(none.kept_vocab == 0);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::inference

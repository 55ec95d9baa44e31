// The batch engine's request bookkeeping under churn: requests that follow another's identical
// prefill keep sampling their own tokens after that leader has finished and newer requests have
// taken its place (a follower once kept a pointer to its finished leader, and a request allocated
// later at the same address restarted it: its tokens changed and its answer never came).
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <vector>

#include "inference/batch_engine.h"
#include "tests/inference/model_test_util.h"
#include "tests/inference/engine_test_util.h"

namespace envforge::inference {
namespace {

using engine_testing::MustAnswer;
using model_testing::TinyModel;

constexpr int32_t kNeverStop = -1;  // no sampled token equals it: choices run to max_tokens

EngineRequest SharedRequest(std::vector<int32_t> feed, int64_t max_tokens, uint64_t seed) {
  EngineRequest request;
  request.feed = std::move(feed);
  request.share_prompt = true;
  request.max_tokens = max_tokens;
  request.stop_tokens = {kNeverStop};
  EngineChoiceParams choice;
  choice.sampling.seed = seed;
  request.choices.push_back(choice);
  return request;
}

std::vector<int32_t> Feed(int32_t first, int length) {
  std::vector<int32_t> feed;
  for (int i = 0; i < length; ++i) feed.push_back(2 + (first + 7 * i) % 500);
  return feed;
}

// The answer within a minute (a request the engine lost would block for ever).
TEST_CASE("followers of a finished leader run to their own end with the tokens they sample alone") {
  auto model = Model::Load(TinyModel("bf16"));
  REQUIRE(model.ok());
  const std::vector<int32_t> shared = Feed(3, 24);
  constexpr int64_t kFollowerTokens = 24;

  // What the follower samples alone: its tokens depend on (seed, stream, logits) only.
  std::vector<int32_t> alone;
  {
    BatchEngine engine(**model);
    auto future = engine.Submit(SharedRequest(shared, kFollowerTokens, 11));
    alone = MustAnswer(future).choices[0].tokens;
  }
  REQUIRE(alone.size() == kFollowerTokens);

  BatchEngine engine(**model);
  int followed = 0;
  for (int round = 0; round < 40; ++round) {
    // A long prefill keeps the engine busy so that the leader and its follower arrive in one step.
    auto busy = engine.Submit(SharedRequest(Feed(1000 + round, 160), 1, 5));
    auto leader = engine.Submit(SharedRequest(shared, 1, 7));
    auto follower = engine.Submit(SharedRequest(shared, kFollowerTokens, 11));
    MustAnswer(busy);
    MustAnswer(leader);
    // New requests while the follower decodes: freed requests' memory is reused for them.
    std::vector<std::future<Result<EngineResult>>> churn;
    for (int i = 0; i < 12; ++i) churn.push_back(engine.Submit(SharedRequest(Feed(round * 13 + i, 8), 2, 3)));
    EngineResult result = MustAnswer(follower);
    for (auto& future : churn) MustAnswer(future);
    CHECK(result.choices[0].tokens == alone);
    followed = static_cast<int>(engine.Stats().shared_prefills);
  }
  // The rounds did exercise following (a prompt-cache hit serves the rest).
  CHECK(followed > 0);
}

}  // namespace
}  // namespace envforge::inference

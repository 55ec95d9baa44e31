// Continuous batching on the embedded DSA engine: every caller's sequences share each decode step.
//
// A request feeds tokens into a KV cache (a fresh one, or the cache an earlier request returned)
// and then samples n continuations that fork from it. One engine thread runs the loop
// (Orca/vLLM-style continuous batching, agents-and-rollouts.md section 4):
//   1. take every request submitted since the last step;
//   2. run the step over all of them: each new request's feed tokens (its prefill) in one
//      Model::Forward, the last token of every live choice (a decode step) in another (so the
//      decode rows keep the model's batched decode path) -- sequences join and leave the batch
//      at every step, so a conversation waiting for its tool result holds no slot;
//   3. sample each sequence's next token; a choice finishes on a stop token, on its max_tokens,
//      at the position limit or when its on_token callback says stop; a request is answered
//      when all its choices have finished, and each choice's cache goes back to the caller.
// Prompt sharing: a request marked share_prompt with a fresh cache looks its feed up among the
// prompts prefilled recently (an LRU of frozen caches with their last logits, at most
// EngineOptions::prompt_cache_entries); on an exact match it forks that cache and runs no
// prefill. Identical fresh feeds submitted in the same step are prefilled once. A request with
// n > 1 prefills once and forks n caches (KvCache::Fork: the prompt rows are shared, not copied).
//
// Token accounting: after a choice finishes, its cache holds the feed and every generated token
// but the last (the last sampled token was never fed). A continuation therefore feeds that last
// token first; EngineRequest::carried_tokens says how many leading feed tokens are such
// generated tokens, so prefill_tokens counts only prompt tokens.
//
// Recording (EngineRequest::record_routing / record_kept_sets, off by default and then free): the
// routed experts of every position a request runs through the model for a choice, and the kept
// sets of its truncated draws. Positions: the feed (from the cache's length before it:
// EngineResult::routing_start) and each sampled token but the last (the token a decode step
// feeds); the last sampled token is never fed by this request (see "Token accounting"). A choice
// served without a prefill of its own (a prompt-cache hit, an identical feed prefilled by another
// request of the step, a fork of the request's own prefill for n > 1) gets the routing recorded
// by that prefill: a recording request only follows or hits a prefill that recorded routing.
//
// Randomness: choice i samples from SampleStream(sampling[i].seed, stream_ids[i]), so its tokens
// depend on (seed, stream id, logits) only, never on batching. Thread safety: Submit may be called
// from any thread; callbacks run on the engine thread and must not block or call Submit.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "inference/kv_cache.h"
#include "inference/model.h"
#include "inference/sampler.h"
#include "inference/token_constraint.h"

namespace envforge::inference {

struct EngineChoiceParams {
  SamplingParams sampling;
  uint64_t stream_id = 0;
};

struct EngineRequest {
  std::unique_ptr<KvCache> cache;           // continue this cache; null: a fresh one
  std::vector<int32_t> feed;                // tokens appended before sampling; at least one
  int64_t carried_tokens = 0;               // leading feed tokens that were generated earlier (not prompt)
  bool share_prompt = false;                // fresh cache only: use / fill the prompt cache
  std::vector<EngineChoiceParams> choices;  // n >= 1
  int64_t max_tokens = 256;                 // per choice; 0 answers at once with no tokens (nothing fed)
  int64_t max_length = 0;                   // cache length limit (0: the model's max_position_embeddings)
  std::vector<int32_t> stop_tokens;         // empty: the model's eos_token_id
  int64_t top_logprobs = 0;                 // alternatives per token (raw model distribution), 0..20
  // Called after each sampled token of a choice; returning false finishes the choice (finish
  // "stop", stop_matched set) -- used for stop strings and streaming.
  std::function<bool(int64_t choice, int32_t token)> on_token;
  bool record_routing = false;    // fill EngineChoice::routing
  bool record_kept_sets = false;  // fill EngineChoice::kept_ids
  // Constrained decoding (token_constraint.h): each choice samples under its own clone of this
  // constraint, every token it disallows masked out before the sampling parameters apply (so
  // logprobs and kept sets describe the masked distribution; raw_logprobs and top_logprobs stay
  // the model's). A choice whose constraint allows no token finishes (constraint_exhausted).
  std::shared_ptr<const TokenConstraint> constraint;
};

struct EngineAlternative {
  int32_t token = -1;
  double logprob = 0;
};

struct EngineChoice {
  std::vector<int32_t> tokens;
  std::vector<double> logprobs;      // sampling distribution
  std::vector<double> raw_logprobs;  // model distribution
  std::vector<int64_t> kept_counts;
  std::vector<std::vector<EngineAlternative>> top_logprobs;
  bool stopped_by_token = false;  // ended on a stop token (kept as the last token)
  bool stopped_by_callback = false;
  bool constraint_exhausted = false;  // the constraint allowed no token (never with a sound grammar)
  std::unique_ptr<KvCache> cache;     // holds the feed and tokens[0 .. size-1)
  // record_routing: ModelConfig::routing_width() expert ids (ForwardOptions::record_routing's
  // layout) per position fed for this choice: the feed, then tokens[0 .. size-1), from
  // EngineResult::routing_start on. Empty when not recorded.
  std::vector<int16_t> routing;
  // record_kept_sets: for each token whose kept_count < vocab, in token order, its kept ids as
  // Sample appends them. Empty when not recorded.
  std::vector<int32_t> kept_ids;
};

struct EngineResult {
  std::vector<EngineChoice> choices;
  int64_t prefilled_tokens = 0;  // prompt tokens of this request run through the model
  bool prompt_cache_hit = false;
  int64_t routing_start = 0;  // the position of the first fed token (the cache's length before the feed)
};

struct EngineOptions {
  int64_t prompt_cache_entries = 32;
  int64_t prompt_cache_bytes = 512ll << 20;
};

struct EngineStats {
  int64_t forward_calls = 0;
  int64_t prefill_tokens = 0;  // prompt tokens run through the model
  int64_t carried_tokens = 0;  // earlier generated tokens fed on continuation
  int64_t decode_tokens = 0;   // one per live choice per step
  int64_t max_batch = 0;       // most sequences in one Forward
  int64_t prompt_cache_hits = 0;
  int64_t shared_prefills = 0;  // fresh requests served by another request's prefill in a step
  int64_t requests = 0;
  int64_t live_choices = 0;  // now
  // Where the engine thread's time goes: seconds in Model::Forward for the prefill rows and for
  // the decode rows of steps, and the steps that had decode rows (decode_tokens / decode_steps is
  // the mean decode batch).
  double prefill_seconds = 0;
  double decode_seconds = 0;
  int64_t decode_steps = 0;
  // Constrained decoding: the tokens sampled under a constraint and the seconds spent computing
  // their masks (on the engine thread, between Forward calls).
  int64_t constrained_tokens = 0;
  double constraint_seconds = 0;
  // The model's own split of its Forward seconds (Model::profile(), copied at the end of each
  // step): the indexer (scores and top-k), attention over the cache, and everything else.
  double indexer_seconds = 0;
  double attention_seconds = 0;
  double rest_seconds = 0;
  Json ToJson() const;
};

class BatchEngine {
 public:
  BatchEngine(Model& model, EngineOptions options = {});
  ~BatchEngine();  // fails pending requests with Unavailable and joins the thread
  BatchEngine(const BatchEngine&) = delete;
  BatchEngine& operator=(const BatchEngine&) = delete;

  // InvalidArgument (through the future) for an empty feed, no choices, bad sampling parameters,
  // a cache of another shape; errors of Model::Forward fail every request of that step.
  std::future<Result<EngineResult>> Submit(EngineRequest request);
  EngineStats Stats() const;

 private:
  struct Active;
  struct PromptEntry;
  void Loop();
  void StartRequests(std::vector<std::unique_ptr<Active>>& incoming);
  void Step();
  std::vector<Active*> CollectPrefills();
  PromptEntry* FindPrompt(const std::vector<int32_t>& feed, bool need_routing);
  void SampleNext(Active& active, size_t choice, std::span<const float> row);
  bool MaskRow(const TokenConstraint& constraint, std::span<const float> row);
  void StartChoices(Active& active, KvCache& source, std::unique_ptr<KvCache> own, std::span<const float> row,
                    std::span<const int16_t> feed_routing);
  void StartFollowers(const Active* leader, KvCache& source, std::span<const float> row);
  void StartFromPrefill(Active& active, std::span<const float> row);
  void KeepPrompt(const Active& active, KvCache& cache, std::span<const float> row);
  void TrimPromptCache();
  int64_t AnswerFinished();
  // Runs the step's prefill rows (the first prefill_rows) and its decode rows as two Forward calls,
  // adding the seconds of each to forward_seconds_ (prefill, decode).
  Status ForwardInParts(std::span<const SequenceInput> batch, size_t prefill_rows, std::vector<float>* logits,
                        std::vector<int16_t>* routing);
  void FailAll(const Status& status);

  Model& model_;
  EngineOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Active>> submitted_;
  bool stopping_ = false;
  EngineStats stats_;
  // Engine thread only.
  std::vector<std::unique_ptr<Active>> active_;
  std::deque<std::unique_ptr<PromptEntry>> prompt_cache_;  // most recent first
  double forward_seconds_[2] = {0, 0};                     // the step's prefill and decode Forward time
  std::vector<uint8_t> allowed_;                           // constrained choices: the token mask
  std::vector<float> masked_;                              // and the masked logits
  int64_t step_constrained_tokens_ = 0;                    // this step's, added to stats_ at its end
  double step_constraint_seconds_ = 0;
  std::thread thread_;
};

}  // namespace envforge::inference

// BatchEngine: one thread, one Forward per step over every new prefill and every live choice.
#include "inference/batch_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <span>
#include <utility>

namespace envforge::inference {

struct BatchEngine::PromptEntry {
  std::vector<int32_t> tokens;
  std::unique_ptr<KvCache> cache;  // a fork holding the prompt as its shared prefix, nothing own
  std::vector<float> logits;       // the prompt's last-token logits
  bool has_routing = false;        // the prefill recorded routing (for a model without MoE: empty)
  std::vector<int16_t> routing;    // the prompt's routing, when has_routing
  int64_t bytes = 0;
};

struct BatchEngine::Active {
  EngineRequest request;
  std::promise<Result<EngineResult>> promise;
  EngineResult result;
  bool started = false;  // choices are sampling (prefill done or served from a cache)
  // An identical fresh feed prefilled by another request this step; cleared when the choices
  // start, so that a request allocated later at a finished leader's address never restarts them.
  Active* leader = nullptr;
  std::vector<SampleStream> streams;
  std::vector<std::unique_ptr<TokenConstraint>> constraints;  // per choice, when the request has one
  std::vector<int16_t> feed_routing;  // record_routing: the prefill's routing, until the choices start
  std::vector<char> live;
  int64_t live_count = 0;
  int64_t max_length = 0;
};

namespace {

Status CheckRequest(const EngineRequest& request, const Model& model) {
  if (request.choices.empty()) return InvalidArgumentError("engine request without choices");
  if (request.feed.empty() && request.max_tokens > 0)
    return InvalidArgumentError("engine request with nothing to feed");
  if (request.max_tokens < 0) return InvalidArgumentError("max_tokens must be >= 0");
  if (request.top_logprobs < 0 || request.top_logprobs > 20)
    return InvalidArgumentError("top_logprobs must be in 0..20");
  for (const EngineChoiceParams& choice : request.choices) {
    const SamplingParams& p = choice.sampling;
    if (!(p.temperature >= 0)) return InvalidArgumentError("temperature must be >= 0");
    if (!(p.top_p > 0 && p.top_p <= 1)) return InvalidArgumentError("top_p must be in (0, 1]");
    if (p.top_k < 0) return InvalidArgumentError("top_k must be >= 0");
  }
  const int64_t vocab = model.config().vocab_size;
  for (int32_t token : request.feed) {
    if (token < 0 || token >= vocab)
      return InvalidArgumentError("token id " + std::to_string(token) + " is outside the vocabulary");
  }
  return Status::Ok();
}

std::vector<EngineAlternative> TopAlternatives(std::span<const float> row, int64_t count) {
  float max_logit = -INFINITY;
  for (float value : row) max_logit = std::max(max_logit, value);
  double sum = 0;
  for (float value : row) sum += std::isfinite(value) ? std::exp(static_cast<double>(value - max_logit)) : 0.0;
  const double log_z = max_logit + std::log(sum);
  std::vector<int32_t> ids(row.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  const auto keep = static_cast<size_t>(std::min<int64_t>(count, static_cast<int64_t>(row.size())));
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(keep), ids.end(),
                    [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  std::vector<EngineAlternative> out;
  for (size_t i = 0; i < keep; ++i) out.push_back({ids[i], static_cast<double>(row[ids[i]]) - log_z});
  return out;
}

}  // namespace

Json EngineStats::ToJson() const {
  return {{"forward_calls", forward_calls},
          {"prefill_tokens", prefill_tokens},
          {"carried_tokens", carried_tokens},
          {"decode_tokens", decode_tokens},
          {"max_batch", max_batch},
          {"prompt_cache_hits", prompt_cache_hits},
          {"shared_prefills", shared_prefills},
          {"requests", requests},
          {"live_choices", live_choices},
          {"prefill_seconds", prefill_seconds},
          {"decode_seconds", decode_seconds},
          {"decode_steps", decode_steps},
          {"constrained_tokens", constrained_tokens},
          {"constraint_seconds", constraint_seconds},
          {"indexer_seconds", indexer_seconds},
          {"attention_seconds", attention_seconds},
          {"rest_seconds", rest_seconds}};
}

BatchEngine::BatchEngine(Model& model, EngineOptions options) : model_(model), options_(options) {
  thread_ = std::thread([this] { Loop(); });
}

BatchEngine::~BatchEngine() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::future<Result<EngineResult>> BatchEngine::Submit(EngineRequest request) {
  auto active = std::make_unique<Active>();
  auto future = active->promise.get_future();
  Status status = CheckRequest(request, model_);
  if (!status.ok()) {
    active->promise.set_value(status);
    return future;
  }
  if (request.cache != nullptr && request.cache->shape().layers != model_.cache_shape().layers) {
    active->promise.set_value(InvalidArgumentError("engine request with a cache of another model"));
    return future;
  }
  active->request = std::move(request);
  {
    std::lock_guard lock(mutex_);
    if (stopping_) {
      active->promise.set_value(UnavailableError("the inference engine is shutting down"));
      return future;
    }
    submitted_.push_back(std::move(active));
    stats_.requests += 1;
  }
  wake_.notify_one();
  return future;
}

EngineStats BatchEngine::Stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void BatchEngine::Loop() {
  while (true) {
    std::vector<std::unique_ptr<Active>> incoming;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !submitted_.empty() || !active_.empty(); });
      if (stopping_) break;
      while (!submitted_.empty()) {
        incoming.push_back(std::move(submitted_.front()));
        submitted_.pop_front();
      }
    }
    StartRequests(incoming);
    Step();
  }
  FailAll(UnavailableError("the inference engine is shutting down"));
  std::lock_guard lock(mutex_);
  for (auto& active : submitted_) active->promise.set_value(UnavailableError("the inference engine is shutting down"));
  submitted_.clear();
}

void BatchEngine::StartRequests(std::vector<std::unique_ptr<Active>>& incoming) {
  const ModelConfig& config = model_.config();
  const int64_t model_limit = config.max_position_embeddings > 0 ? config.max_position_embeddings : INT64_MAX;
  for (auto& owned : incoming) {
    Active& active = *owned;
    EngineRequest& request = active.request;
    active.max_length = request.max_length > 0 ? std::min(request.max_length, model_limit) : model_limit;
    if (request.stop_tokens.empty()) request.stop_tokens.push_back(static_cast<int32_t>(config.eos_token_id));
    const size_t n = request.choices.size();
    active.result.choices.resize(n);
    for (size_t i = 0; i < n; ++i) {
      active.streams.emplace_back(request.choices[i].sampling.seed, request.choices[i].stream_id);
      if (request.constraint) active.constraints.push_back(request.constraint->Clone());
    }
    active.live.assign(n, 1);
    active.live_count = static_cast<int64_t>(n);
    const int64_t base = request.cache ? request.cache->length() : 0;
    active.result.routing_start = base;
    if (request.max_tokens == 0) {
      active.result.choices[0].cache = std::move(request.cache);
      active.promise.set_value(std::move(active.result));
      continue;
    }
    if (base + static_cast<int64_t>(request.feed.size()) > active.max_length) {
      active.promise.set_value(
          ResourceExhaustedError("context length exceeded: " + std::to_string(base + request.feed.size()) +
                                 " tokens, the limit is " + std::to_string(active.max_length)));
      continue;
    }
    active_.push_back(std::move(owned));
  }
}

void BatchEngine::FailAll(const Status& status) {
  for (auto& active : active_) active->promise.set_value(status);
  active_.clear();
}

// Prefill rows and decode rows in separate Forward calls: a batch of single tokens takes the
// model's decode path (selection and attention split across sequences), which one multi-token
// sequence in the batch would turn off for every row. The weights stream once more per step,
// which costs far less than serialising a hundred decode rows.
// `routing` (null: not recorded) receives the token rows' routing in batch order, as one Forward
// would give it.
Status BatchEngine::ForwardInParts(std::span<const SequenceInput> batch, size_t prefill_rows,
                                   std::vector<float>* logits, std::vector<int16_t>* routing) {
  logits->clear();
  if (routing != nullptr) routing->clear();
  forward_seconds_[0] = forward_seconds_[1] = 0;
  if (batch.empty()) return Status::Ok();
  ForwardOptions options;
  options.record_routing = routing;
  auto timed_forward = [&](std::span<const SequenceInput> rows, std::vector<float>* out, int part) {
    const auto start = std::chrono::steady_clock::now();
    Status status = model_.Forward(rows, out, options);
    forward_seconds_[part] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return status;
  };
  if (prefill_rows == 0 || prefill_rows == batch.size()) return timed_forward(batch, logits, prefill_rows == 0 ? 1 : 0);
  std::vector<float> decode_logits;
  std::vector<int16_t> decode_routing;
  ENVFORGE_RETURN_IF_ERROR(timed_forward(batch.first(prefill_rows), logits, 0));
  if (routing != nullptr) options.record_routing = &decode_routing;
  ENVFORGE_RETURN_IF_ERROR(timed_forward(batch.subspan(prefill_rows), &decode_logits, 1));
  logits->insert(logits->end(), decode_logits.begin(), decode_logits.end());
  if (routing != nullptr) routing->insert(routing->end(), decode_routing.begin(), decode_routing.end());
  return Status::Ok();
}

// Requests not started yet that need a prefill row of their own: a fresh shared feed identical to
// one already listed follows that one (its leader) instead.
std::vector<BatchEngine::Active*> BatchEngine::CollectPrefills() {
  std::vector<Active*> prefills;
  for (auto& owned : active_) {
    Active& active = *owned;
    if (active.started || active.leader != nullptr) continue;
    const bool fresh_shared = active.request.cache == nullptr && active.request.share_prompt;
    if (fresh_shared) {
      for (Active* other : prefills) {
        // A recording request follows only a prefill that records routing.
        if (other->request.cache == nullptr && other->request.share_prompt &&
            (other->request.record_routing || !active.request.record_routing) &&
            other->request.feed == active.request.feed) {
          active.leader = other;
          break;
        }
      }
      if (active.leader != nullptr) continue;
    }
    prefills.push_back(&active);
  }
  return prefills;
}

BatchEngine::PromptEntry* BatchEngine::FindPrompt(const std::vector<int32_t>& feed, bool need_routing) {
  auto hit = std::find_if(prompt_cache_.begin(), prompt_cache_.end(), [&](const auto& entry) {
    return (entry->has_routing || !need_routing) && entry->tokens == feed;
  });
  if (hit == prompt_cache_.end()) return nullptr;
  std::rotate(prompt_cache_.begin(), hit, hit + 1);
  return prompt_cache_.front().get();
}

// The logits row with every token the choice's constraint disallows at -inf (masked_), or false
// when it allows none.
bool BatchEngine::MaskRow(const TokenConstraint& constraint, std::span<const float> row) {
  const auto started = std::chrono::steady_clock::now();
  allowed_.assign(row.size(), 0);
  constraint.Allow(allowed_);
  masked_.assign(row.begin(), row.end());
  bool any = false;
  for (size_t t = 0; t < row.size(); ++t) {
    if (allowed_[t] == 0) {
      masked_[t] = -INFINITY;
    } else {
      any = true;
    }
  }
  step_constrained_tokens_ += 1;
  step_constraint_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return any;
}

void BatchEngine::SampleNext(Active& active, size_t i, std::span<const float> row) {
  EngineChoice& choice = active.result.choices[i];
  TokenConstraint* constraint = active.constraints.empty() ? nullptr : active.constraints[i].get();
  if (constraint != nullptr && !MaskRow(*constraint, row)) {
    choice.constraint_exhausted = true;
    active.live[i] = 0;
    active.live_count -= 1;
    return;
  }
  SampledToken token =
      Sample(constraint != nullptr ? std::span<const float>(masked_) : row, active.request.choices[i].sampling,
             active.streams[i], active.request.record_kept_sets ? &choice.kept_ids : nullptr);
  if (constraint != nullptr) {
    constraint->Accept(token.token);
    token.raw_logprob = RawLogprob(row, token.token);  // the model's, not the masked distribution's
  }
  choice.tokens.push_back(token.token);
  choice.logprobs.push_back(token.logprob);
  choice.raw_logprobs.push_back(token.raw_logprob);
  choice.kept_counts.push_back(token.kept_count);
  if (active.request.top_logprobs > 0) choice.top_logprobs.push_back(TopAlternatives(row, active.request.top_logprobs));
  const auto& stops = active.request.stop_tokens;
  bool done = false;
  if (std::find(stops.begin(), stops.end(), token.token) != stops.end()) {
    choice.stopped_by_token = true;
    done = true;
  } else if (active.request.on_token && !active.request.on_token(static_cast<int64_t>(i), token.token)) {
    choice.stopped_by_callback = true;
    done = true;
  }
  if (!done && static_cast<int64_t>(choice.tokens.size()) >= active.request.max_tokens) done = true;
  if (!done && choice.cache->length() + 1 > active.max_length) done = true;
  if (done) {
    active.live[i] = 0;
    active.live_count -= 1;
  }
}

void BatchEngine::StartChoices(Active& active, KvCache& source, std::unique_ptr<KvCache> own,
                               std::span<const float> row, std::span<const int16_t> feed_routing) {
  const size_t n = active.result.choices.size();
  for (size_t i = 0; i < n; ++i) {
    EngineChoice& choice = active.result.choices[i];
    choice.cache = (i == 0 && own != nullptr) ? std::move(own) : source.Fork();
    if (active.request.record_routing) choice.routing.assign(feed_routing.begin(), feed_routing.end());
  }
  active.started = true;
  active.leader = nullptr;
  for (size_t i = 0; i < n; ++i) SampleNext(active, i, row);
}

void BatchEngine::StartFollowers(const Active* leader, KvCache& source, std::span<const float> row) {
  for (auto& other : active_) {
    if (other->leader != leader) continue;
    StartChoices(*other, source, nullptr, row, leader->feed_routing);
    std::lock_guard lock(mutex_);
    stats_.shared_prefills += 1;
  }
}

// A prefill row's request: its cache becomes the choices' (forked for n > 1), and a shared feed
// enters the prompt cache and starts the requests that followed it.
void BatchEngine::StartFromPrefill(Active& active, std::span<const float> row) {
  EngineRequest& request = active.request;
  active.result.prefilled_tokens = static_cast<int64_t>(request.feed.size()) - request.carried_tokens;
  std::unique_ptr<KvCache> cache = std::move(request.cache);
  if (request.share_prompt) {
    KeepPrompt(active, *cache, row);
    StartFollowers(&active, *cache, row);
  }
  KvCache& source = *cache;
  // One choice keeps the prefill cache; several fork it and it goes.
  const std::vector<int16_t> feed_routing = std::move(active.feed_routing);
  StartChoices(active, source, active.result.choices.size() == 1 ? std::move(cache) : nullptr, row, feed_routing);
}

// A shared prefill enters the prompt cache, most recent first. An older entry of the same prompt
// (one without routing, which a recording request could not hit) stays until it ages out: this
// step's hits may still point at it.
void BatchEngine::KeepPrompt(const Active& active, KvCache& cache, std::span<const float> row) {
  const EngineRequest& request = active.request;
  auto entry = std::make_unique<PromptEntry>();
  entry->tokens = request.feed;
  entry->cache = cache.Fork();
  entry->logits.assign(row.begin(), row.end());
  entry->has_routing = request.record_routing;
  entry->routing = active.feed_routing;
  entry->bytes = entry->cache->prefix_bytes() + static_cast<int64_t>(entry->routing.size() * sizeof(int16_t));
  prompt_cache_.push_front(std::move(entry));
}

void BatchEngine::TrimPromptCache() {
  int64_t bytes = 0, kept = 0;
  for (auto it = prompt_cache_.begin(); it != prompt_cache_.end();) {
    bytes += (*it)->bytes;
    kept += 1;
    if (kept > options_.prompt_cache_entries || bytes > options_.prompt_cache_bytes) {
      it = prompt_cache_.erase(it);
    } else {
      ++it;
    }
  }
}

// Answers the requests whose choices have all finished; returns the live choices left.
int64_t BatchEngine::AnswerFinished() {
  int64_t live = 0;
  for (auto it = active_.begin(); it != active_.end();) {
    Active& active = **it;
    if (active.started && active.live_count == 0) {
      active.promise.set_value(std::move(active.result));
      it = active_.erase(it);
    } else {
      live += active.started ? active.live_count : 0;
      ++it;
    }
  }
  return live;
}

void BatchEngine::Step() {
  // Rows: each prefill (prompt-cache hits need none), then every live choice's last token.
  std::vector<SequenceInput> batch;
  std::vector<std::pair<Active*, int64_t>> rows;  // (request, choice) per row; choice -1: prefill
  std::vector<std::pair<Active*, PromptEntry*>> hits;
  for (Active* active : CollectPrefills()) {
    const bool fresh_shared = active->request.cache == nullptr && active->request.share_prompt;
    if (PromptEntry* entry =
            fresh_shared ? FindPrompt(active->request.feed, active->request.record_routing) : nullptr) {
      hits.push_back({active, entry});
      continue;
    }
    if (active->request.cache == nullptr) active->request.cache = model_.NewCache();
    batch.push_back({active->request.cache.get(), std::span<const int32_t>(active->request.feed)});
    rows.push_back({active, -1});
  }
  const size_t prefill_rows = rows.size();
  for (auto& owned : active_) {
    if (!owned->started) continue;
    for (size_t i = 0; i < owned->live.size(); ++i) {
      if (!owned->live[i]) continue;
      batch.push_back(
          {owned->result.choices[i].cache.get(), std::span<const int32_t>(&owned->result.choices[i].tokens.back(), 1)});
      rows.push_back({owned.get(), static_cast<int64_t>(i)});
    }
  }

  std::vector<float> logits;
  // Routing is recorded for the whole step when any of its rows asks for it (free otherwise).
  const bool record_routing =
      std::any_of(rows.begin(), rows.end(), [](const auto& row) { return row.first->request.record_routing; });
  std::vector<int16_t> routing;
  Status status = ForwardInParts(batch, prefill_rows, &logits, record_routing ? &routing : nullptr);
  if (!status.ok()) {
    FailAll(status);
    return;
  }
  const auto vocab = static_cast<size_t>(model_.config().vocab_size);
  const auto width = static_cast<size_t>(model_.config().routing_width());
  int64_t prefilled = 0, carried = 0;
  size_t token_row = 0;  // the first token row of batch[r]
  for (size_t r = 0; r < rows.size(); ++r) {
    auto [active, choice] = rows[r];
    std::span<const float> row(logits.data() + r * vocab, vocab);
    std::span<const int16_t> row_routing;
    if (active->request.record_routing)
      row_routing = {routing.data() + token_row * width, batch[r].tokens.size() * width};
    token_row += batch[r].tokens.size();
    if (choice >= 0) {
      std::vector<int16_t>& choice_routing = active->result.choices[static_cast<size_t>(choice)].routing;
      choice_routing.insert(choice_routing.end(), row_routing.begin(), row_routing.end());
      SampleNext(*active, static_cast<size_t>(choice), row);
      continue;
    }
    carried += active->request.carried_tokens;
    active->feed_routing.assign(row_routing.begin(), row_routing.end());
    StartFromPrefill(*active, row);
    prefilled += active->result.prefilled_tokens;
  }
  for (auto [active, entry] : hits) {
    for (auto& other : active_) {  // the hit and the requests that followed it
      if (other.get() != active && other->leader != active) continue;
      other->result.prompt_cache_hit = true;
      StartChoices(*other, *entry->cache, nullptr, entry->logits, entry->routing);
    }
  }
  TrimPromptCache();
  const int64_t live = AnswerFinished();

  std::lock_guard lock(mutex_);
  stats_.forward_calls += batch.empty() ? 0 : 1;
  stats_.prefill_tokens += prefilled;
  stats_.carried_tokens += carried;
  stats_.decode_tokens += static_cast<int64_t>(rows.size() - prefill_rows);
  stats_.max_batch = std::max<int64_t>(stats_.max_batch, static_cast<int64_t>(batch.size()));
  stats_.prompt_cache_hits += static_cast<int64_t>(hits.size());
  stats_.live_choices = live;
  stats_.prefill_seconds += forward_seconds_[0];
  stats_.decode_seconds += forward_seconds_[1];
  stats_.decode_steps += rows.size() > prefill_rows ? 1 : 0;
  stats_.constrained_tokens += std::exchange(step_constrained_tokens_, 0);
  stats_.constraint_seconds += std::exchange(step_constraint_seconds_, 0.0);
  const ForwardProfile& profile = model_.profile();
  stats_.indexer_seconds = profile.indexer_s;
  stats_.attention_seconds = profile.attention_s;
  stats_.rest_seconds = profile.rest_s;
}

}  // namespace envforge::inference

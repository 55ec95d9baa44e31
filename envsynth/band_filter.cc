#include "envsynth/band_filter.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "agents/pass_at_k.h"

namespace envforge::envsynth {

Status ValidateBandOptions(const BandOptions& o) {
  if (!(o.lo >= 0 && o.lo < o.hi && o.hi <= 1)) {
    return InvalidArgumentError("--band " + std::to_string(o.lo) + "," + std::to_string(o.hi) +
                                " is not 0 <= lo < hi <= 1");
  }
  if (o.k < 1) return InvalidArgumentError("--k must be at least 1, got " + std::to_string(o.k));
  if (o.chunk < 1) return InvalidArgumentError("the filter's round size must be at least 1");
  if (o.early_after < 0) return InvalidArgumentError("--early-stop must be >= 0");
  return Status::Ok();
}

const char* BandDecisionName(BandDecision decision) {
  switch (decision) {
    case BandDecision::kUndecided: return "undecided";
    case BandDecision::kInBand: return "in_band";
    case BandDecision::kTooEasy: return "too_easy";
    case BandDecision::kTooHard: return "too_hard";
    case BandDecision::kInfraError: return "infra_error";
  }
  return "undecided";
}

BandVerdict DecideBand(const BandOptions& o, int64_t scored, int64_t passed) {
  const double k = static_cast<double>(o.k);
  const int64_t left = std::max<int64_t>(o.k - scored, 0);
  const double low = static_cast<double>(passed) / k;
  const double high = static_cast<double>(passed + left) / k;
  if (low >= o.hi) return {BandDecision::kTooEasy, false};
  if (high <= o.lo) return {BandDecision::kTooHard, false};
  if (low > o.lo && high < o.hi) return {BandDecision::kInBand, false};
  if (o.early_after > 0 && scored >= o.early_after && passed == scored && left > 0)
    return {BandDecision::kTooEasy, true};
  if (left == 0) {
    // Every episode played and still undecided: only possible at the band's edges (rate == lo or
    // rate == hi with a strict band), which are outside it.
    return {low <= o.lo ? BandDecision::kTooHard : BandDecision::kTooEasy, false};
  }
  return {BandDecision::kUndecided, false};
}

Json FilterResult::ToJson() const {
  Json points = Json::object();
  for (auto [k, value] : pass_at_k) points[std::to_string(k)] = value;
  return {{"decision", BandDecisionName(verdict.decision)},
          {"early", verdict.early},
          {"episodes", episodes},
          {"scored", scored},
          {"passed", passed},
          {"pass_rate", pass_rate()},
          {"rounds", rounds},
          {"pass_at_k", points},
          {"mean_turns", mean_turns},
          {"model_calls", model_calls},
          {"tokens", tokens},
          {"seconds", seconds},
          {"detail", detail}};
}

namespace {

void Absorb(FilterResult& result, const agents::TaskRollout& rollout, int64_t& turns_total) {
  for (const agents::EpisodeResult& episode : rollout.episodes) {
    result.episodes += 1;
    result.model_calls += episode.turns;
    result.tokens += episode.generated_tokens + episode.new_prompt_tokens;
    if (episode.outcome == agents::RolloutOutcome::kInfraError) {
      if (result.detail.empty()) result.detail = episode.detail;
      continue;
    }
    result.scored += 1;
    turns_total += episode.turns;
    if (episode.passed) result.passed += 1;
  }
}

void Finish(FilterResult& result, int64_t turns_total) {
  result.mean_turns = result.scored > 0 ? double(turns_total) / double(result.scored) : 0;
  if (result.scored == 0) return;
  for (int64_t k : agents::PassAtKPoints(result.scored)) {
    auto value = agents::PassAtK(result.scored, result.passed, k);
    if (value.ok()) result.pass_at_k.emplace_back(k, *value);
  }
}

}  // namespace

Result<std::vector<FilterResult>> RunBandFilter(sandbox::SessionManager& manager, inference::Backend& backend,
                                                const std::string& env_id, const std::vector<std::string>& task_ids,
                                                const BandOptions& options, agents::RolloutOptions episode,
                                                const std::function<void(int64_t)>& on_progress) {
  ENVFORGE_RETURN_IF_ERROR(ValidateBandOptions(options));
  const auto start = std::chrono::steady_clock::now();
  std::vector<FilterResult> results(task_ids.size());
  std::map<std::string, size_t> index;
  std::vector<int64_t> turns(task_ids.size(), 0);
  for (size_t i = 0; i < task_ids.size(); ++i) {
    results[i].task_id = task_ids[i];
    index[task_ids[i]] = i;
  }
  int64_t played = 0, round_start = 0;
  episode.on_episode = [&](int64_t done, int64_t) {
    if (on_progress) on_progress(played + done);
  };
  while (true) {
    std::vector<std::string> undecided;
    for (const FilterResult& result : results) {
      if (result.verdict.decision == BandDecision::kUndecided) undecided.push_back(result.task_id);
    }
    if (undecided.empty()) break;
    episode.n = std::min(options.chunk, std::max<int64_t>(options.k - round_start, 1));
    episode.first_sample = round_start;
    agents::RolloutRunner runner(manager, backend, episode);
    ENVFORGE_ASSIGN_OR_RETURN(std::vector<agents::TaskRollout> rollouts, runner.Run(env_id, undecided));
    played += episode.n * static_cast<int64_t>(undecided.size());
    for (const agents::TaskRollout& rollout : rollouts) {
      const size_t i = index.at(rollout.task_id);
      FilterResult& result = results[i];
      const int64_t scored_before = result.scored;
      Absorb(result, rollout, turns[i]);
      result.rounds += 1;
      if (result.scored == scored_before) {
        result.verdict = {BandDecision::kInfraError, false};  // a whole round of infra errors
        continue;
      }
      result.verdict = DecideBand(options, result.scored, result.passed);
    }
    round_start += episode.n;
    // Infra errors leave a task short of k scored episodes: keep playing it until it has k or a
    // round scores nothing (bounded by 2k samples, so a flaky backend cannot loop forever).
    if (round_start >= 2 * options.k) {
      for (FilterResult& result : results) {
        if (result.verdict.decision == BandDecision::kUndecided) result.verdict = {BandDecision::kInfraError, false};
      }
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (size_t i = 0; i < results.size(); ++i) {
    Finish(results[i], turns[i]);
    results[i].seconds = seconds / static_cast<double>(results.size());
  }
  return results;
}

}  // namespace envforge::envsynth

#include "envsynth/search_agents.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "agents/rollout.h"
#include "base/rng.h"
#include "envsynth/embedded_prompts.h"
#include "envsynth/prompt_template.h"
#include "sandbox/search_synth_bundle.h"
#include "sandbox/session_manager.h"
#include "toolsets/search/answer_match.h"
#include "toolsets/search/corpus_store.h"

namespace envforge::envsynth {
namespace {

constexpr int kMaxAnswerAgents = 16;
constexpr int kMaxVerifyPasses = 8;

constexpr const char* kStageSystemPrompt =
    "You help build question-answering tasks for search agents from a reference corpus. You answer with exactly the "
    "JSON object asked for, nothing else.";

// The answer agents' configurations: agent k takes entry k mod 3 of each.
constexpr const char* kAnswerAgentPrompts[] = {
    "You answer questions by searching a reference corpus with the tools search, open and find. Follow every clue "
    "of the question in order: search for the clues of the first entry, open what you find and follow its links "
    "until you reach the entry the question asks for. Then call submit_result exactly once with that entry's title "
    "as answer_text, plain text.",
    "You answer questions with a search engine over a reference corpus (tools search, open, find). Be quick: search "
    "for the most distinctive words of the question, open the best result, follow the link the question names, and "
    "call submit_result once with the title you reach as answer_text.",
    "You answer questions by searching a reference corpus (tools search, open, find). Be sceptical: before you "
    "accept an entry, check it against every clue of the question; when one clue does not fit, search again. When "
    "one entry fits every clue, call submit_result once with its title as answer_text, plain text.",
};
constexpr double kAnswerAgentTemperatures[] = {0.6, 0.8, 1.0};

struct Prompts {
  std::string question;
  std::string verify;
};

Result<Prompts> LoadPrompts(const std::string& configured) {
  const std::string dir = PromptsDirectory(configured);
  if (dir.empty()) return Prompts{embedded::kSearchQuestion, embedded::kSearchVerify};
  Prompts prompts;
  ENVFORGE_ASSIGN_OR_RETURN(prompts.question, ReadPromptFile(dir, "search_question.md"));
  ENVFORGE_ASSIGN_OR_RETURN(prompts.verify, ReadPromptFile(dir, "search_verify.md"));
  return prompts;
}

Status CheckOptions(const SearchAgentOptions& options) {
  auto out_of_range = [](const char* name, int64_t value, int64_t low, int64_t high) {
    return InvalidArgumentError("search agents: " + std::string(name) + " must be in " + std::to_string(low) + ".." +
                                std::to_string(high) + ", got " + std::to_string(value));
  };
  if (options.answer_agents < 1 || options.answer_agents > kMaxAnswerAgents)
    return out_of_range("answer_agents", options.answer_agents, 1, kMaxAnswerAgents);
  if (options.verify_passes < 1 || options.verify_passes > kMaxVerifyPasses)
    return out_of_range("verify_passes", options.verify_passes, 1, kMaxVerifyPasses);
  if (options.format_retries < 0 || options.format_retries > 5)
    return out_of_range("format_retries", options.format_retries, 0, 5);
  if (options.concurrency < 1 || options.concurrency > 256)
    return out_of_range("concurrency", options.concurrency, 1, 256);
  if (options.max_turns < 1) return out_of_range("max_turns", options.max_turns, 1, INT32_MAX);
  if (options.max_tokens < 16) return out_of_range("max_tokens", options.max_tokens, 16, INT32_MAX);
  return Status::Ok();
}

// Runs fn(i) for every i in [0, count) on up to `threads` threads. The first error stops the
// handing out of further indices and is returned once every thread has stopped.
Status ForEachConcurrently(size_t count, int64_t threads, const std::function<Status(size_t)>& fn) {
  std::atomic<size_t> next{0};
  std::mutex mutex;
  Status first_error;
  auto work = [&] {
    for (size_t i = next++; i < count; i = next++) {
      Status status = fn(i);
      if (status.ok()) continue;
      std::lock_guard lock(mutex);
      if (first_error.ok()) first_error = std::move(status);
      next = count;
    }
  };
  std::vector<std::thread> pool;
  const size_t workers = std::min(count, static_cast<size_t>(threads));
  for (size_t t = 1; t < workers; ++t) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
  return first_error;
}

// At most `chars` bytes of `text`, cut at a UTF-8 boundary, "..." marking a cut.
std::string Excerpt(const std::string& text, int64_t chars) {
  if (static_cast<int64_t>(text.size()) <= chars) return text;
  size_t end = static_cast<size_t>(chars);
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end) + "...";
}

// The chain as the writer and the verifier see it: each entry's title, the link into it and the
// start of its text.
Result<std::string> ChainText(search::CorpusReader& corpus, const search::SynthQuestion& question, int64_t chars) {
  std::string out;
  for (size_t step = 0; step < question.chain.size(); ++step) {
    const search::ChainStep& entry = question.chain[step];
    ENVFORGE_ASSIGN_OR_RETURN(search::Document document, corpus.Get(entry.doc_id));
    out += std::to_string(step + 1) + ". \"" + entry.title + "\"";
    if (step > 0)
      out += " (reached by the link: " + (entry.relation.empty() ? "cross-reference" : entry.relation) + ")";
    out += "\n" + Excerpt(document.text, chars) + "\n\n";
  }
  return out;
}

// What a model stage got: the accepted object, or why there is none.
struct StageReply {
  std::optional<Json> object;
  std::string problem;   // the last problem with the reply (format), or the refusal
  bool refused = false;  // the backend refused the request (InvalidArgument, context too long)
  int64_t requests = 0;
};

bool IsRefusal(const Status& status) {
  return status.code() == StatusCode::kInvalidArgument || status.code() == StatusCode::kResourceExhausted;
}

// Asks `backend` for a JSON object that `check` accepts (inference::CompleteForObject); the
// retries start with `header` (the prompt's first line, so the model and a script know which item
// it is). A refused request is a reply (refused); other failures of the backend are errors.
Result<StageReply> AskForObject(inference::Backend& backend, const std::string& header, const std::string& prompt,
                                const SearchAgentOptions& options, uint64_t seed, int64_t retries,
                                const std::function<std::string(const Json&)>& check) {
  inference::CompletionRequest request;
  request.messages = {{"system", kStageSystemPrompt}, {"user", prompt}};
  request.tool_choice = "none";
  request.max_tokens = options.max_tokens;
  request.sampling.temperature = options.temperature;
  request.sampling.seed = seed;
  StageReply reply;
  auto asked = inference::CompleteForObject(
      backend, std::move(request), retries, check,
      [&](const std::string& problem) {
        return header + "\nYour reply was not usable: " + problem + ". Reply with the JSON object only, as asked.";
      },
      &reply.requests);
  if (!asked.ok()) {
    if (!IsRefusal(asked.status())) return asked.status();
    reply.refused = true;
    reply.problem = asked.status().message();
    return reply;
  }
  reply.object = std::move(asked->object);
  reply.problem = std::move(asked->problem);
  return reply;
}

std::string Quoted(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "\"" : ", \"") + name + "\"";
  return out;
}

// The names a written question must not use: the answer, its aliases and the chain's titles.
std::vector<std::string> ForbiddenNames(const search::SynthQuestion& question) {
  std::vector<std::string> names = {question.key.answer};
  names.insert(names.end(), question.key.aliases.begin(), question.key.aliases.end());
  for (const search::ChainStep& step : question.chain) names.push_back(step.title);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::string VerdictWord(const Json& value) {
  if (!value.is_string()) return "unsure";
  std::string word = value.get<std::string>();
  std::transform(word.begin(), word.end(), word.begin(), [](unsigned char c) { return std::tolower(c); });
  return word == "correct" || word == "incorrect" ? word : "unsure";
}

// Runs and collects the stages for one review.
class Review {
 public:
  Review(const std::vector<search::SynthQuestion>& proposals, const search::QaSynthOptions& synth_options,
         std::string corpus_path, inference::Backend& writer, inference::Backend& answerer,
         const SearchAgentOptions& options, Prompts prompts, std::string work_dir,
         std::function<void(const SearchAgentProgress&)> on_progress)
      : proposals_(proposals),
        synth_options_(synth_options),
        corpus_path_(std::move(corpus_path)),
        writer_(writer),
        answerer_(answerer),
        options_(options),
        prompts_(std::move(prompts)),
        work_dir_(std::move(work_dir)),
        on_progress_(std::move(on_progress)) {}

  Result<SearchAgentResult> Run() {
    result_.reviews.resize(proposals_.size());
    result_.stats.proposals = static_cast<int64_t>(proposals_.size());
    for (size_t i = 0; i < proposals_.size(); ++i) result_.reviews[i].id = proposals_[i].id;
    ENVFORGE_RETURN_IF_ERROR(LoadChains());
    auto timed = [](double& seconds, auto&& stage) -> Status {
      const auto start = std::chrono::steady_clock::now();
      Status status = stage();
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return status;
    };
    ENVFORGE_RETURN_IF_ERROR(timed(result_.stats.writer_seconds, [&] { return WriteQuestions(); }));
    ENVFORGE_RETURN_IF_ERROR(timed(result_.stats.answer_seconds, [&] { return RunAnswerAgents(); }));
    ENVFORGE_RETURN_IF_ERROR(timed(result_.stats.verify_seconds, [&] { return VerifyQuestions(); }));
    Decide();
    return std::move(result_);
  }

 private:
  // Counts one more item of `stage` done (in `done`, guarded here) and reports it.
  void Progress(const char* stage, int64_t& done, int64_t total) {
    std::lock_guard lock(progress_mutex_);
    ++done;
    if (on_progress_) on_progress_({stage, done, total});
  }

  Status LoadChains() {
    ENVFORGE_ASSIGN_OR_RETURN(auto corpus, search::CorpusReader::Open(corpus_path_));
    chains_.reserve(proposals_.size());
    for (const search::SynthQuestion& proposal : proposals_) {
      ENVFORGE_ASSIGN_OR_RETURN(std::string chain, ChainText(*corpus, proposal, options_.evidence_chars));
      chains_.push_back(std::move(chain));
    }
    return Status::Ok();
  }

  void Drop(size_t i, const std::string& kind, const std::string& reason) {
    ProposalReview& review = result_.reviews[i];
    if (!review.drop_reason.empty()) return;
    review.drop_reason = reason;
    std::lock_guard lock(stats_mutex_);
    ++result_.stats.dropped[kind];
  }

  void CountRequests(int64_t requests) {
    std::lock_guard lock(stats_mutex_);
    result_.stats.model_requests += requests;
  }

  Status WriteQuestions() {
    int64_t done = 0;
    const auto total = static_cast<int64_t>(proposals_.size());
    Status written = ForEachConcurrently(proposals_.size(), options_.concurrency, [&](size_t i) -> Status {
      ENVFORGE_RETURN_IF_ERROR(WriteOne(i));
      Progress("writer", done, total);
      return Status::Ok();
    });
    if (!written.ok()) return written;
    for (const ProposalReview& review : result_.reviews) result_.stats.written += review.written_prompt.empty() ? 0 : 1;
    return Status::Ok();
  }

  Status WriteOne(size_t i) {
    const search::SynthQuestion& proposal = proposals_[i];
    const std::string header = "Proposal: " + proposal.id;
    const std::string prompt = FillTemplate(prompts_.question, {{"id", proposal.id},
                                                                {"hops", std::to_string(proposal.hops)},
                                                                {"chain", chains_[i]},
                                                                {"answer", proposal.key.answer},
                                                                {"clue_question", proposal.prompt},
                                                                {"forbidden", Quoted(ForbiddenNames(proposal))}});
    auto check = [&](const Json& object) -> std::string {
      if (!object.contains("question") || !object["question"].is_string()) return "it has no \"question\" string";
      const std::string question = object["question"].get<std::string>();
      if (search::NormalizeAnswer(question).size() < 12) return "the question is too short";
      if (question.size() > 4096) return "the question is longer than 4096 bytes";
      if (search::PromptNamesTheChain(proposal, question))
        return "the question names the answer or an entry of the chain; use none of " +
               Quoted(ForbiddenNames(proposal));
      return "";
    };
    ENVFORGE_ASSIGN_OR_RETURN(StageReply reply, AskForObject(writer_, header, prompt, options_,
                                                             DeriveSeed(options_.seed, "writer/" + proposal.id),
                                                             options_.format_retries, check));
    CountRequests(reply.requests);
    if (reply.refused) {
      Drop(i, "refused", "model refused: " + reply.problem);
    } else if (!reply.object) {
      Drop(i, "writer", "writer: " + reply.problem);
    } else {
      result_.reviews[i].written_prompt = (*reply.object)["question"].get<std::string>();
    }
    return Status::Ok();
  }

  // The written questions as tasks of a search environment, played by each answer agent once.
  Status RunAnswerAgents() {
    std::vector<search::SynthQuestion> written;
    std::map<std::string, size_t> index_of;
    for (size_t i = 0; i < proposals_.size(); ++i) {
      if (result_.reviews[i].written_prompt.empty()) continue;
      search::SynthQuestion question = proposals_[i];
      question.prompt = result_.reviews[i].written_prompt;
      index_of[question.id] = i;
      written.push_back(std::move(question));
    }
    if (written.empty()) return Status::Ok();
    const std::string envdb = (std::filesystem::path(work_dir_) / "answer_agents.envdb").string();
    sandbox::SynthBundleOptions bundle;
    bundle.name = "search_answer_agents";
    ENVFORGE_RETURN_IF_ERROR(
        sandbox::PackSynthesizedSearchEnvironment(written, synth_options_, corpus_path_, envdb, bundle));
    ENVFORGE_ASSIGN_OR_RETURN(auto manager, sandbox::SessionManager::Create(sandbox::ManagerOptions{}));
    ENVFORGE_ASSIGN_OR_RETURN(std::string env_id, manager->OpenEnvironment(envdb));
    std::vector<std::string> task_ids;
    for (const auto& question : written) task_ids.push_back(question.id);
    int64_t total = options_.answer_agents * static_cast<int64_t>(written.size());
    int64_t done = 0;
    for (int agent = 0; agent < options_.answer_agents; ++agent)
      ENVFORGE_RETURN_IF_ERROR(PlayAgent(*manager, env_id, task_ids, agent, index_of, done, total));
    return Status::Ok();
  }

  agents::RolloutOptions AgentOptions(int agent) const {
    agents::RolloutOptions episode;
    episode.n = 1;
    episode.first_sample = agent;
    episode.max_turns = options_.max_turns;
    episode.max_tokens_per_turn = options_.max_tokens_per_turn;
    episode.max_tokens = options_.max_turns * options_.max_tokens_per_turn;
    episode.system_prompt = kAnswerAgentPrompts[agent % 3];
    episode.sampling.temperature = kAnswerAgentTemperatures[agent % 3];
    episode.sampling.seed = DeriveSeed(options_.seed, "agent/" + std::to_string(agent));
    episode.concurrency = options_.concurrency;
    return episode;
  }

  // Answer agent `agent` plays each task once. A task whose episode ended infra_error (a flaky
  // model server, past the backend's own retries) is played once more; a second infra_error fails
  // the review.
  Status PlayAgent(sandbox::SessionManager& manager, const std::string& env_id, std::vector<std::string> task_ids,
                   int agent, const std::map<std::string, size_t>& index_of, int64_t& done, int64_t& total) {
    agents::RolloutOptions episode = AgentOptions(agent);
    episode.on_episode = [&](int64_t, int64_t) { Progress("answer", done, total); };
    for (int attempt = 0; !task_ids.empty(); ++attempt) {
      agents::RolloutRunner runner(manager, answerer_, episode);
      ENVFORGE_ASSIGN_OR_RETURN(std::vector<agents::TaskRollout> rollouts, runner.Run(env_id, task_ids));
      task_ids.clear();
      for (const agents::TaskRollout& rollout : rollouts) {
        for (const agents::EpisodeResult& result : rollout.episodes) {
          ++result_.stats.answer_episodes;
          if (result.outcome != agents::RolloutOutcome::kInfraError) {
            AddCandidate(index_of.at(rollout.task_id), agent, result);
          } else if (attempt == 0) {
            task_ids.push_back(rollout.task_id);
            ++result_.stats.answer_retries;
            ++total;
          } else {
            return UnavailableError("answer agent " + std::to_string(agent) + " on " + rollout.task_id +
                                    " failed twice: " + result.detail);
          }
        }
      }
    }
    return Status::Ok();
  }

  void AddCandidate(size_t i, int agent, const agents::EpisodeResult& result) {
    if (result.outcome != agents::RolloutOutcome::kSubmitted) return;
    ProposalReview& review = result_.reviews[i];
    ++review.answer_agents_submitted;
    if (result.passed) ++review.answer_agents_solved;
    const std::string normal = search::NormalizeAnswer(result.answer_text);
    for (AgentCandidate& candidate : review.candidates) {
      if (search::NormalizeAnswer(candidate.answer) != normal) continue;
      candidate.agents.push_back(agent);
      return;
    }
    review.candidates.push_back({result.answer_text, {agent}, result.passed, {}});
  }

  Status VerifyQuestions() {
    std::vector<size_t> pending;
    for (size_t i = 0; i < proposals_.size(); ++i)
      if (!result_.reviews[i].written_prompt.empty()) pending.push_back(i);
    const auto total = static_cast<int64_t>(pending.size()) * options_.verify_passes;
    int64_t done = 0;
    std::vector<std::mutex> locks(pending.size());
    return ForEachConcurrently(
        pending.size() * static_cast<size_t>(options_.verify_passes), options_.concurrency, [&](size_t job) -> Status {
          const size_t slot = job / static_cast<size_t>(options_.verify_passes);
          const auto pass = static_cast<int64_t>(job % static_cast<size_t>(options_.verify_passes));
          ENVFORGE_RETURN_IF_ERROR(VerifyOnce(pending[slot], pass, locks[slot]));
          Progress("verify", done, total);
          return Status::Ok();
        });
  }

  Status VerifyOnce(size_t i, int64_t pass, std::mutex& lock) {
    ProposalReview& review = result_.reviews[i];
    const search::SynthQuestion& proposal = proposals_[i];
    std::string candidates;
    for (const AgentCandidate& candidate : review.candidates) candidates += candidate.answer + "\n";
    const std::string header = "Question under review: " + proposal.id;
    const std::string prompt =
        FillTemplate(prompts_.verify, {{"id", proposal.id},
                                       {"question", review.written_prompt},
                                       {"answer", proposal.key.answer},
                                       {"evidence", chains_[i]},
                                       {"candidates", candidates.empty() ? "(none)\n" : candidates}});
    auto check = [](const Json& object) -> std::string {
      if (!object.contains("ground_truth")) return "it has no \"ground_truth\"";
      if (object.contains("candidates") && !object["candidates"].is_array()) return "\"candidates\" is not an array";
      return "";
    };
    ENVFORGE_ASSIGN_OR_RETURN(
        StageReply reply, AskForObject(writer_, header, prompt, options_,
                                       DeriveSeed(options_.seed, "verify/" + proposal.id + "/" + std::to_string(pass)),
                                       options_.format_retries, check));
    CountRequests(reply.requests);
    std::lock_guard guard(lock);
    if (reply.refused) {
      Drop(i, "refused", "model refused: " + reply.problem);
      return Status::Ok();
    }
    const Json verdict = reply.object.value_or(Json::object());
    review.ground_truth_verdicts.push_back(VerdictWord(verdict.value("ground_truth", Json())));
    for (AgentCandidate& candidate : review.candidates)
      candidate.verdicts.push_back(CandidateVerdict(verdict, candidate));
    return Status::Ok();
  }

  // The verifier's word on `candidate`: the entry whose answer normalises as it does.
  static std::string CandidateVerdict(const Json& verdict, const AgentCandidate& candidate) {
    if (!verdict.contains("candidates") || !verdict["candidates"].is_array()) return "unsure";
    const std::string normal = search::NormalizeAnswer(candidate.answer);
    for (const Json& entry : verdict["candidates"]) {
      if (!entry.is_object() || !entry.contains("answer") || !entry["answer"].is_string()) continue;
      if (search::NormalizeAnswer(entry["answer"].get<std::string>()) != normal) continue;
      return VerdictWord(entry.value("verdict", Json()));
    }
    return "unsure";
  }

  void Decide() {
    for (size_t i = 0; i < proposals_.size(); ++i) {
      ProposalReview& review = result_.reviews[i];
      if (!review.drop_reason.empty()) continue;
      const auto not_correct = std::find_if(review.ground_truth_verdicts.begin(), review.ground_truth_verdicts.end(),
                                            [](const std::string& word) { return word != "correct"; });
      if (not_correct != review.ground_truth_verdicts.end()) {
        Drop(i, "ground_truth", "ground truth not verified: the verifier said \"" + *not_correct + "\"");
        continue;
      }
      std::string unrefuted;
      for (const AgentCandidate& candidate : review.candidates) {
        if (candidate.solves) continue;
        for (const std::string& word : candidate.verdicts)
          if (word != "incorrect" && unrefuted.empty()) unrefuted = "\"" + candidate.answer + "\" (" + word + ")";
      }
      if (!unrefuted.empty()) {
        Drop(i, "ambiguous", "ambiguous: the wrong candidate " + unrefuted + " is not verifiably wrong");
        continue;
      }
      if (options_.require_unsolved && review.answer_agents_solved > 0) {
        Drop(i, "solved", "solved by " + std::to_string(review.answer_agents_solved) + " answer agent(s)");
        continue;
      }
      review.kept = true;
      result_.kept.push_back(KeptQuestion(i));
    }
    result_.stats.kept = static_cast<int64_t>(result_.kept.size());
  }

  search::SynthQuestion KeptQuestion(size_t i) const {
    const ProposalReview& review = result_.reviews[i];
    search::SynthQuestion question = proposals_[i];
    question.extra_knobs["clue_prompt"] = question.prompt;
    question.prompt = review.written_prompt;
    for (const AgentCandidate& candidate : review.candidates) {
      if (candidate.solves || question.distractors.size() >= search::kMaxDistractors) continue;
      const std::string normal = search::NormalizeAnswer(candidate.answer);
      const bool known = std::any_of(question.distractors.begin(), question.distractors.end(),
                                     [&](const std::string& d) { return search::NormalizeAnswer(d) == normal; });
      if (!known) question.distractors.push_back(candidate.answer);
    }
    question.extra_knobs["writer"] = writer_.info().model;
    question.extra_knobs["answer_agents"] = options_.answer_agents;
    question.extra_knobs["answer_agents_solved"] = review.answer_agents_solved;
    question.extra_knobs["verify_passes"] = options_.verify_passes;
    return question;
  }

  const std::vector<search::SynthQuestion>& proposals_;
  const search::QaSynthOptions& synth_options_;
  const std::string corpus_path_;
  inference::Backend& writer_;
  inference::Backend& answerer_;
  const SearchAgentOptions& options_;
  const Prompts prompts_;
  const std::string work_dir_;
  const std::function<void(const SearchAgentProgress&)> on_progress_;
  std::vector<std::string> chains_;
  SearchAgentResult result_;
  std::mutex stats_mutex_;
  std::mutex progress_mutex_;
};

}  // namespace

Json ToJson(const ProposalReview& review) {
  Json candidates = Json::array();
  for (const AgentCandidate& candidate : review.candidates) {
    candidates.push_back({{"answer", candidate.answer},
                          {"agents", candidate.agents},
                          {"solves", candidate.solves},
                          {"verdicts", candidate.verdicts}});
  }
  return {{"id", review.id},
          {"kept", review.kept},
          {"drop_reason", review.drop_reason},
          {"written_prompt", review.written_prompt},
          {"ground_truth_verdicts", review.ground_truth_verdicts},
          {"answer_agents_solved", review.answer_agents_solved},
          {"answer_agents_submitted", review.answer_agents_submitted},
          {"candidates", std::move(candidates)}};
}

Result<SearchAgentResult> ReviewWithAgents(const std::vector<search::SynthQuestion>& proposals,
                                           const search::QaSynthOptions& synth_options, const std::string& corpus_path,
                                           inference::Backend& writer, inference::Backend& answerer,
                                           const SearchAgentOptions& options, const std::string& work_dir,
                                           const std::function<void(const SearchAgentProgress&)>& on_progress) {
  ENVFORGE_RETURN_IF_ERROR(CheckOptions(options));
  ENVFORGE_ASSIGN_OR_RETURN(Prompts prompts, LoadPrompts(options.prompts_dir));
  Review review(proposals, synth_options, corpus_path, writer, answerer, options, std::move(prompts), work_dir,
                on_progress);
  return review.Run();
}

}  // namespace envforge::envsynth

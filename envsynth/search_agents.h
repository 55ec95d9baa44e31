// The model-backed stages of search question synthesis (`envforge search synth --backend SPEC`;
// issue 15), after DeepSeek-V3.2's search-agent pipeline: a question agent consolidates an
// explored chain of entities into a question, several answer agents with heterogeneous
// configurations answer it with the search tools, and a verification agent keeps the question only
// when its ground truth is verified and every wrong candidate is verifiably wrong.
//
// EXPLORATION is the offline walk of toolsets/search/qa_synth.h: from a long-tail entity along the
// corpus's links, `hops` deep, `breadth` wide, checked unique by search, with a solution path
// replayed through the session tools. Those PROPOSALS come in; the model stages below decide.
//
// 1. WRITER (data/prompts/search_question.md): the model gets the chain (each entry's title, the
//    link into it and the start of its text), the answer, the mechanically assembled clue question
//    and the names it must not use, and answers {"question": "..."}. A reply that is not that
//    object, or whose question names the answer, an alias or a title of the chain (the offline
//    synthesis's own check, search::PromptNamesTheChain), is answered in the same conversation
//    with what was wrong, at most format_retries times; then the proposal is dropped ("writer").
// 2. ANSWER AGENTS: the written questions are packed as a search environment (in work_dir) and
//    played by answer_agents agents through agents::RolloutRunner, one episode each, with the
//    search tools in sandboxed sessions. Agent k uses the k-th of three system prompts (careful,
//    quick, sceptical) and temperature 0.6 / 0.8 / 1.0 in turn; an episode that ends infra_error is
//    played once more (a second infra_error fails the review). A submitted answer is a
//    CANDIDATE; an agent that did not submit gives none. A candidate SOLVES the question when the
//    task's verdict (normalised exact match with aliases) passes.
// 3. VERIFIER (data/prompts/search_verify.md), verify_passes times with different seeds: the model
//    gets the question, the ground truth, the chain's entries as evidence and the distinct
//    candidates, and answers {"ground_truth": ..., "candidates": [{"answer", "verdict", "reason"}]}
//    with "correct" | "incorrect" | "unsure". A reply that is not that shape is asked again (as the
//    writer's); a pass still unreadable counts as "unsure" for everything.
// KEPT when, in every pass, the ground truth is "correct" and every candidate that does not solve
// the question is "incorrect" (a wrong candidate the verifier cannot refute means the question
// admits another answer: dropped, "ambiguous"); with require_unsolved (the paper's rule) also no
// candidate solved it. The model's verdict never replaces the exact-match verdict: it only drops.
// A kept question gets the written prompt; its verifiably wrong candidates join its distractors;
// its knobs add "writer" (the backend's model), "answer_agents", "answer_agents_solved",
// "verify_passes" and "clue_prompt" (the mechanical question).
//
// Errors (Status): the backend's infrastructure failures (Unavailable, DeadlineExceeded, DataLoss)
// and the sandbox's fail the review, so a run never keeps a question on an unanswered stage; a
// request the backend refuses (InvalidArgument, a context too long) drops that proposal.
//
// Thread safety: one review at a time per backend pair; the stages run up to `concurrency` model
// requests at once (Backend::Complete is thread-safe).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "inference/backend.h"
#include "toolsets/search/qa_synth.h"

namespace envforge::envsynth {

struct SearchAgentOptions {
  int answer_agents = 3;  // 1..16
  int verify_passes = 2;  // 1..8
  bool require_unsolved = false;
  int64_t format_retries = 1;          // writer and verifier replies asked again
  int64_t max_turns = 12;              // per answer-agent episode
  int64_t max_tokens_per_turn = 1024;  // per answer-agent turn
  int64_t max_tokens = 2048;           // per writer or verifier reply
  double temperature = 0.7;            // writer and verifier
  int64_t concurrency = 16;            // model requests (and episodes) at once
  uint64_t seed = 1;
  int64_t evidence_chars = 800;  // of each chain entry's text shown to the writer and the verifier
  std::string prompts_dir;       // empty: $ENVFORGE_SYNTH_PROMPTS, else the compiled-in prompts
};

// One candidate answer and what became of it.
struct AgentCandidate {
  std::string answer;                 // as submitted (the first agent's spelling of a normal form)
  std::vector<int> agents;            // the answer agents (0-based) that submitted it
  bool solves = false;                // the task's exact-match verdict passed
  std::vector<std::string> verdicts;  // the verifier's word per pass: correct, incorrect, unsure
};

// What the stages made of one proposal.
struct ProposalReview {
  std::string id;
  bool kept = false;
  // Why it was dropped: "writer: ...", "ground truth not verified: ...", "ambiguous: ...",
  // "solved by an answer agent", "model refused: ..."; empty when kept.
  std::string drop_reason;
  std::string written_prompt;                      // empty when the writer failed
  std::vector<std::string> ground_truth_verdicts;  // per pass
  std::vector<AgentCandidate> candidates;
  int answer_agents_solved = 0;
  int answer_agents_submitted = 0;
};

struct SearchAgentStats {
  int64_t proposals = 0;
  int64_t written = 0;
  int64_t kept = 0;
  std::map<std::string, int64_t> dropped;  // "writer", "ground_truth", "ambiguous", "solved", "refused"
  int64_t model_requests = 0;
  int64_t answer_episodes = 0;  // retries included
  int64_t answer_retries = 0;   // episodes played again after an infra_error
  double writer_seconds = 0;
  double answer_seconds = 0;
  double verify_seconds = 0;
};

struct SearchAgentResult {
  std::vector<search::SynthQuestion> kept;  // in proposal order, prompts rewritten
  std::vector<ProposalReview> reviews;      // one per proposal, in proposal order
  SearchAgentStats stats;
};

struct SearchAgentProgress {
  std::string stage;  // "writer", "answer", "verify"
  int64_t done = 0;
  int64_t total = 0;
};

// Runs the three stages over `proposals` (SynthesizeQuestions's output for `synth_options` over
// the corpus at `corpus_path`). `writer` writes and verifies, `answerer` plays the answer agents
// (the same backend, or another model). work_dir (must exist) receives the answer agents'
// environment. on_progress (may be null) is called from the calling thread or a stage's threads,
// serialised. Errors: InvalidArgument for options out of range; NotFound for a missing prompt in
// prompts_dir; the stage errors above.
Result<SearchAgentResult> ReviewWithAgents(
    const std::vector<search::SynthQuestion>& proposals, const search::QaSynthOptions& synth_options,
    const std::string& corpus_path, inference::Backend& writer, inference::Backend& answerer,
    const SearchAgentOptions& options, const std::string& work_dir,
    const std::function<void(const SearchAgentProgress&)>& on_progress = nullptr);

// {"id", "kept", "drop_reason", "written_prompt", "ground_truth_verdicts", "answer_agents_solved",
//  "answer_agents_submitted", "candidates": [{"answer", "agents", "solves", "verdicts"}]}
Json ToJson(const ProposalReview& review);

}  // namespace envforge::envsynth

// A second opinion on a search answer that the exact match rejected: a rubric judge (issue 15:
// "a rubric judge through a model backend as an option, never the only check"). agents/
// rubric_judge.h asks a model; this seam keeps the search layer free of inference.
//
// NEVER THE ONLY CHECK. JudgeAnswer asks the judge only about a NEAR MISS: a submission the exact
// match (answer_match.h) rejected whose normal form holds the normal form of the answer or of an
// alias as whole words ("helium gas" for "helium", "the element helium"), or is held by it as
// whole words of at least kMinNearMissLetters letters ("Curie" for "Marie Curie"), and is at most
// kMaxNearMissWords words long. Anything else fails without asking, so a judge that says yes to
// everything still passes no unrelated answer.
//
// A judged answer that the judge calls equivalent passes with score 1 and the reason "accepted by
// the rubric judge <name>"; one it calls different fails with "the rubric judge <name> found it
// different". The judge's own words never reach the verdict's reasons (they go back to the model
// and could name the answer).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "toolsets/search/answer_match.h"

namespace envforge::search {

inline constexpr int kMaxNearMissWords = 12;
inline constexpr int kMinNearMissLetters = 4;

struct JudgeOpinion {
  bool equivalent = false;
  std::string reason;  // the judge's words, for logs and reviews only
};

class AnswerJudge {
 public:
  virtual ~AnswerJudge() = default;
  // "model deepseek-chat via openai:https://..."; names the judge in verdicts.
  virtual std::string name() const = 0;
  // Whether `submitted` names what `key` names, as an answer to `question`. Thread-safe; may
  // block (a model call). Errors: the judge could not decide (its backend failed, its reply was
  // unreadable): callers answer infra_error, never a verdict.
  virtual Result<JudgeOpinion> Judge(std::string_view question, const AnswerKey& key, std::string_view submitted) = 0;
};

// The near-miss rule above.
bool IsNearMiss(std::string_view submitted, const AnswerKey& key);

// MatchAnswer, then (judge set, the match failed, a near miss) the judge's opinion. Errors: the
// judge's, with its name.
Result<AnswerVerdict> JudgeAnswer(std::string_view submitted, const AnswerKey& key, std::string_view question,
                                  AnswerJudge* judge);

}  // namespace envforge::search

// A rubric judge of search answers through a model backend (toolsets/search/answer_judge.h; issue
// 15): `--search-judge SPEC` on envforge rollout and envforge serve. The exact match stays the first
// check; the model is asked only about near misses (search::IsNearMiss), so it can turn "helium gas"
// into a pass for "helium" but never an unrelated answer.
//
// The model gets a rubric (equivalent: the same entity under another name, a spelling variant, or
// with descriptive words that do not change what it names; different: another, broader or narrower
// entity, or words that change the meaning), the question, the reference answer with its aliases
// and the answer to grade, and replies {"verdict": "equivalent" | "different", "reason": "..."}.
// With votes > 1 it is asked that many times (temperature 0.7, distinct seeds) and the majority
// decides; one vote is greedy. A reply that is not that object is asked again once; still
// unreadable, or a backend failure, is an error (the verdict is infra_error, never a fail).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "inference/backend.h"
#include "toolsets/search/answer_judge.h"

namespace envforge::agents {

struct RubricJudgeOptions {
  int votes = 1;  // odd, 1..9
  int64_t max_tokens = 512;
  uint64_t seed = 0;
};

// A judge owning `backend`. InvalidArgument for votes that are even or out of range.
Result<std::shared_ptr<search::AnswerJudge>> MakeRubricJudge(std::unique_ptr<inference::Backend> backend,
                                                             const RubricJudgeOptions& options = {});

}  // namespace envforge::agents

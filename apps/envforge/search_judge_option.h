// --search-judge SPEC, --search-judge-model NAME, --search-judge-votes N: the rubric judge of search
// answers (agents/rubric_judge.h) for the sessions of `envforge rollout` and `envforge serve`.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "apps/envforge/cli_args.h"
#include "base/status.h"
#include "toolsets/search/answer_judge.h"

namespace envforge::cli {

// The three options, under `section`.
std::vector<OptionDecl> SearchJudgeOptions(const std::string& section);

// InvalidArgument when --search-judge-model or --search-judge-votes is given without --search-judge
// (a usage check that opens nothing).
Status CheckSearchJudgeOptions(const ParsedArgs& parsed);

// Null without --search-judge. Errors: InvalidArgument for the model or votes options without
// --search-judge, votes out of range; the backend's open errors, naming --search-judge.
Result<std::shared_ptr<search::AnswerJudge>> SearchJudgeFrom(const ParsedArgs& parsed);

}  // namespace envforge::cli

#include "apps/envforge/search_judge_option.h"

#include "agents/rubric_judge.h"
#include "inference/backend.h"

namespace envforge::cli {

std::vector<OptionDecl> SearchJudgeOptions(const std::string& section) {
  return {{.name = "--search-judge",
           .metavar = "SPEC",
           .help = "search environments: a model (embedded:DIR, openai:URL, scripted:FILE.jsonl) judges answers the "
                   "exact match rejects that hold the answer's words (\"helium gas\" for \"helium\"); never the only "
                   "check",
           .section = section},
          {.name = "--search-judge-model",
           .metavar = "NAME",
           .help = "the judge's model name (sent to openai servers)",
           .section = section},
          {.name = "--search-judge-votes",
           .metavar = "N",
           .help = "judgements per answer, the majority decides (odd, 1..9)",
           .default_text = "1",
           .section = section}};
}

Status CheckSearchJudgeOptions(const ParsedArgs& parsed) {
  if (parsed.Given("--search-judge")) return Status::Ok();
  for (const char* flag : {"--search-judge-model", "--search-judge-votes"})
    if (parsed.Given(flag)) return InvalidArgumentError(std::string(flag) + " needs --search-judge");
  return Status::Ok();
}

Result<std::shared_ptr<search::AnswerJudge>> SearchJudgeFrom(const ParsedArgs& parsed) {
  ENVFORGE_RETURN_IF_ERROR(CheckSearchJudgeOptions(parsed));
  const auto spec = parsed.Option("--search-judge");
  if (!spec) return std::shared_ptr<search::AnswerJudge>();
  agents::RubricJudgeOptions options;
  ENVFORGE_ASSIGN_OR_RETURN(long long votes, parsed.IntOption("--search-judge-votes", 1, 9));
  options.votes = static_cast<int>(votes);
  inference::BackendOptions backend_options;
  backend_options.model_name = parsed.OptionOr("--search-judge-model");
  auto backend = inference::OpenBackend(*spec, backend_options);
  if (!backend.ok()) return backend.status().WithContext("--search-judge " + *spec);
  return agents::MakeRubricJudge(std::move(backend).value(), options);
}

}  // namespace envforge::cli

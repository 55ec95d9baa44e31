// envforge search synth: multi-hop questions synthesized offline from a corpus, packed as a search
// environment with the corpus inside (toolsets/search/qa_synth.h, sandbox/search_synth_bundle.h).
//
//   envforge search synth --corpus C.sqlite --questions N --hops A..B -o X.envdb [--seed S]
//                         [--breadth B] [--obfuscation quote|keywords|sparse] [--name NAME] [--json]
//
// With --backend SPEC the walks are proposals that a model reviews (envsynth/search_agents.h):
// --proposals M per hop count are walked, written as questions by the model, played by answer
// agents and verified; at most N per hop count are kept, and the summary says why the others
// were dropped (--reviews FILE writes every review as JSON lines).
//
// Progress on stderr (a line per kept question and every 100 walks); a summary on stdout. Exit 2
// for bad usage or input (a missing corpus, hops out of range, a corpus too small for what was
// asked), 3 for infrastructure failures (and when the review kept no question); nothing is written
// unless every question was made (the offline synthesis) or at least one was kept (a review).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "base/cleanup_registry.h"
#include "base/json.h"
#include "envsynth/search_agents.h"
#include "inference/backend.h"
#include "sandbox/search_synth_bundle.h"
#include "toolsets/search/qa_synth.h"

namespace envforge::cli {
namespace {

// "2..4" or "3" into [min, max].
Status ParseHops(const std::string& text, search::QaSynthOptions& options) {
  auto number = [&](const std::string& part, int& out) -> Status {
    if (part.empty() || part.size() > 2 || part.find_first_not_of("0123456789") != std::string::npos) {
      return InvalidArgumentError("envforge search synth: --hops must be A..B or A with 1 <= A <= B <= " +
                                  std::to_string(search::kMaxSynthHops) + ", got '" + text + "'");
    }
    out = std::stoi(part);
    return Status::Ok();
  };
  size_t dots = text.find("..");
  if (dots == std::string::npos) {
    ENVFORGE_RETURN_IF_ERROR(number(text, options.min_hops));
    options.max_hops = options.min_hops;
  } else {
    ENVFORGE_RETURN_IF_ERROR(number(text.substr(0, dots), options.min_hops));
    ENVFORGE_RETURN_IF_ERROR(number(text.substr(dots + 2), options.max_hops));
  }
  if (options.min_hops < 1 || options.max_hops > search::kMaxSynthHops || options.min_hops > options.max_hops) {
    return InvalidArgumentError("envforge search synth: --hops must be A..B or A with 1 <= A <= B <= " +
                                std::to_string(search::kMaxSynthHops) + ", got '" + text + "'");
  }
  return Status::Ok();
}

double PerMinute(int questions, double seconds) { return seconds > 0 ? 60.0 * questions / seconds : 0; }

Json SummaryJson(const std::string& output, const search::QaSynthResult& result, const search::QaSynthOptions& options,
                 double pack_seconds, double seconds) {
  Json by_hops = Json::object();
  for (const auto& [hops, count] : result.stats.questions_by_hops) {
    double hop_seconds = result.stats.seconds_by_hops.at(hops);
    by_hops[std::to_string(hops)] = {{"questions", count},
                                     {"walks", result.stats.attempts_by_hops.at(hops)},
                                     {"seconds", hop_seconds},
                                     {"questions_per_minute", PerMinute(count, hop_seconds)}};
  }
  return {{"output", output},
          {"questions", result.questions.size()},
          {"by_hops", std::move(by_hops)},
          {"seed", options.seed},
          {"breadth", options.breadth},
          {"obfuscation", search::ObfuscationName(options.obfuscation)},
          {"corpus",
           {{"documents", result.stats.documents},
            {"links", result.stats.links},
            {"load_seconds", result.stats.load_seconds}}},
          {"synth_seconds", result.stats.seconds},
          {"pack_seconds", pack_seconds},
          {"seconds", seconds},
          {"questions_per_minute", PerMinute(static_cast<int>(result.questions.size()), result.stats.seconds)}};
}

// The model review of --backend: its backends, options and what it made.
struct AgentReview {
  std::unique_ptr<inference::Backend> writer;
  std::unique_ptr<inference::Backend> answerer;  // null: the writer answers too
  envsynth::SearchAgentOptions options;
  int wanted_per_hop = 0;
  std::string reviews_path;
};

Result<std::unique_ptr<inference::Backend>> OpenNamedBackend(const std::string& flag, const std::string& spec,
                                                             const ParsedArgs& parsed) {
  inference::BackendOptions backend_options;
  backend_options.model_name = parsed.OptionOr("--model");
  backend_options.api_key_env = parsed.OptionOr("--api-key-env");
  auto backend = inference::OpenBackend(spec, backend_options);
  if (!backend.ok()) return backend.status().WithContext(flag + " " + spec);
  return std::move(backend).value();
}

Status ParseAgentReview(const ParsedArgs& parsed, search::QaSynthOptions& options, AgentReview& review) {
  const auto backend = parsed.Option("--backend");
  for (const char* flag : {"--answer-backend", "--proposals", "--answer-agents", "--verify-passes",
                           "--require-unsolved", "--reviews", "--model", "--api-key-env"}) {
    if (!backend && parsed.Given(flag))
      return InvalidArgumentError(std::string("envforge search synth: ") + flag + " needs --backend");
  }
  if (!backend) return Status::Ok();
  review.wanted_per_hop = options.questions;
  auto proposals_option = parsed.ComputedIntOption("--proposals", 2LL * options.questions, 1, 100'000);
  if (!proposals_option.ok()) return proposals_option.status();
  const int64_t proposals = *proposals_option;
  if (proposals < options.questions)
    return InvalidArgumentError("envforge search synth: --proposals (" + std::to_string(proposals) +
                                ") must be at least --questions (" + std::to_string(options.questions) + ")");
  options.questions = static_cast<int>(proposals);
  ENVFORGE_ASSIGN_OR_RETURN(int64_t agents, parsed.IntOption("--answer-agents", 1, 16));
  ENVFORGE_ASSIGN_OR_RETURN(int64_t passes, parsed.IntOption("--verify-passes", 1, 8));
  review.options.answer_agents = static_cast<int>(agents);
  review.options.verify_passes = static_cast<int>(passes);
  review.options.require_unsolved = parsed.Has("--require-unsolved");
  review.options.seed = options.seed;
  review.reviews_path = parsed.OptionOr("--reviews");
  ENVFORGE_ASSIGN_OR_RETURN(review.writer, OpenNamedBackend("--backend", *backend, parsed));
  if (auto answer_spec = parsed.Option("--answer-backend")) {
    ENVFORGE_ASSIGN_OR_RETURN(review.answerer, OpenNamedBackend("--answer-backend", *answer_spec, parsed));
  }
  return Status::Ok();
}

// At most wanted_per_hop of the kept questions per hop count, in order.
std::vector<search::SynthQuestion> FirstPerHop(std::vector<search::SynthQuestion> kept, int wanted_per_hop) {
  std::map<int, int> taken;
  std::vector<search::SynthQuestion> out;
  for (search::SynthQuestion& question : kept)
    if (taken[question.hops]++ < wanted_per_hop) out.push_back(std::move(question));
  return out;
}

// Every review as a JSON line, written to a temporary file renamed into place.
Status WriteReviews(const std::string& path, const std::vector<envsynth::ProposalReview>& reviews) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    for (const envsynth::ProposalReview& review : reviews) out << DumpJson(envsynth::ToJson(review)) << "\n";
    out.flush();
    if (!out) return InternalError("cannot write " + temporary);
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) return InternalError("cannot rename " + temporary + " to " + path + ": " + error.message());
  return Status::Ok();
}

Json ReviewJson(const envsynth::SearchAgentStats& stats, const AgentReview& review, size_t written) {
  return {{"proposals", stats.proposals},
          {"written", stats.written},
          {"kept", stats.kept},
          {"packed", written},
          {"dropped", stats.dropped},
          {"answer_agents", review.options.answer_agents},
          {"verify_passes", review.options.verify_passes},
          {"model_requests", stats.model_requests},
          {"answer_episodes", stats.answer_episodes},
          {"answer_retries", stats.answer_retries},
          {"writer_seconds", stats.writer_seconds},
          {"answer_seconds", stats.answer_seconds},
          {"verify_seconds", stats.verify_seconds}};
}

// Runs the review over the offline proposals; the kept questions replace them.
Result<Json> ReviewProposals(const std::string& corpus, const std::string& output,
                             const search::QaSynthOptions& options, AgentReview& review,
                             search::QaSynthResult& result) {
  const std::string work_dir = output + ".agents." + std::to_string(::getpid());
  std::error_code error;
  std::filesystem::create_directories(work_dir, error);
  if (error) return InternalError("cannot create " + work_dir + ": " + error.message());
  ScopedCleanupPath cleanup(work_dir, CleanupKind::kTree);
  inference::Backend& answerer = review.answerer ? *review.answerer : *review.writer;
  auto reviewed =
      envsynth::ReviewWithAgents(result.questions, options, corpus, *review.writer, answerer, review.options, work_dir,
                                 [](const envsynth::SearchAgentProgress& p) {
                                   std::fprintf(stderr, "review: %s %lld/%lld\n", p.stage.c_str(),
                                                static_cast<long long>(p.done), static_cast<long long>(p.total));
                                   std::fflush(stderr);
                                 });
  std::filesystem::remove_all(work_dir, error);
  if (!reviewed.ok()) return reviewed.status();
  if (!review.reviews_path.empty()) ENVFORGE_RETURN_IF_ERROR(WriteReviews(review.reviews_path, reviewed->reviews));
  if (reviewed->kept.empty())
    return UnavailableError("the review kept none of " + std::to_string(reviewed->stats.proposals) +
                            " proposals; nothing written (--reviews FILE says why each was dropped)");
  result.questions = FirstPerHop(std::move(reviewed->kept), review.wanted_per_hop);
  result.stats.questions_by_hops.clear();
  for (const search::SynthQuestion& question : result.questions) ++result.stats.questions_by_hops[question.hops];
  return ReviewJson(reviewed->stats, review, result.questions.size());
}

int SearchSynth(const ParsedArgs& parsed) {
  const std::string corpus = parsed.OptionOr("--corpus");
  const std::string output = parsed.OptionOr("-o");  // both required by the declaration
  search::QaSynthOptions options;
  auto questions = parsed.IntOption("--questions", 1, 100'000);
  if (!questions.ok()) return Fail(questions.status(), kExitUsage);
  options.questions = static_cast<int>(*questions);
  if (Status hops = ParseHops(parsed.OptionOr("--hops"), options); !hops.ok()) return Fail(hops, kExitUsage);
  auto breadth = parsed.IntOption("--breadth", 1, search::kMaxSynthBreadth);
  if (!breadth.ok()) return Fail(breadth.status(), kExitUsage);
  options.breadth = static_cast<int>(*breadth);
  auto seed = parsed.IntOption("--seed", 0, INT64_MAX);
  if (!seed.ok()) return Fail(seed.status(), kExitUsage);
  options.seed = static_cast<uint64_t>(*seed);
  if (auto level = search::ObfuscationLevel(parsed.OptionOr("--obfuscation")); level.ok()) {
    options.obfuscation = *level;
  } else {
    return Fail(level.status(), kExitUsage);
  }

  AgentReview review;
  if (Status status = ParseAgentReview(parsed, options, review); !status.ok())
    return Fail(status, status.code() == StatusCode::kInvalidArgument ? kExitUsage : ExitCodeFor(status));

  InstallCleanupSignalHandlers();
  const auto start = std::chrono::steady_clock::now();
  auto result = search::SynthesizeQuestions(corpus, options, [](const search::QaSynthProgress& progress) {
    std::fprintf(stderr, "synth: %d hop(s): %d/%d questions, %lld walks, %.1f s\n", progress.hops, progress.made,
                 progress.wanted, static_cast<long long>(progress.attempts), progress.seconds);
    std::fflush(stderr);
  });
  if (!result.ok()) return Fail(result.status(), ExitCodeFor(result.status()));
  Json review_summary;  // null without --backend
  if (review.writer) {
    auto reviewed = ReviewProposals(corpus, output, options, review, *result);
    if (!reviewed.ok()) return Fail(reviewed.status(), kExitInfra);
    review_summary = std::move(*reviewed);
  }
  const auto pack_start = std::chrono::steady_clock::now();
  sandbox::SynthBundleOptions bundle_options;
  bundle_options.name = parsed.Option("--name").value_or(bundle_options.name);
  bundle_options.provenance = {{"seed", options.seed},
                               {"breadth", options.breadth},
                               {"obfuscation", search::ObfuscationName(options.obfuscation)},
                               {"hops", std::to_string(options.min_hops) + ".." + std::to_string(options.max_hops)}};
  if (review.writer) {
    bundle_options.provenance["model"] = review.writer->info().model;
    bundle_options.provenance["backend"] = parsed.OptionOr("--backend");
    bundle_options.provenance["review"] = review_summary;
  }
  Status packed = sandbox::PackSynthesizedSearchEnvironment(result->questions, options, corpus, output, bundle_options);
  if (!packed.ok()) return Fail(packed, ExitCodeFor(packed));
  const auto now = std::chrono::steady_clock::now();
  const double pack_seconds = std::chrono::duration<double>(now - pack_start).count();
  const double seconds = std::chrono::duration<double>(now - start).count();
  if (parsed.Has("--json")) {
    Json summary = SummaryJson(output, *result, options, pack_seconds, seconds);
    if (review.writer) summary["review"] = review_summary;
    std::printf("%s\n", summary.dump(2).c_str());
    return kExitOk;
  }
  std::printf("synthesized %zu questions from %lld documents, %lld links -> %s\n", result->questions.size(),
              static_cast<long long>(result->stats.documents), static_cast<long long>(result->stats.links),
              output.c_str());
  std::printf("  %-5s %9s %7s %9s %13s\n", "hops", "questions", "walks", "seconds", "questions/min");
  for (const auto& [hops, count] : result->stats.questions_by_hops) {
    double hop_seconds = result->stats.seconds_by_hops.at(hops);
    std::printf("  %-5d %9d %7lld %9.2f %13.1f\n", hops, count,
                static_cast<long long>(result->stats.attempts_by_hops.at(hops)), hop_seconds,
                PerMinute(count, hop_seconds));
  }
  std::printf("  corpus load %.2f s, packing %.2f s, total %.2f s\n", result->stats.load_seconds, pack_seconds,
              seconds);
  if (review.writer) {
    std::printf("review: %lld proposals, %lld written, %lld kept (%zu packed)",
                review_summary["proposals"].get<long long>(), review_summary["written"].get<long long>(),
                review_summary["kept"].get<long long>(), result->questions.size());
    for (const auto& [reason, count] : review_summary["dropped"].items())
      std::printf("; dropped %s %lld", reason.c_str(), count.get<long long>());
    std::printf("\n  %lld model requests, %lld answer episodes; writer %.1f s, answer agents %.1f s, verifier %.1f s\n",
                review_summary["model_requests"].get<long long>(), review_summary["answer_episodes"].get<long long>(),
                review_summary["writer_seconds"].get<double>(), review_summary["answer_seconds"].get<double>(),
                review_summary["verify_seconds"].get<double>());
  }
  return kExitOk;
}

}  // namespace

std::vector<Command> SearchSynthCommands() {
  return {
      {{.name = "search synth",
        .summary = "multi-hop questions about long-tail entities of a corpus, unique by search, with solution paths; "
                   "packed as a search environment with the corpus inside",
        .details =
            "N questions for each hop count from A to B, each a chain of documents walked along the corpus's links "
            "from a long-tail entity: the question gives clues (words of the first document's text, the relations "
            "of the links), never a title; its answer is the last document's title, checked unique by search, with "
            "aliases from the corpus and distractors in the task's knobs; each keeps its solution path (search, "
            "then opens), replayed through the session tools before it is kept. Same seed, same bundle.\n"
            "Progress on stderr. Exit 2 for bad usage or input (a missing corpus, hops out of range, a corpus too "
            "small for what was asked), 3 for infrastructure; nothing is written unless every question was made.",
        .options =
            {{.name = "--corpus",
              .metavar = "CORPUS.sqlite",
              .help = "the corpus (envforge search corpus build)",
              .required = true},
             {.name = "-o", .metavar = "X.envdb", .help = "the bundle written", .required = true},
             {.name = "--questions", .metavar = "N", .help = "questions per hop count", .default_text = "10"},
             {.name = "--hops", .metavar = "A..B", .help = "hop counts, 1..4 (\"3\" is 3..3)", .default_text = "1"},
             {.name = "--seed", .metavar = "S", .help = "the synthesis seed", .default_text = "1"},
             {.name = "--breadth",
              .metavar = "B",
              .help = "link targets considered per step (at most 50)",
              .default_text = "3"},
             {.name = "--obfuscation",
              .metavar = "quote|keywords|sparse",
              .help = "how clues cite the text",
              .default_text = "keywords"},
             {.name = "--name", .metavar = "NAME", .help = "the environment's name"},
             JsonOption("the summary as JSON (questions per hop count, seconds, questions per minute)"),
             {.name = "--backend",
              .metavar = "SPEC",
              .help = "a model reviews the walks: writes each question, verifies its answer against the answer "
                      "agents' (embedded:DIR, openai:URL, scripted:FILE.jsonl)",
              .section = "model review (DeepSeek-V3.2's search-agent pipeline)"},
             {.name = "--answer-backend",
              .metavar = "SPEC",
              .help = "the answer agents' model",
              .default_text = "--backend",
              .section = "model review (DeepSeek-V3.2's search-agent pipeline)",
              .computed = true},
             {.name = "--proposals",
              .metavar = "M",
              .help = "walks reviewed per hop count (at least --questions)",
              .default_text = "2 x --questions",
              .section = "model review (DeepSeek-V3.2's search-agent pipeline)",
              .computed = true},
             {.name = "--answer-agents",
              .metavar = "K",
              .help = "answer agents per question, each with its own system prompt and temperature (1..16)",
              .default_text = "3",
              .section = "model review (DeepSeek-V3.2's search-agent pipeline)"},
             {.name = "--verify-passes",
              .metavar = "P",
              .help = "verification passes; a decision must hold in each (1..8)",
              .default_text = "2",
              .section = "model review (DeepSeek-V3.2's search-agent pipeline)"},
             {.name = "--require-unsolved",
              .help = "keep only questions no answer agent solved (the paper's rule)",
              .section = "model review (DeepSeek-V3.2's search-agent pipeline)"},
             {.name = "--reviews",
              .metavar = "FILE.jsonl",
              .help = "every proposal's review as a JSON line: the written question, candidates, verdicts, why dropped",
              .section = "model review (DeepSeek-V3.2's search-agent pipeline)"},
             {.name = "--model",
              .metavar = "NAME",
              .help = "the model name sent to openai backends",
              .section = "model review (DeepSeek-V3.2's search-agent pipeline)"},
             {.name = "--api-key-env",
              .metavar = "VAR",
              .help = "the environment variable holding an openai API key",
              .section = "model review (DeepSeek-V3.2's search-agent pipeline)"}}},
       SearchSynth},
  };
}

}  // namespace envforge::cli

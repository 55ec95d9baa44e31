// envforge search synth: multi-hop questions synthesized offline from a corpus, packed as a search
// environment with the corpus inside (toolsets/search/qa_synth.h, sandbox/search_synth_bundle.h).
//
//   envforge search synth --corpus C.sqlite --questions N --hops A..B -o X.envdb [--seed S]
//                         [--breadth B] [--obfuscation quote|keywords|sparse] [--name NAME] [--json]
//
// Progress on stderr (a line per kept question and every 100 walks); a summary on stdout. Exit 2
// for bad usage or input (a missing corpus, hops out of range, a corpus too small for what was
// asked), 3 for infrastructure failures; nothing is written unless every question was made.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "base/cleanup_registry.h"
#include "base/json.h"
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

  InstallCleanupSignalHandlers();
  const auto start = std::chrono::steady_clock::now();
  auto result = search::SynthesizeQuestions(corpus, options, [](const search::QaSynthProgress& progress) {
    std::fprintf(stderr, "synth: %d hop(s): %d/%d questions, %lld walks, %.1f s\n", progress.hops, progress.made,
                 progress.wanted, static_cast<long long>(progress.attempts), progress.seconds);
    std::fflush(stderr);
  });
  if (!result.ok()) return Fail(result.status(), ExitCodeFor(result.status()));
  const auto pack_start = std::chrono::steady_clock::now();
  sandbox::SynthBundleOptions bundle_options;
  bundle_options.name = parsed.Option("--name").value_or(bundle_options.name);
  bundle_options.provenance = {{"seed", options.seed},
                               {"breadth", options.breadth},
                               {"obfuscation", search::ObfuscationName(options.obfuscation)},
                               {"hops", std::to_string(options.min_hops) + ".." + std::to_string(options.max_hops)}};
  Status packed = sandbox::PackSynthesizedSearchEnvironment(result->questions, options, corpus, output, bundle_options);
  if (!packed.ok()) return Fail(packed, ExitCodeFor(packed));
  const auto now = std::chrono::steady_clock::now();
  const double pack_seconds = std::chrono::duration<double>(now - pack_start).count();
  const double seconds = std::chrono::duration<double>(now - start).count();
  if (parsed.Has("--json")) {
    std::printf("%s\n", SummaryJson(output, *result, options, pack_seconds, seconds).dump(2).c_str());
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
             JsonOption("the summary as JSON (questions per hop count, seconds, questions per minute)")}},
       SearchSynth},
  };
}

}  // namespace envforge::cli

// envforge search: the offline search corpus and backend from the command line.
//
//   envforge search corpus build --from debian -o CORPUS.sqlite [--sources a,b,...] [--json]
//                                [--dictd-dir D] [--wordnet-dir D] [--iso-codes-dir D] [--python-doc-dir D]
//   envforge search corpus info CORPUS.sqlite [--json]
//   envforge search query CORPUS.sqlite TEXT... [--top-k N] [--json]
//   envforge search open CORPUS.sqlite DOC_ID_OR_URL [--json]
//   envforge search synth ... (cmd_search_synth.cc)
//
// Words after "--" are positional, so a query may start with '-'. --help anywhere prints the
// usage. Exit codes as in commands.h: 2 for bad usage or input (a missing source package
// included), 3 for infrastructure failures.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "base/cleanup_registry.h"
#include "base/json.h"
#include "toolsets/search/debian_corpus.h"
#include "toolsets/search/offline_backend.h"

namespace envforge::cli {
namespace {

constexpr const char* kSearchUsage = R"(usage:
  envforge search corpus build --from debian -o CORPUS.sqlite [--sources a,b,...] [--json]
                                  build an offline search corpus from Debian packages installed
                                  by scripts/setup.sh; sources (default all): gcide, foldoc,
                                  jargon, elements, wordnet, iso-codes, python-doc. Progress per
                                  source on stderr; a summary of documents, links, size and
                                  seconds per source on stdout; --dictd-dir, --wordnet-dir,
                                  --iso-codes-dir and --python-doc-dir read the sources from
                                  elsewhere than /usr/share (tests/fixtures/search, say)
  envforge search corpus info CORPUS.sqlite [--json]
                                  what a corpus holds, per source
  envforge search query CORPUS.sqlite TEXT... [--top-k N] [--json]
                                  the N best hits (default 10, at most 100): words, "quoted
                                  phrases" and prefix* terms; nothing else is syntax
  envforge search open CORPUS.sqlite DOC_ID_OR_URL [--json]
                                  a whole document with its links
  envforge search synth --corpus CORPUS.sqlite --questions N --hops A..B -o X.envdb [--seed S] ...
                                  multi-hop questions synthesized from the corpus, packed as a
                                  search environment (envforge search synth --help)
  Words after "--" are positional (a query starting with '-').
)";

// --help or -h before any "--" (after it they are words of a query).
bool WantsHelp(const std::vector<std::string>& args) {
  auto end = std::find(args.begin(), args.end(), "--");
  return std::any_of(args.begin(), end, [](const std::string& a) { return a == "--help" || a == "-h"; });
}

// ParseArgs, with everything after a "--" taken as positional words.
Result<ParsedArgs> ParseWithSeparator(const std::string& command, const std::vector<std::string>& args, ArgSpec spec) {
  auto separator = std::find(args.begin(), args.end(), "--");
  const std::vector<std::string> before(args.begin(), separator);
  const std::vector<std::string> after(separator == args.end() ? args.end() : separator + 1, args.end());
  const size_t max_positional = spec.max_positional;
  spec.min_positional = spec.min_positional > after.size() ? spec.min_positional - after.size() : 0;
  ENVFORGE_ASSIGN_OR_RETURN(ParsedArgs parsed, ParseArgs(command, before, spec));
  parsed.positional.insert(parsed.positional.end(), after.begin(), after.end());
  if (parsed.positional.size() > max_positional) {
    return InvalidArgumentError(command + ": unexpected argument '" + parsed.positional[max_positional] + "'");
  }
  return parsed;
}

int FailWith(const Status& status) { return Fail(status, ExitCodeFor(status)); }

double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

int64_t FileBytes(const std::string& path) {
  struct stat info{};
  return ::stat(path.c_str(), &info) == 0 ? static_cast<int64_t>(info.st_size) : 0;
}

void PrintCorpusSummary(const std::string& path, const search::CorpusInfo& info) {
  std::printf("corpus %s: %lld documents, %lld links, %.1f MiB of text, %.1f MiB on disk (built %s)\n", path.c_str(),
              static_cast<long long>(info.documents), static_cast<long long>(info.links), MiB(info.bytes),
              MiB(FileBytes(path)), info.built_at.c_str());
  std::printf("  %-12s %10s %10s %10s %9s\n", "source", "documents", "links", "text MiB", "seconds");
  for (const search::SourceStats& source : info.sources) {
    std::printf("  %-12s %10lld %10lld %10.1f %9.1f\n", source.name.c_str(), static_cast<long long>(source.documents),
                static_cast<long long>(source.links), MiB(source.bytes), source.seconds);
  }
}

Json CorpusJson(const std::string& path, const search::CorpusInfo& info) {
  Json json = search::ToJson(info);
  json["path"] = path;
  json["file_bytes"] = FileBytes(path);
  return json;
}

int BuildCorpus(const std::vector<std::string>& args) {
  auto parsed = ParseArgs("envforge search corpus build", args,
                          {.value_options = {"--from", "-o", "--sources", "--dictd-dir", "--wordnet-dir",
                                             "--iso-codes-dir", "--python-doc-dir"},
                           .flags = {"--json"}});
  if (!parsed.ok()) return Fail(parsed.status(), kExitUsage);
  const std::string from = parsed->OptionOr("--from", "");
  if (from != "debian") {
    return Fail(InvalidArgumentError("envforge search corpus build: --from must be 'debian'" +
                                     (from.empty() ? std::string(" (missing)") : ", got '" + from + "'")),
                kExitUsage);
  }
  const std::string output = parsed->OptionOr("-o", "");
  if (output.empty()) return Fail(InvalidArgumentError("envforge search corpus build: -o CORPUS.sqlite is required"), kExitUsage);
  search::DebianCorpusOptions options;
  options.sources = SplitCommas(parsed->OptionOr("--sources", ""));
  options.paths.dictd_dir = parsed->OptionOr("--dictd-dir", options.paths.dictd_dir);
  options.paths.wordnet_dir = parsed->OptionOr("--wordnet-dir", options.paths.wordnet_dir);
  options.paths.iso_codes_dir = parsed->OptionOr("--iso-codes-dir", options.paths.iso_codes_dir);
  options.paths.python_doc_dir = parsed->OptionOr("--python-doc-dir", options.paths.python_doc_dir);
  if (parsed->Option("--sources") && options.sources.empty()) {
    return Fail(InvalidArgumentError("envforge search corpus build: --sources is empty"), kExitUsage);
  }
  // Progress (progress.h) wants a total up front; a source's document count is known only once
  // it is read, so these are plain lines: the start, every kProgressEvery documents, the end.
  options.on_progress = [](const search::SourceStats& stats, bool done) {
    if (stats.documents == 0 && !done) {
      std::fprintf(stderr, "corpus: %s: reading\n", stats.name.c_str());
    } else {
      std::fprintf(stderr, "corpus: %s: %s%lld documents, %.1f MiB of text, %.1f s\n", stats.name.c_str(), done ? "done, " : "",
                   static_cast<long long>(stats.documents), MiB(stats.bytes), stats.seconds);
    }
    std::fflush(stderr);
  };
  InstallCleanupSignalHandlers();
  const auto start = std::chrono::steady_clock::now();
  Result<search::CorpusInfo> info = search::BuildDebianCorpus(output, options);
  if (!info.ok()) return FailWith(info.status());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (parsed->Has("--json")) {
    Json json = CorpusJson(output, *info);
    json["seconds"] = seconds;
    std::printf("%s\n", json.dump(2).c_str());
    return kExitOk;
  }
  PrintCorpusSummary(output, *info);
  std::printf("  built in %.1f s, of which %.1f s for the indexes\n", seconds, info->index_seconds);
  return kExitOk;
}

int ShowCorpusInfo(const std::vector<std::string>& args) {
  auto parsed = ParseArgs("envforge search corpus info", args, {.flags = {"--json"}, .min_positional = 1, .max_positional = 1});
  if (!parsed.ok()) return Fail(parsed.status(), kExitUsage);
  const std::string& path = parsed->positional[0];
  auto reader = search::CorpusReader::Open(path);
  if (!reader.ok()) return FailWith(reader.status());
  auto info = (*reader)->Info();
  if (!info.ok()) return FailWith(info.status());
  if (parsed->Has("--json")) {
    std::printf("%s\n", CorpusJson(path, *info).dump(2).c_str());
  } else {
    PrintCorpusSummary(path, *info);
  }
  return kExitOk;
}

int RunCorpus(const std::vector<std::string>& args) {
  const std::string verb = args.empty() ? "" : args[0];
  const std::vector<std::string> rest(args.begin() + (args.empty() ? 0 : 1), args.end());
  if (verb == "build") return BuildCorpus(rest);
  if (verb == "info") return ShowCorpusInfo(rest);
  return Fail(InvalidArgumentError("envforge search corpus: expected build or info" + (verb.empty() ? std::string() : ", got '" + verb + "'")),
              kExitUsage);
}

std::string JoinWords(const std::vector<std::string>& words, size_t first) {
  std::string joined;
  for (size_t i = first; i < words.size(); ++i) joined += (i == first ? "" : " ") + words[i];
  return joined;
}

int Query(const std::vector<std::string>& args) {
  auto parsed = ParseWithSeparator("envforge search query", args,
                                   {.value_options = {"--top-k"}, .flags = {"--json"}, .min_positional = 2, .max_positional = 64});
  if (!parsed.ok()) return Fail(parsed.status(), kExitUsage);
  auto top_k = parsed->IntOption("--top-k", 10, 1, search::OfflineSearchBackend::kMaxTopK);
  if (!top_k.ok()) return Fail(top_k.status(), kExitUsage);
  auto backend = search::OfflineSearchBackend::OpenCorpus(parsed->positional[0]);
  if (!backend.ok()) return FailWith(backend.status());
  const auto start = std::chrono::steady_clock::now();
  auto page = (*backend)->Search({JoinWords(parsed->positional, 1), static_cast<int>(*top_k)});
  if (!page.ok()) return FailWith(page.status());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (parsed->Has("--json")) {
    Json json = search::ToJson(*page);
    json["ms"] = ms;
    std::printf("%s\n", json.dump(2, ' ', false, Json::error_handler_t::replace).c_str());
    return kExitOk;
  }
  for (size_t i = 0; i < page->hits.size(); ++i) {
    const search::SearchHit& hit = page->hits[i];
    std::string snippet = hit.snippet;
    std::replace(snippet.begin(), snippet.end(), '\n', ' ');
    std::printf("%2zu. %s  [%s]  score %.3f\n    %s\n    %s\n", i + 1, hit.title.c_str(), hit.doc_id.c_str(), hit.score,
                hit.url.c_str(), snippet.c_str());
  }
  std::printf("(%zu hits in %.1f ms)\n", page->hits.size(), ms);
  return kExitOk;
}

int Open(const std::vector<std::string>& args) {
  auto parsed = ParseWithSeparator("envforge search open", args, {.flags = {"--json"}, .min_positional = 2, .max_positional = 2});
  if (!parsed.ok()) return Fail(parsed.status(), kExitUsage);
  auto backend = search::OfflineSearchBackend::OpenCorpus(parsed->positional[0]);
  if (!backend.ok()) return FailWith(backend.status());
  auto document = (*backend)->Open(parsed->positional[1]);
  if (!document.ok()) return FailWith(document.status());
  if (parsed->Has("--json")) {
    std::printf("%s\n", search::ToJson(*document).dump(2, ' ', false, Json::error_handler_t::replace).c_str());
    return kExitOk;
  }
  std::printf("%s\n  id      %s\n  url     %s\n  source  %s\n\n%s\n", document->title.c_str(), document->doc_id.c_str(),
              document->url.c_str(), document->source.c_str(), document->text.c_str());
  if (!document->links.empty()) std::printf("\nlinks (%zu):\n", document->links.size());
  for (const search::DocumentLink& link : document->links) {
    std::printf("  %s  ->  %s\n", link.anchor.c_str(), link.target.c_str());
  }
  return kExitOk;
}

}  // namespace

int RunSearchCommand(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fputs(kSearchUsage, stderr);
    return kExitUsage;
  }
  if (args[0] == "synth") return RunSearchSynthCommand(std::vector<std::string>(args.begin() + 1, args.end()));
  if (WantsHelp(args)) {
    std::fputs(kSearchUsage, stdout);
    return kExitOk;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "corpus") return RunCorpus(rest);
  if (args[0] == "query") return Query(rest);
  if (args[0] == "open") return Open(rest);
  if (args[0] == "synth") return RunSearchSynthCommand(rest);
  return Fail(InvalidArgumentError("envforge search: unknown sub-command '" + args[0] + "' (corpus, query, open or synth; see --help)"),
              kExitUsage);
}

}  // namespace envforge::cli

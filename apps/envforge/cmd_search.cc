// envforge search: the offline search corpus and backend from the command line.
//
//   envforge search corpus build --from debian -o CORPUS.sqlite [--sources a,b,...] [--json]
//                                [--dictd-dir D] [--wordnet-dir D] [--iso-codes-dir D] [--python-doc-dir D]
//   envforge search corpus info CORPUS.sqlite [--json]
//   envforge search query CORPUS.sqlite TEXT... [--top-k N] [--json]
//   envforge search open CORPUS.sqlite DOC_ID_OR_URL [--json]
//   envforge search synth ... (cmd_search_synth.cc)
//
// Words after "--" are positional, so a query may start with '-'. --help before a "--" prints the
// command's help. Exit codes as in commands.h: 2 for bad usage or input (a missing source package
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

int FailWith(const Status& status) { return Fail(status, ExitCodeFor(status)); }

double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

int64_t FileBytes(const std::string& path) {
  struct stat info {};
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

int BuildCorpus(const ParsedArgs& parsed) {
  const std::string from = parsed.OptionOr("--from");
  if (from != "debian") {
    return Fail(InvalidArgumentError("envforge search corpus build: --from must be 'debian'" +
                                     (from.empty() ? std::string(" (missing)") : ", got '" + from + "'")),
                kExitUsage);
  }
  const std::string output = parsed.OptionOr("-o");  // required by the declaration
  search::DebianCorpusOptions options;
  options.sources = SplitCommas(parsed.OptionOr("--sources"));
  options.paths.dictd_dir = parsed.Option("--dictd-dir").value_or(options.paths.dictd_dir);
  options.paths.wordnet_dir = parsed.Option("--wordnet-dir").value_or(options.paths.wordnet_dir);
  options.paths.iso_codes_dir = parsed.Option("--iso-codes-dir").value_or(options.paths.iso_codes_dir);
  options.paths.python_doc_dir = parsed.Option("--python-doc-dir").value_or(options.paths.python_doc_dir);
  if (parsed.Option("--sources") && options.sources.empty()) {
    return Fail(InvalidArgumentError("envforge search corpus build: --sources is empty"), kExitUsage);
  }
  // Progress (progress.h) wants a total up front; a source's document count is known only once
  // it is read, so these are plain lines: the start, every kProgressEvery documents, the end.
  options.on_progress = [](const search::SourceStats& stats, bool done) {
    if (stats.documents == 0 && !done) {
      std::fprintf(stderr, "corpus: %s: reading\n", stats.name.c_str());
    } else {
      std::fprintf(stderr, "corpus: %s: %s%lld documents, %.1f MiB of text, %.1f s\n", stats.name.c_str(),
                   done ? "done, " : "", static_cast<long long>(stats.documents), MiB(stats.bytes), stats.seconds);
    }
    std::fflush(stderr);
  };
  InstallCleanupSignalHandlers();
  const auto start = std::chrono::steady_clock::now();
  Result<search::CorpusInfo> info = search::BuildDebianCorpus(output, options);
  if (!info.ok()) return FailWith(info.status());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (parsed.Has("--json")) {
    Json json = CorpusJson(output, *info);
    json["seconds"] = seconds;
    std::printf("%s\n", json.dump(2).c_str());
    return kExitOk;
  }
  PrintCorpusSummary(output, *info);
  std::printf("  built in %.1f s, of which %.1f s for the indexes\n", seconds, info->index_seconds);
  return kExitOk;
}

int ShowCorpusInfo(const ParsedArgs& parsed) {
  const std::string& path = parsed.positional[0];
  auto reader = search::CorpusReader::Open(path);
  if (!reader.ok()) return FailWith(reader.status());
  auto info = (*reader)->Info();
  if (!info.ok()) return FailWith(info.status());
  if (parsed.Has("--json")) {
    std::printf("%s\n", CorpusJson(path, *info).dump(2).c_str());
  } else {
    PrintCorpusSummary(path, *info);
  }
  return kExitOk;
}

std::string JoinWords(const std::vector<std::string>& words, size_t first) {
  std::string joined;
  for (size_t i = first; i < words.size(); ++i) joined += (i == first ? "" : " ") + words[i];
  return joined;
}

int Query(const ParsedArgs& parsed) {
  auto top_k = parsed.IntOption("--top-k", 1, search::OfflineSearchBackend::kMaxTopK);
  if (!top_k.ok()) return Fail(top_k.status(), kExitUsage);
  auto backend = search::OfflineSearchBackend::OpenCorpus(parsed.positional[0]);
  if (!backend.ok()) return FailWith(backend.status());
  const auto start = std::chrono::steady_clock::now();
  auto page = (*backend)->Search({JoinWords(parsed.positional, 1), static_cast<int>(*top_k)});
  if (!page.ok()) return FailWith(page.status());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (parsed.Has("--json")) {
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

int Open(const ParsedArgs& parsed) {
  auto backend = search::OfflineSearchBackend::OpenCorpus(parsed.positional[0]);
  if (!backend.ok()) return FailWith(backend.status());
  auto document = (*backend)->Open(parsed.positional[1]);
  if (!document.ok()) return FailWith(document.status());
  if (parsed.Has("--json")) {
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

std::vector<Command> SearchCommands() {
  const OptionDecl dir = {.metavar = "D",
                          .help = "read that source from D instead of /usr/share (tests/fixtures/search, say)"};
  auto source_dir = [&dir](const char* name) {
    OptionDecl option = dir;
    option.name = name;
    return option;
  };
  return {
      {{.name = "search corpus build",
        .summary = "build an offline search corpus (SQLite FTS5) from Debian packages installed by scripts/setup.sh",
        .details =
            "Progress per source on stderr; a summary of documents, links, size and seconds per source on stdout.",
        .options = {{.name = "--from", .metavar = "debian", .help = "where the documents come from", .required = true},
                    {.name = "-o", .metavar = "CORPUS.sqlite", .help = "the corpus written", .required = true},
                    {.name = "--sources",
                     .metavar = "a,b,...",
                     .help = "gcide, foldoc, jargon, elements, wordnet, iso-codes, python-doc",
                     .default_text = "all",
                     .computed = true},
                    source_dir("--dictd-dir"),
                    source_dir("--wordnet-dir"),
                    source_dir("--iso-codes-dir"),
                    source_dir("--python-doc-dir"),
                    JsonOption("the summary as JSON")}},
       BuildCorpus},
      {{.name = "search corpus info",
        .positionals = "CORPUS.sqlite",
        .summary = "what a corpus holds, per source",
        .options = {JsonOption("the summary as JSON")},
        .min_positional = 1,
        .max_positional = 1},
       ShowCorpusInfo},
      {{.name = "search query",
        .positionals = "CORPUS.sqlite TEXT...",
        .summary = "the N best hits: words, \"quoted phrases\" and prefix* terms; nothing else is syntax",
        .details = "Words after \"--\" are positional (a query starting with '-').",
        .options = {{.name = "--top-k", .metavar = "N", .help = "hits shown (at most 100)", .default_text = "10"},
                    JsonOption("the hits as JSON")},
        .min_positional = 2,
        .max_positional = 64,
        .separator = true},
       Query},
      {{.name = "search open",
        .positionals = "CORPUS.sqlite DOC_ID_OR_URL",
        .summary = "a whole document with its links",
        .options = {JsonOption("the document as JSON")},
        .min_positional = 2,
        .max_positional = 2,
        .separator = true},
       Open},
  };
}

}  // namespace envforge::cli

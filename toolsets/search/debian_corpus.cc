#include "toolsets/search/debian_corpus.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "toolsets/search/dictd_reader.h"
#include "toolsets/search/iso_codes_reader.h"
#include "toolsets/search/python_doc_reader.h"
#include "toolsets/search/wordnet_reader.h"

namespace envforge::search {
namespace {

bool IsDictd(const std::string& name) {
  return name == "gcide" || name == "foldoc" || name == "jargon" || name == "elements";
}

// The file whose absence means the source's package is not installed.
std::string MarkerFile(const std::string& name, const DebianPaths& paths) {
  if (IsDictd(name)) return paths.dictd_dir + "/" + name + ".index";
  if (name == "wordnet") return paths.wordnet_dir + "/data.noun";
  if (name == "iso-codes") return paths.iso_codes_dir + "/iso_3166-1.json";
  return paths.python_doc_dir + "/index.html";
}

Status ReadSource(const std::string& name, const DebianPaths& paths, const DocumentSink& sink) {
  if (IsDictd(name)) {
    ENVFORGE_ASSIGN_OR_RETURN(DictdDatabase database, LocateDictdDatabase(paths.dictd_dir, name));
    return ReadDictdDatabase(database, sink);
  }
  if (name == "wordnet") return ReadWordNet(paths.wordnet_dir, sink);
  if (name == "iso-codes") return ReadIsoCodes(paths.iso_codes_dir, sink);
  return ReadPythonDocs(paths.python_doc_dir, PythonDocVersion(paths.python_doc_dir), sink);
}

const DebianSource* FindSource(const std::string& name) {
  const auto& sources = DebianSources();
  auto it = std::find_if(sources.begin(), sources.end(), [&](const DebianSource& s) { return s.name == name; });
  return it == sources.end() ? nullptr : &*it;
}

// Reads one source into the writer, reporting progress; its stats without links.
Result<SourceStats> BuildSource(const std::string& name, const DebianCorpusOptions& options, CorpusWriter& writer) {
  const auto start = std::chrono::steady_clock::now();
  SourceStats stats{name, 0, 0, 0, 0};
  auto report = [&](bool done) {
    stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (options.on_progress) options.on_progress(stats, done);
  };
  report(false);
  Status read = ReadSource(name, options.paths, [&](const Document& document) {
    ENVFORGE_RETURN_IF_ERROR(writer.Add(document));
    stats.documents += 1;
    stats.bytes += static_cast<int64_t>(document.title.size() + document.text.size());
    if (stats.documents % kProgressEvery == 0) report(false);
    return Status::Ok();
  });
  if (!read.ok()) return read.WithContext("source " + name);
  report(true);
  return stats;
}

}  // namespace

const std::vector<DebianSource>& DebianSources() {
  static const std::vector<DebianSource> kSources = {
      {"gcide", "dict-gcide", "GNU Collaborative International Dictionary of English"},
      {"foldoc", "dict-foldoc", "Free On-line Dictionary of Computing"},
      {"jargon", "dict-jargon", "the Jargon File"},
      {"elements", "dict-elements", "the chemical elements"},
      {"wordnet", "wordnet-base", "WordNet 3.0 synsets"},
      {"iso-codes", "iso-codes", "ISO countries, subdivisions, currencies, languages and scripts"},
      {"python-doc", "python3-doc", "the Python documentation"},
  };
  return kSources;
}

Result<std::vector<std::string>> ResolveDebianSources(const std::vector<std::string>& names) {
  std::set<std::string> wanted;
  for (const std::string& name : names) {
    if (FindSource(name) != nullptr) {
      wanted.insert(name);
      continue;
    }
    std::string known;
    for (const DebianSource& source : DebianSources()) known += (known.empty() ? "" : ", ") + source.name;
    return InvalidArgumentError("unknown corpus source '" + name + "'; the sources are " + known);
  }
  std::vector<std::string> ordered;
  for (const DebianSource& source : DebianSources()) {
    if (names.empty() || wanted.count(source.name)) ordered.push_back(source.name);
  }
  return ordered;
}

Status CheckDebianSource(const std::string& name, const DebianPaths& paths) {
  const DebianSource* source = FindSource(name);
  if (source == nullptr) return InvalidArgumentError("unknown corpus source '" + name + "'");
  const std::string marker = MarkerFile(name, paths);
  if (::access(marker.c_str(), R_OK) != 0) {
    return FailedPreconditionError("source " + name + " missing: install package " + source->package + " (no " +
                                   marker + ")");
  }
  return Status::Ok();
}

Result<CorpusInfo> BuildDebianCorpus(const std::string& output_path, const DebianCorpusOptions& options) {
  ENVFORGE_ASSIGN_OR_RETURN(std::vector<std::string> names, ResolveDebianSources(options.sources));
  for (const std::string& name : names) ENVFORGE_RETURN_IF_ERROR(CheckDebianSource(name, options.paths));
  ENVFORGE_ASSIGN_OR_RETURN(std::unique_ptr<CorpusWriter> writer, CorpusWriter::Create(output_path));
  std::map<std::string, double> seconds;
  for (const std::string& name : names) {
    ENVFORGE_ASSIGN_OR_RETURN(SourceStats stats, BuildSource(name, options, *writer));
    seconds[name] = stats.seconds;
  }
  return writer->Finish(seconds);
}

}  // namespace envforge::search

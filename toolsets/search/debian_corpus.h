// Builds an offline search corpus from Debian packages that scripts/setup.sh installs.
//
// Sources, each a family of documents with its own reader:
//
//   name        package        reader                 documents (bookworm)
//   gcide       dict-gcide     dictd_reader.h         GNU Collaborative International Dictionary
//                                                     of English (Webster 1913 and additions)
//   foldoc      dict-foldoc    dictd_reader.h         Free On-line Dictionary of Computing
//   jargon      dict-jargon    dictd_reader.h         the Jargon File
//   elements    dict-elements  dictd_reader.h         the chemical elements
//   wordnet     wordnet-base   wordnet_reader.h       WordNet 3.0 synsets
//   iso-codes   iso-codes      iso_codes_reader.h     countries, subdivisions, currencies,
//                                                     languages, scripts
//   python-doc  python3-doc    python_doc_reader.h    the Python documentation, one page each
//
// Every selected source is checked before anything is written: a missing one fails the build
// with "source X missing: install package Y (no <file>)". The corpus is written through
// CorpusWriter, so an interrupted build leaves no partial output.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "toolsets/search/corpus_store.h"

namespace envforge::search {

struct DebianSource {
  std::string name;     // what --sources takes, and the documents' source
  std::string package;  // the Debian package that provides it
  std::string description;
};

// Every source, in build order.
const std::vector<DebianSource>& DebianSources();

// Where the packages put their files; tests point these at fixtures.
struct DebianPaths {
  std::string dictd_dir = "/usr/share/dictd";
  std::string wordnet_dir = "/usr/share/wordnet";
  std::string iso_codes_dir = "/usr/share/iso-codes/json";
  std::string python_doc_dir = "/usr/share/doc/python3-doc/html";
};

struct DebianCorpusOptions {
  std::vector<std::string> sources;  // names from DebianSources(); empty means all of them
  DebianPaths paths;
  // Called as a source starts (documents 0, done false), every kProgressEvery documents, and as
  // it ends (done true, with its documents, bytes and seconds; links are counted by Finish and
  // are 0 here). May be empty.
  std::function<void(const SourceStats& progress, bool done)> on_progress;
};

inline constexpr int64_t kProgressEvery = 20'000;

// The selected names, checked and in build order; all sources for an empty list. InvalidArgument
// naming an unknown name and listing the known ones; a name given twice counts once.
Result<std::vector<std::string>> ResolveDebianSources(const std::vector<std::string>& names);

// OK when the files of source `name` are present. FailedPrecondition "source gcide missing:
// install package dict-gcide (no /usr/share/dictd/gcide.index)"; InvalidArgument for an unknown
// name.
Status CheckDebianSource(const std::string& name, const DebianPaths& paths);

// Builds the corpus at `output_path` from the selected sources. Returns what the corpus's meta
// says (documents, links, bytes and seconds per source). Errors: those of
// ResolveDebianSources and CheckDebianSource before anything is written; those of the readers
// (DataLoss for a malformed file, naming it) and of CorpusWriter.
Result<CorpusInfo> BuildDebianCorpus(const std::string& output_path, const DebianCorpusOptions& options);

}  // namespace envforge::search

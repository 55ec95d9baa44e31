// The search environment fixture of the tests: tests/fixtures/search_env (env.json and four
// questions with answers and aliases) copied to a temporary directory, with a corpus built there
// from the search fixtures (tests/fixtures/search) by the corpus builder itself, then packed.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "base/fd.h"
#include "sandbox/env_pack.h"
#include "tests/temp_dir.h"
#include "toolsets/search/debian_corpus.h"

namespace envforge::sandbox::testing {

inline const std::string kSearchFixtures = std::string(ENVFORGE_TEST_SOURCE_DIR) + "/tests/fixtures/search";
inline const std::string kSearchEnvFixture = std::string(ENVFORGE_TEST_SOURCE_DIR) + "/tests/fixtures/search_env";

// Builds a corpus of the fixture sources at `path` (dictd databases from dictd_dir).
inline void BuildFixtureCorpus(const std::string& path,
                               std::vector<std::string> sources = {"elements", "foldoc", "wordnet"},
                               const std::string& dictd_dir = kSearchFixtures + "/dictd") {
  search::DebianCorpusOptions options;
  options.sources = std::move(sources);
  options.paths.dictd_dir = dictd_dir;
  options.paths.wordnet_dir = kSearchFixtures + "/wordnet";
  options.paths.iso_codes_dir = kSearchFixtures + "/iso-codes";
  options.paths.python_doc_dir = kSearchFixtures + "/python-doc";
  Result<search::CorpusInfo> info = search::BuildDebianCorpus(path, options);
  REQUIRE_MESSAGE(info.ok(), info.status().ToString());
}

// The fixture's source directory under `root`/name, with its corpus.sqlite built.
inline std::string MakeSearchEnvSource(const ::envforge::testing::TempDir& root, const std::string& name = "search_env",
                                       std::vector<std::string> sources = {"elements", "foldoc", "wordnet"}) {
  const std::filesystem::path dir = root.path() / name;
  std::filesystem::copy(kSearchEnvFixture, dir, std::filesystem::copy_options::recursive);
  BuildFixtureCorpus((dir / "corpus.sqlite").string(), std::move(sources));
  return dir.string();
}

// The fixture's source directory under `root`/name whose corpus says other things about neon than
// the fixtures do: its elements database is a copy with "red glow" made "tan glow" and its atomic
// number 99 (same lengths, so the dictd index stays right).
inline std::string MakeChangedSearchEnvSource(const ::envforge::testing::TempDir& root, const std::string& name) {
  const std::filesystem::path dictd = root.path() / (name + "_dictd");
  std::filesystem::copy(kSearchFixtures + "/dictd", dictd, std::filesystem::copy_options::recursive);
  const std::string elements = (dictd / "elements.dict").string();
  Result<std::string> text = ReadFileToString(elements);
  REQUIRE(text.ok());
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"red glow", "tan glow"}, {"Atomic number: 10\n", "Atomic number: 99\n"}}) {
    size_t at = text->find(from);
    REQUIRE(at != std::string::npos);
    text->replace(at, from.size(), to);
  }
  REQUIRE(WriteFileAtomically(elements, *text).ok());
  const std::filesystem::path dir = root.path() / name;
  std::filesystem::copy(kSearchEnvFixture, dir, std::filesystem::copy_options::recursive);
  BuildFixtureCorpus((dir / "corpus.sqlite").string(), {"elements", "foldoc", "wordnet"}, dictd.string());
  return dir.string();
}

// Packs `source_dir` into root/<output>; fails the test when packing fails.
inline std::string PackSearchEnv(const ::envforge::testing::TempDir& root, const std::string& source_dir,
                                 const std::string& output = "search_fixture.envdb") {
  const std::string envdb = root / output;
  Status packed = PackEnvironment(source_dir, envdb);
  REQUIRE_MESSAGE(packed.ok(), packed.ToString());
  return envdb;
}

}  // namespace envforge::sandbox::testing

// A synthesized question set (toolsets/search/qa_synth.h) as a search environment: written as a
// search source directory (sandbox/search_bundle.h) and packed with the corpus inside.
//
// The source directory: env.json (kind "search"), corpus.sqlite (a hard link to the corpus, or a
// copy across file systems), and per question tasks/<id>/task.json {"prompt", "answer",
// "aliases", "difficulty", "knobs"} and tasks/<id>/solution.json (the recorded solution path).
#pragma once

#include <string>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "toolsets/search/qa_synth.h"

namespace envforge::sandbox {

struct SynthBundleOptions {
  std::string name = "search_synth";
  std::string description;           // "" : one naming the corpus and hop counts
  Json provenance = Json::object();  // merged into env.json's provenance (generator, seed, ...)
};

// Writes the source directory at `dir` (created; must not exist). Errors: AlreadyExists for an
// existing `dir`; the file system's.
Status WriteSynthesizedSearchSource(const std::vector<search::SynthQuestion>& questions,
                                    const search::QaSynthOptions& synth_options, const std::string& corpus_path,
                                    const std::string& dir, const SynthBundleOptions& options = {});

// Writes the source next to `output_path` ("<output>.source.<pid>"), packs it to `output_path`
// (replaced only when packing succeeds: PackEnvironment writes a temporary file and renames it)
// and removes the source (provenance's source_dir is null; its corpus and seeds reproduce it). Errors: InvalidArgument
// for an empty question set; NotFound when the output's directory does not exist; those of writing and of
// PackEnvironment.
Status PackSynthesizedSearchEnvironment(const std::vector<search::SynthQuestion>& questions,
                                        const search::QaSynthOptions& synth_options, const std::string& corpus_path,
                                        const std::string& output_path, const SynthBundleOptions& options = {});

}  // namespace envforge::sandbox

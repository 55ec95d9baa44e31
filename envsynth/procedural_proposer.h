// The procedural proposer: envsynth/procedural/propose.py and its category generators
// (cat_<id>.py), run with /usr/bin/python3, one process per request (the protocol is that
// file's docstring).
//
// Where the generators come from: they are compiled into the library (embedded at build time)
// and written to a private directory that lives as long as the proposer; with
// ENVFORGE_SYNTH_PROCEDURAL=DIR in the environment, DIR's copies run instead (developing a
// generator without rebuilding).
#pragma once

#include <memory>
#include <string>

#include "envsynth/proposer.h"

namespace envforge::envsynth {

struct ProceduralOptions {
  std::string python = "/usr/bin/python3";
  std::string generators_dir;  // empty: $ENVFORGE_SYNTH_PROCEDURAL, else the embedded copies
};

// Errors: Internal when the embedded generators cannot be written out.
Result<std::unique_ptr<Proposer>> OpenProceduralProposer(const ProceduralOptions& options = {});

}  // namespace envforge::envsynth

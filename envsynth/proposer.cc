#include "envsynth/proposer.h"

#include "base/sha256.h"

namespace envforge::envsynth {

std::string TaskDraft::ArtifactHash() const {
  Sha256 hash;
  for (const std::string& part : {id, prompt, DumpJson(answer_schema), DumpJson(knobs), solution, verifier, oracle}) {
    hash.Update(std::to_string(part.size()) + ":");
    hash.Update(part);
  }
  return hash.FinishHex();
}

}  // namespace envforge::envsynth

// envforge.read_episodes(...): episodes of a trajectory store as dicts, for a trainer.
//
//   import envforge
//   figures = envforge.rollout("envs/", "shop", "t1", backend="embedded:DIR", n=8, trajectories="run.db")
//   episodes = envforge.read_episodes("run.db", [e["id"] for e in figures["episodes"]])
//   episodes[0]["tokens"]  # the token-exact segments: ids, mask, logprobs (agents/trajectory_store.h)
//
// Each dict is agents::EpisodeToJson of the episode (its steps, messages, model turns, context
// events, verdict and "tokens", TokenSegmentsToJson). ids are full episode ids or unique
// prefixes, answered in the order given; an id the store does not hold raises ValueError naming
// it, a store that cannot be opened (missing, not a store, newer format) raises ValueError naming
// the path. Reads through its own read-only connection (the writer may keep writing: WAL), with
// the GIL released.
#pragma once

#include <pybind11/pybind11.h>

namespace envforge::python {

void DefineTrajectories(pybind11::module_& module);

}  // namespace envforge::python

// envforge.rollout(...): the rollout loop (agents/rollout.h) from Python, in process.
//
//   import envforge
//   figures = envforge.rollout("envs/", "trip_planning", "cheapest_rated_hotel",
//                              backend="embedded:data/models/policy-small", n=8, seed=1)
//   figures["pass_at_k"]["1"], [e["id"] for e in figures["episodes"]]
//
// env is an environment name, a content hash, or an *.envdb file stem in envs_dir (or a path to
// an *.envdb); task None plays every task and returns a list. Returns TaskRollout::ToJson() dicts
// ({"task", "n", "scored", "passed", "pass_at_k": {"1": ..}, "mean_turns", "outcomes",
// "episodes": [{"id", "outcome", "passed", ...}], "rollout_id", "backend", "model"}). Bad input
// (unknown backend, environment or task, n < 1, a model that does not load) raises ValueError
// naming it; infrastructure failures raise RuntimeError. Runs with the GIL released.
#pragma once

#include <pybind11/pybind11.h>

namespace envforge::python {

void DefineRollout(pybind11::module_& module);

}  // namespace envforge::python

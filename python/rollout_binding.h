// envforge.rollout(...): the rollout loop (agents/rollout.h) from Python, in process.
//
//   import envforge
//   figures = envforge.rollout("envs/", "trip_planning", "cheapest_rated_hotel",
//                              backend="embedded:data/models/policy-small", n=8, seed=1)
//   figures["pass_at_k"]["1"], [e["id"] for e in figures["episodes"]]
//
// env is an environment name, a content hash, or an *.envdb file stem in envs_dir (or a path to
// an *.envdb); task None plays every task and returns a list.
//
// Sessions on a server: url="http://HOST:PORT" (or "ws://HOST:PORT/ws"), token="..." plays the
// episodes in sessions of a running `envforge serve` (server/remote_session_host.h): the model
// runs in this process, the tools and verifier on the server; envs_dir is ignored (may be "") and
// env / task name the server's environment (name, id or id prefix) and task. The trajectories
// store (here) records the environment, task and verifier versions the server reports. An
// unreachable server raises RuntimeError naming the URL; an unknown environment or task, or a
// refused token, ValueError naming it; a session the server loses mid-episode (closed, expired,
// the server stopped) ends that episode infra_error.
//
//   envforge.rollout("", "shop_eval_a", "price_lookup_00", url="http://127.0.0.1:8080",
//                    token="secret", backend="embedded:data/models/policy-small", n=8) Returns TaskRollout::ToJson()
//                    dicts
// ({"task", "n", "scored", "passed", "pass_at_k": {"1": ..}, "mean_turns", "outcomes",
// "episodes": [{"id", "outcome", "passed", ...}], "rollout_id", "backend", "model"}). Bad input
// (unknown backend, environment or task, n < 1, a model that does not load) raises ValueError
// naming it; infrastructure failures raise RuntimeError. Runs with the GIL released.
#pragma once

#include <pybind11/pybind11.h>

namespace envforge::python {

void DefineRollout(pybind11::module_& module);

}  // namespace envforge::python

// envforge.read_episodes: TrajectoryReader -> EpisodeToJson -> Python dicts.
#include "python/trajectory_binding.h"

#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "agents/trajectory_store.h"
#include "python/json_convert.h"
#include "python/status_error.h"

namespace py = pybind11;

namespace envforge::python {
namespace {

Result<Json> ReadEpisodes(const std::string& path, const std::vector<std::string>& ids) {
  ENVFORGE_ASSIGN_OR_RETURN(std::unique_ptr<agents::TrajectoryReader> reader, agents::TrajectoryReader::Open(path));
  Json episodes = Json::array();
  for (const std::string& id : ids) {
    auto episode = reader->Get(id);
    if (!episode.ok()) {
      return Status(episode.status().code(), "trajectory store '" + path + "': " + episode.status().message());
    }
    episodes.push_back(agents::EpisodeToJson(*episode));
  }
  return episodes;
}

}  // namespace

void DefineTrajectories(py::module_& module) {
  module.def(
      "read_episodes",
      [](const std::string& path, const std::vector<std::string>& ids) {
        Result<Json> episodes = Json::array();
        {
          py::gil_scoped_release release;
          episodes = ReadEpisodes(path, ids);
        }
        if (!episodes.ok()) RaiseStatus(episodes.status());
        return JsonToPython(*episodes);
      },
      py::arg("path"), py::arg("ids"),
      "The episodes (full ids or unique prefixes) of a trajectory store as dicts, in the order given: steps, "
      "messages, model turns and the token-exact segments under \"tokens\".");
}

}  // namespace envforge::python

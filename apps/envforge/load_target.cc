#include "apps/envforge/load_target.h"

#include <cstdlib>
#include <iterator>

namespace envforge::cli {

std::vector<OptionDecl> LoadTargetOptions() {
  return {{.name = "--url",
           .metavar = "URL",
           .help = "ws://HOST:PORT[/ws] or http://HOST:PORT[/rpc] of a running envforge serve",
           .required = true},
          {.name = "--env", .metavar = "E", .help = "the environment's name", .required = true},
          {.name = "--task", .metavar = "T", .help = "the task of every session", .required = true},
          {.name = "--transport", .metavar = "ws|http", .help = "WebSocket or HTTP keep-alive", .default_text = "ws"},
          {.name = "--io-threads", .metavar = "N", .help = "threads running the clients (1..16)", .default_text = "1"},
          {.name = "--token", .metavar = "T", .help = "the server's bearer token (or ENVFORGE_SERVE_TOKEN)"},
          {.name = "--without-tools",
           .help = "session/create asks for no tool list (params.tools false), as a trainer that read them once "
                   "from envs/get does"}};
}

std::vector<OptionDecl> WithLoadTarget(std::vector<OptionDecl> own) {
  std::vector<OptionDecl> all = LoadTargetOptions();
  all.insert(all.end(), std::make_move_iterator(own.begin()), std::make_move_iterator(own.end()));
  return all;
}

Status LoadTargetFrom(const ParsedArgs& parsed, server::LoadOptions* load) {
  // --url, --env and --task are required by the declaration.
  ENVFORGE_RETURN_IF_ERROR(
      server::ParseLoadUrl(*parsed.Option("--url"), parsed.OptionOr("--transport"), load).WithContext("--url"));
  load->env = *parsed.Option("--env");
  load->task = *parsed.Option("--task");
  load->token = parsed.OptionOr("--token");
  if (load->token.empty()) {
    if (const char* from_env = std::getenv("ENVFORGE_SERVE_TOKEN"); from_env != nullptr) load->token = from_env;
  }
  ENVFORGE_ASSIGN_OR_RETURN(long long io_threads, parsed.IntOption("--io-threads", 1, 16));
  load->io_threads = static_cast<int>(io_threads);
  load->create_with_tools = !parsed.Has("--without-tools");
  return Status::Ok();
}

}  // namespace envforge::cli

// The server a load command drives (`envforge bench serve`, `envforge bench burst`): its options
// are declared once here and read once, so both commands take them alike.
#pragma once

#include <vector>

#include "apps/envforge/cli_args.h"
#include "base/status.h"
#include "server/load_client.h"

namespace envforge::cli {

// --url (required), --env (required), --task (required), --transport, --io-threads, --token,
// --without-tools.
std::vector<OptionDecl> LoadTargetOptions();
// LoadTargetOptions() followed by a command's own options.
std::vector<OptionDecl> WithLoadTarget(std::vector<OptionDecl> own);

// Fills `load`'s transport (server::ParseLoadUrl of --url and --transport), env, task, token (the
// option, else ENVFORGE_SERVE_TOKEN), io_threads and create_with_tools. InvalidArgument naming the option.
Status LoadTargetFrom(const ParsedArgs& parsed, server::LoadOptions* load);

}  // namespace envforge::cli

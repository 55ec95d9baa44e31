// The one-answer Reply (contract in server/internal/rpc_dialect.h).
#include "server/internal/rpc_dialect.h"

#include <atomic>
#include <memory>

#include "base/log.h"

namespace envforge::server::internal {

Reply MakeReply(std::function<void(RpcReply)> finish) {
  // Shared by every copy of the Reply: its destructor runs when the last copy goes.
  struct State {
    std::function<void(RpcReply)> finish;
    std::atomic<bool> answered{false};
    ~State() {
      if (answered.exchange(true)) return;
      try {
        finish(MakeError(kRpcInternalError, "internal error: the request was dropped without an answer"));
      } catch (...) {
        ENVFORGE_LOG(kError) << "rpc: answering a dropped request failed";
      }
    }
  };
  auto state = std::make_shared<State>();
  state->finish = std::move(finish);
  return [state](RpcReply reply) {
    if (!state->answered.exchange(true)) state->finish(std::move(reply));
  };
}

}  // namespace envforge::server::internal

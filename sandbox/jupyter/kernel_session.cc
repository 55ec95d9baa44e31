// Kernel tools on the tool protocol.
#include "sandbox/jupyter/kernel_session.h"

namespace envforge::sandbox::jupyter {
namespace {

using toolsets::kExecuteTool;
using toolsets::kInterruptTool;
using toolsets::kRestartTool;
using toolsets::Outcome;
using toolsets::ToolCall;
using toolsets::ToolResult;

ToolResult Ok(const ToolCall& call, Json content) {
  ToolResult result;
  result.call_id = call.id;
  result.content = std::move(content);
  return result;
}

}  // namespace

KernelSession::KernelSession(KernelPool& pool, KernelSessionOptions options, ReadyKernel kernel)
    : pool_(pool), options_(std::move(options)), kernel_(std::move(kernel)) {}

KernelSession::~KernelSession() = default;

Result<std::unique_ptr<KernelSession>> KernelSession::Start(KernelPool& pool, KernelSessionOptions options) {
  ENVFORGE_ASSIGN_OR_RETURN(ReadyKernel kernel, pool.Acquire(options.acquire_timeout));
  return std::unique_ptr<KernelSession>(new KernelSession(pool, std::move(options), std::move(kernel)));
}

Status KernelSession::Replace() {
  {
    std::lock_guard<std::mutex> lock(kernel_mu_);
    kernel_.process->Kill();
  }
  if (terminated_) return UnavailableError("the session is closing");
  ENVFORGE_ASSIGN_OR_RETURN(ReadyKernel fresh, pool_.Acquire(options_.acquire_timeout));
  std::lock_guard<std::mutex> lock(kernel_mu_);
  kernel_ = std::move(fresh);
  if (terminated_) kernel_.process->Terminate();
  restarts_ += 1;
  return Status::Ok();
}

void KernelSession::Terminate() {
  std::lock_guard<std::mutex> lock(kernel_mu_);
  terminated_ = true;
  if (kernel_.process) kernel_.process->Terminate();
}

ToolResult KernelSession::Call(const ToolCall& call) {
  if (crashed_) return ToolResult::Error(Outcome::kCrashed, "the kernel died earlier (" + crash_reason_ + ")", call.id);
  if (call.name == kExecuteTool) return Execute(call);
  if (!call.arguments.is_object() || !call.arguments.empty()) {
    return ToolResult::Error(Outcome::kInvalidCall, call.name + " takes no arguments", call.id);
  }
  if (call.name == kInterruptTool) {
    return Ok(call, {{"interrupted", kernel_.client->Interrupt(std::chrono::milliseconds(3000)).ok()}});
  }
  if (call.name == kRestartTool) {
    if (Status replaced = Replace(); !replaced.ok()) {
      return ToolResult::Error(Outcome::kInfraError, "restart: " + replaced.message(), call.id);
    }
    return Ok(call, {{"restarted", true}});
  }
  return ToolResult::Error(Outcome::kInvalidCall, "unknown kernel tool '" + call.name + "'", call.id);
}

ToolResult KernelSession::Execute(const ToolCall& call) {
  auto code = call.arguments.is_object() ? call.arguments.find("code") : call.arguments.end();
  if (!call.arguments.is_object() || code == call.arguments.end() || !code->is_string()) {
    return ToolResult::Error(Outcome::kInvalidCall, "execute needs {\"code\": string}", call.id);
  }
  if (code->get_ref<const std::string&>().size() > options_.max_code_bytes) {
    return ToolResult::Error(Outcome::kInvalidCall,
                             "execute: code of " + std::to_string(code->get_ref<const std::string&>().size()) +
                                 " bytes is over the " + std::to_string(options_.max_code_bytes) + "-byte limit",
                             call.id);
  }
  executes_ += 1;
  Result<ExecuteResult> run =
      kernel_.client->Execute(code->get_ref<const std::string&>(), options_.execute, kernel_.process->Probe());
  if (!run.ok()) return ToolResult::Error(Outcome::kInfraError, "execute: " + run.status().message(), call.id);
  ExecuteResult& executed = *run;
  ToolResult result = Ok(call, {{"status", ExecuteOutcomeName(executed.outcome)},
                                {"execution_count", executed.execution_count},
                                {"outputs", std::move(executed.outputs)},
                                {"truncated", executed.truncated},
                                {"restarted", false}});
  switch (executed.outcome) {
    case ExecuteOutcome::kOk: break;
    case ExecuteOutcome::kError:
      result.outcome = Outcome::kToolError;
      result.message = executed.error.value("ename", "") + ": " + executed.error.value("evalue", "");
      break;
    case ExecuteOutcome::kTimeout:
      result.outcome = Outcome::kTimeout;
      result.limit = executed.limit;
      result.message = "execute ran past its " + std::string(executed.limit == "cpu_time" ? "CPU" : "wall-clock") +
                       " budget and was interrupted";
      if (executed.needs_restart) {
        if (Status replaced = Replace(); !replaced.ok()) {
          return ToolResult::Error(Outcome::kInfraError,
                                   "execute timed out and the restart failed: " + replaced.message(), call.id);
        }
        result.content["restarted"] = true;
        result.message += "; the kernel did not respond and was restarted (its state is lost)";
      }
      break;
    case ExecuteOutcome::kCrashed:
      crashed_ = true;
      crash_reason_ = kernel_.process->ExitReason();
      result.outcome = Outcome::kCrashed;
      result.session_alive = false;
      result.limit = kernel_.process->OomKilled() ? "memory" : "";
      result.message = "the kernel died during execute (" + crash_reason_ + ")";
      break;
  }
  return result;
}

Json KernelSession::Info() const {
  std::lock_guard<std::mutex> lock(kernel_mu_);
  return {{"pid", kernel_.process ? kernel_.process->pid() : 0},
          {"memory_bytes", kernel_.process ? kernel_.process->MemoryBytes() : 0},
          {"memory", kernel_.process ? kernel_.process->MemoryReport() : Json()},
          {"cpu_seconds", kernel_.process ? kernel_.process->CpuSeconds() : 0.0},
          {"executes", executes_.load()},
          {"restarts", restarts_.load()},
          {"crashed", crashed_.load()},
          {"isolation", kernel_.process ? kernel_.process->isolation() : Json()}};
}

}  // namespace envforge::sandbox::jupyter

// One thread that runs tasks in the order they were posted: the mechanics under a session's
// runner (sandbox/internal/code_runner.h, search_runner.h) and the viewer's replays
// (server/ui_api.h), which decide what their tasks see and what becomes of tasks that never
// started when their owner goes.
//
// Contract: Post may be called from any thread; a task runs on the worker's thread, never two at
// once. Stop (and the destructor, which calls it) waits for the running task to end, runs nothing
// more, and hands back the tasks that never started. Post after Stop drops the task.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace envforge {

class SerialWorker {
 public:
  using Task = std::function<void()>;

  SerialWorker();
  ~SerialWorker();
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  void Post(Task task);
  // Idempotent; must not be called from a task (it joins the worker's thread).
  std::deque<Task> Stop();

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Task> tasks_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace envforge

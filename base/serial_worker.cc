// A thread running tasks in order.
#include "base/serial_worker.h"

namespace envforge {

SerialWorker::SerialWorker() : thread_([this] { Loop(); }) {}

SerialWorker::~SerialWorker() { Stop(); }

void SerialWorker::Post(Task task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    tasks_.push_back(std::move(task));
  }
  wake_.notify_one();
}

std::deque<SerialWorker::Task> SerialWorker::Stop() {
  std::deque<Task> unstarted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    unstarted.swap(tasks_);
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  return unstarted;
}

void SerialWorker::Loop() {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (stopping_) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace envforge

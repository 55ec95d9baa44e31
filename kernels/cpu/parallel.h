// The CPU kernels' thread pool: one process-wide pool of worker threads (default: the number of
// online CPUs; ENVFORGE_THREADS=N overrides; SetThreadCount changes it between calls).
//
// ParallelFor(n, grain, fn) splits [0, n) into contiguous chunks of at least `grain` items and
// calls fn(begin, end) for each, on the pool and the calling thread, returning when all are done.
// With one thread, or n <= grain, fn(0, n) runs inline. Nested ParallelFor calls (from inside fn)
// run inline. fn must not throw. Thread safety: ParallelFor may be called from several threads;
// calls are serialised on the pool.
#pragma once

#include <cstdint>
#include <functional>

namespace envforge::kernels {

void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t begin, int64_t end)>& fn);
int ThreadCount();
void SetThreadCount(int threads);  // >= 1

}  // namespace envforge::kernels

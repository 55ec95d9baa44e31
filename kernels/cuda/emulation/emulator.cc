// The emulator's scheduler (see emulator.h for the execution model): a block's CUDA threads are
// fibers on mmap'ed stacks that are reused across blocks and launches; barriers and warp
// collectives switch fibers; blocks run one after another in the launching thread.
//
// Context switching: on x86-64 a hand-written switch saves only what the System V ABI makes
// callee-saved (rbx, rbp, r12-r15, the MXCSR and x87 control words) and swaps stack pointers, a few
// nanoseconds; elsewhere ucontext's swapcontext (correct, but a signal-mask system call per switch).
//
// Scheduling: a ring of runnable fibers. A fiber that blocks (barrier, collective) switches
// directly to the next runnable one; the launching thread's context is entered only when none is
// runnable, where it either finds every thread finished (the block is done) or reports a deadlock.
// The last thread to arrive at a barrier or collective releases the waiters and runs on, so a
// barrier costs one switch per waiting thread.
//
// AddressSanitizer (ENVFORGE_EMULATION_ASAN): every switch is announced with
// __sanitizer_start_switch_fiber (the destination's stack bounds) and confirmed on the new stack
// with __sanitizer_finish_switch_fiber, so ASan's stack bookkeeping (reports, unwinding, fake
// stacks) follows the fiber that runs. A fiber that leaves for good (finished, or abandoned by a
// fault) says so, which releases its fake stack. The launching thread's bounds are learnt from the
// first finish after it switched away. Frames still on a reused stack (a finished fiber's last
// switch, an abandoned fiber's kernel frames) keep their redzones poisoned; PrepareStack clears
// them, from the saved stack pointer up, before the stack runs a new thread.
#include "kernels/cuda/emulation/emulator.h"

#include <link.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cinttypes>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <unordered_map>
#include <vector>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#if ENVFORGE_EMULATION_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__x86_64__)
// void envforge_emu_switch(void** save_sp, void* load_sp): saves the callee-saved state on the
// current stack, stores the stack pointer in *save_sp, and resumes the context saved at load_sp.
// A fresh fiber's stack is prepared (PrepareStack) so that the resume "returns" into
// envforge_emu_fiber_trampoline with a 16-byte aligned stack, which calls the fiber's entry.
asm(R"(
  .text
  .globl envforge_emu_switch
  .type envforge_emu_switch, @function
envforge_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size envforge_emu_switch, .-envforge_emu_switch

  .globl envforge_emu_fiber_trampoline
  .type envforge_emu_fiber_trampoline, @function
envforge_emu_fiber_trampoline:
  call envforge_emu_fiber_entry@PLT
  ud2
  .size envforge_emu_fiber_trampoline, .-envforge_emu_fiber_trampoline
  .section .note.GNU-stack,"",@progbits
  .text
)");
extern "C" void envforge_emu_switch(void** save_sp, void* load_sp);
extern "C" void envforge_emu_fiber_trampoline();
#endif

extern "C" [[noreturn]] void envforge_emu_fiber_entry();

namespace envforge::cuda_emulation {
namespace {

using internal::Combine;
using internal::LaneSlot;

// Kernel frames are small (registers become locals); 256 KiB leaves room for unoptimised builds,
// and ASan's redzones get four times that. Stacks are reserved, not committed: only touched pages
// cost memory.
constexpr size_t kStackBytes = (ENVFORGE_EMULATION_ASAN ? 1024 : 256) * 1024;
constexpr size_t kGuardBytes = 4096;
constexpr int kMaxBlockThreads = 1024;
constexpr int kNamedBarriers = 16;
constexpr int kDefaultDynamicSharedBytes = 48 * 1024;
// Unwritten device and dynamic shared memory reads as this: a NaN as fp32 and as both bf16/fp16
// halves, a large positive int32 (so a stray index is out of bounds, never the -1 padding).
constexpr uint32_t kGarbageWord = 0x7FC07FC0u;

enum class Wait : uint8_t { kRunnable, kBarrier, kWarp, kDone };

struct Context {
#if defined(__x86_64__)
  void* sp = nullptr;
#else
  ucontext_t context;
#endif
  // The stack this context runs on (ASan's switch annotations): a fiber's mmap'ed stack, or the
  // launching thread's, learnt when it first switches to a fiber.
  const void* stack_bottom = nullptr;
  size_t stack_size = 0;
};

struct Fiber {
  Context context;
  unsigned char* stack = nullptr;  // lowest usable byte; kStackBytes long, guard page below
  uint3 thread_idx{};
  Wait wait = Wait::kRunnable;
  int barrier_id = 0;
};

struct Barrier {
  int arrived = 0;
  int expected = 0;
};

struct Warp {
  int arrived = 0;
  int lanes = 0;  // lanes this warp has (the block's last warp may be partial)
  const char* what = nullptr;
  Combine combine = nullptr;
  LaneSlot slots[32];
};

struct Scheduler {
  std::mutex launch_mutex;  // one launch at a time: the statics behind __shared__ are process-wide

  std::vector<Fiber> fibers = std::vector<Fiber>(kMaxBlockThreads);
  Context main_context;
  int current = -1;  // the running fiber, -1 in the launching thread's context
  int thread_count = 0;
  int finished = 0;
  std::vector<int> ring = std::vector<int>(kMaxBlockThreads);
  int ring_head = 0, ring_size = 0;
  Context* switching_from = nullptr;  // the context the last switch left (ASan: its stack bounds)
  Barrier barriers[kNamedBarriers];
  Warp warps[kMaxBlockThreads / 32];

  internal::LaunchConfig config;
  void (*body)(const void*) = nullptr;
  const void* closure = nullptr;

  bool block_order_chosen = false;  // by the environment at the first launch, or SetBlockOrder
  BlockOrder block_order = BlockOrder::kForward;
  uint64_t shuffle_seed = kDefaultShuffleSeed;
  uint64_t ordered_launches = 0;  // launches since the order was chosen: shuffle's per-launch key

  bool abort_on_fault = true;
  bool faulted = false;
  std::string fault_message;
  bool pending_fault = false;
  EmulatorStats stats;
};

// Out of line: inlined into S(), the constructor gave every call of S() (several per emulated
// memory access and collective) its large stack frame, which AddressSanitizer poisons and
// unpoisons on each call (an emulated engine test: 27.8 s -> 16.2 s).
[[gnu::noinline]] Scheduler* NewScheduler() { return new Scheduler(); }

Scheduler& S() {
  static Scheduler* const scheduler = NewScheduler();  // never destroyed: fibers may be abandoned mid-kernel
  return *scheduler;
}

std::mutex error_mutex;
cudaError_t last_error = cudaSuccess;
std::mutex attribute_mutex;
std::unordered_map<const void*, int> max_dynamic_shared;

// ---- fibers

unsigned char* AllocateStack() {
  void* memory = mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (memory == MAP_FAILED) {
    std::fprintf(stderr, "envforge CUDA emulator: cannot map a %zu-byte fiber stack\n", kStackBytes);
    std::abort();
  }
  // The guard page turns a stack overflow into a SIGSEGV instead of silent corruption.
  mprotect(memory, kGuardBytes, PROT_NONE);
  return static_cast<unsigned char*>(memory) + kGuardBytes;
}

// Clears the ASan poison that frames still on the fiber's stack left (see the top of this file):
// every frame below the saved stack pointer returned normally, which unpoisoned it.
void UnpoisonLeftoverFrames([[maybe_unused]] Fiber& fiber) {
#if ENVFORGE_EMULATION_ASAN
#if defined(__x86_64__)
  if (fiber.context.sp == nullptr) return;
  auto* low = static_cast<unsigned char*>(fiber.context.sp);
  ASAN_UNPOISON_MEMORY_REGION(low, static_cast<size_t>(fiber.stack + kStackBytes - low));
#else
  ASAN_UNPOISON_MEMORY_REGION(fiber.stack, kStackBytes);
#endif
#endif
}

void PrepareStack(Fiber& fiber) {
  if (fiber.stack == nullptr) fiber.stack = AllocateStack();
  UnpoisonLeftoverFrames(fiber);
  fiber.context.stack_bottom = fiber.stack;
  fiber.context.stack_size = kStackBytes;
#if defined(__x86_64__)
  // The frame envforge_emu_switch pops: [control words][r15 r14 r13 r12 rbx rbp][return address].
  auto top = reinterpret_cast<uintptr_t>(fiber.stack + kStackBytes) & ~uintptr_t{15};
  auto* frame = reinterpret_cast<uint64_t*>(top - 8 * sizeof(uint64_t));
  std::memset(frame, 0, 8 * sizeof(uint64_t));
  const uint32_t mxcsr = 0x1F80;  // round to nearest, all exceptions masked, no flush-to-zero
  const uint16_t x87 = 0x037F;
  std::memcpy(frame, &mxcsr, 4);
  std::memcpy(reinterpret_cast<unsigned char*>(frame) + 4, &x87, 2);
  frame[7] = reinterpret_cast<uint64_t>(&envforge_emu_fiber_trampoline);
  fiber.context.sp = frame;
#else
  getcontext(&fiber.context.context);
  fiber.context.context.uc_stack.ss_sp = fiber.stack;
  fiber.context.context.uc_stack.ss_size = kStackBytes;
  fiber.context.context.uc_link = nullptr;
  makecontext(&fiber.context.context, envforge_emu_fiber_entry, 0);
#endif
}

// ASan: the second half of a switch, on the new stack. `fake_stack` is what this context's own
// start_switch_fiber saved (nullptr on a fiber's first entry). The bounds reported are those of the
// context just left: for the launching thread, the only way to learn them.
void FinishSwitch([[maybe_unused]] void* fake_stack) {
#if ENVFORGE_EMULATION_ASAN
  const void* from_bottom = nullptr;
  size_t from_size = 0;
  __sanitizer_finish_switch_fiber(fake_stack, &from_bottom, &from_size);
  Context* from = S().switching_from;
  if (from != nullptr) {
    from->stack_bottom = from_bottom;
    from->stack_size = from_size;
  }
#endif
}

// Saves the running context in `save` and resumes `load`; returns when `save` is resumed.
// `leaving_for_good`: `save` is never resumed (a finished or abandoned fiber), so ASan may drop
// its fake stack.
void SwitchContext(Context& save, Context& load, bool leaving_for_good = false) {
  Scheduler& s = S();
  ++s.stats.fiber_switches;
#if ENVFORGE_EMULATION_ASAN
  s.switching_from = &save;
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(leaving_for_good ? nullptr : &fake_stack, load.stack_bottom, load.stack_size);
#else
  (void)leaving_for_good;
#endif
#if defined(__x86_64__)
  envforge_emu_switch(&save.sp, load.sp);
#else
  swapcontext(&save.context, &load.context);
#endif
#if ENVFORGE_EMULATION_ASAN
  FinishSwitch(fake_stack);
#endif
}

// ---- run queue

void Push(int fiber) {
  Scheduler& s = S();
  s.ring[(s.ring_head + s.ring_size) % kMaxBlockThreads] = fiber;
  ++s.ring_size;
}

int Pop() {
  Scheduler& s = S();
  if (s.ring_size == 0) return -1;
  const int fiber = s.ring[s.ring_head];
  s.ring_head = (s.ring_head + 1) % kMaxBlockThreads;
  --s.ring_size;
  return fiber;
}

// Makes `fiber` the running one (built-in variables included) and switches to it from `save`.
void Enter(int fiber, Context& save, bool leaving_for_good = false) {
  Scheduler& s = S();
  s.current = fiber;
  threadIdx = s.fibers[fiber].thread_idx;
  SwitchContext(save, s.fibers[fiber].context, leaving_for_good);
}

// The running fiber has recorded why it waits (or that it is done): run the next runnable fiber,
// or return to the launching thread when there is none.
void Suspend() {
  Scheduler& s = S();
  Fiber& self = s.fibers[s.current];
  const bool leaving_for_good = self.wait == Wait::kDone;
  const int next = Pop();
  if (next >= 0) {
    Enter(next, self.context, leaving_for_good);
  } else {
    s.current = -1;
    SwitchContext(self.context, s.main_context, leaving_for_good);
  }
}

// ---- faults

std::string Dim(const dim3& d) { return std::to_string(d.x) + "x" + std::to_string(d.y) + "x" + std::to_string(d.z); }

// The kernel and its launch shape (and a block order other than forward: needed to reproduce).
std::string Launch() {
  const Scheduler& s = S();
  std::string out =
      std::string("kernel ") + s.config.name + " (grid " + Dim(s.config.grid) + ", block " + Dim(s.config.block);
  if (s.block_order == BlockOrder::kReverse) out += ", block order reverse";
  if (s.block_order == BlockOrder::kShuffle) {
    out += ", block order shuffle:" + std::to_string(s.shuffle_seed) + " launch " + std::to_string(s.ordered_launches);
  }
  return out + ")";
}

std::string Where() {
  return Launch() + ", block (" + std::to_string(blockIdx.x) + "," + std::to_string(blockIdx.y) + "," +
         std::to_string(blockIdx.z) + ")";
}

std::string Hex(const void* address) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%" PRIxPTR, reinterpret_cast<uintptr_t>(address));
  return text;
}

// Aborts, or (tests) abandons the launch: from a fiber, control goes back to the launching thread
// for good; from the launching thread, the caller returns. `where` names the place (Where() for a
// fault inside a block).
void FaultAt(const std::string& where, const std::string& what) {
  Scheduler& s = S();
  const std::string message = "envforge CUDA emulator: " + where + ": " + what;
  if (s.abort_on_fault) {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::fflush(stderr);
    std::abort();
  }
  s.faulted = true;
  s.fault_message = message;
  if (s.current >= 0) {
    Fiber& self = s.fibers[s.current];
    s.current = -1;
    SwitchContext(self.context, s.main_context, /*leaving_for_good=*/true);
    std::abort();  // never resumed
  }
}

void Fault(const std::string& what) { FaultAt(Where(), what); }

std::string ThreadName() {
  return "thread (" + std::to_string(threadIdx.x) + "," + std::to_string(threadIdx.y) + "," +
         std::to_string(threadIdx.z) + ")";
}

// ---- memory regions (the shared-memory operand checks)

struct AddressRange {
  uintptr_t begin, end;
};

// The writable segments of the loaded modules: where `static` (so `__shared__`) variables live.
const std::vector<AddressRange>& StaticStorage() {
  static const std::vector<AddressRange>* ranges = [] {
    auto* found = new std::vector<AddressRange>();
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
          auto* out = static_cast<std::vector<AddressRange>*>(data);
          for (int i = 0; i < info->dlpi_phnum; ++i) {
            const ElfW(Phdr)& header = info->dlpi_phdr[i];
            if (header.p_type != PT_LOAD || (header.p_flags & PF_W) == 0) continue;
            const uintptr_t begin = info->dlpi_addr + header.p_vaddr;
            out->push_back({begin, begin + header.p_memsz});
          }
          return 0;
        },
        found);
    return found;
  }();
  return *ranges;
}

bool InDynamicSharedArray(uintptr_t begin, uintptr_t end) {
  const auto base = reinterpret_cast<uintptr_t>(internal::dynamic_shared_memory);
  return end > base && begin < base + internal::kMaxDynamicSharedBytes;
}

// [address, address + bytes) lies in the launch's dynamic shared memory or in static storage
// outside the dynamic shared memory array (see emulator.h: the emulator's notion of a static
// `__shared__` variable).
bool InSharedMemory(const void* address, size_t bytes) {
  const auto begin = reinterpret_cast<uintptr_t>(address), end = begin + bytes;
  const auto base = reinterpret_cast<uintptr_t>(internal::dynamic_shared_memory);
  if (InDynamicSharedArray(begin, end)) return begin >= base && end <= base + S().config.shared_bytes;
  for (const AddressRange& range : StaticStorage()) {
    if (begin >= range.begin && end <= range.end) return true;
  }
  return false;
}

std::string DescribeSharedRegion() {
  return "shared memory is the launch's " + std::to_string(S().config.shared_bytes) +
         " bytes of dynamic shared memory at " + Hex(internal::dynamic_shared_memory) +
         " and static __shared__ variables";
}

// "0-31, 64, 96-127": thread indices (linear) in compact form.
std::string Ranges(const std::vector<int>& threads) {
  std::string out;
  for (size_t i = 0; i < threads.size();) {
    size_t j = i;
    while (j + 1 < threads.size() && threads[j + 1] == threads[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(threads[i]);
    if (j > i) out += "-" + std::to_string(threads[j]);
    i = j + 1;
  }
  return out;
}

std::string DescribeDeadlock() {
  const Scheduler& s = S();
  std::string out = "deadlock: no thread can run;";
  for (int id = 0; id < kNamedBarriers; ++id) {
    std::vector<int> waiting;
    for (int t = 0; t < s.thread_count; ++t) {
      if (s.fibers[t].wait == Wait::kBarrier && s.fibers[t].barrier_id == id) waiting.push_back(t);
    }
    if (waiting.empty()) continue;
    out += " threads " + Ranges(waiting) + " wait at " +
           (id == 0 && s.barriers[0].expected == s.thread_count ? std::string("__syncthreads (barrier 0)")
                                                                : "barrier " + std::to_string(id)) +
           " (" + std::to_string(s.barriers[id].arrived) + " of " + std::to_string(s.barriers[id].expected) +
           " arrived);";
  }
  for (int w = 0; w * 32 < s.thread_count; ++w) {
    std::vector<int> waiting;
    for (int t = w * 32; t < std::min(s.thread_count, w * 32 + 32); ++t) {
      if (s.fibers[t].wait == Wait::kWarp) waiting.push_back(t);
    }
    if (waiting.empty()) continue;
    out += " threads " + Ranges(waiting) + " wait at warp collective " + s.warps[w].what + " (" +
           std::to_string(s.warps[w].arrived) + " of " + std::to_string(s.warps[w].lanes) + " lanes arrived);";
  }
  std::vector<int> done;
  for (int t = 0; t < s.thread_count; ++t) {
    if (s.fibers[t].wait == Wait::kDone) done.push_back(t);
  }
  out += done.empty() ? " no thread has exited" : " threads " + Ranges(done) + " have exited";
  return out;
}

// ---- one block

void RunBlock() {
  Scheduler& s = S();
  const dim3& block = s.config.block;
  s.finished = 0;
  s.ring_head = 0;
  s.ring_size = 0;
  for (Barrier& barrier : s.barriers) barrier = Barrier{};
  for (int w = 0; w * 32 < s.thread_count; ++w) {
    s.warps[w].arrived = 0;
    s.warps[w].lanes = std::min(32, s.thread_count - w * 32);
    s.warps[w].what = nullptr;
    s.warps[w].combine = nullptr;
  }
  for (int t = 0; t < s.thread_count; ++t) {
    Fiber& fiber = s.fibers[t];
    fiber.thread_idx = uint3{t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
    fiber.wait = Wait::kRunnable;
    PrepareStack(fiber);
    Push(t);
  }
  if (s.config.shared_bytes > 0) {
    for (size_t offset = 0; offset < s.config.shared_bytes; offset += 4) {
      std::memcpy(internal::dynamic_shared_memory + offset, &kGarbageWord,
                  std::min<size_t>(4, s.config.shared_bytes - offset));
    }
  }
  ++s.stats.blocks;
  for (;;) {
    const int next = Pop();
    if (next >= 0) {
      Enter(next, s.main_context);
      s.current = -1;
      if (s.faulted) return;
      continue;
    }
    if (s.finished == s.thread_count) return;
    Fault(DescribeDeadlock());
    return;
  }
}

// ---- block order

// A bijection on [0, 2^bits) keyed by `keys`: multiplication by an odd number, an xor-shift and an
// addition, each invertible modulo 2^bits, three rounds.
uint64_t MixBits(uint64_t x, int bits, const uint64_t (&keys)[6]) {
  const uint64_t mask = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  const int shift = (bits + 1) / 2;
  for (int round = 0; round < 3; ++round) {
    x = (x * (keys[2 * round] | 1)) & mask;
    x ^= x >> shift;
    x = (x + keys[2 * round + 1]) & mask;
  }
  return x;
}

uint64_t SplitMix(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Position i of the launch's block order -> the linear block index (x fastest). Shuffle walks the
// cycle of a bijection on the next power of two until it lands inside [0, blocks): a bijection on
// [0, blocks) without storing it.
class BlockPermutation {
 public:
  BlockPermutation(uint64_t blocks, BlockOrder order, uint64_t seed, uint64_t launch) : blocks_(blocks), order_(order) {
    while (bits_ < 64 && (uint64_t{1} << bits_) < blocks) ++bits_;
    uint64_t state = seed ^ (launch * 0xD1B54A32D192ED03ull);
    for (uint64_t& key : keys_) key = SplitMix(state);
  }
  uint64_t At(uint64_t i) const {
    switch (order_) {
      case BlockOrder::kForward: return i;
      case BlockOrder::kReverse: return blocks_ - 1 - i;
      case BlockOrder::kShuffle: {
        uint64_t x = i;
        do {
          x = MixBits(x, bits_, keys_);
        } while (x >= blocks_);
        return x;
      }
    }
    return i;
  }

 private:
  uint64_t blocks_;
  BlockOrder order_;
  int bits_ = 0;
  uint64_t keys_[6] = {};
};

void ChooseBlockOrderFromEnvironment() {
  Scheduler& s = S();
  s.block_order_chosen = true;
  const char* value = std::getenv("ENVFORGE_EMULATOR_BLOCK_ORDER");
  if (value == nullptr || *value == '\0') return;
  const std::string text = value;
  if (text == "forward") {
    s.block_order = BlockOrder::kForward;
  } else if (text == "reverse") {
    s.block_order = BlockOrder::kReverse;
  } else if (text == "shuffle") {
    s.block_order = BlockOrder::kShuffle;
  } else if (text.rfind("shuffle:", 0) == 0 && text.size() > 8 &&
             text.find_first_not_of("0123456789", 8) == std::string::npos && text.size() <= 8 + 19) {
    s.block_order = BlockOrder::kShuffle;
    s.shuffle_seed = std::strtoull(text.c_str() + 8, nullptr, 10);
  } else {
    std::fprintf(stderr,
                 "envforge CUDA emulator: ENVFORGE_EMULATOR_BLOCK_ORDER=\"%s\" is not forward, reverse, shuffle or "
                 "shuffle:<decimal seed>\n",
                 value);
    std::fflush(stderr);
    std::abort();
  }
}

// A partial warp (a block size that is not a multiple of 32) may name its lanes exactly or pass
// the usual full mask.
void CheckMask(const char* what, unsigned mask, int lanes) {
  const unsigned full = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
  if (mask != full && mask != 0xffffffffu) {
    char text[160];
    std::snprintf(text, sizeof text, "%s with mask 0x%08x in a warp of %d lanes: only full masks are emulated", what,
                  mask, lanes);
    Fault(text);
  }
}

}  // namespace
}  // namespace envforge::cuda_emulation

#if ENVFORGE_EMULATION_ASAN
// LeakSanitizer: a fiber abandoned by a fault (SetAbortOnFault(false)) never runs the destructors
// of its frames, so the fault message's temporaries stay allocated; kernel code allocates nothing,
// so what fibers allocated is left out of the leak report. (The hook ASan's runtime calls; an
// executable may define only one.)
extern "C" const char* __lsan_default_suppressions() { return "leak:envforge_emu_fiber_entry\n"; }
#endif

extern "C" [[noreturn]] void envforge_emu_fiber_entry() {
  using namespace envforge::cuda_emulation;
  FinishSwitch(nullptr);  // the first entry: the switch that started this fiber ends here
  Scheduler& s = S();
  s.body(s.closure);
  s.fibers[s.current].wait = Wait::kDone;
  ++s.finished;
  Suspend();
  std::abort();  // a finished fiber is never resumed
}

namespace envforge::cuda_emulation {

// ---- internal entry points

namespace internal {

cudaError_t RunGrid(const LaunchConfig& config, void (*body)(const void*), const void* closure) {
  Scheduler& s = S();
  std::lock_guard<std::mutex> lock(s.launch_mutex);
  const dim3 &grid = config.grid, &block = config.block;
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (block.x == 0 || block.y == 0 || block.z == 0 || block.x > 1024 || block.y > 1024 || block.z > 64 ||
      threads > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 ||
      grid.z > 65535) {
    RecordError(cudaErrorInvalidConfiguration);
    return cudaErrorInvalidConfiguration;
  }
  if (config.kernel == nullptr) {
    RecordError(cudaErrorInvalidDeviceFunction);
    return cudaErrorInvalidDeviceFunction;
  }
  int limit = kDefaultDynamicSharedBytes;
  {
    std::lock_guard<std::mutex> attribute_lock(attribute_mutex);
    auto it = max_dynamic_shared.find(config.kernel);
    if (it != max_dynamic_shared.end()) limit = it->second;
  }
  if (config.shared_bytes > static_cast<size_t>(limit)) {
    RecordError(cudaErrorInvalidValue);
    return cudaErrorInvalidValue;
  }

  if (!s.block_order_chosen) ChooseBlockOrderFromEnvironment();
#if ENVFORGE_EMULATION_ASAN
  // The dynamic shared memory array past the launch's size is not shared memory (as for ldmatrix
  // and cp.async above): ASan reports a kernel's access there.
  ASAN_UNPOISON_MEMORY_REGION(internal::dynamic_shared_memory, config.shared_bytes);
  ASAN_POISON_MEMORY_REGION(internal::dynamic_shared_memory + config.shared_bytes,
                            internal::kMaxDynamicSharedBytes - config.shared_bytes);
#endif
  s.config = config;
  s.body = body;
  s.closure = closure;
  s.thread_count = static_cast<int>(threads);
  s.faulted = false;
  ++s.stats.launches;
  blockDim = block;
  gridDim = grid;
  const uint64_t blocks = uint64_t{grid.x} * grid.y * grid.z;
  ++s.ordered_launches;
  const BlockPermutation permutation(blocks, s.block_order, s.shuffle_seed, s.ordered_launches);
  for (uint64_t i = 0; i < blocks && !s.faulted; ++i) {
    const uint64_t linear = permutation.At(i);
    blockIdx = uint3{static_cast<unsigned>(linear % grid.x), static_cast<unsigned>((linear / grid.x) % grid.y),
                     static_cast<unsigned>(linear / (uint64_t{grid.x} * grid.y))};
    RunBlock();
  }
  if (!s.faulted) {
    const std::string damage = CheckDeviceMemoryGuards();
    if (!damage.empty()) FaultAt(Launch(), "after the launch: " + damage);
  }
  if (s.faulted) {
    s.pending_fault = true;
    RecordError(cudaErrorLaunchFailure);
    return cudaErrorLaunchFailure;
  }
  return cudaSuccess;
}

LaneSlot& WarpCollective(const char* what, unsigned mask, Combine combine, const void* in, size_t in_bytes) {
  Scheduler& s = S();
  if (s.current < 0) {
    std::fprintf(stderr, "envforge CUDA emulator: %s called outside a kernel\n", what);
    std::abort();
  }
  const int thread = s.current, lane = thread % 32;
  Warp& warp = s.warps[thread / 32];
  CheckMask(what, mask, warp.lanes);
  if (warp.arrived == 0) {
    warp.what = what;
    warp.combine = combine;
  } else if (warp.combine != combine) {
    Fault("warp " + std::to_string(thread / 32) + " diverged: lane " + std::to_string(lane) + " is at " + what +
          " while other lanes wait at " + warp.what);
  }
  if (in_bytes > 0) std::memcpy(warp.slots[lane].in, in, in_bytes);
  if (++warp.arrived == warp.lanes) {
    warp.arrived = 0;
    combine(warp.slots, warp.lanes);
    const int first = thread - lane;
    for (int t = first; t < first + warp.lanes; ++t) {
      if (s.fibers[t].wait == Wait::kWarp) {
        s.fibers[t].wait = Wait::kRunnable;
        Push(t);
      }
    }
    return warp.slots[lane];
  }
  s.fibers[thread].wait = Wait::kWarp;
  Suspend();
  return warp.slots[lane];
}

namespace {

struct ShuffleIn {
  uint64_t bits;
  int mode;
  int lane_arg;
  int width;
};

void CombineShuffle(LaneSlot* lanes, int lane_count) {
  for (int lane = 0; lane < lane_count; ++lane) {
    ShuffleIn in;
    std::memcpy(&in, lanes[lane].in, sizeof in);
    const int width = in.width;
    const int segment = lane & ~(width - 1);
    int source = lane;
    switch (static_cast<ShuffleMode>(in.mode)) {
      case ShuffleMode::kIndex: source = segment + (in.lane_arg & (width - 1)); break;
      case ShuffleMode::kUp: source = (lane - segment) >= in.lane_arg ? lane - in.lane_arg : lane; break;
      case ShuffleMode::kDown: source = (lane - segment) + in.lane_arg < width ? lane + in.lane_arg : lane; break;
      case ShuffleMode::kXor: {
        const int target = lane ^ in.lane_arg;
        source = target < segment + width ? target : lane;  // later segments give the own value
        break;
      }
    }
    if (source >= lane_count) source = lane;  // a partial warp's missing lanes: the own value
    std::memcpy(lanes[lane].out, lanes[source].in, sizeof(uint64_t));
  }
}

void CombineVote(LaneSlot* lanes, int lane_count) {
  unsigned ballot = 0;
  for (int lane = 0; lane < lane_count; ++lane) {
    if (lanes[lane].in[0] != 0) ballot |= 1u << lane;
  }
  for (int lane = 0; lane < lane_count; ++lane) std::memcpy(lanes[lane].out, &ballot, sizeof ballot);
}

void CombineNothing(LaneSlot*, int) {}

}  // namespace

uint64_t Shuffle(unsigned mask, uint64_t bits, ShuffleMode mode, int lane_arg, int width) {
  if (width < 1 || width > 32 || (width & (width - 1)) != 0)
    Fault("shuffle width " + std::to_string(width) + " is not a power of two <= 32");
  const ShuffleIn in{bits, static_cast<int>(mode), lane_arg, width};
  const LaneSlot& slot = WarpCollective("__shfl*_sync", mask, CombineShuffle, &in, sizeof in);
  uint64_t out;
  std::memcpy(&out, slot.out, sizeof out);
  return out;
}

unsigned Vote(unsigned mask, bool predicate) {
  const unsigned char in = predicate ? 1 : 0;
  const LaneSlot& slot = WarpCollective("__ballot_sync/__any_sync/__all_sync", mask, CombineVote, &in, 1);
  unsigned out;
  std::memcpy(&out, slot.out, sizeof out);
  return out;
}

void WarpSync(unsigned mask) { WarpCollective("__syncwarp", mask, CombineNothing, nullptr, 0); }

void BlockBarrier() { NamedBarrier(0, static_cast<int>(blockDim.x * blockDim.y * blockDim.z)); }

void RecordError(cudaError_t error) {
  std::lock_guard<std::mutex> lock(error_mutex);
  last_error = error;
}

cudaError_t PeekLastError() {
  std::lock_guard<std::mutex> lock(error_mutex);
  return last_error;
}

cudaError_t TakeLastError() {
  std::lock_guard<std::mutex> lock(error_mutex);
  return std::exchange(last_error, cudaSuccess);
}

cudaError_t TakePendingFault() {
  Scheduler& s = S();
  std::lock_guard<std::mutex> lock(s.launch_mutex);
  return std::exchange(s.pending_fault, false) ? cudaErrorLaunchFailure : cudaSuccess;
}

void SetMaxDynamicSharedBytes(const void* kernel, int bytes) {
  std::lock_guard<std::mutex> lock(attribute_mutex);
  max_dynamic_shared[kernel] = bytes;
}

void HostFault(const std::string& what) {
  Scheduler& s = S();
  const std::string message = "envforge CUDA emulator: " + what;
  std::lock_guard<std::mutex> lock(s.launch_mutex);
  if (s.abort_on_fault) {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::fflush(stderr);
    std::abort();
  }
  s.fault_message = message;
  s.pending_fault = true;
  RecordError(cudaErrorLaunchFailure);
}

void MisalignedAccess(const char* what, const void* address, size_t bytes, size_t alignment) {
  if (S().current < 0) {
    std::fprintf(stderr, "envforge CUDA emulator: %s called outside a kernel\n", what);
    std::abort();
  }
  Fault(ThreadName() + ": misaligned address: " + what + " of a " + std::to_string(bytes) + "-byte value at " +
        Hex(address) + ", which is not " + std::to_string(alignment) + "-byte aligned");
}

}  // namespace internal

// ---- collectives

void NamedBarrier(int id, int thread_count) {
  Scheduler& s = S();
  if (s.current < 0) {
    std::fprintf(stderr, "envforge CUDA emulator: a barrier was called outside a kernel\n");
    std::abort();
  }
  if (id < 0 || id >= kNamedBarriers) Fault("bar.sync " + std::to_string(id) + ": barrier ids are 0..15");
  // bar.sync's count is a multiple of the warp size (or the whole block); a count above the
  // block's threads could never be reached.
  if (thread_count <= 0 || thread_count > s.thread_count ||
      (thread_count % 32 != 0 && thread_count != s.thread_count)) {
    Fault("bar.sync " + std::to_string(id) + ", " + std::to_string(thread_count) + " in a block of " +
          std::to_string(s.thread_count) + " threads");
  }
  Barrier& barrier = s.barriers[id];
  if (barrier.arrived == 0) {
    barrier.expected = thread_count;
  } else if (barrier.expected != thread_count) {
    Fault("barrier " + std::to_string(id) + " used with thread counts " + std::to_string(barrier.expected) + " and " +
          std::to_string(thread_count) + " at once");
  }
  if (++barrier.arrived == barrier.expected) {
    barrier.arrived = 0;
    for (int t = 0; t < s.thread_count; ++t) {
      Fiber& fiber = s.fibers[t];
      if (fiber.wait == Wait::kBarrier && fiber.barrier_id == id) {
        fiber.wait = Wait::kRunnable;
        Push(t);
      }
    }
    return;
  }
  Fiber& self = s.fibers[s.current];
  self.wait = Wait::kBarrier;
  self.barrier_id = id;
  Suspend();
}

namespace {

struct LdMatrixIn {
  const unsigned char* row;
  int count;
  int transpose;
};

void CombineLdMatrix(LaneSlot* lanes, int lane_count) {
  LdMatrixIn first;
  std::memcpy(&first, lanes[0].in, sizeof first);
  for (int lane = 1; lane < lane_count; ++lane) {
    LdMatrixIn in;
    std::memcpy(&in, lanes[lane].in, sizeof in);
    if (in.count != first.count || in.transpose != first.transpose)
      Fault("ldmatrix: lanes disagree on .x count or .trans");
  }
  if (lane_count != 32) Fault("ldmatrix in a partial warp");
  if (first.count != 1 && first.count != 2 && first.count != 4) Fault("ldmatrix .x" + std::to_string(first.count));
  // element(m, r, c): row r, column c (16-bit) of matrix m, whose row r lane 8m + r addresses.
  auto element = [lanes](int m, int r, int c) {
    LdMatrixIn in;
    std::memcpy(&in, lanes[8 * m + r].in, sizeof in);
    uint16_t value;
    std::memcpy(&value, in.row + 2 * c, sizeof value);
    return static_cast<uint32_t>(value);
  };
  for (int lane = 0; lane < 32; ++lane) {
    uint32_t regs[4] = {0, 0, 0, 0};
    const int group = lane / 4, pair = 2 * (lane % 4);
    for (int m = 0; m < first.count; ++m) {
      regs[m] = first.transpose ? element(m, pair, group) | element(m, pair + 1, group) << 16
                                : element(m, group, pair) | element(m, group, pair + 1) << 16;
    }
    std::memcpy(lanes[lane].out, regs, sizeof regs);
  }
}

struct MmaIn {
  uint32_t a[4];
  uint32_t b[2];
  float c[4];
};

float Bf16(uint32_t bits) { return __uint_as_float(bits << 16); }

float E4m3(uint32_t byte) {
  // e4m3 (bias 7, no infinities, S.1111.111 is NaN): every value is exact in fp32.
  const uint32_t sign = byte & 0x80, exponent = (byte >> 3) & 0xf, mantissa = byte & 7;
  float magnitude;
  if (exponent == 0xf && mantissa == 7) {
    magnitude = std::numeric_limits<float>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -9);  // subnormal: m / 8 * 2^-6
  } else {
    magnitude = std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, static_cast<int>(exponent) - 7);
  }
  return sign ? -magnitude : magnitude;
}

// Gathers the warp's fragments into plain 16 x K (A), K x 8 (B) and 16 x 8 (C) matrices and
// computes D = A . B + C, k ascending, fp32. `kK` is 16 (bf16: 2 per register) or 32 (e4m3: 4).
template <int kK>
void CombineMma(LaneSlot* lanes, int lane_count) {
  if (lane_count != 32) Fault("mma.sync in a partial warp");
  constexpr int kPerReg = kK / 8;  // elements per 32-bit register
  constexpr int kBits = 32 / kPerReg;
  auto decode = [](uint32_t reg, int index) {
    const uint32_t field = (reg >> (kBits * index)) & ((1u << kBits) - 1);
    return kK == 16 ? Bf16(field) : E4m3(field);
  };
  float a[16][kK], b[kK][8], c[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    MmaIn in;
    std::memcpy(&in, lanes[lane].in, sizeof in);
    const int g = lane / 4, t = lane % 4;
    for (int reg = 0; reg < 4; ++reg) {
      const int row = g + 8 * (reg & 1), col0 = kPerReg * t + (kK / 2) * (reg >> 1);
      for (int i = 0; i < kPerReg; ++i) a[row][col0 + i] = decode(in.a[reg], i);
    }
    for (int reg = 0; reg < 2; ++reg) {
      const int k0 = kPerReg * t + (kK / 2) * reg;
      for (int i = 0; i < kPerReg; ++i) b[k0 + i][g] = decode(in.b[reg], i);
    }
    for (int i = 0; i < 4; ++i) c[g + 8 * (i >> 1)][2 * t + (i & 1)] = in.c[i];
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    float d[4];
    for (int i = 0; i < 4; ++i) {
      const int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
      float sum = c[row][col];
      for (int k = 0; k < kK; ++k) sum += a[row][k] * b[k][col];
      d[i] = sum;
    }
    std::memcpy(lanes[lane].out, d, sizeof d);
  }
}

}  // namespace

void LdMatrix(uint32_t* regs, int count, const void* row_address, bool transpose) {
  Scheduler& s = S();
  // Only the lanes whose addresses are read (8 per matrix) are checked, like the hardware.
  if (s.current >= 0 && s.current % 32 < 8 * std::clamp(count, 0, 4)) {
    const auto address = reinterpret_cast<uintptr_t>(row_address);
    if (address % 16 != 0) {
      Fault(ThreadName() + ": misaligned address: ldmatrix row address " + Hex(row_address) +
            " is not 16-byte aligned");
    }
    if (!InSharedMemory(row_address, 16)) {
      Fault(ThreadName() + ": ldmatrix row address " + Hex(row_address) + " (16 bytes) is outside shared memory (" +
            DescribeSharedRegion() + ")");
    }
  }
  const LdMatrixIn in{static_cast<const unsigned char*>(row_address), count, transpose ? 1 : 0};
  const LaneSlot& slot = internal::WarpCollective("ldmatrix", 0xffffffffu, CombineLdMatrix, &in, sizeof in);
  std::memcpy(regs, slot.out, sizeof(uint32_t) * static_cast<size_t>(std::clamp(count, 0, 4)));
}

void MmaBf16M16N8K16(float* d, const uint32_t* a, const uint32_t* b, const float* c) {
  MmaIn in;
  std::memcpy(in.a, a, sizeof in.a);
  std::memcpy(in.b, b, sizeof in.b);
  std::memcpy(in.c, c, sizeof in.c);
  const LaneSlot& slot = internal::WarpCollective("mma.m16n8k16.bf16", 0xffffffffu, CombineMma<16>, &in, sizeof in);
  std::memcpy(d, slot.out, 4 * sizeof(float));
}

void MmaE4m3M16N8K32(float* d, const uint32_t* a, const uint32_t* b, const float* c) {
  MmaIn in;
  std::memcpy(in.a, a, sizeof in.a);
  std::memcpy(in.b, b, sizeof in.b);
  std::memcpy(in.c, c, sizeof in.c);
  const LaneSlot& slot = internal::WarpCollective("mma.m16n8k32.e4m3", 0xffffffffu, CombineMma<32>, &in, sizeof in);
  std::memcpy(d, slot.out, 4 * sizeof(float));
}

void CpAsync(void* shared_dst, const void* global_src, int copy_bytes, int src_bytes) {
  if ((copy_bytes != 4 && copy_bytes != 8 && copy_bytes != 16) || src_bytes < 0 || src_bytes > copy_bytes) {
    Fault("cp.async of " + std::to_string(copy_bytes) + " bytes with src-size " + std::to_string(src_bytes));
  }
  // Built only for a fault: cp.async is on the hot path of the attention kernels.
  auto copy = [&] {
    return "cp.async of " + std::to_string(copy_bytes) + " bytes from " + Hex(global_src) + " to " + Hex(shared_dst);
  };
  if (reinterpret_cast<uintptr_t>(shared_dst) % static_cast<uintptr_t>(copy_bytes) != 0 ||
      reinterpret_cast<uintptr_t>(global_src) % static_cast<uintptr_t>(copy_bytes) != 0) {
    Fault(ThreadName() + ": misaligned address: " + copy() + ": both must be " + std::to_string(copy_bytes) +
          "-byte aligned");
  }
  if (!InSharedMemory(shared_dst, static_cast<size_t>(copy_bytes))) {
    Fault(ThreadName() + ": " + copy() + ": the destination is outside shared memory (" + DescribeSharedRegion() + ")");
  }
  const auto src = reinterpret_cast<uintptr_t>(global_src);
  if (src_bytes > 0 && InDynamicSharedArray(src, src + static_cast<uintptr_t>(copy_bytes))) {
    Fault(ThreadName() + ": " + copy() + ": the source is in shared memory, not global memory");
  }
  if (src_bytes > 0) std::memcpy(shared_dst, global_src, static_cast<size_t>(src_bytes));
  std::memset(static_cast<unsigned char*>(shared_dst) + src_bytes, 0, static_cast<size_t>(copy_bytes - src_bytes));
}

void SetAbortOnFault(bool abort_on_fault) {
  Scheduler& s = S();
  std::lock_guard<std::mutex> lock(s.launch_mutex);
  s.abort_on_fault = abort_on_fault;
}

void SetBlockOrder(BlockOrder order, uint64_t seed) {
  Scheduler& s = S();
  std::lock_guard<std::mutex> lock(s.launch_mutex);
  s.block_order_chosen = true;
  s.block_order = order;
  s.shuffle_seed = seed;
  s.ordered_launches = 0;
}

BlockOrder CurrentBlockOrder() {
  Scheduler& s = S();
  std::lock_guard<std::mutex> lock(s.launch_mutex);
  if (!s.block_order_chosen) ChooseBlockOrderFromEnvironment();
  return s.block_order;
}

uint64_t CurrentShuffleSeed() {
  Scheduler& s = S();
  std::lock_guard<std::mutex> lock(s.launch_mutex);
  if (!s.block_order_chosen) ChooseBlockOrderFromEnvironment();
  return s.shuffle_seed;
}

const char* BlockOrderName(BlockOrder order) {
  switch (order) {
    case BlockOrder::kForward: return "forward";
    case BlockOrder::kReverse: return "reverse";
    case BlockOrder::kShuffle: return "shuffle";
  }
  return "forward";
}

std::string LastFaultMessage() {
  Scheduler& s = S();
  std::lock_guard<std::mutex> lock(s.launch_mutex);
  return s.fault_message;
}

EmulatorStats Stats() {
  Scheduler& s = S();
  std::lock_guard<std::mutex> lock(s.launch_mutex);
  return s.stats;
}

}  // namespace envforge::cuda_emulation

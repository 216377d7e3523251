// The test programs' main: GoogleTest's, plus a report on a fatal signal, so that a crash on a machine
// without a debugger still says where it happened (addr2line -C -f -e MODULE OFFSET): the faulting
// address and instruction, the unwound backtrace, and the code addresses found on the stack, which
// still name the callers when the unwinder cannot step past the fault (a jump through a bad pointer).
#include <dlfcn.h>
#include <execinfo.h>
#include <gtest/gtest.h>
#include <ucontext.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace {

void say(const char* s) { (void)!write(STDERR_FILENO, s, std::strlen(s)); }

// "module(+0xOFFSET) symbol" for a code address, or false when no loaded module holds it.
bool describe(uintptr_t addr, const char* what) {
  Dl_info info{};
  if (addr == 0 || !dladdr(reinterpret_cast<void*>(addr), &info) || !info.dli_fname) return false;
  char line[1024];
  std::snprintf(line, sizeof line, "  %s %s(+0x%lx) %s\n", what, info.dli_fname,
                static_cast<unsigned long>(addr - reinterpret_cast<uintptr_t>(info.dli_fbase)),
                info.dli_sname ? info.dli_sname : "");
  say(line);
  return true;
}

void on_fatal_signal(int sig, siginfo_t* si, void* ctx) {
  char line[256];
  std::snprintf(line, sizeof line, "\n*** fatal signal: %s at address %p\n", strsignal(sig), si ? si->si_addr : nullptr);
  say(line);
#if defined(__x86_64__)
  const auto* uc = static_cast<const ucontext_t*>(ctx);
  const auto pc = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
  const auto sp = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
  std::snprintf(line, sizeof line, "instruction %#lx, stack %#lx\n", static_cast<unsigned long>(pc), static_cast<unsigned long>(sp));
  say(line);
  describe(pc, "at");
  say("code addresses on the stack (callers, innermost first):\n");
  const auto* stack = reinterpret_cast<const uintptr_t*>(sp);
  for (int i = 0, found = 0; i < 512 && found < 24; ++i) found += describe(stack[i], "ret") ? 1 : 0;
#else
  (void)ctx;
#endif
  say("backtrace:\n");
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
  std::signal(sig, SIG_DFL);  // the default action: the exit status and a core as without this handler
  std::raise(sig);
}

}  // namespace

int main(int argc, char** argv) {
  struct sigaction sa {};
  sa.sa_sigaction = on_fatal_signal;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(sig, &sa, nullptr);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

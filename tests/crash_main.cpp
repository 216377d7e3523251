// The test programs' main: GoogleTest's, plus a backtrace on a fatal signal, so that a crash on a
// machine without a debugger still says where it happened (addr2line -C -f -e PROGRAM OFFSET).
#include <execinfo.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstring>

namespace {

void on_fatal_signal(int sig) {
  const char* name = strsignal(sig);
  const char head[] = "\n*** fatal signal: ";
  (void)!write(STDERR_FILENO, head, sizeof head - 1);
  (void)!write(STDERR_FILENO, name, std::strlen(name));
  (void)!write(STDERR_FILENO, "; backtrace:\n", 13);
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
  std::signal(sig, SIG_DFL);  // the default action: the exit status and a core as without this handler
  std::raise(sig);
}

}  // namespace

int main(int argc, char** argv) {
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, on_fatal_signal);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

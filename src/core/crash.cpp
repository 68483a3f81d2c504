// The fatal-signal handler (see crash.h). Everything the handler calls is async-signal-safe:
// write(2), backtrace_symbols_fd (writes straight to the fd, no malloc), syscall(gettid),
// sigaction/raise. backtrace() itself may load libgcc on its first call, so install() calls
// it once up front.
#include "core/crash.h"

#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>

namespace tandem {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
std::atomic<bool> g_installed{false};
std::atomic<bool> g_reporting{false};

void put(const char* s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= size_t(w);
  }
}

void put_num(uint64_t v, int base) {
  char buf[32];
  int i = int(sizeof buf) - 1;
  buf[i] = '\0';
  do {
    buf[--i] = "0123456789abcdef"[v % uint64_t(base)];
    v /= uint64_t(base);
  } while (v != 0 && i > 0);
  if (base == 16) put("0x");
  put(buf + i);
}

const char* name_of(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    case SIGABRT:
      return "SIGABRT";
  }
  return "signal";
}

void on_fatal(int sig, siginfo_t* info, void*) {
  // A second thread faulting while the first reports waits; the first re-raise ends us all.
  if (g_reporting.exchange(true)) {
    for (;;) ::pause();
  }
  put("\n*** tandem: fatal signal ");
  put_num(uint64_t(sig), 10);
  put(" (");
  put(name_of(sig));
  put(")");
  if (sig != SIGABRT && info) {
    put(" at address ");
    put_num(uint64_t(reinterpret_cast<uintptr_t>(info->si_addr)), 16);
  }
  put(" in thread ");
  put_num(uint64_t(::syscall(SYS_gettid)), 10);
  put(" of pid ");
  put_num(uint64_t(::getpid()), 10);
  put("; backtrace (resolve with addr2line -Cfpie <binary> <+offset>, or gdb on the core):\n");
  void* frames[64];
  int n = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, n, STDERR_FILENO);
  put("*** end of backtrace\n");
  // Default action again, then re-raise: the process dies by this signal (core dump where
  // enabled). SA_NODEFER lets it land now rather than when the handler returns.
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
  // A fault re-executes on return and now takes the default action; _exit as a backstop.
  if (sig != SIGSEGV && sig != SIGBUS && sig != SIGFPE && sig != SIGILL) ::_exit(128 + sig);
}

}  // namespace

void install_crash_handler() {
  if (g_installed.exchange(true)) return;
  {
    void* warm[2];
    (void)::backtrace(warm, 2);  // loads the unwinder now, not inside the handler
  }
  // An alternate stack, so a stack overflow (SIGSEGV on the guard page) is reported too.
  // It lives for the process; the engine and I/O threads use their own (faults on them run
  // the handler on their stack, which is fine short of an overflow there).
  static char alt_stack[1 << 16];
  stack_t ss;
  std::memset(&ss, 0, sizeof ss);
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof alt_stack;
  ::sigaltstack(&ss, nullptr);
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fatal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  for (int sig : kSignals) ::sigaction(sig, &sa, nullptr);
}

}  // namespace tandem

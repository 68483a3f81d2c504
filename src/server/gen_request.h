#pragma once
// One generation request, whichever API it came through. The OpenAI and Ollama parsers
// validate their JSON into this; prepare.cpp turns it into engine requests.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/tool_call_parser.h"

namespace tandem::server {

using json = nlohmann::ordered_json;

// kResponses: OpenAI's Responses API; kAnthropic: Anthropic's Messages API (both chat).
enum class Api {
  kOpenAIChat,
  kOpenAICompletion,
  kOllamaChat,
  kOllamaGenerate,
  kResponses,
  kAnthropic
};

inline bool is_openai(Api a) {
  return a == Api::kOpenAIChat || a == Api::kOpenAICompletion || a == Api::kResponses;
}
inline bool is_chat(Api a) {
  return a == Api::kOpenAIChat || a == Api::kOllamaChat || a == Api::kResponses ||
         a == Api::kAnthropic;
}

struct Message {
  std::string role;  // system | user | assistant | tool
  std::string content;
  std::string reasoning;             // an assistant turn's thinking, if the client sent it
  std::vector<ToolCall> tool_calls;  // assistant
  std::string tool_call_id;          // tool (OpenAI)
  std::string name;                  // tool (Ollama tool_name)
};

enum class ToolChoice { kAuto, kNone, kRequired, kNamed };

// Sampling fields as sent; unset ones take the model's defaults (which depend on thinking).
struct SamplingFields {
  std::optional<double> temperature, top_p, min_p, repetition_penalty, presence_penalty,
      frequency_penalty;
  std::optional<int> top_k, penalty_last_n;
  std::optional<uint64_t> seed;
};

struct GenRequest {
  Api api = Api::kOpenAIChat;
  std::string model;

  // Chat: messages (+ tools). Completion/generate: prompts (text) or prompt_ids (tokens).
  std::vector<Message> messages;
  json tools = json::array();  // OpenAI shape: [{type:"function", function:{name,...}}]
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_name;  // kNamed
  std::vector<std::string> prompts;
  std::vector<std::vector<int32_t>> prompt_ids;
  std::string system;  // Ollama generate
  bool raw = false;    // Ollama generate: no template
  bool echo = false;   // OpenAI completions

  std::optional<bool> think;  // per-request thinking switch
  std::optional<int> thinking_budget;

  SamplingFields sampling;
  std::optional<int> max_tokens;  // unset: up to the context
  std::optional<int> num_ctx;     // Ollama: context window for this request
  std::vector<std::string> stop;
  int n = 1;
  bool ignore_eos = false;

  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;
  int top_logprobs = 0;

  bool load_only = false;  // Ollama: no prompt/messages, just "load the model"
  bool unload = false;     // Ollama keep_alive 0 with load_only
};

GenRequest parse_openai_chat(const json& body);
GenRequest parse_openai_completion(const json& body);
GenRequest parse_ollama_chat(const json& body);
GenRequest parse_ollama_generate(const json& body);

}  // namespace tandem::server

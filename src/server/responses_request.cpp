// Responses API request bodies -> GenRequest: input items become the chat messages the
// Qwen3 template renders; every field is checked, and what tandem cannot do is a 400 that
// names the field.
#include <limits>

#include "server/formatter.h"
#include "server/json_fields.h"
#include "server/responses.h"

namespace tandem::server {
namespace {
using namespace fields;

constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();

[[noreturn]] void unsupported(const std::string& param, const std::string& why) {
  throw ApiError(400, "invalid_request_error", param, why);
}

// Text of a message's content: a string or a list of text parts.
std::string content_text(const json& c, const std::string& where) {
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array())
    bad_field(where, "'{}' must be a string or an array of content parts, got {}", where,
              type_name(c));
  std::string text;
  for (size_t i = 0; i < c.size(); ++i) {
    const json& p = c[i];
    const std::string pw = where + "[" + std::to_string(i) + "]";
    if (!p.is_object()) bad_field(pw, "'{}' must be an object", pw);
    auto type = get_string(p, "type").value_or("");
    if (type == "input_text" || type == "output_text" || type == "text" || type == "summary_text" ||
        type == "reasoning_text") {
      const json* t = find(p, "text");
      if (!t || !t->is_string()) bad_field(pw + ".text", "'{}.text' must be a string", pw);
      text += t->get<std::string>();
    } else if (type == "refusal") {
      if (const json* r = find(p, "refusal"); r && r->is_string()) text += r->get<std::string>();
    } else if (type == "input_image" || type == "input_file" || type == "input_audio") {
      unsupported(pw + ".type", "content part type '" + type +
                                    "' is not supported: Qwen3 text models read text only");
    } else {
      bad_field(pw + ".type", "unknown content part type '{}'", type);
    }
  }
  return text;
}

// An input item with its type spelled out and an id, checked.
json normalise_item(const json& item, size_t i, ResponseStore& store) {
  const std::string where = "input[" + std::to_string(i) + "]";
  if (!item.is_object()) bad_field(where, "'{}' must be an object, got {}", where, type_name(item));
  json it = item;
  std::string type = get_string(item, "type").value_or(item.contains("role") ? "message" : "");
  if (type == "item_reference") {
    auto id = get_string(item, "id");
    if (!id) bad_field(where + ".id", "an item_reference needs 'id'");
    auto found = store.find_item(*id);
    if (!found)
      throw ApiError(404, "invalid_request_error", where + ".id",
                     "item '" + *id + "' is not in any stored response", "item_not_found");
    return *found;
  }
  it["type"] = type;
  if (type == "message") {
    auto role = get_string(item, "role");
    if (!role ||
        (*role != "user" && *role != "assistant" && *role != "system" && *role != "developer"))
      bad_field(where + ".role", "'{}.role' must be user, assistant, system or developer", where);
    const json* c = find(item, "content");
    if (!c) bad_field(where + ".content", "'{}.content' is required", where);
    std::string text = content_text(*c, where + ".content");  // checks the parts
    if (c->is_string())  // stored and listed as parts, as OpenAI does
      it["content"] = json::array(
          {{{"type", *role == "assistant" ? "output_text" : "input_text"}, {"text", text}}});
    if (!it.contains("id")) it["id"] = random_id("msg_", 24);
  } else if (type == "function_call") {
    for (const char* k : {"call_id", "name", "arguments"})
      if (!get_string(item, k))
        bad_field(where + "." + k, "a function_call item needs '{}' (a string)", k);
    if (!it.contains("id")) it["id"] = random_id("fc_", 24);
  } else if (type == "function_call_output") {
    if (!get_string(item, "call_id"))
      bad_field(where + ".call_id", "a function_call_output item needs 'call_id'");
    const json* o = find(item, "output");
    if (!o) bad_field(where + ".output", "a function_call_output item needs 'output'");
    content_text(*o, where + ".output");
    if (!it.contains("id")) it["id"] = random_id("fco_", 24);
  } else if (type == "reasoning") {
    for (const char* k : {"content", "summary"})
      if (const json* c = find(item, k)) content_text(*c, where + "." + k);
    if (!it.contains("id")) it["id"] = random_id("rs_", 24);
  } else if (type.empty()) {
    bad_field(where + ".type", "'{}' needs a 'type' (or a 'role' for a message)", where);
  } else {
    unsupported(where + ".type", "input item type '" + type +
                                     "' is not supported (supported: message, function_call, "
                                     "function_call_output, reasoning, item_reference)");
  }
  return it;
}

// The items as the chat messages the template renders.
std::vector<Message> to_messages(const json& items, const json& instructions) {
  std::vector<Message> out;
  if (instructions.is_string() && !instructions.get<std::string>().empty())
    out.push_back(Message{"system", instructions.get<std::string>(), {}, {}, {}, {}});
  std::string reasoning;    // a reasoning item waits for the assistant turn it belongs to
  bool calls_open = false;  // the last message is an assistant turn that calls may join
  for (const json& it : items) {
    const std::string type = it.value("type", std::string());
    if (type == "message") {
      Message m;
      m.role = it["role"] == "developer" ? "system" : it["role"].get<std::string>();
      m.content = content_text(it["content"], "input");
      if (m.role == "assistant") {
        m.reasoning = std::move(reasoning);
        reasoning.clear();
      }
      calls_open = m.role == "assistant";
      out.push_back(std::move(m));
    } else if (type == "function_call") {
      if (!calls_open) {
        out.push_back(Message{"assistant", "", reasoning, {}, {}, {}});
        reasoning.clear();
        calls_open = true;
      }
      out.back().tool_calls.push_back(
          {it["name"].get<std::string>(), it["arguments"].get<std::string>()});
    } else if (type == "function_call_output") {
      Message m;
      m.role = "tool";
      m.content = content_text(it["output"], "input");
      m.tool_call_id = it["call_id"].get<std::string>();
      out.push_back(std::move(m));
      calls_open = false;
    } else if (type == "reasoning") {
      if (const json* c = find(it, "content"); c && !content_text(*c, "input").empty())
        reasoning = content_text(*c, "input");
      else if (const json* s = find(it, "summary"))
        reasoning = content_text(*s, "input");
    }
  }
  return out;
}

void parse_tools(const json& body, ResponsesRequest& r) {
  GenRequest& g = r.gen;
  if (const json* tools = find(body, "tools")) {
    if (!tools->is_array()) bad_field("tools", "'tools' must be an array");
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      const std::string where = "tools[" + std::to_string(i) + "]";
      if (!t.is_object()) bad_field(where, "'{}' must be an object", where);
      auto type = get_string(t, "type").value_or("");
      if (type != "function")
        unsupported(where + ".type",
                    "tool type '" + type + "' is not supported: tandem serves function tools only");
      auto name = get_string(t, "name");
      if (!name || name->empty()) bad_field(where + ".name", "each function tool needs 'name'");
      json f = {{"name", *name}};
      if (auto d = get_string(t, "description")) f["description"] = *d;
      if (const json* p = find(t, "parameters")) {
        if (!p->is_object()) bad_field(where + ".parameters", "'parameters' must be an object");
        f["parameters"] = *p;
      }
      g.tools.push_back(json{{"type", "function"}, {"function", std::move(f)}});
    }
    r.echo["tools"] = *tools;
  } else {
    r.echo["tools"] = json::array();
  }
  const json* tc = find(body, "tool_choice");
  r.echo["tool_choice"] = tc ? *tc : json("auto");
  if (!tc) return;
  if (tc->is_string()) {
    auto s = tc->get<std::string>();
    if (s == "auto")
      g.tool_choice = ToolChoice::kAuto;
    else if (s == "none")
      g.tool_choice = ToolChoice::kNone;
    else if (s == "required")
      g.tool_choice = ToolChoice::kRequired;
    else
      bad_field("tool_choice", "'tool_choice' must be none, auto, required or a function");
  } else if (tc->is_object()) {
    auto type = get_string(*tc, "type").value_or("");
    if (type != "function")
      unsupported("tool_choice", "tool_choice type '" + type +
                                     "' is not supported (supported: none, auto, required, "
                                     "{\"type\": \"function\", \"name\": ...})");
    auto name = get_string(*tc, "name");
    if (!name) bad_field("tool_choice", "'tool_choice' of type function needs 'name'");
    bool known = false;
    for (auto& t : g.tools) known |= t["function"]["name"] == *name;
    if (!known) bad_field("tool_choice", "tool_choice names '{}', which is not in 'tools'", *name);
    g.tool_choice = ToolChoice::kNamed;
    g.tool_choice_name = *name;
  } else {
    bad_field("tool_choice", "'tool_choice' must be a string or an object");
  }
  if (g.tools.empty() && g.tool_choice == ToolChoice::kRequired)
    bad_field("tool_choice", "tool_choice 'required' needs 'tools'");
}

// reasoning.effort -> Qwen3 thinking: none/minimal off; low and medium think within a
// budget; high and xhigh think freely (the server's --thinking-budget still applies).
void parse_reasoning(const json& body, ResponsesRequest& r) {
  json echo = {{"effort", nullptr}, {"summary", nullptr}};
  if (const json* rs = find(body, "reasoning")) {
    if (!rs->is_object()) bad_field("reasoning", "'reasoning' must be an object");
    if (auto e = get_string(*rs, "effort")) {
      if (*e == "none" || *e == "minimal") {
        r.gen.think = false;
      } else if (*e == "low" || *e == "medium" || *e == "high" || *e == "xhigh") {
        r.gen.think = true;
        if (*e == "low") r.gen.thinking_budget = 1024;
        if (*e == "medium") r.gen.thinking_budget = 4096;
      } else {
        bad_field("reasoning.effort",
                  "'reasoning.effort' must be none, minimal, low, medium, high or xhigh, got '{}'",
                  *e);
      }
      echo["effort"] = *e;
    }
    for (const char* k : {"summary", "generate_summary"})
      if (auto s = get_string(*rs, k)) {
        if (*s != "auto" && *s != "concise" && *s != "detailed")
          bad_field(std::string("reasoning.") + k,
                    "'reasoning.{}' must be auto, concise or detailed", k);
        r.summary = true;
        echo["summary"] = *s;
      }
  }
  r.echo["reasoning"] = echo;
}

void parse_text(const json& body, ResponsesRequest& r) {
  json echo = {{"format", {{"type", "text"}}}};
  if (const json* t = find(body, "text")) {
    if (!t->is_object()) bad_field("text", "'text' must be an object");
    if (const json* f = find(*t, "format")) {
      if (!f->is_object()) bad_field("text.format", "'text.format' must be an object");
      auto type = get_string(*f, "type").value_or("");
      if (type == "json_schema" || type == "json_object")
        unsupported("text.format", "text.format '" + type +
                                       "' is not supported yet: tandem has no constrained "
                                       "decoding (structured outputs are planned)");
      if (type != "text") bad_field("text.format", "unknown text.format type '{}'", type);
    }
    if (auto v = get_string(*t, "verbosity")) {
      if (*v != "low" && *v != "medium" && *v != "high")
        bad_field("text.verbosity", "'text.verbosity' must be low, medium or high");
      echo["verbosity"] = *v;
    }
  }
  r.echo["text"] = echo;
}

void parse_sampling(const json& body, ResponsesRequest& r) {
  GenRequest& g = r.gen;
  auto& s = g.sampling;
  s.temperature = get_number(body, "temperature", 0, 2);
  s.top_p = get_number(body, "top_p", 0, 1);
  // Extensions other servers accept in the Responses API too (vLLM's sampling fields).
  if (auto k = get_int(body, "top_k", -1, kMaxInt)) s.top_k = int(*k < 0 ? 0 : *k);
  s.min_p = get_number(body, "min_p", 0, 1);
  s.presence_penalty = get_number(body, "presence_penalty", -2, 2);
  s.frequency_penalty = get_number(body, "frequency_penalty", -2, 2);
  s.repetition_penalty = get_number(body, "repetition_penalty", 0.01, 10);
  s.seed = get_seed(body, "seed");
  g.stop = get_stop(body, "stop", 4);
  if (auto m = get_int(body, "max_output_tokens", 1, kMaxInt)) g.max_tokens = int(*m);
  if (auto t = get_int(body, "top_logprobs", 0, 20)) {
    g.logprobs = true;
    g.top_logprobs = int(*t);
  }
  if (const json* inc = find(body, "include")) {
    if (!inc->is_array()) bad_field("include", "'include' must be an array of strings");
    for (auto& x : *inc) {
      if (!x.is_string()) bad_field("include", "'include' must be an array of strings");
      if (x == "message.output_text.logprobs") r.output_logprobs = g.logprobs = true;
    }
  }
  r.output_logprobs = r.output_logprobs || g.logprobs;
  r.echo["temperature"] = s.temperature ? json(*s.temperature) : json(nullptr);
  r.echo["top_p"] = s.top_p ? json(*s.top_p) : json(nullptr);
  r.echo["top_logprobs"] = g.top_logprobs;
  r.echo["max_output_tokens"] = g.max_tokens ? json(*g.max_tokens) : json(nullptr);
}

}  // namespace

ResponsesRequest parse_responses_request(const json& body, ResponseStore& store) {
  if (!body.is_object()) bad_field("", "the request body must be a JSON object");
  ResponsesRequest r;
  GenRequest& g = r.gen;
  g.api = Api::kResponses;
  auto model = get_string(body, "model");
  if (!model || model->empty()) bad_field("model", "'model' is required");
  g.model = *model;
  r.id = random_id("resp_", 32);

  if (find(body, "prompt"))
    unsupported("prompt", "reusable prompts ('prompt') are not supported; send 'input'");
  if (find(body, "conversation"))
    unsupported("conversation",
                "the Conversations API is not served; chain responses with "
                "'previous_response_id'");
  if (auto t = get_string(body, "truncation"); t && *t != "disabled")
    unsupported("truncation", "truncation '" + *t +
                                  "' is not supported: tandem never drops input items (send "
                                  "'disabled'; a conversation that does not fit is a 400)");
  g.stream = get_bool(body, "stream").value_or(false);
  r.background = get_bool(body, "background").value_or(false);
  if (r.background && g.stream)
    unsupported("background",
                "background responses cannot be streamed here; poll GET /v1/responses/{id}");
  r.store = get_bool(body, "store").value_or(true);
  if (r.background && !r.store)
    bad_field("store", "a background response must be stored ('store': true)");
  get_bool(body, "parallel_tool_calls");  // accepted: the model may write several calls
  if (auto u = find(body, "user"); u && !u->is_string())
    bad_field("user", "'user' must be a string");
  if (const json* md = find(body, "metadata")) {
    if (!md->is_object() || md->size() > 16)
      bad_field("metadata", "'metadata' must be an object of at most 16 string values");
    for (auto& [k, v] : md->items())
      if (!v.is_string() || k.size() > 64 || v.get<std::string>().size() > 512)
        bad_field("metadata",
                  "'metadata' values must be strings (keys up to 64 characters, "
                  "values up to 512)");
  }

  // The conversation: the previous response's, then this input.
  json context = json::array();
  if (auto prev = get_string(body, "previous_response_id")) {
    auto e = store.get(*prev);
    if (!e)
      throw ApiError(404, "invalid_request_error", "previous_response_id",
                     "previous response '" + *prev +
                         "' not found (not stored, deleted, or "
                         "evicted from the server's store)",
                     "previous_response_not_found");
    const std::string st = e->response.value("status", std::string());
    if (st == "queued" || st == "in_progress")
      bad_field("previous_response_id", "previous response '{}' is still in progress", *prev);
    context = e->conversation;
    r.previous_response_id = *prev;
  }
  const json* input = find(body, "input");
  if (!input) bad_field("input", "'input' is required");
  r.input = json::array();
  if (input->is_string()) {
    r.input.push_back({{"id", random_id("msg_", 24)},
                       {"type", "message"},
                       {"role", "user"},
                       {"content", json::array({{{"type", "input_text"}, {"text", *input}}})}});
  } else if (input->is_array()) {
    for (size_t i = 0; i < input->size(); ++i)
      r.input.push_back(normalise_item((*input)[i], i, store));
  } else {
    bad_field("input", "'input' must be a string or an array of items, got {}", type_name(*input));
  }
  for (auto& it : r.input) context.push_back(it);
  if (context.empty()) bad_field("input", "'input' must not be empty");
  r.context = std::move(context);

  const json* ins = find(body, "instructions");
  if (ins && !ins->is_string()) bad_field("instructions", "'instructions' must be a string");
  r.instructions = ins ? *ins : json(nullptr);

  parse_tools(body, r);
  parse_reasoning(body, r);
  parse_text(body, r);
  parse_sampling(body, r);
  g.messages = to_messages(r.context, r.instructions);
  if (g.messages.empty()) bad_field("input", "'input' holds no message");

  r.echo["instructions"] = r.instructions;
  r.echo["metadata"] = find(body, "metadata") ? body["metadata"] : json::object();
  r.echo["parallel_tool_calls"] = get_bool(body, "parallel_tool_calls").value_or(true);
  r.echo["previous_response_id"] =
      r.previous_response_id.empty() ? json(nullptr) : json(r.previous_response_id);
  r.echo["store"] = r.store;
  r.echo["background"] = r.background;
  r.echo["truncation"] = "disabled";
  r.echo["service_tier"] = "default";
  r.echo["user"] = find(body, "user") ? body["user"] : json(nullptr);
  return r;
}

json initial_response(const ResponsesRequest& r, const std::string& status) {
  json j = {{"id", r.id},
            {"object", "response"},
            {"created_at", unix_seconds()},
            {"status", status},
            {"completed_at", nullptr},
            {"error", nullptr},
            {"incomplete_details", nullptr},
            {"model", r.gen.model},
            {"output", json::array()},
            {"usage", nullptr}};
  for (auto& [k, v] : r.echo.items()) j[k] = v;
  return j;
}

}  // namespace tandem::server

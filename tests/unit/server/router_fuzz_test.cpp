// Random damage to valid request bodies: every answer is a 200 or a 4xx in the API's shape,
// never an exception or a 5xx, and a request that starts runs to its end.
#include <gtest/gtest.h>

#include <random>

#include "fake_generator.h"
#include "server/router.h"

using namespace tandem;
using namespace tandem::server;
using tandem::server::testing::FakeGenerator;

namespace {

json random_value(std::mt19937& g, int depth = 0) {
  switch (g() % (depth > 1 ? 7 : 9)) {
    case 0:
      return nullptr;
    case 1:
      return bool(g() % 2);
    case 2:
      return int64_t(g()) - int64_t(1u << 31);
    case 3:
      return std::numeric_limits<int64_t>::max() - int64_t(g() % 3);
    case 4:
      return double(g()) / 1e3 - 2e6;
    case 5:
      return std::string(g() % 5, "ab /\n<"[g() % 6]);
    case 6:
      return "user";
    case 7: {
      json a = json::array();
      for (int i = 0, n = g() % 3; i < n; ++i) a.push_back(random_value(g, depth + 1));
      return a;
    }
    default: {
      json o = json::object();
      const char* keys[] = {"role", "content", "type", "function", "name", "text"};
      for (int i = 0, n = g() % 3; i < n; ++i) o[keys[g() % 6]] = random_value(g, depth + 1);
      return o;
    }
  }
}

// Picks a random node (object member or array element) and damages it.
void mutate(std::mt19937& g, json& j) {
  json* node = &j;
  for (int d = 0; d < 4; ++d) {
    if (node->is_object() && !node->empty() && g() % 2) {
      auto it = node->begin();
      std::advance(it, g() % node->size());
      node = &*it;
    } else if (node->is_array() && !node->empty() && g() % 2) {
      node = &(*node)[g() % node->size()];
    } else {
      break;
    }
  }
  if (node->is_object() && !node->empty() && g() % 3 == 0) {
    auto it = node->begin();
    std::advance(it, g() % node->size());
    node->erase(it);
  } else {
    *node = random_value(g);
  }
}

}  // namespace

TEST(RouterFuzz, DamagedBodiesGetA4xxOrRunToTheEnd) {
  auto tok = tok::load_tokenizer("");
  FakeGenerator fake(
      [&](const engine::Request&) { return tok->encode("ok <tool_call>{\"name\"", true); }, 512);
  ServerContext ctx = tandem::server::testing::test_context(fake, tok);
  Router router(ctx);
  const json bodies[] = {
      json::parse(R"({"model":"tiny","messages":[{"role":"system","content":"s"},{"role":"user",
        "content":"hi /think"}],"max_tokens":5,"stop":["x"],"n":2,"seed":3,"stream":true,
        "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],
        "tool_choice":"auto","logprobs":true,"top_logprobs":1})"),
      json::parse(R"({"model":"tiny","prompt":["a","b"],"max_tokens":4,"echo":true,"logprobs":2})"),
      json::parse(R"({"model":"tiny","messages":[{"role":"user","content":"q"},{"role":"assistant",
        "content":"","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]},{"role":"tool",
        "content":"r"}],"options":{"num_predict":6,"temperature":0.5,"stop":["y"]},"think":true})"),
      json::parse(R"({"model":"tiny","prompt":"p","system":"s","raw":false,"stream":false,
        "options":{"num_ctx":300,"seed":1}})"),
  };
  const char* routes[] = {"/v1/chat/completions", "/v1/completions", "/api/chat", "/api/generate"};
  std::mt19937 g(2024);
  int started = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    int k = int(g() % 4);
    json b = bodies[k];
    for (int m = 0, n = 1 + int(g() % 3); m < n; ++m) mutate(g, b);
    std::string text = b.dump();
    if (g() % 8 == 0) text = text.substr(0, g() % (text.size() + 1));  // truncated
    HttpResponse r = router.handle({"POST", routes[k], text}, [] {});
    ASSERT_TRUE(r.status == 200 || (r.status >= 400 && r.status < 500))
        << r.status << " " << r.body << "\n"
        << text;
    if (r.status != 200) {
      json e = json::parse(r.body);
      ASSERT_TRUE(e.contains("error")) << r.body;
      continue;
    }
    if (!r.gen) continue;  // Ollama "load"
    ++started;
    std::vector<ChoiceDelta> ds;
    for (int s = 0; s < 100 && !r.gen->finished(); ++s) {
      fake.step();
      r.gen->poll(ds);
      for (auto& d : ds) r.fmt->delta(d);
      ds.clear();
    }
    ASSERT_TRUE(r.gen->finished());
    if (!r.stream)
      Router::finish_body(r);
    else
      r.body = r.fmt->finish(r.gen->totals());
    ASSERT_FALSE(r.body.empty());
  }
  EXPECT_GT(started, 100);  // the fuzzing reached generation, not only the parsers
}

#include "model/script_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "core/bf16.h"
#include "core/error.h"
#include "model/config.h"
#include "model/rope.h"
#include "model/testmodel.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;

namespace tandem::model {
namespace {

using Tok = int32_t;

constexpr int kHeadDim = 64;  // 32 RoPE frequencies: sharp peaks at any distance
constexpr int kHalf = kHeadDim / 2;
constexpr int kMaxContext = 24;
constexpr float kQkNorm = 13.0f;         // q_norm = k_norm weight: 42.25 logits per frequency
constexpr float kGate = 32.0f;           // gate logits per unit of agreement
constexpr float kLm = 16.0f;             // lm_head weight of a code bit
constexpr float kEosBias = 80.0f;        // <|im_end|>'s logit from the constant, before the norm
constexpr double kMinPeakMargin = 30.0;  // attention logits, checked at write time
constexpr std::string_view kHeader = "<|im_start|>assistant\n";
constexpr std::string_view kNoThink = "<|im_start|>assistant\n<think>\n\n</think>\n\n";

// Residual stream layout.
constexpr int kConst = 0;    // 1 in every embedding
constexpr int kPad = 1;      // 4 dims: integers making every embedding's norm^2 = hidden / 4
constexpr int kFlag = 5;     // 1 in the trigger token's embedding
constexpr int kFlagOut = 6;  // the trigger head's output: 1 when the context holds a trigger
constexpr int kCur = 7;      // the current token's code, then the n slots, then the output

struct Path {
  std::vector<Tok> toks;  // header (and the empty think block), script, <|im_end|>
  size_t first = 0;       // the first position whose next token the model writes
  int flag = -1;          // -1: any context; 0: no trigger in it; 1: a trigger in it
};

struct Neuron {
  std::vector<Tok> ctx;  // ctx[j]: the token j back (ctx[0] the current one)
  int flag = -1;
  Tok next = 0;
  size_t path = 0, pos = 0;  // where it came from (for error messages)
};

// Four integers whose squares sum to n (Lagrange), found by search; n is small.
std::array<int, 4> four_squares(int n) {
  for (int a = 0; a * a <= n; ++a)
    for (int b = 0; a * a + b * b <= n; ++b)
      for (int c = 0; a * a + b * b + c * c <= n; ++c) {
        int d2 = n - a * a - b * b - c * c;
        int d = int(std::lround(std::sqrt(double(d2))));
        if (d * d == d2) return {a, b, c, d};
      }
  fail(ErrorKind::kInternal, "no four squares sum to {}", n);
}

std::vector<Tok> concat(std::vector<Tok> a, const std::vector<Tok>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<Neuron> neurons_for(const std::vector<Path>& paths, int n) {
  std::vector<Neuron> out;
  for (size_t p = 0; p < paths.size(); ++p) {
    const auto& t = paths[p].toks;
    for (size_t i = paths[p].first; i + 1 < t.size(); ++i) {
      Neuron nr;
      for (size_t j = 0; j <= size_t(n) && j <= i; ++j) nr.ctx.push_back(t[i - j]);
      nr.flag = paths[p].flag;
      nr.next = t[i + 1];
      nr.path = p;
      nr.pos = i;
      bool dup = false;
      for (auto& o : out) dup |= o.ctx == nr.ctx && o.flag == nr.flag && o.next == nr.next;
      if (!dup) out.push_back(std::move(nr));
    }
  }
  return out;
}

bool is_prefix(const std::vector<Tok>& a, const std::vector<Tok>& b) {
  return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
}

// Two neurons that can fire together but write different tokens; nullptr pair when none.
std::pair<const Neuron*, const Neuron*> first_conflict(const std::vector<Neuron>& ns) {
  for (size_t a = 0; a < ns.size(); ++a)
    for (size_t b = a + 1; b < ns.size(); ++b) {
      const Neuron &x = ns[a], &y = ns[b];
      if (x.next == y.next) continue;
      if (x.flag >= 0 && y.flag >= 0 && x.flag != y.flag) continue;
      if (is_prefix(x.ctx, y.ctx) || is_prefix(y.ctx, x.ctx)) return {&x, &y};
    }
  return {nullptr, nullptr};
}

void put(std::vector<float>& w, int64_t cols, int64_t r, int64_t c, float v) {
  w[size_t(r * cols + c)] = v;
}

TensorBlob blob(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& w) {
  TensorBlob t{name, "BF16", std::move(shape), std::vector<uint8_t>(w.size() * 2)};
  for (size_t i = 0; i < w.size(); ++i) {
    bf16 b = float_to_bf16(w[i]);
    t.data[2 * i] = uint8_t(b.bits & 0xff);
    t.data[2 * i + 1] = uint8_t(b.bits >> 8);
  }
  return t;
}

// The exact-integer weights must survive bf16 unchanged.
void require_exact(const std::vector<float>& w, const char* what) {
  for (float v : w)
    if (round_bf16(v) != v)
      fail(ErrorKind::kInvalidArgument,
           "the script is too large for this model's layout ({} weight {} is not exact in "
           "bf16); use a shorter or less repetitive text",
           what, v);
}

// The smallest margin between a position head's score at its own distance and at any other
// distance up to `max_pos`, computed from the stored (bf16) q and k as the runner does.
double peak_margin(const std::vector<float>& q_raw, const std::vector<float>& k_raw,
                   const std::vector<double>& inv_freq, int offset, int max_pos) {
  auto normed = [](const std::vector<float>& v) {
    double ss = 0;
    for (float x : v) ss += double(round_bf16(x)) * round_bf16(x);
    double inv = 1.0 / std::sqrt(ss / double(v.size()) + 1e-6);
    std::vector<double> o(v.size());
    for (size_t i = 0; i < v.size(); ++i) o[i] = double(round_bf16(v[i])) * inv * kQkNorm;
    return o;
  };
  std::vector<double> q = normed(q_raw), k = normed(k_raw);
  const double scale = 1.0 / std::sqrt(double(kHeadDim));
  auto score = [&](int delta) {
    double s = 0;
    for (int i = 0; i < kHalf; ++i) {
      double phi = -double(delta) * inv_freq[size_t(i)];
      double k1 = k[size_t(i)], k2 = k[size_t(i + kHalf)];
      s += q[size_t(i)] * (k1 * std::cos(phi) - k2 * std::sin(phi)) +
           q[size_t(i + kHalf)] * (k1 * std::sin(phi) + k2 * std::cos(phi));
    }
    return s * scale;
  };
  const double peak = score(offset);
  double worst = 1e300;
  for (int d = 0; d < max_pos; ++d)
    if (d != offset) worst = std::min(worst, peak - score(d));
  return worst;
}

}  // namespace

ScriptModelInfo write_script_model(const fs::path& out, const ScriptModelSpec& spec,
                                   const fs::path& tokenizer_dir) {
  auto tok = tok::Tokenizer::load(tokenizer_dir);
  auto id_of = [&](const char* s) {
    auto id = tok->find_token(s);
    if (!id) fail(ErrorKind::kInvalidArgument, "the tokenizer has no token {}", s);
    return Tok(*id);
  };
  const Tok im_start = id_of("<|im_start|>"), im_end = id_of("<|im_end|>"),
            eot = id_of("<|endoftext|>"), trigger = id_of("<tool_response>");
  const std::vector<Tok> header = tok->encode(kHeader);
  const std::vector<Tok> no_think = tok->encode(kNoThink);

  std::vector<Path> paths;
  auto add = [&](const std::string& text, int flag, const char* field) {
    std::vector<Tok> ids = tok->encode(text);
    for (Tok t : ids)
      if (t == im_start || t == im_end || t == eot)
        fail(ErrorKind::kInvalidArgument,
             "{} must not hold <|im_start|>, <|im_end|> or <|endoftext|> (the model ends "
             "its answer with <|im_end|> itself)",
             field);
    paths.push_back({concat(concat(header, ids), {im_end}), header.size() - 1, flag});
    // With thinking off the prompt ends with the empty think block: the answer follows.
    std::string answer = text;
    if (answer.rfind("<think>", 0) == 0) {
      size_t close = answer.find("</think>");
      answer = close == std::string::npos ? "" : answer.substr(close + 8);
      answer.erase(0, answer.find_first_not_of(" \n"));
      if (answer.find_first_not_of(" \n") == std::string::npos) answer.clear();
    }
    paths.push_back(
        {concat(concat(no_think, tok->encode(answer)), {im_end}), no_think.size() - 1, flag});
    // tool_choice naming a function writes the call's start up to its arguments into the
    // prompt; an answer that begins with a call continues from there.
    constexpr std::string_view kArgs = "\"arguments\": ";
    if (size_t a = answer.find(kArgs); answer.rfind("<tool_call>", 0) == 0 && a != answer.npos) {
      const size_t cut = a + kArgs.size();
      auto prompt = tok->encode(std::string(kNoThink) + answer.substr(0, cut));
      paths.push_back({concat(concat(prompt, tok->encode(answer.substr(cut))), {im_end}),
                       prompt.size() - 1, flag});
    }
  };
  const bool has_tool = !spec.tool_text.empty();
  add(spec.text, has_tool ? 0 : -1, "--text");
  if (has_tool) add(spec.tool_text, 1, "--tool-text");

  // Codes: every token the paths hold, in id order.
  std::map<Tok, int> index;
  for (auto& p : paths)
    for (Tok t : p.toks) index[t] = 0;
  int k = 0;
  for (auto& [t, i] : index) i = k++;
  int E = 4;
  while ((1 << E) < int(index.size())) ++E;
  auto code = [&](Tok t, int b) { return (index.at(t) >> b) & 1 ? 1.0f : -1.0f; };

  int n = 2;
  std::vector<Neuron> ns;
  for (;; ++n) {
    ns = neurons_for(paths, n);
    auto [x, y] = first_conflict(ns);
    if (!x) break;
    if (n == kMaxContext) {
      const Neuron* at = x->ctx.size() >= y->ctx.size() ? x : y;
      const auto& t = paths[at->path].toks;
      std::vector<Tok> run(t.begin() + long(at->pos + 1 - at->ctx.size()),
                           t.begin() + long(at->pos + 1));
      fail(ErrorKind::kInvalidArgument,
           "the text cannot be scripted: the {} tokens \"{}\" occur twice with different "
           "continuations; break up the repetition",
           run.size(), tok->decode(run));
    }
  }

  const int slots = kCur + E;  // first slot dim
  const int outd = slots + n * E;
  int H = outd + E;
  H = (H + 3) / 4 * 4;
  const int K = H / 4;  // every embedding's norm^2: RMSNorm then scales by exactly 2
  const int I = int(ns.size() + 7) / 8 * 8;
  const int heads = has_tool ? 2 * n : n, kv_heads = has_tool ? 2 : 1;
  const int64_t V = 151936;

  TestModelSpec s;
  s.preset = "script";
  s.num_layers = 1, s.hidden = H, s.intermediate = I, s.num_heads = heads,
  s.num_kv_heads = kv_heads, s.head_dim = kHeadDim, s.tied = false;
  nlohmann::ordered_json config = test_model_config(s);
  ModelConfig cfg = parse_config(nlohmann::json::parse(config.dump()));
  RopeTable rope = rope_table(cfg);
  std::vector<double> inv_freq;
  for (float f : rope.inv_freq) inv_freq.push_back(double(f));

  // Embeddings.
  std::vector<float> emb(size_t(V * H), 0.0f);
  for (int64_t t = 0; t < V; ++t) {
    const bool scripted = index.count(Tok(t)) > 0, trig = Tok(t) == trigger && has_tool;
    put(emb, H, t, kConst, 1.0f);
    if (trig) put(emb, H, t, kFlag, 1.0f);
    if (scripted)
      for (int b = 0; b < E; ++b) put(emb, H, t, kCur + b, code(Tok(t), b));
    auto pads = four_squares(K - 1 - (scripted ? E : 0) - (trig ? 1 : 0));
    for (int i = 0; i < 4; ++i) put(emb, H, t, kPad + i, float(pads[size_t(i)]));
  }

  // Attention.
  std::vector<float> wq(size_t(heads * kHeadDim * H), 0.0f),
      wk(size_t(kv_heads * kHeadDim * H), 0.0f), wv(size_t(kv_heads * kHeadDim * H), 0.0f),
      wo(size_t(H * heads * kHeadDim), 0.0f);
  std::vector<float> key0(kHeadDim, 0.0f);
  for (int i = 0; i < kHalf; ++i) {
    put(wk, H, i, kConst, 1.0f);
    key0[size_t(i)] = 1.0f;
  }
  for (int h = 0; h < n; ++h) {
    std::vector<float> q(kHeadDim);
    for (int i = 0; i < kHalf; ++i) {
      // Peak at distance h + 1: the query leads the key by that many steps of each frequency.
      double a = -double(h + 1) * inv_freq[size_t(i)];
      q[size_t(i)] = float(std::cos(a));
      q[size_t(i + kHalf)] = float(std::sin(a));
    }
    for (int d = 0; d < kHeadDim; ++d) put(wq, H, h * kHeadDim + d, kConst, q[size_t(d)]);
    double m = peak_margin(q, key0, inv_freq, h + 1, cfg.max_position_embeddings);
    if (m < kMinPeakMargin)
      fail(ErrorKind::kInternal, "script model: head {} peaks only {:.1f} logits above others", h,
           m);
    for (int b = 0; b < E; ++b)
      put(wo, heads * kHeadDim, slots + h * E + b, h * kHeadDim + b, 0.5f);
  }
  for (int b = 0; b < E; ++b) put(wv, H, b, kCur + b, 1.0f);
  if (has_tool) {
    // Head n (the first of KV group 1) attends to the trigger through the slowest frequency.
    put(wq, H, n * kHeadDim + kHalf - 1, kConst, 1.0f);
    put(wk, H, kHeadDim + kHalf - 1, kFlag, 1.0f);
    put(wv, H, kHeadDim, kFlag, 1.0f);
    put(wo, heads * kHeadDim, kFlagOut, n * kHeadDim, 0.5f);
  }

  // MLP: one neuron per script position.
  std::vector<float> wg(size_t(I * H), 0.0f), wu(size_t(I * H), 0.0f), wd(size_t(H * I), 0.0f);
  for (size_t i = 0; i < ns.size(); ++i) {
    const Neuron& nr = ns[i];
    const int64_t r = int64_t(i);
    int good = 0;
    for (size_t j = 0; j < nr.ctx.size(); ++j) {
      const int base = j == 0 ? kCur : slots + int(j - 1) * E;
      for (int b = 0; b < E; ++b) put(wg, H, r, base + b, kGate * code(nr.ctx[j], b));
      good += E;
    }
    if (nr.flag == 1) {
      put(wg, H, r, kFlagOut, 2 * kGate);
      good += 2;
    } else if (nr.flag == 0) {
      put(wg, H, r, kFlagOut, -2 * kGate);
    }
    put(wg, H, r, kConst, -kGate * float(good - 1));
    put(wu, H, r, kConst, 1.0f);
    for (int b = 0; b < E; ++b) put(wd, I, outd + b, r, code(nr.next, b));
  }
  require_exact(wg, "gate");

  std::vector<float> lm(size_t(V * H), 0.0f);
  for (auto& [t, i] : index)
    for (int b = 0; b < E; ++b) put(lm, H, t, outd + b, kLm * code(t, b));
  put(lm, H, im_end, kConst, kEosBias);

  const std::vector<float> ones_h(size_t(H), 1.0f), qk(kHeadDim, kQkNorm);
  std::vector<TensorBlob> t;
  const std::string p = "model.layers.0.";
  t.push_back(blob("model.embed_tokens.weight", {V, H}, emb));
  t.push_back(blob(p + "input_layernorm.weight", {H}, ones_h));
  t.push_back(blob(p + "self_attn.q_proj.weight", {heads * kHeadDim, H}, wq));
  t.push_back(blob(p + "self_attn.k_proj.weight", {kv_heads * kHeadDim, H}, wk));
  t.push_back(blob(p + "self_attn.v_proj.weight", {kv_heads * kHeadDim, H}, wv));
  t.push_back(blob(p + "self_attn.o_proj.weight", {H, heads * kHeadDim}, wo));
  t.push_back(blob(p + "self_attn.q_norm.weight", {kHeadDim}, qk));
  t.push_back(blob(p + "self_attn.k_norm.weight", {kHeadDim}, qk));
  t.push_back(blob(p + "post_attention_layernorm.weight", {H}, ones_h));
  t.push_back(blob(p + "mlp.gate_proj.weight", {I, H}, wg));
  t.push_back(blob(p + "mlp.up_proj.weight", {I, H}, wu));
  t.push_back(blob(p + "mlp.down_proj.weight", {H, I}, wd));
  t.push_back(blob("model.norm.weight", {H}, ones_h));
  t.push_back(blob("lm_head.weight", {V, H}, lm));
  write_model_folder(out, config, t, tokenizer_dir);
  return ScriptModelInfo{n, E, int(ns.size()), H};
}

}  // namespace tandem::model

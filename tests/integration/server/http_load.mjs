// Closed-loop streaming load over HTTP, the serving scenario of TARGETS.md: C clients each
// send R requests one after another (a prompt of P random token ids, O output tokens with
// EOS ignored, greedy, SSE via /v1/completions) and measure output tok/s and TTFT.
// In CI it runs small as a concurrency test (every stream must deliver exactly O tokens);
// on the GPU machine it is the HTTP side of the HTTP-overhead benchmark.
//   node http_load.mjs --url URL --model NAME [--concurrency 8] [--requests 2]
//                      [--prompt-len 400] [--output-len 256] [--check] [--api openai|ollama]
// With --api ollama (raw /api/generate, NDJSON) the server's own timings come back in the
// last line, so the HTTP overhead is measured directly: client TTFT minus the server's
// prompt_eval_duration, and the client's token rate against the server's eval rate.
const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1] && !all[i + 1].startsWith('--') ? all[i + 1] : true]);
  return acc;
}, []));
const url = args.url || process.env.TANDEM_URL;
const model = args.model || 'tiny';
const C = Number(args.concurrency || 8), R = Number(args.requests || 2);
const P = Number(args['prompt-len'] || 400), O = Number(args['output-len'] || 256);

let seed = 12345;
const rand = () => (seed = (seed * 1103515245 + 12345) % 2147483648);
const prompt = () => Array.from({ length: P }, () => 1000 + (rand() % 99000));

const api = args.api || 'openai';
const ttfts = [], overheads = [];
let tokens = 0, passes = 0, fails = 0, serverEvalNs = 0, clientEvalMs = 0;
const words = ['alpha', 'river', 'stone', 'cloud', 'seven', 'market', 'quiet', 'orange'];
const textPrompt = () => Array.from({ length: P }, () => words[rand() % words.length]).join(' ');

async function oneOllama() {
  const t0 = performance.now();
  const res = await fetch(`${url}/api/generate`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model, prompt: textPrompt(), raw: true, stream: true,
      options: { num_predict: O, ignore_eos: true, temperature: 0 } }),
  });
  if (res.status !== 200) throw new Error(`status ${res.status}: ${await res.text()}`);
  let first = null, last = null, buf = '';
  const dec = new TextDecoder();
  for await (const bytes of res.body) {
    if (first === null) first = performance.now();
    buf += dec.decode(bytes, { stream: true });
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const j = JSON.parse(buf.slice(0, i)); buf = buf.slice(i + 1);
      if (j.error) throw new Error(j.error);
      if (j.done) last = j;
    }
  }
  const end = performance.now();
  ttfts.push(first - t0);
  overheads.push(first - t0 - last.prompt_eval_duration / 1e6);
  tokens += last.eval_count;
  serverEvalNs += last.eval_duration;
  clientEvalMs += end - first;
  if (args.check) {
    if (last.eval_count === O) passes++;
    else { fails++; console.log(`FAIL: eval_count ${last.eval_count}`); }
  }
}

async function one() {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model, prompt: prompt(), max_tokens: O, ignore_eos: true, temperature: 0,
      stream: true, stream_options: { include_usage: true } }),
  });
  if (res.status !== 200) throw new Error(`status ${res.status}: ${await res.text()}`);
  let first = null, usage = null, buf = '', done = false;
  const dec = new TextDecoder();
  for await (const bytes of res.body) {
    if (first === null) first = performance.now();
    buf += dec.decode(bytes, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, i); buf = buf.slice(i + 2);
      if (!ev.startsWith('data: ')) continue;
      if (ev === 'data: [DONE]') { done = true; continue; }
      const j = JSON.parse(ev.slice(6));
      if (j.error) throw new Error(j.error.message);
      if (j.usage) usage = j.usage;
    }
  }
  ttfts.push(first - t0);
  tokens += usage ? usage.completion_tokens : 0;
  if (args.check) {
    if (done && usage && usage.completion_tokens === O && usage.prompt_tokens === P) passes++;
    else { fails++; console.log(`FAIL: done=${done} usage=${JSON.stringify(usage)}`); }
  }
}

const t0 = performance.now();
await Promise.all(Array.from({ length: C }, async () => {
  for (let r = 0; r < R; r++) {
    try { await (api === 'ollama' ? oneOllama() : one()); } catch (e) { fails++; console.log(`FAIL: ${e.message}`); }
  }
}));
const wall = (performance.now() - t0) / 1000;
ttfts.sort((a, b) => a - b);
const pct = (p) => ttfts.length ? ttfts[Math.min(ttfts.length - 1, Math.floor(p * ttfts.length))] : NaN;
console.log(JSON.stringify({ concurrency: C, requests: C * R, prompt_len: P, output_len: O,
  output_tokens: tokens, wall_s: +wall.toFixed(3), output_tok_s: +(tokens / wall).toFixed(1),
  ttft_p50_ms: +pct(0.5).toFixed(2), ttft_p99_ms: +pct(0.99).toFixed(2),
  ...(api === 'ollama' ? {
    http_ttft_overhead_p50_ms: +overheads.sort((a, b) => a - b)[Math.floor(overheads.length / 2)].toFixed(3),
    // Client-seen decode time vs the server's: how much slower tokens arrive than they are made.
    stream_time_ratio: +(clientEvalMs / (serverEvalNs / 1e6)).toFixed(4) } : {}) }));
if (args.check) console.log(`${passes} passed, ${fails} failed`);
process.exit(fails ? 1 : 0);

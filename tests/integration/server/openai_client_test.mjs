// The official `openai` npm client against a live tandem (tiny random model, CPU).
// Texts are random, so checks compare the server with itself: streamed == not streamed,
// same seed == same text, stop == the greedy text cut at the stop string.
import OpenAI from 'openai';

const base = process.env.TANDEM_URL;
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0, timeout: 60000 });
let passes = 0, fails = 0;
async function check(name, fn) {
  try { await fn(); passes++; } catch (e) { fails++; console.log(`FAIL: ${name}: ${e.stack || e}`); }
}
function assert(c, msg) { if (!c) throw new Error(msg); }
const user = (content) => [{ role: 'user', content }];
const greedy = { model: 'tiny', temperature: 0, max_tokens: 16 };

async function streamText(params) {
  const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  const out = {}; let usage = null; const ids = new Set();
  for await (const chunk of stream) {
    ids.add(chunk.id);
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      const o = (out[c.index] ??= { content: '', finish: null, role: null });
      if (c.delta.role) o.role = c.delta.role;
      if (c.delta.content) o.content += c.delta.content;
      if (c.finish_reason) o.finish = c.finish_reason;
    }
  }
  assert(ids.size === 1, 'one id across chunks');
  return { out, usage };
}

await check('models', async () => {
  const list = await client.models.list();
  assert(list.data.some((m) => m.id === 'tiny'), 'tiny listed');
  const m = await client.models.retrieve('tiny');
  assert(m.id === 'tiny' && m.object === 'model', 'retrieve');
});

let G = '';
await check('chat, not streamed', async () => {
  const r = await client.chat.completions.create({ ...greedy, messages: user('Hello there') });
  const c = r.choices[0];
  assert(r.object === 'chat.completion', 'object');
  assert(c.message.role === 'assistant' && typeof c.message.content === 'string', 'message');
  assert(['stop', 'length'].includes(c.finish_reason), `finish ${c.finish_reason}`);
  assert(r.usage.completion_tokens > 0 && r.usage.completion_tokens <= 16, 'completion_tokens');
  assert(r.usage.total_tokens === r.usage.prompt_tokens + r.usage.completion_tokens, 'total');
  assert(typeof r.usage.prompt_tokens_details.cached_tokens === 'number', 'cached_tokens');
  G = c.message.content;
});

await check('chat, streamed == not streamed, usage chunk', async () => {
  const { out, usage } = await streamText({ ...greedy, messages: user('Hello there') });
  assert(out[0].role === 'assistant', 'role chunk');
  assert(out[0].content === G, `stream "${out[0].content}" != "${G}"`);
  assert(usage && usage.completion_tokens > 0, 'usage in the last chunk');
});

await check('n=2, streamed and not', async () => {
  const r = await client.chat.completions.create({ model: 'tiny', temperature: 1, seed: 5, n: 2, max_tokens: 8, messages: user('Pick') });
  assert(r.choices.length === 2 && r.choices[0].index === 0 && r.choices[1].index === 1, 'two choices');
  const { out } = await streamText({ model: 'tiny', temperature: 1, seed: 5, n: 2, max_tokens: 8, messages: user('Pick') });
  assert(out[0].content === r.choices[0].message.content && out[1].content === r.choices[1].message.content,
    'streamed n=2 matches');
});

await check('seed reproducibility', async () => {
  const p = { model: 'tiny', temperature: 1.0, top_p: 1, max_tokens: 16, messages: user('Tell me something') };
  const a = await client.chat.completions.create({ ...p, seed: 7 });
  const b = await client.chat.completions.create({ ...p, seed: 7 });
  assert(a.choices[0].message.content === b.choices[0].message.content, 'same seed, same text');
  const c = await client.chat.completions.create({ ...p, seed: 8 });
  const d = await client.chat.completions.create({ ...p, seed: 9 });
  assert(c.choices[0].message.content !== a.choices[0].message.content ||
         d.choices[0].message.content !== a.choices[0].message.content, 'other seeds differ');
});

await check('stop strings (not streamed and streamed)', async () => {
  assert(G.length >= 6, `greedy text too short: "${G}"`);
  const cut = [...G].length > 8 ? [...G].slice(4, 7).join('') : [...G].slice(2, 4).join('');
  const want = G.slice(0, G.indexOf(cut));
  const r = await client.chat.completions.create({ ...greedy, messages: user('Hello there'), stop: [cut, 'zzzzqqq'] });
  assert(r.choices[0].message.content === want, `stop: "${r.choices[0].message.content}" != "${want}"`);
  assert(r.choices[0].finish_reason === 'stop', 'finish stop');
  const { out } = await streamText({ ...greedy, messages: user('Hello there'), stop: cut });
  assert(out[0].content === want, `streamed stop: "${out[0].content}" != "${want}"`);
});

await check('completions, streamed == not, echo, logprobs', async () => {
  const p = { model: 'tiny', prompt: 'The capital of France is', max_tokens: 8, temperature: 0 };
  const r = await client.completions.create(p);
  assert(r.object === 'text_completion' && typeof r.choices[0].text === 'string', 'shape');
  let s = '';
  for await (const ch of await client.completions.create({ ...p, stream: true })) s += ch.choices[0]?.text ?? '';
  assert(s === r.choices[0].text, `stream "${s}" != "${r.choices[0].text}"`);
  const e = await client.completions.create({ ...p, echo: true, logprobs: 2 });
  assert(e.choices[0].text === p.prompt + r.choices[0].text, 'echo');
  const lp = e.choices[0].logprobs;
  assert(lp.tokens.length === e.usage.completion_tokens && lp.token_logprobs.every((x) => x <= 0), 'logprobs');
});

await check('chat logprobs', async () => {
  const r = await client.chat.completions.create({ ...greedy, max_tokens: 4, messages: user('Hi'), logprobs: true, top_logprobs: 2 });
  const c = r.choices[0].logprobs.content;
  assert(c.length === r.usage.completion_tokens, 'one entry per token');
  assert(c.every((t) => t.logprob <= 0 && Array.isArray(t.bytes) && t.top_logprobs.length === 2), 'entries');
  // Greedy: the chosen token is the most likely one.
  assert(c.every((t) => Math.abs(t.top_logprobs[0].logprob - t.logprob) < 1e-4), 'greedy picks the top');
});

await check('tool-call round trip', async () => {
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  const msgs = user('What is the weather in Paris?');
  const r = await client.chat.completions.create({ model: 'tiny', max_tokens: 24, temperature: 0, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } }, messages: msgs });
  const m = r.choices[0].message;
  // A random model rarely closes the JSON: a parsed call or the raw text, never an error.
  if (m.tool_calls?.length) {
    assert(m.tool_calls[0].function.name === 'get_weather' && typeof m.tool_calls[0].function.arguments === 'string', 'call shape');
    assert(r.choices[0].finish_reason === 'tool_calls', 'finish tool_calls');
  } else {
    assert(typeof m.content === 'string' && m.content.includes('get_weather'), `forced call text: ${m.content}`);
  }
  // The client runs the tool and sends the result back, as SDK users do.
  const call = { id: 'call_abc', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } };
  const before = await client.chat.completions.create({ model: 'tiny', max_tokens: 4, tools, messages: msgs });
  const after = await client.chat.completions.create({ model: 'tiny', max_tokens: 4, tools, messages: [
    ...msgs, { role: 'assistant', content: null, tool_calls: [call] },
    { role: 'tool', tool_call_id: 'call_abc', content: '{"temperature_c": 21}' }] });
  assert(after.choices[0].message.role === 'assistant', 'reply after the tool result');
  assert(after.usage.prompt_tokens > before.usage.prompt_tokens + 10, 'history rendered into the prompt');
});

await check('errors raise the SDK classes', async () => {
  try { await client.chat.completions.create({ model: 'nope', messages: user('x') }); assert(false, 'no throw'); }
  catch (e) { assert(e instanceof OpenAI.NotFoundError, `404 class, got ${e.constructor.name}`); }
  try { await client.chat.completions.create({ model: 'tiny', messages: user('x'), response_format: { type: 'json_object' } }); assert(false, 'no throw'); }
  catch (e) { assert(e instanceof OpenAI.BadRequestError && e.param === 'response_format', `400 response_format, got ${e}`); }
});

await check('abort stops the request on the server', async () => {
  const ac = new AbortController();
  const stream = await client.chat.completions.create({ model: 'tiny', max_tokens: 300, ignore_eos: true, stream: true, messages: user('go') }, { signal: ac.signal });
  let n = 0;
  try { for await (const _ of stream) { if (++n === 3) ac.abort(); } } catch (_) { /* aborted */ }
  let running = -1;
  for (let i = 0; i < 50; i++) {
    running = (await (await fetch(`${base}/health`)).json()).running;
    if (running === 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert(running === 0, `still running: ${running}`);
});

console.log(`${passes} passed, ${fails} failed`);
process.exit(fails ? 1 : 0);

// The official `ollama` npm client against a live tandem (tiny random model, CPU).
import { Ollama } from 'ollama';

const ollama = new Ollama({ host: process.env.TANDEM_URL });
let passes = 0, fails = 0;
async function check(name, fn) {
  try { await fn(); passes++; } catch (e) { fails++; console.log(`FAIL: ${name}: ${e.stack || e}`); }
}
function assert(c, msg) { if (!c) throw new Error(msg); }
const msgs = [{ role: 'user', content: 'Hello there' }];
const opts = { temperature: 0, num_predict: 12 };

await check('tags', async () => {
  const r = await ollama.list();
  const m = r.models.find((x) => x.name === 'tiny:latest');
  assert(m && m.details.family === 'qwen3' && typeof m.size === 'number', JSON.stringify(r));
});

await check('show', async () => {
  const r = await ollama.show({ model: 'tiny' });
  assert(r.model_info['general.architecture'] === 'qwen3', 'architecture');
  assert(r.capabilities.includes('thinking') && r.capabilities.includes('tools'), 'capabilities');
  assert(r.template.includes('<|im_start|>'), 'template');
  assert(r.details.quantization_level === 'BF16', 'quantization_level');
});

await check('ps and version', async () => {
  const ps = await ollama.ps();
  assert(ps.models.length === 1 && ps.models[0].context_length > 0, 'ps');
  const v = await ollama.version();
  assert(/^\d+\.\d+\.\d+$/.test(v.version), 'version');
});

let C = '';
await check('chat, not streamed', async () => {
  const r = await ollama.chat({ model: 'tiny', messages: msgs, options: opts, stream: false });
  assert(r.done === true && r.message.role === 'assistant', 'done message');
  assert(r.eval_count > 0 && r.eval_count <= 12 && r.prompt_eval_count > 0, 'counts');
  assert(r.total_duration > 0 && r.total_duration >= r.eval_duration && r.prompt_eval_duration > 0, 'ns durations');
  assert(['stop', 'length'].includes(r.done_reason), 'done_reason');
  C = r.message.content;
});

await check('chat, streamed == not streamed', async () => {
  let s = '', last = null, n = 0;
  for await (const part of await ollama.chat({ model: 'tiny', messages: msgs, options: opts, stream: true })) {
    s += part.message.content; last = part; n++;
  }
  assert(s === C, `stream "${s}" != "${C}"`);
  assert(last.done && last.eval_count > 0, 'final part');
  assert(n > 2, 'several parts');
});

await check('generate, streamed == not streamed', async () => {
  const p = { model: 'tiny', prompt: 'Why is the sky blue?', options: opts };
  const r = await ollama.generate({ ...p, stream: false });
  assert(r.done && typeof r.response === 'string', 'shape');
  let s = '';
  for await (const part of await ollama.generate({ ...p, stream: true })) s += part.response;
  assert(s === r.response, `stream "${s}" != "${r.response}"`);
  const raw = await ollama.generate({ ...p, raw: true, stream: false });
  assert(raw.prompt_eval_count < r.prompt_eval_count, 'raw skips the template');
});

await check('think on and off', async () => {
  const on = await ollama.chat({ model: 'tiny', messages: msgs, options: opts, think: true, stream: false });
  const off = await ollama.chat({ model: 'tiny', messages: msgs, options: opts, think: false, stream: false });
  // Thinking off closes an empty think block in the prompt, as Qwen3's template does.
  assert(off.prompt_eval_count > on.prompt_eval_count, `${off.prompt_eval_count} vs ${on.prompt_eval_count}`);
  assert(on.done && off.done, 'both done');
  // The same message: the soft switch alone turns thinking off; the request's think wins.
  const m = [{ role: 'user', content: 'Hello there /no_think' }];
  const soft = await ollama.chat({ model: 'tiny', messages: m, options: opts, stream: false });
  const forced = await ollama.chat({ model: 'tiny', messages: m, options: opts, think: true, stream: false });
  assert(soft.prompt_eval_count > forced.prompt_eval_count, '/no_think switches thinking off');
});

await check('seed and options', async () => {
  const o = { temperature: 1, seed: 11, num_predict: 10 };
  const a = await ollama.generate({ model: 'tiny', prompt: 'Say', options: o, stream: false });
  const b = await ollama.generate({ model: 'tiny', prompt: 'Say', options: o, stream: false });
  assert(a.response === b.response, 'same seed, same text');
});

await check('errors', async () => {
  try { await ollama.chat({ model: 'nope', messages: msgs, stream: false }); assert(false, 'no throw'); }
  catch (e) { assert(e.status_code === 404 && /not found/.test(e.error), `404: ${e}`); }
  try { await ollama.generate({ model: 'tiny', prompt: 'x', format: 'json', stream: false }); assert(false, 'no throw'); }
  catch (e) { assert(e.status_code === 400 && /format/.test(e.error), `400 format: ${e}`); }
});

console.log(`${passes} passed, ${fails} failed`);
process.exit(fails ? 1 : 0);

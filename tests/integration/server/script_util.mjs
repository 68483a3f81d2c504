// What the scripted-model tests share: the texts the model writes (script_texts.json, see
// with_server.sh --scripted), split into reasoning, answer and tool call as a client sees
// them, and a small check runner.
import { readFileSync } from 'node:fs';

export const base = process.env.TANDEM_URL;
export const model = process.env.TANDEM_MODEL;
const texts = JSON.parse(readFileSync(process.env.TANDEM_SCRIPT_TEXTS, 'utf8'));

function split(text) {
  const m = text.match(/^<think>\n([\s\S]*?)\n<\/think>\n\n([\s\S]*)$/);
  return m ? { reasoning: m[1], answer: m[2] } : { reasoning: '', answer: text };
}
// First turn: thinks, then calls get_weather.
export const first = split(texts.text);
const call = first.answer.match(/^<tool_call>\n([\s\S]*)\n<\/tool_call>$/);
export const firstCall = JSON.parse(call[1]);             // {name, arguments: {...}}
export const firstCallArgs = call[1].match(/"arguments": (\{.*\})\}$/)[1];  // as written
// After the tool result: thinks, then answers.
export const second = split(texts.tool_text);

export const weatherTool = {
  name: 'get_weather', description: 'Weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string' } },
                required: ['city', 'unit'] },
};

let passes = 0, fails = 0;
export async function check(name, fn) {
  try { await fn(); passes++; } catch (e) { fails++; console.log(`FAIL: ${name}: ${e.stack || e}`); }
}
export function assert(c, msg) { if (!c) throw new Error(msg); }
export function eq(a, b, msg) {
  const sa = JSON.stringify(a), sb = JSON.stringify(b);
  if (sa !== sb) throw new Error(`${msg}: ${sa} != ${sb}`);
}
export function finish() {
  console.log(`${passes} passed, ${fails} failed`);
  process.exit(fails ? 1 : 0);
}

// The Responses API driven by the official `openai` npm client and the OpenAI Agents SDK,
// against tandem serving the scripted model (with_server.sh --scripted): what comes out is
// known, so the output, the event sequence and the tool loop are checked exactly.
import OpenAI from 'openai';
import { Agent, run, tool, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled } from '@openai/agents';
import { z } from 'zod';
import { base, model, first, firstCall, firstCallArgs, second, weatherTool, check, assert, eq, finish } from './script_util.mjs';

const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0, timeout: 60000 });
const tools = [{ type: 'function', ...weatherTool }];
const ask = { model, input: 'What is the weather in Paris?', tools };

function kinds(output) { return output.map((o) => o.type); }

// The streamed events: checked for order and numbering, and folded into the output they
// describe, independently of the SDK's own accumulator.
async function streamed(params) {
  const stream = await client.responses.create({ ...params, stream: true });
  const events = [];
  for await (const e of stream) events.push(e);
  events.forEach((e, i) => assert(e.sequence_number === i, `sequence_number ${e.sequence_number} at ${i}`));
  eq(events.slice(0, 2).map((e) => e.type), ['response.created', 'response.in_progress'], 'opening events');
  assert(events[0].response.status === 'in_progress' && events[0].response.output.length === 0, 'created shape');
  const last = events[events.length - 1];
  assert(['response.completed', 'response.incomplete'].includes(last.type), `last event ${last.type}`);
  const out = [];
  let open = null;
  for (const e of events.slice(2, -1)) {
    switch (e.type) {
      case 'response.output_item.added':
        assert(open === null, 'an item opens while another is open');
        assert(e.output_index === out.length, 'output_index of a new item');
        out.push({ ...e.item, text: '', args: '' });
        open = e.output_index;
        break;
      case 'response.content_part.added':
      case 'response.content_part.done':
      case 'response.reasoning_text.done':
      case 'response.output_text.done':
      case 'response.function_call_arguments.done':
        assert(e.output_index === open && e.item_id === out[open].id, `${e.type} outside its item`);
        if (e.type === 'response.function_call_arguments.done') eq(e.arguments, out[open].args, 'arguments.done');
        if (e.type.endsWith('_text.done')) eq(e.text, out[open].text, `${e.type} text`);
        break;
      case 'response.reasoning_text.delta':
      case 'response.output_text.delta':
        assert(e.output_index === open && e.item_id === out[open].id, `${e.type} outside its item`);
        out[open].text += e.delta;
        out[open].deltas = (out[open].deltas ?? 0) + 1;
        break;
      case 'response.function_call_arguments.delta':
        assert(e.output_index === open && out[open].type === 'function_call', 'arguments delta outside a call');
        out[open].args += e.delta;
        out[open].deltas = (out[open].deltas ?? 0) + 1;
        break;
      case 'response.output_item.done':
        assert(e.output_index === open, 'done of the open item');
        out[open].final = e.item;
        open = null;
        break;
      default:
        throw new Error(`unexpected event ${e.type}`);
    }
  }
  assert(open === null, 'an item was left open');
  return { events, out, response: last.response };
}

let R1 = null;
await check('create, not streamed: reasoning then a function call', async () => {
  const r = await client.responses.create(ask);
  assert(r.object === 'response' && r.id.startsWith('resp_') && r.status === 'completed', 'shape');
  eq(kinds(r.output), ['reasoning', 'function_call'], 'output items');
  eq(r.output[0].content, [{ type: 'reasoning_text', text: first.reasoning }], 'reasoning text');
  const fc = r.output[1];
  assert(fc.name === 'get_weather' && fc.call_id.startsWith('call_') && fc.status === 'completed', 'call');
  eq(fc.arguments, firstCallArgs, 'arguments as written');
  eq(JSON.parse(fc.arguments), firstCall.arguments, 'arguments parse');
  assert(r.usage.input_tokens > 0 && r.usage.output_tokens > 0, 'usage');
  eq(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens, 'total_tokens');
  assert(r.usage.output_tokens_details.reasoning_tokens > 0, 'reasoning_tokens');
  R1 = r;
});

await check('create, streamed: the documented events, equal to the body', async () => {
  const { out, response } = await streamed(ask);
  eq(kinds(out), ['reasoning', 'function_call'], 'streamed items');
  eq(out[0].text, first.reasoning, 'reasoning deltas');
  assert(out[0].deltas > 3, 'reasoning came token by token');
  eq(out[1].args, firstCallArgs, 'argument deltas add up');
  assert(out[1].deltas > 3, `arguments came in ${out[1].deltas} deltas`);
  eq(out[1].final.arguments, firstCallArgs, 'final item');
  eq(response.output.map((o) => o.type), kinds(R1.output), 'completed response');
  eq(response.output[1].arguments, R1.output[1].arguments, 'same arguments as not streamed');
});

await check('the SDK stream helper builds the same response', async () => {
  const s = client.responses.stream(ask);
  let argDeltas = '';
  s.on('response.function_call_arguments.delta', (e) => { argDeltas += e.delta; });
  const final = await s.finalResponse();
  eq(kinds(final.output), ['reasoning', 'function_call'], 'items');
  eq(final.output[1].arguments, firstCallArgs, 'arguments');
  eq(argDeltas, firstCallArgs, 'delta events');
});

await check('tool loop with previous_response_id', async () => {
  const call = R1.output[1];
  const r = await client.responses.create({
    model, tools, previous_response_id: R1.id,
    input: [{ type: 'function_call_output', call_id: call.call_id, output: '{"sky": "sunny", "c": 22}' }],
  });
  eq(kinds(r.output), ['reasoning', 'message'], 'answer items');
  eq(r.output_text, second.answer, 'answer');
  eq(r.output[0].content[0].text, second.reasoning, 'reasoning');
  eq(r.previous_response_id, R1.id, 'previous_response_id echoed');
  assert(r.usage.input_tokens_details.cached_tokens > 0, 'the shared prefix came from the cache');
  // Streamed, the same.
  const { out } = await streamed({
    model, tools, previous_response_id: R1.id,
    input: [{ type: 'function_call_output', call_id: call.call_id, output: 'sunny' }],
  });
  eq(out.map((o) => o.text), [second.reasoning, second.answer], 'streamed answer');
});

await check('tool loop without the store: the whole conversation as input', async () => {
  const a = await client.responses.create({ ...ask, store: false });
  const b = await client.responses.create({
    model, tools, store: false,
    input: [{ role: 'user', content: ask.input }, ...a.output,
            { type: 'function_call_output', call_id: a.output[1].call_id, output: 'sunny' }],
  });
  eq(b.output_text, second.answer, 'answer');
  for (const id of [a.id, b.id]) {
    const e = await client.responses.retrieve(id).then(() => null, (x) => x);
    assert(e && e.status === 404, 'store: false keeps nothing');
  }
});

await check('reasoning effort none: no thinking; instructions reach the prompt', async () => {
  const r = await client.responses.create({ ...ask, reasoning: { effort: 'none' }, instructions: 'Be brief.' });
  eq(kinds(r.output), ['function_call'], 'no reasoning item');
  eq(r.output[0].arguments, firstCallArgs, 'same call');
  eq(r.instructions, 'Be brief.', 'instructions echoed');
  eq(r.reasoning.effort, 'none', 'effort echoed');
  const s = await client.responses.create({ model, input: 'Hello', reasoning: { effort: 'high', summary: 'auto' } });
  eq(s.output[0].summary, [{ type: 'summary_text', text: first.reasoning }], 'summary when asked');
  eq(s.output_text, first.answer, 'no tools: the call is plain text');
});

await check('retrieve, input_items, delete', async () => {
  const got = await client.responses.retrieve(R1.id);
  eq(got.output, R1.output, 'stored output');
  const items = [];
  for await (const it of client.responses.inputItems.list(R1.id, { order: 'asc' })) items.push(it);
  eq(items.map((i) => [i.type, i.role]), [['message', 'user']], 'input items');
  eq(items[0].content, [{ type: 'input_text', text: ask.input }], 'input text');
  const r2 = await client.responses.create({ ...ask, input: [{ role: 'user', content: 'a' }, { role: 'user', content: 'b' }] });
  const page = await client.responses.inputItems.list(r2.id, { limit: 1 });
  eq(page.data.map((i) => i.content[0].text), ['b'], 'newest first, limit');
  assert(page.has_more === true, 'has_more');
  await client.responses.delete(r2.id);
  const e = await client.responses.retrieve(r2.id).then(() => null, (x) => x);
  assert(e && e.status === 404, 'gone after delete');
  const e2 = await client.responses.create({ ...ask, previous_response_id: r2.id }).then(() => null, (x) => x);
  assert(e2 && e2.status === 404 && e2.param === 'previous_response_id', 'a deleted previous response is a 404');
});

await check('background: polled to completion; cancel only for background', async () => {
  const r = await client.responses.create({ ...ask, background: true });
  assert(['queued', 'in_progress'].includes(r.status), `status ${r.status}`);
  let got = r;
  for (let i = 0; i < 200 && ['queued', 'in_progress'].includes(got.status); i++) {
    await new Promise((ok) => setTimeout(ok, 50));
    got = await client.responses.retrieve(r.id);
  }
  eq(got.status, 'completed', 'background run finished');
  eq(got.output[1].arguments, firstCallArgs, 'background output');
  const e = await client.responses.cancel(R1.id).then(() => null, (x) => x);
  assert(e && e.status === 400, 'a foreground response cannot be cancelled');
});

await check('refused with a 400 naming the field', async () => {
  const cases = [
    [{ ...ask, text: { format: { type: 'json_schema', name: 'x', schema: { type: 'object' } } } }, 'text.format'],
    [{ ...ask, tools: [{ type: 'web_search' }] }, 'tools[0].type'],
    [{ model, input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'http://x/y.png' }] }] }, 'input[0].content[0].type'],
    [{ ...ask, reasoning: { effort: 'extreme' } }, 'reasoning.effort'],
    [{ ...ask, truncation: 'auto' }, 'truncation'],
    [{ ...ask, input: [{ type: 'computer_call' }] }, 'input[0].type'],
    [{ ...ask, temperature: 3 }, 'temperature'],
  ];
  for (const [params, param] of cases) {
    const e = await client.responses.create(params).then(() => null, (x) => x);
    assert(e && e.status === 400, `${param}: status ${e?.status}`);
    eq(e.param, param, 'param');
  }
  const e = await client.responses.create({ ...ask, model: 'nope' }).then(() => null, (x) => x);
  assert(e && e.status === 404 && e.code === 'model_not_found', 'unknown model');
});

await check('@openai/agents: one agent turn with a tool', async () => {
  setTracingDisabled(true);
  setDefaultOpenAIClient(client);
  setOpenAIAPI('responses');
  const calls = [];
  const getWeather = tool({
    name: 'get_weather', description: 'Weather in a city',
    parameters: z.object({ city: z.string(), unit: z.string() }),
    execute: async (args) => { calls.push(args); return 'sunny, 22 C'; },
  });
  const agent = new Agent({ name: 'Weather', instructions: 'Answer with the tool.', model, tools: [getWeather] });
  const result = await run(agent, 'What is the weather in Paris?');
  eq(calls, [firstCall.arguments], 'the tool ran once with the model\'s arguments');
  eq(result.finalOutput, second.answer, 'final output');
  // Streamed too.
  const s = await run(agent, 'And now?', { stream: true });
  let text = '';
  for await (const ev of s) if (ev.type === 'raw_model_stream_event' && ev.data.type === 'output_text_delta') text += ev.data.delta;
  await s.completed;
  eq(s.finalOutput, second.answer, 'streamed final output');
  eq(text, second.answer, 'text deltas');
  eq(calls.length, 2, 'the tool ran in the streamed turn too');
});

finish();

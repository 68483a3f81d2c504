// `tandem tokenize` and `tandem template` driven from outside, against the Hugging Face
// goldens: request bodies as a client would send them (messages, tools,
// add_generation_prompt, chat_template_kwargs.enable_thinking) must print transformers'
// exact prompt; --json/--decode must give tokenizers' ids and text; bad input must fail
// with a message and a non-zero status.
// Usage: node tests/integration/tokenizer_cli_test.mjs path/to/tandem
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { gunzipSync } from "node:zlib";

const tandem = process.argv[2];
const lines = (name) =>
  gunzipSync(readFileSync(`tests/golden/tokenizer/${name}.jsonl.gz`))
    .toString("utf8")
    .split("\n")
    .filter((l) => l);
const golden = (name) => lines(name).map((l) => JSON.parse(l));
let passes = 0, fails = 0;
const check = (ok, what) => {
  if (ok) passes++;
  else {
    fails++;
    console.log(`FAIL: ${what}`);
  }
};
const run = (args, input) =>
  spawnSync(tandem, args, { input, maxBuffer: 1 << 28, encoding: "utf8" });

// template: every golden chat case, sent as an OpenAI-style request body. The body is the
// golden line itself (its messages, tools and add_generation_prompt keys; other keys are
// ignored) so that floats such as 100.0 keep their Python spelling, which JSON.stringify
// would turn into 100.
for (const raw of lines("chats")) {
  const c = JSON.parse(raw);
  const kw = c.enable_thinking === null ? "" : `, "chat_template_kwargs": {"enable_thinking": ${c.enable_thinking}}`;
  const r = run(["template"], raw.slice(0, raw.lastIndexOf("}")) + kw + "}");
  check(r.status === 0 && r.stdout === c.text, `template ${c.name} (status ${r.status}) ${r.stderr}`);
}
// template --ids on a few cases (built with JSON.stringify, as a JS client would)
for (const c of golden("chats").slice(0, 8)) {
  const body = { messages: c.messages, add_generation_prompt: c.add_generation_prompt, tools: c.tools };
  if (c.enable_thinking !== null) body.chat_template_kwargs = { enable_thinking: c.enable_thinking };
  const r = run(["template", "--ids"], JSON.stringify(body));
  check(r.status === 0 && r.stdout.trim() === c.ids.join(" "), `template --ids ${c.name}`);
}

// tokenize --json over a sample of the corpus; plain mode on one text
const docs = golden("encode").filter((_, i) => i % 7 === 0);
let r = run(["tokenize", "--json"], JSON.stringify(docs.map((d) => d.text)));
check(r.status === 0, `tokenize --json status ${r.status} ${r.stderr}`);
if (r.status === 0) {
  const got = JSON.parse(r.stdout);
  docs.forEach((d, i) => check(JSON.stringify(got[i]) === JSON.stringify(d.ids), `tokenize --json doc ${i}`));
}
const special = golden("encode").find((d) => d.ids_no_special);
r = run(["tokenize", "--no-special"], special.text);
check(r.stdout.trim() === special.ids_no_special.join(" "), "tokenize --no-special");
r = run(["tokenize"], special.text);
check(r.stdout.trim() === special.ids.join(" "), "tokenize (plain output)");

// decode: JSON and plain
const dec = golden("decode");
r = run(["tokenize", "--decode", "--json"], JSON.stringify(dec.map((d) => d.ids)));
if (r.status === 0) {
  const got = JSON.parse(r.stdout);
  dec.forEach((d, i) => check(got[i] === d.text, `decode --json row ${i}`));
} else check(false, `decode --json status ${r.status} ${r.stderr}`);
r = run(["tokenize", "--decode", "--skip-special"], dec[1].ids.join(" "));
check(r.stdout === dec[1].text_skip, "decode --skip-special");

// bad input: clear message, non-zero status, no crash
for (const [args, input, pat] of [
  [["template"], "not json", /JSON object/],
  [["template"], '{"messages": [{"role": "wizard", "content": "x"}]}', /wizard/],
  [["template"], '{"messages": []}', /empty/],
  [["template"], '{"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"enable_thinking": "no"}}', /enable_thinking/],
  [["tokenize", "--json"], '{"a": 1}', /array of strings/],
  [["tokenize", "--json"], '["ok", 5]', /item 1/],
  [["tokenize", "--decode"], "12 abc", /not a token id/],
  [["tokenize", "--decode"], "99999999999", /out of range|not a token id/],
  [["tokenize", "--model", "/nonexistent"], "x", /tokenizer\.json/],
]) {
  const b = run(args, input);
  check(b.status !== 0 && b.status !== null && pat.test(b.stderr), `bad input ${args.join(" ")} <<< ${input}: status ${b.status} ${b.stderr}`);
}

console.log(`${passes} passed, ${fails} failed`);
process.exit(fails ? 1 : 0);

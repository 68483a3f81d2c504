#!/usr/bin/env bash
# `tandem generate` as a user meets it: greedy tokens equal transformers' (the committed
# goldens), seeds reproduce, text streams, and bad input gets a clear error.
set -u
T=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/expect.sh"
"$T" testmodel --out "$tmp/m" --preset tiny >/dev/null || { echo "FAIL: testmodel"; exit 1; }
M=$tmp/m
ids() { node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).generated_ids.join(",")))'; }

# Greedy from the 17-token golden prompt: the 64 tokens transformers produced.
prompt=$(node -e 'const g=require(process.argv[1]);console.log(g.prompts.seventeen.ids.join(","))' "$PWD/tests/golden/model/tiny.json")
want=$(node -e 'const g=require(process.argv[1]);console.log(g.prompts.seventeen.greedy.join(","))' "$PWD/tests/golden/model/tiny.json")
got=$("$T" generate --model "$M" --prompt-ids "$prompt" --max-tokens 64 --temperature 0 --ignore-eos --json 2>/dev/null | ids)
check "greedy tokens equal transformers' (got $got)" $([ "$got" = "$want" ]; echo $?)

# Same seed, same tokens; another seed, other tokens.
a=$("$T" generate --model "$M" --prompt "Hello" --temperature 1 --top-k 0 --top-p 1 --seed 5 --max-tokens 24 --ignore-eos --json 2>/dev/null | ids)
b=$("$T" generate --model "$M" --prompt "Hello" --temperature 1 --top-k 0 --top-p 1 --seed 5 --max-tokens 24 --ignore-eos --json 2>/dev/null | ids)
c=$("$T" generate --model "$M" --prompt "Hello" --temperature 1 --top-k 0 --top-p 1 --seed 6 --max-tokens 24 --ignore-eos --json 2>/dev/null | ids)
check "same seed reproduces" $([ -n "$a" ] && [ "$a" = "$b" ]; echo $?)
check "another seed differs" $([ "$a" != "$c" ]; echo $?)

# Text mode: text on stdout, counts and speed on stderr.
"$T" generate --model "$M" --prompt "Hello" --chat --max-tokens 6 >"$tmp/out" 2>"$tmp/err"
check "text mode exits 0" $?
check "stderr has token counts and tok/s" $(grep -qE "prompt: [0-9]+ tokens.*decode: [0-9]+ tokens.*tok/s" "$tmp/err"; echo $?)
check "stdout has text" $([ -s "$tmp/out" ]; echo $?)
"$T" generate --model "$M" --prompt "Hi" --max-tokens 3 --json --top-logprobs 2 >"$tmp/j" 2>/dev/null
check "json has the documented fields" $(node -e 'const j=JSON.parse(require("fs").readFileSync(process.argv[1]));
  if(!(j.prompt_ids.length>0&&j.generated_ids.length===3&&typeof j.text==="string"&&j.finish_reason==="length"&&j.logprobs[0].top.length===2))process.exit(1)' "$tmp/j"; echo $?)

# --chat renders the model's own chat template: the same ids as `tandem template` + tokenize.
for think in "" --no-think; do
  "$T" generate --model "$M" --prompt "Hi there" --system "Be brief." --chat $think --max-tokens 1 --json 2>/dev/null \
    | node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(0)).prompt_ids.join(" "))' >"$tmp/g_ids"
  body='{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi there"}]'
  [ -n "$think" ] && body="$body"',"chat_template_kwargs":{"enable_thinking":false}'
  echo "$body}" | "$T" template >"$tmp/t_text" 2>/dev/null
  "$T" tokenize --model "$M" <"$tmp/t_text" | tr -s ' \n,' ' ' | sed 's/ *$//' >"$tmp/t_ids"
  check "generate --chat $think uses the chat template" $([ -s "$tmp/g_ids" ] && [ "$(cat "$tmp/g_ids")" = "$(cat "$tmp/t_ids")" ]; echo $?)
done

expect missing-model nonzero "config.json" -- "$T" generate --model "$tmp/nope" --prompt hi
expect bad-ids nonzero "token id" -- "$T" generate --model "$M" --prompt-ids 1,x
expect both-prompts nonzero "exactly one" -- "$T" generate --model "$M" --prompt hi --prompt-ids 1
expect bad-top-p nonzero "top_p" -- "$T" generate --model "$M" --prompt hi --top-p 2
expect id-out-of-vocab nonzero "vocabulary" -- "$T" generate --model "$M" --prompt-ids 999999
expect too-long nonzero "context" -- "$T" generate --model "$M" --prompt hi --max-tokens 100000
expect bad-block-size nonzero "block size" -- "$T" generate --model "$M" --prompt hi --block-size 7
finish

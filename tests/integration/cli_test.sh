#!/usr/bin/env bash
# The command line as a user meets it: exit codes and messages on good and bad input.
set -u
T=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/expect.sh"
expect version 0 "tandem [0-9]+\.[0-9]+" -- "$T" --version
expect help 0 "testmodel" -- "$T" --help
expect unknown-subcommand nonzero "unknown command .frobnicate" -- "$T" frobnicate
expect unknown-flag nonzero "not expected|unknown|extra" -- "$T" testmodel --out "$tmp/x" --bogus
expect bad-preset nonzero "preset" -- "$T" testmodel --out "$tmp/x" --preset huge
expect testmodel 0 "wrote tiny" -- "$T" testmodel --out "$tmp/m1" --seed 9
expect testmodel-again 0 "wrote tiny" -- "$T" testmodel --out "$tmp/m2" --seed 9
a=$(cd "$tmp/m1" && sha256sum * ); b=$(cd "$tmp/m2" && sha256sum *)
check same-seed-same-bytes "$([ "$a" = "$b" ]; echo $?)"
expect non-empty-folder nonzero "not empty" -- "$T" testmodel --out "$tmp/m1"
expect testmodel-fp8 0 "wrote tiny model \(FP8 weights" -- "$T" testmodel --out "$tmp/m3" --preset tiny --fp8
check fp8-has-scales "$(grep -q weight_scale_inv "$tmp/m3/model.safetensors"; echo $?)"
expect generate-fp8-cpu 0 "decode: 4 tokens" -- "$T" generate --model "$tmp/m3" --prompt-ids 9707 --max-tokens 4 --ignore-eos --temperature 0
expect bench-engine-cpu 0 "out tok/s" -- "$T" bench --backend cpu --model "$tmp/m1" --concurrency 1,3 --prompt-len 9 --output-len 5 --requests-per-client 1
expect bench-engine-bad-model nonzero "error" -- "$T" bench --backend cpu --model "$tmp/nope" --concurrency 1
expect script-needs-text nonzero "needs --text" -- "$T" testmodel --out "$tmp/s0" --preset script
expect text-needs-script nonzero "need --preset script" -- "$T" testmodel --out "$tmp/s0" --text hi
expect script-special-token nonzero "must not hold" -- "$T" testmodel --out "$tmp/s0" --preset script --text 'a<|im_end|>'
expect testmodel-script 0 "wrote script model" -- "$T" testmodel --out "$tmp/s1" --preset script --text $'<think>\nEasy.\n</think>\n\nFour.'
expect generate-script 0 "finish: stop" -- "$T" generate --model "$tmp/s1" --chat --prompt "2+2?" --max-tokens 32 --temperature 0
check script-writes-its-text "$("$T" generate --model "$tmp/s1" --chat --no-think --prompt "2+2?" --max-tokens 32 --temperature 0 2>/dev/null | grep -qx 'Four.'; echo $?)"
touch "$tmp/afile"
expect parent-is-a-file nonzero "error" -- "$T" testmodel --out "$tmp/afile/m"
if [ "$(id -u)" -ne 0 ]; then
  mkdir "$tmp/ro" && chmod 555 "$tmp/ro"
  expect no-write-permission nonzero "permission" -- "$T" testmodel --out "$tmp/ro/m"
fi
ls -a "$tmp" | grep -q partial && { fails=$((fails+1)); echo "FAIL: a partial folder was left behind"; }
expect serve-needs-model nonzero "model" -- "$T" serve
expect serve-cpu-quantize nonzero "needs the CUDA backend" -- "$T" serve --model "$tmp/m1" --backend cpu --quantization fp8 --port 0
expect bench-cpu-quantize nonzero "needs the CUDA backend" -- "$T" bench --backend cpu --model "$tmp/m1" --concurrency 1 --quantization fp8
finish

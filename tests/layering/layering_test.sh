#!/usr/bin/env bash
# The layering rule (cmake/Module.cmake) on a small project of three modules, low < mid <
# high: a clean tree builds; an upward include, an undeclared include, a "../" include and
# an upward DEPS entry each fail with their message; an upward include hidden from the
# check in a macro still fails to compile, as no include path holds the higher module.
# Usage: layering_test.sh <repo>/cmake
set -u
CMAKE_DIR=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0

# fixture DIR: writes the clean project into DIR.
fixture() {
  local d=$1
  mkdir -p "$d/src/low" "$d/src/mid" "$d/src/high"
  cat >"$d/CMakeLists.txt" <<EOT
cmake_minimum_required(VERSION 3.25)
project(layering_fixture CXX)
include($CMAKE_DIR/Module.cmake)
tandem_layers(low mid high)
EOT
  echo 'tandem_module(tandem_low)' >"$d/src/low/CMakeLists.txt"
  echo 'tandem_module(tandem_mid DEPS tandem_low)' >"$d/src/mid/CMakeLists.txt"
  echo 'tandem_module(tandem_high DEPS tandem_mid)' >"$d/src/high/CMakeLists.txt"
  printf '#pragma once\ninline int low_one() { return 1; }\n' >"$d/src/low/low.h"
  printf '#include "low/low.h"\nint low_two() { return 2 * low_one(); }\n' >"$d/src/low/low.cpp"
  printf '#pragma once\n#include "low/low.h"\ninline int mid_one() { return low_one(); }\n' \
    >"$d/src/mid/mid.h"
  printf '#include "mid/mid.h"\nint mid_two() { return 2 * mid_one(); }\n' >"$d/src/mid/mid.cpp"
  printf '#pragma once\n#include "mid/mid.h"\ninline int high_one() { return mid_one(); }\n' \
    >"$d/src/high/high.h"
  printf '#include "high/high.h"\nint high_two() { return 2 * high_one(); }\n' \
    >"$d/src/high/high.cpp"
}

# expect NAME WANT_RC PATTERN DIR: configures and builds DIR; checks the outcome and that
# the output matches PATTERN (a grep -E pattern; empty: no check).
expect() {
  local name=$1 want=$2 pattern=$3 d=$4 rc
  {
    cmake -S "$d" -B "$d/build" -DCMAKE_BUILD_TYPE=Release &&
      cmake --build "$d/build" -j2
  } >"$d/out.log" 2>&1
  rc=$?
  local got=ok
  if [ "$want" = 0 ] && [ $rc -ne 0 ]; then got="failed (rc $rc)"; fi
  if [ "$want" != 0 ] && [ $rc -eq 0 ]; then got="built, but must fail"; fi
  # CMake wraps its messages: match against the output with whitespace runs as one space.
  if [ "$got" = ok ] && [ -n "$pattern" ] &&
    ! tr -s ' \n' '  ' <"$d/out.log" | grep -qE "$pattern"; then
    got="no line matching: $pattern"
  fi
  if [ "$got" = ok ]; then
    echo "ok   $name"
  else
    echo "FAIL $name: $got"
    sed 's/^/     | /' "$d/out.log" | tail -25
    fails=$((fails + 1))
  fi
}

fixture "$work/clean"
expect "a clean tree builds" 0 "" "$work/clean"

fixture "$work/up"
printf '#include "low/low.h"\n#include "high/high.h"\nint low_two() { return 2; }\n' \
  >"$work/up/src/low/low.cpp"
expect "an upward include fails the build" 1 \
  'src/low/low.cpp:2: #include "high/high.h": src/low may not include src/high, which is not in a lower layer' \
  "$work/up"

fixture "$work/undeclared"
printf '#include "high/high.h"\n#include "low/low.h"\nint high_two() { return low_one(); }\n' \
  >"$work/undeclared/src/high/high.cpp"
expect "an undeclared downward include fails the build" 1 \
  'src/high/high.cpp:2: #include "low/low.h": src/low is not declared: add its target to DEPS of tandem_high' \
  "$work/undeclared"

fixture "$work/climb"
printf '#include "mid/mid.h"\n#include "../high/high.h"\nint mid_two() { return 2; }\n' \
  >"$work/climb/src/mid/mid.cpp"
expect "a ../ include fails the build" 1 'src/mid/mid.cpp:2: #include "../high/high.h" leaves src/mid' \
  "$work/climb"

fixture "$work/deps"
echo 'tandem_module(tandem_low DEPS tandem_high)' >"$work/deps/src/low/CMakeLists.txt"
expect "an upward DEPS entry fails at configure time" 1 \
  'tandem_low \(src/low\): DEPS names tandem_high, which is not a module of a lower layer' \
  "$work/deps"

fixture "$work/hidden"
printf '#define HIGH "high/high.h"\n#include HIGH\nint low_two() { return high_one(); }\n' \
  >"$work/hidden/src/low/low.cpp"
expect "an upward include the check cannot see does not compile" 1 'high/high.h: No such file' \
  "$work/hidden"

if [ $fails -ne 0 ]; then
  echo "layering: $fails case(s) failed"
  exit 1
fi
echo "layering: all cases as expected"

# Shared by the shell integration tests: `source` it, then call expect/check, then finish.
#   expect <name> <want-rc: 0|nonzero> <grep-pattern|-> -- cmd...   runs cmd, checks rc and output
#   check <name> <0 = pass>                                          records a computed result
#   finish                                                          prints the tally, sets the status
fails=0; passes=0
check() {
  if [ "$2" = 0 ]; then passes=$((passes+1)); else fails=$((fails+1)); echo "FAIL: $1"; fi
}
expect() {
  local name=$1 want=$2 pat=$3; shift 4
  local out rc
  out=$("$@" 2>&1); rc=$?
  local ok=1
  if [ "$want" = 0 ] && [ $rc -ne 0 ]; then ok=0; fi
  if [ "$want" = nonzero ] && [ $rc -eq 0 ]; then ok=0; fi
  if [ "$pat" != - ] && ! grep -qiE "$pat" <<<"$out"; then ok=0; fi
  if [ $ok = 1 ]; then passes=$((passes+1)); else
    fails=$((fails+1)); echo "FAIL: $name (rc=$rc)"; echo "$out" | head -5; fi
}
finish() {
  echo "$passes passed, $fails failed"
  [ $fails -eq 0 ]
}

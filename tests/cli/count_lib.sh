# Shared by cli_tests.sh, the video CLI tests and the report test (source it after setting WORK): check,
# expect_error and finish count passes and failures and print what failed.
pass=0
fail=0
check() {  # name, then a command that must succeed
  local name="$1"; shift
  if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: $name"; fi
}
# expect_error NAME EXPECTED_EXIT FRAGMENT -- command...: exit code, a single stderr line containing FRAGMENT
expect_error() {
  local name="$1" code="$2" frag="$3"; shift 4
  "$@" >"$WORK/out" 2>"$WORK/err"
  local rc=$?
  local lines; lines=$(grep -c . "$WORK/err")
  if [ "$rc" -eq "$code" ] && grep -q -- "$frag" "$WORK/err" && [ "$lines" -ge 1 ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); echo "FAILED: $name (exit $rc, stderr: $(cat "$WORK/err"))"
  fi
}
finish() {  # the summary line and the script's exit status
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}

# Sourced by the CLI test scripts: a scratch folder $WORK (removed on exit),
# skip REASON (ctest's exit 77), check NAME COMMAND... (ok / FAIL with the
# command's output), and finish (the count, the exit status).
PY=/usr/bin/python3
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fails=0
skip() { echo "SKIP: $*"; exit 77; }
check() {
  local name=$1; shift
  if "$@" >"$WORK/log" 2>&1; then echo "ok   $name"; else echo "FAIL $name"; sed 's/^/     /' "$WORK/log"; fails=$((fails + 1)); fi
}
finish() {
  echo "$fails failure(s)"
  [ "$fails" -eq 0 ]
}

#!/usr/bin/env bash
# `embed-wsi --worker-devices cpu,cpu` (the CPU stand-in for --gpus): two worker processes over one
# manifest share it through the lock files. Every slide is embedded by exactly one worker, a finished
# slide is skipped, a dead worker's lock is broken, a killed run resumes, and bad device lists fail
# with one line and write nothing.
# Usage: workers_test.sh TESSERA_BINARY REPO_ROOT
set -u
BIN="$1"
ROOT="$2"
FIX="$ROOT/../shared/fixtures"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
source "$(dirname "$0")/count_lib.sh"
"$BIN" --help | grep -q embed-wsi || { echo "embed-wsi not built: skipped"; exit 77; }

"$BIN" make-samples "$WORK/s" --only slide > /dev/null
printf 'slide\n' > "$WORK/m.csv"
for x in a b c d e f; do
  cp "$WORK/s/slide.svs" "$WORK/$x.svs"
  echo "$x.svs" >> "$WORK/m.csv"
done
EW=("$BIN" embed-wsi --model "$ROOT/configs/vit_tiny_timm.yaml" --weights "$FIX/vit_tiny_timm.safetensors" --quiet)
O="$WORK/o1"

# a.svs finished before (its output must stay untouched); b.svs locked by a worker that died.
"${EW[@]}" "$WORK/a.svs" -o "$O" 2> /dev/null
touch -d '2020-01-01' "$O/features/a.h5"
printf '{"host": "%s", "pid": 999999999, "started": "2026-01-01T00:00:00Z", "job": ""}\n' "$(hostname)" > "$O/features/b.h5.lock"

check "two CPU workers over one manifest" bash -c "\"\${@}\" --manifest \"$WORK/m.csv\" -o \"$O\" --worker-devices cpu,cpu --json \
  > \"$WORK/run.json\" 2> \"$WORK/run.err\"" _ "${EW[@]}"
check "every slide has its features, no lock is left" bash -c "for x in a b c d e f; do test -s \"$O/features/\$x.h5\" || exit 1; done;
  ! ls \"$O/features\" | grep -q lock"
check "the finished slide is not redone" bash -c "[ \$(stat -c %Y \"$O/features/a.h5\") -lt 1600000000 ]"
check "the dead worker's lock is broken" grep -q '^\[cpu#[01]\] tessera: broke a stale lock .*b.h5.lock.*gone' "$WORK/run.err"
check "every worker line is prefixed with its device" bash -c "! grep -v '^\[cpu#[01]\] ' \"$WORK/run.err\" | grep -q ."
# Each worker's own task summary: together they did b..f once each (row 0, a, was done before).
check "the workers' summaries: disjoint, together every slide" python3 -c '
import glob, json, sys
files = sorted(glob.glob(sys.argv[1] + "/summaries/embed-wsi-shard0of1-*-worker*.json"))
assert len(files) == 2, files
done = []
for f in files:
    s = json.load(open(f))
    assert s["finished"] and s["worker"] in (0, 1), f
    assert sorted(i["row"] for i in s["items"]) == list(range(6)), s["items"]
    done.append({i["row"] for i in s["items"] if i["status"] == "done"})
assert not (done[0] & done[1]), done
assert done[0] | done[1] == {1, 2, 3, 4, 5}, done
' "$O"
check "the parent merges the workers' results" python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert [(w["worker"], w["device"], w["status"]) for w in j["workers"]] == [(0, "cpu", "exited with status 0"), (1, "cpu", "exited with status 0")], j["workers"]
assert (j["done"], j["skipped"], j["failed"]) == (5, 1, 0), j
assert [s["row"] for s in j["slides"]] == list(range(6))
assert j["slides"][0]["status"] == "skipped" and j["slides"][0]["reason"] == "output exists", j["slides"][0]
assert sum(w["done"] for w in j["workers"]) == 5
' "$WORK/run.json"
check "collect: every row done" bash -c "\"$BIN\" collect \"$O\" | grep -q '6 done, 0 failed, 0 missing'"

# Killed after its first slide: the workers stop with it, and the next run does the rest.
K="$WORK/killed"
"${EW[@]}" --manifest "$WORK/m.csv" -o "$K" --worker-devices cpu,cpu 2> "$WORK/kill.err" &
pid=$!
for _ in $(seq 600); do grep -q 'tessera: done' "$WORK/kill.err" && break; sleep 0.1; done
kill -TERM "$pid"
wait "$pid"
rc=$?
check "a killed run exits non-zero, naming its workers" bash -c "[ $rc -ne 0 ] && grep -q '^tessera: error: worker 0 (cpu) was killed by signal 15' \"$WORK/kill.err\" &&
  grep -q '^tessera: error: worker 1 (cpu) was killed by signal 15' \"$WORK/kill.err\""
no_workers_left() { ! ps -eo args | grep -q -- "[-]o $K --device"; }  # [-]: not this grep itself
check "no worker outlives the parent" no_workers_left
check "the next run resumes: only what is left" bash -c "\"\${@}\" --manifest \"$WORK/m.csv\" -o \"$K\" --worker-devices cpu,cpu --json 2> /dev/null |
  python3 -c '
import json, sys
j = json.load(sys.stdin)
assert j[\"failed\"] == 0 and j[\"done\"] + j[\"skipped\"] == 6 and 1 <= j[\"skipped\"] < 6, j
' && for x in a b c d e f; do test -s \"$K/features/\$x.h5\" || exit 1; done" _ "${EW[@]}"

# Bad lists and devices: one line naming the option, nothing written.
one_line_no_output() {  # after expect_error: exactly one stderr line and no output folder
  [ "$(grep -c . "$WORK/err")" -eq 1 ] && [ ! -e "$WORK/bad" ]
}
bad() {  # name, exit code, fragment, then the extra arguments
  local name="$1" code="$2" frag="$3"; shift 3
  expect_error "$name" "$code" "$frag" -- "${EW[@]}" --manifest "$WORK/m.csv" -o "$WORK/bad" "$@"
  check "$name: one line, no output" one_line_no_output
}
bad "--gpus with an empty entry" 2 "--gpus: an empty entry in '0,,1'" --gpus 0,,1
bad "--gpus with a negative index" 2 "--gpus: expected CUDA device indices" --gpus=-1
bad "--gpus with a duplicate" 2 "--gpus: GPU 1 is listed twice" --gpus 1,0,1
bad "--gpus and --device" 2 "excludes --gpus" --gpus 0 --device cpu
bad "--gpus and --shard" 2 "excludes --gpus" --gpus 0 --shard 0/2
bad "--worker-devices with garbage" 2 "--worker-devices: expected cpu, cuda or cuda:N, got 'gpu'" --worker-devices cpu,gpu
bad "--device garbage" 2 "--device: expected cpu, cuda or cuda:N, got 'cuda:x'" --device cuda:x
if "$BIN" doctor --json | python3 -c 'import json, sys; sys.exit(json.load(sys.stdin)["cuda"]["device_available"])'; then
  bad "--device cuda:7 without a GPU" 1 "--device cuda:7: no CUDA device" --device cuda:7
  bad "--gpus 0 without a GPU" 1 "--gpus cuda:0: no CUDA device" --gpus 0
fi

finish

#!/usr/bin/env bash
# Batch runs on a real Slurm: a one-node cluster on localhost (munged, slurmctld, slurmd; generated
# key and slurm.conf, started here and stopped at the end), the sbatch scripts of scripts/slurm/
# submitted as 3-task arrays over 8 generated slides (embed-wsi) and 4 generated CTs (segment) on
# the CPU. One task of each array is cancelled midway (after its first input), leaving a lock behind;
# the arrays are resubmitted; then: exactly 8 feature files and 4 masks, each written once (the
# files finished before the resubmission keep their inode and mtime, and each input is "done" in
# exactly one task log), no lock or temporary file left, and `tessera collect` reports all done.
# Usage: slurm_test.sh TESSERA_BINARY REPO_ROOT. Exit 77 (ctest: skipped) with the reason when
# the Slurm or munge binaries, the pipelines or the fixture are missing, or the cluster cannot start.
set -u
BIN="$(readlink -f "$1")"
ROOT="$(readlink -f "$2")"
FIX="$ROOT/../shared/fixtures"
skip() { echo "SKIPPED: $*"; exit 77; }
for b in sbatch squeue scancel sinfo slurmctld slurmd munged; do
  command -v "$b" > /dev/null || skip "no '$b' on PATH (apt-get install slurm-wlm munge)"
done
"$BIN" --help | grep -q ' embed-wsi' || skip "this tessera has no embed-wsi"
"$BIN" --help | grep -q ' segment' || skip "this tessera has no segment"
[ -f "$FIX/vit_tiny_timm.safetensors" ] || skip "no fixture $FIX/vit_tiny_timm.safetensors"

WORK="$(mktemp -d /tmp/tessera-slurm.XXXXXX)"
chmod 755 "$WORK"
# shellcheck source=local_slurm.sh
source "$(dirname "$0")/local_slurm.sh"
cleanup() {
  slurm_stop
  if [ "${KEEP_WORK:-0}" = 1 ]; then echo "work folder kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
pass=0
fail=0
check() {  # name, then a command that must succeed
  local name="$1"; shift
  if "$@"; then pass=$((pass + 1)); echo "ok: $name"; else fail=$((fail + 1)); echo "FAILED: $name"; fi
}
T0=$(date +%s)

# Inputs: tiny generated samples, copied under distinct names.
"$BIN" make-samples "$WORK/samples" --only slide ct --ct-size 96 96 48 > /dev/null || { echo "make-samples failed"; exit 1; }
mkdir -p "$WORK/in" "$WORK/logs"
printf 'slide\n' > "$WORK/slides.csv"
for i in 1 2 3 4 5 6 7 8; do
  cp "$WORK/samples/slide.svs" "$WORK/in/slide_$i.svs"
  echo "in/slide_$i.svs" >> "$WORK/slides.csv"
done
printf 'image\n' > "$WORK/cts.csv"
for i in 1 2 3 4; do
  cp "$WORK/samples/ct_phantom.nii.gz" "$WORK/in/ct_$i.nii.gz"
  echo "in/ct_$i.nii.gz" >> "$WORK/cts.csv"
done

slurm_start "$WORK/cluster" || skip "$SLURM_START_ERROR"
echo "cluster up after $(($(date +%s) - T0)) s: $(sinfo -h -N -o '%N %T %c CPUs')"

export TESSERA="$BIN" TESSERA_DEVICE=cpu OMP_NUM_THREADS=1
SB=(--parsable --gres=none --cpus-per-task=1 --mem=0 --array=0-2 --chdir="$WORK")
EW=(--model "$ROOT/configs/vit_tiny_timm.yaml" --weights "$FIX/vit_tiny_timm.safetensors" --batch 16)
SEG=(--model "$ROOT/configs/swin_unetr_phantom.yaml" --weights "$ROOT/models/phantom/swin_unetr_phantom.safetensors"
     --spacing 2 2 2.5 --roi 32 32 32 --sw-batch 1)
submit() {  # name, script, manifest, out, options...
  local name="$1" script="$2" manifest="$3" out="$4"; shift 4
  sbatch "${SB[@]}" --job-name="$name" --output="$WORK/logs/$name-%A_%a.log" "$ROOT/scripts/slurm/$script" "$manifest" "$out" "$@" | cut -d';' -f1
}
wait_jobs() {  # job ids...; at most 240 s
  local i
  for ((i = 0; i < 1200; i++)); do
    [ -z "$(squeue -h -j "$(IFS=,; echo "$*")" 2>/dev/null)" ] && return 0
    sleep 0.2
  done
  echo "jobs $* still queued after 240 s:"; squeue
  return 1
}
# cancel_after_first JOB TASK: scancel that task as soon as its log shows a finished input.
cancel_after_first() {
  local job="$1" task="$2" log="$WORK/logs/$3-$1_$2.log" i
  for ((i = 0; i < 1500; i++)); do
    if grep -q '^tessera: done ' "$log" 2>/dev/null; then
      scancel "${job}_${task}"
      echo "cancelled ${job}_${task} after: $(grep '^tessera: done ' "$log" | head -n 1)"
      return 0
    fi
    [ -z "$(squeue -h -j "${job}_${task}" 2>/dev/null)" ] && break
    sleep 0.1
  done
  echo "task ${job}_${task} ended before it could be cancelled midway"
  return 1
}

E1=$(submit embed embed_wsi.sbatch slides.csv out_embed "${EW[@]}")
S1=$(submit segment segment.sbatch cts.csv out_seg "${SEG[@]}")
echo "submitted embed-wsi array $E1, segment array $S1"
check "cancel embed-wsi task 1 midway" cancel_after_first "$E1" 1 embed
check "cancel segment task 0 midway" cancel_after_first "$S1" 0 segment
check "first arrays end" wait_jobs "$E1" "$S1"
echo "first round done after $(($(date +%s) - T0)) s"

nfeat() { find "$WORK/out_embed/features" -maxdepth 1 -name '*.h5' | wc -l; }
nmask() { find "$WORK/out_seg" -maxdepth 1 -name '*.nii.gz' ! -name '.*' | wc -l; }
echo "after the first round: $(nfeat) feature files, $(nmask) masks; locks left: $(find "$WORK/out_embed" "$WORK/out_seg" -name '*.lock' | wc -l)"
check "the cancelled tasks left work undone" bash -c "[ $(nfeat) -lt 8 ] || [ $(nmask) -lt 4 ]"
check "collect reports the gap (non-zero exit)" bash -c "! \"$BIN\" collect \"$WORK/out_embed\" > \"$WORK/collect0.txt\" 2>&1 || ! \"$BIN\" collect \"$WORK/out_seg\" >> \"$WORK/collect0.txt\" 2>&1"
# Identity of what the first round finished: inode and mtime (ns).
stat -c '%n %i %.9Y' "$WORK"/out_embed/features/*.h5 "$WORK"/out_seg/*.nii.gz 2>/dev/null | sort > "$WORK/before.txt"

E2=$(submit embed embed_wsi.sbatch slides.csv out_embed "${EW[@]}")
S2=$(submit segment segment.sbatch cts.csv out_seg "${SEG[@]}")
echo "resubmitted: embed-wsi array $E2, segment array $S2"
check "resubmitted arrays end" wait_jobs "$E2" "$S2"
echo "second round done after $(($(date +%s) - T0)) s"

check "exactly 8 feature files" test "$(nfeat)" -eq 8
check "exactly 4 masks" test "$(nmask)" -eq 4
check "no lock, break or temporary file left" bash -c "! find \"$WORK/out_embed\" \"$WORK/out_seg\" \\( -name '*.lock' -o -name '*.break' -o -name '*.tmp.*' \\) | grep ."
stat -c '%n %i %.9Y' $(cut -d' ' -f1 "$WORK/before.txt") | sort > "$WORK/after.txt"
check "files of the first round not rewritten (inode, mtime)" diff "$WORK/before.txt" "$WORK/after.txt"
once() {  # manifest: every input is 'done' in exactly one task log
  local manifest="$1" logs="$2" ok=0 input n
  while read -r input; do
    n=$(cat "$WORK"/logs/"$logs"-*.log | grep -c "^tessera: done $WORK/$input -> ")
    [ "$n" -eq 1 ] || { echo "  $input done $n times"; ok=1; }
  done < <(tail -n +2 "$WORK/$manifest")
  return $ok
}
check "each slide done once across the task logs" once slides.csv embed
check "each CT done once across the task logs" once cts.csv segment
check "a resubmitted task took over a stale lock" bash -c "cat \"$WORK\"/logs/*.log | grep -q '^tessera: broke a stale lock .*gone'"
check "collect: embed-wsi all done" bash -c "\"$BIN\" collect \"$WORK/out_embed\" > \"$WORK/collect_embed.txt\" && grep -q '8 done, 0 failed, 0 missing' \"$WORK/collect_embed.txt\""
check "collect: segment all done" bash -c "\"$BIN\" collect \"$WORK/out_seg\" > \"$WORK/collect_seg.txt\" && grep -q '4 done, 0 failed, 0 missing' \"$WORK/collect_seg.txt\""
check "task summaries: 3 per array and round, minus none" bash -c "[ \$(ls \"$WORK\"/out_embed/summaries/*.json | wc -l) -eq 6 ] && [ \$(ls \"$WORK\"/out_seg/summaries/*.json | wc -l) -eq 6 ]"

echo "--- task logs ---"
for f in "$WORK"/logs/*.log; do echo "== $(basename "$f")"; grep -E '^(tessera|slurmstepd)' "$f"; done
echo "--- collect ---"
cat "$WORK/collect0.txt" "$WORK/collect_embed.txt" "$WORK/collect_seg.txt"
echo "$pass passed, $fail failed in $(($(date +%s) - T0)) s"
[ "$fail" -eq 0 ]

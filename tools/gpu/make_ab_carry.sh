#!/usr/bin/env bash
# Packs the "before" tree of a same-call A / B into .gpu_carry/ab_before.tar.gz (git archive of BASE,
# default the merge-base of main and HEAD) for `tools/gpu/gpu_check.sh ab-build ab`; the "after"
# tree is the working tree the device call carries. Run after make_gpu_carry.sh, which wipes .gpu_carry.
#
#   tools/gpu/make_ab_carry.sh [BASE]
set -euo pipefail
cd "$(dirname "$0")/../.."
BASE=${1:-$(git merge-base main HEAD)}
EXCLUDE=$(git rev-parse --git-path info/exclude)
grep -qx '/.gpu_carry/' "$EXCLUDE" 2>/dev/null || echo '/.gpu_carry/' >> "$EXCLUDE"
mkdir -p .gpu_carry
git archive --format=tar.gz -o .gpu_carry/ab_before.tar.gz "$BASE"
git rev-parse --short "$BASE" > .gpu_carry/ab_before.commit
echo "before: $(cat .gpu_carry/ab_before.commit), $(du -h .gpu_carry/ab_before.tar.gz | cut -f1)"

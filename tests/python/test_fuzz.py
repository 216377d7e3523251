"""Randomized argument fuzz: TESSERA_FUZZ_CASES cases (default 2000) from seed TESSERA_FUZZ_SEED (default 0).

The cases themselves are in fuzz_worker.py. They run in a pool of TESSERA_FUZZ_WORKERS worker processes
(default 2), one case at a time per worker; a worker that crashes or hangs is replaced and the case it
was running is reported as a crash, with its seed and description. Every failing case is listed (not
only the first), each with the command that reproduces it alone.
"""
import os
import sys
import time


import fuzz_worker
from subproc import TESTS_DIR, WorkerPool

MAX_REPORTED = 40


def test_fuzz(device):
    n = int(os.environ.get("TESSERA_FUZZ_CASES", "2000"))
    first = int(os.environ.get("TESSERA_FUZZ_SEED", "0"))
    workers = int(os.environ.get("TESSERA_FUZZ_WORKERS", "2"))
    seeds = list(range(first, first + n))
    pool = WorkerPool([os.path.join(TESTS_DIR, "fuzz_worker.py"), "--device", str(device), "--worker"],
                      n=workers, timeout=120)
    t0 = time.monotonic()
    results = pool.map([str(s) for s in seeds])
    elapsed = time.monotonic() - t0

    failures, counts = [], {"valid": 0, "invalid": 0, "either": 0, "grad": 0}
    not_run = [s for s in seeds if str(s) not in results]
    for seed in seeds:
        if str(seed) not in results:
            continue
        status, payload = results[str(seed)]
        spec = fuzz_worker.make_spec(seed, device.type)
        counts[spec["expect"]] += 1
        counts["grad"] += bool(spec["grad"])
        if status != "ok":
            failures.append((seed, spec, f"CRASH ({status}): {payload}"))
        elif not payload["ok"]:
            failures.append((seed, spec, payload["problem"]))
    failures.sort(key=lambda f: not f[2].startswith("CRASH"))  # crashes first
    print(f"\nfuzz: {n} cases in {elapsed:.1f} s on {device} ({counts}), {pool.restarts} worker restarts, "
          f"{len(failures)} failures")

    if failures:
        lines = [f"{len(failures)} of {n} fuzz cases failed on {device}"
                 + (f" ({len(not_run)} not run: stopped after {pool.restarts} crashes)" if not_run else "")
                 + ". Reproduce one with\n"
                 f"  {sys.executable} {os.path.join(TESTS_DIR, 'fuzz_worker.py')} --device {device} --run SEED\n"]
        for seed, spec, problem in failures[:MAX_REPORTED]:
            lines.append(f"--- seed {seed}: {fuzz_worker.describe(spec)}\n    {problem.strip()}")
        if len(failures) > MAX_REPORTED:
            lines.append(f"... and {len(failures) - MAX_REPORTED} more: seeds "
                         f"{[f[0] for f in failures[MAX_REPORTED:]]}")
        raise AssertionError("\n".join(lines))

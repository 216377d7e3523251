#!/usr/bin/env python3
"""Model check of the dQ handshake in the warp-specialised Hopper backward
(attention/cuda/kernels/sm90/bwd_sm90_ws_kernel.cuh), without a GPU.

Three agents share three named barriers (bar.sync / bar.arrive with a thread count):
  c0, c1  the consumer warpgroups (128 threads each)
  p       the producer's dQ warp (32 threads)
  cons    both consumers, 256 threads, once per block and twice at the tile's end
  empty   p arrives (the dQ tile is free), the consumer whose turn it is syncs: 160 threads
  full    that consumer arrives (the tile is staged), p syncs: 160 threads
A barrier generation completes when its thread count has arrived; bar.sync waits for the generation it
joined. The script runs the kernel's order of operations under random interleavings and checks that
nothing deadlocks, no generation receives more arrivals than its count, staging k pairs with the
producer's hand-back k (the tile was read by reduce-add k - 1 before it is rewritten), and the tile's
final hand-back goes to the end of the tile (where dK / dV are staged in it).

  scripts/ws_dq_handshake_model.py [--blocks N] [--runs R] [--old-epilogue]

--old-epilogue runs the first build's tile end (the next-turn consumer syncing `empty` before the
consumers meet), which deadlocked on the H200; the model finds it. Exits 1 on a violation.
"""
import argparse
import random
import sys

THREADS = {"c0": 128, "c1": 128, "p": 32}
COUNT = {"cons": 256, "empty": 160, "full": 160}


def consumer(c, iters, old_epilogue):
    for it in range(iters):
        yield ("sync", "cons", None)
        if (it & 1) != c:
            continue
        yield ("sync", "empty", ("stage", it))
        yield ("arrive", "full", None)
    if not old_epilogue:
        yield ("sync", "cons", None)
    if c == (iters & 1):
        yield ("sync", "empty", ("end", iters))
    yield ("sync", "cons", None)


def producer(iters):
    yield ("arrive", "empty", None)
    for it in range(iters):
        yield ("sync", "full", ("reduce", it))
        yield ("arrive", "empty", None)


def run(iters, seed, old_epilogue):
    rnd = random.Random(seed)
    count = {b: 0 for b in COUNT}
    gen = {b: 0 for b in COUNT}
    progs = {"c0": consumer(0, iters, old_epilogue), "c1": consumer(1, iters, old_epilogue), "p": producer(iters)}
    op = {k: next(g) for k, g in progs.items()}
    waiting = {}  # agent -> (barrier, generation joined)
    done = set()

    def advance(k):
        try:
            op[k] = next(progs[k])
        except StopIteration:
            done.add(k)

    while len(done) < len(progs):
        ready = [k for k in progs if k not in done and (k not in waiting or gen[waiting[k][0]] > waiting[k][1])]
        if not ready:
            return f"deadlock: waiting {waiting}"
        k = rnd.choice(ready)
        if k in waiting:  # released: check what the generation paired
            bar, g = waiting.pop(k)
            tag = op[k][2]
            if tag and g != tag[1]:
                return f"{k} {tag[0]} {tag[1]} paired with {bar} generation {g}"
            advance(k)
            continue
        kind, bar, _ = op[k]
        joined = gen[bar]
        count[bar] += THREADS[k]
        if count[bar] > COUNT[bar]:
            return f"{bar} generation {joined}: {count[bar]} arrivals for {COUNT[bar]}"
        if count[bar] == COUNT[bar]:
            count[bar] = 0
            gen[bar] += 1
        if kind == "sync":
            waiting[k] = (bar, joined)
        else:
            advance(k)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=8, help="check tiles of 0..N-1 query blocks")
    ap.add_argument("--runs", type=int, default=3000, help="random interleavings per block count")
    ap.add_argument("--old-epilogue", action="store_true", help="the first build's tile end (deadlocks)")
    args = ap.parse_args()
    for iters in range(args.blocks):
        for seed in range(args.runs):
            err = run(iters, seed, args.old_epilogue)
            if err:
                print(f"{iters} blocks, interleaving {seed}: {err}")
                return 1
    print(f"ok: 0..{args.blocks - 1} blocks x {args.runs} interleavings")
    return 0


if __name__ == "__main__":
    sys.exit(main())

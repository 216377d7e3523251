#!/usr/bin/env python3
"""Registers, spills and PTX size of the attention kernels, here, without a GPU; and what
changed against another commit (`--rev`): the check that would have caught the eighth
session's packed_off rewrite (same registers, different loop code, 7 % slower on the GPU).

  scripts/kernel_report.py [--rev REV] [--arch 90a] [--match REGEX] [FILE.cu ...]

FILEs are paths below attention/cuda (default: instantiations/inst_bf16_small.cu). For each kernel entry:
registers, spill bytes (stores + loads) and stack from `ptxas -v`, and the PTX instruction
count; with --rev, the same for that commit (built from a temporary worktree) and whether
the entry's PTX is identical once register numbers, labels and parameter offsets are
normalised. Prints a Markdown table; exits 0.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def nvcc(src_root, inst, arch, args):
    cuda = os.path.join(src_root, "attention", "cuda")
    cmd = ["nvcc", "-std=c++17", "-O3", "--expt-relaxed-constexpr",
           f"-gencode=arch=compute_{arch},code=sm_{arch}", "-I../include", "-I..", "-I."]
    if arch.startswith("90"):
        cmd.append("-DTESSERA_SM90A")
    return subprocess.run(cmd + [inst] + args, cwd=cuda, capture_output=True, text=True)


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    short = []
    for d in out:
        d = re.sub(r"^void ", "", d)
        d = re.sub(r"\(.*\)$", "", d)
        d = re.sub(r"tessera::attention::cuda::(sm90::)?", "", d)
        d = d.replace("__nv_bfloat16", "bf16").replace("__half", "f16")
        short.append(d)
    return dict(zip(names, short))


def normalised_ptx(text):
    """{entry: normalised body}: register numbers, labels, anonymous namespaces and
    parameter offsets (KArgs may grow) do not count as changes."""
    entries = {}
    # An entry runs to the next entry's `// .globl` line (or the end): a closing brace cannot end it,
    # since inline asm blocks (`{ .reg .pred p; ... }`) put braces at the start of lines too.
    starts = [m for m in re.finditer(r"\.entry (\S+)\(", text)]
    for k, m in enumerate(starts):
        end = starts[k + 1].start() if k + 1 < len(starts) else len(text)
        body = text[m.start():end]
        g = body.rfind("// .globl")
        if g > 0:
            body = body[:g]
        body = re.sub(r"_GLOBAL__N__\w+", "GN", body)
        body = re.sub(r"\$L__BB\d+_\d+", "L", body)
        body = re.sub(r"%(r|rd|f|p|rs|fd|hh|h)\d+", r"%\1", body)
        body = re.sub(r"\[%rd\+-?\d+\]", "[P]", body)
        body = re.sub(r"param_0\[\d+\]", "param_0", body)
        body = re.sub(r"\.reg \.\S+ \s*%\w+<\d+>;", ".reg", body)
        entries[m.group(1)] = body
    return entries


def ptx_instructions(body):
    return sum(1 for line in body.splitlines()
               if line.startswith("\t") and not line.lstrip().startswith(("//", ".", "{", "}", "$")) and
               line.strip().endswith(";"))


def report(src_root, files, arch, match):
    """{mangled: (regs, spill, stack, ptx instructions, normalised ptx)} for the kernels of `files`."""
    out = {}
    for inst in files:
        with tempfile.TemporaryDirectory() as tmp:
            ptx_path = os.path.join(tmp, "k.ptx")
            r = nvcc(src_root, inst, arch, ["-ptx", "-o", ptx_path])
            if r.returncode != 0:
                sys.exit(f"{src_root}: nvcc -ptx {inst} failed:\n{r.stderr[-3000:]}")
            ptx = normalised_ptx(open(ptx_path).read())
            r = nvcc(src_root, inst, arch, ["-Xptxas", "-v", "-c", "-o", os.path.join(tmp, "k.o")])
            if r.returncode != 0:
                sys.exit(f"{src_root}: nvcc -c {inst} failed:\n{r.stderr[-3000:]}")
        name, spill, stack = None, 0, 0
        for line in r.stderr.splitlines():
            m = re.search(r"Function properties for (\S+)", line)
            if m:
                name = m.group(1)
                continue
            m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
            if m and name:
                stack, spill = int(m.group(1)), int(m.group(2)) + int(m.group(3))
                continue
            m = re.search(r"Used (\d+) registers", line)
            if m and name and name in ptx and re.search(match, name):
                out[name] = (int(m.group(1)), spill, stack, ptx_instructions(ptx[name]), ptx[name])
                name = None
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", default=["instantiations/inst_bf16_small.cu"])
    ap.add_argument("--rev", help="compare against this commit")
    ap.add_argument("--arch", default="90a")
    ap.add_argument("--match", default="kernel", help="regex on the mangled kernel name")
    a = ap.parse_args()

    now = report(ROOT, a.files, a.arch, a.match)
    old = {}
    if a.rev:
        with tempfile.TemporaryDirectory() as tmp:
            wt = os.path.join(tmp, "rev")
            subprocess.run(["git", "-C", ROOT, "worktree", "add", "-q", "--detach", wt, a.rev], check=True)
            try:
                old = report(wt, a.files, a.arch, a.match)
            finally:
                subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", wt], check=False)
    names = demangle(sorted(set(now) | set(old)))
    if a.rev:
        print(f"| kernel (sm_{a.arch}) | regs | spill B | PTX instr | {a.rev}: regs | spill B | PTX instr | PTX same |")
        print("|---|---|---|---|---|---|---|---|")
    else:
        print(f"| kernel (sm_{a.arch}) | regs | spill B | stack B | PTX instr |")
        print("|---|---|---|---|---|")
    for k in sorted(names, key=lambda k: names[k]):
        n, o = now.get(k), old.get(k)
        if not a.rev:
            print(f"| {names[k]} | {n[0]} | {n[1]} | {n[2]} | {n[3]} |")
            continue
        cols = [str(x) if x is not None else "—" for x in
                ((n[0], n[1], n[3]) if n else (None,) * 3) + ((o[0], o[1], o[3]) if o else (None,) * 3)]
        same = "yes" if n and o and n[4] == o[4] else ("—" if not (n and o) else "**no**")
        print(f"| {names[k]} | " + " | ".join(cols) + f" | {same} |")


if __name__ == "__main__":
    main()

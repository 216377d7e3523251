#!/usr/bin/env python3
"""Builds the prefix that lets the GPU machine build and run the whole `tessera` CLI, as a tar.xz.
Run by tools/gpu/make_app_carry.sh (which says why it is a trimmed tarball); policy.py says what goes.

  prefix.py --build BUILD --cache DEBS --out DIR

BUILD holds a local build of the CLI (what its apps/tessera loads is what travels), DEBS caches the
downloaded .deb files (a package already there is not fetched again), DIR receives prefix.tar.xz and
manifest.txt.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import elf  # noqa: E402
import policy  # noqa: E402
import stubs  # noqa: E402

LIB = f"usr/lib/{policy.ARCH}"


def die(msg):
    raise SystemExit(f"make_app_carry: {msg}")


def sh(*cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw).stdout


def system_libs():
    """soname -> path of the x86-64 libraries ldconfig knows here."""
    libs = {}
    for line in sh("ldconfig", "-p").splitlines()[1:]:
        m = re.match(r"\s+(\S+) \((.*?)\) => (\S+)", line)
        if m and "x86-64" in m.group(2):
            libs.setdefault(m.group(1), m.group(3))
    return libs


def walk(roots, resolve):
    """Follows NEEDED from the root sonames. Returns (real {soname: path}, stub importers
    {soname: {paths}}, unresolved sonames)."""
    real, importers, missing = {}, {}, set()
    todo = [(s, None) for s in roots]
    while todo:
        so, by = todo.pop()
        if so in policy.SYSTEM or policy.SKIP.match(so):
            continue
        if so in policy.STUBS:
            importers.setdefault(so, set()).update({by} if by else set())
            continue
        if so in real:
            continue
        path = resolve(so)
        if not path:
            missing.add(so)
            continue
        real[so] = path
        todo += [(n, path) for n in elf.needed(path)]
    return real, importers, missing


def package_of(path):
    real = os.path.realpath(path)
    for p in {real, path, re.sub(r"^/usr/lib/", "/lib/", real), re.sub(r"^/lib/", "/usr/lib/", real)}:
        r = subprocess.run(["dpkg", "-S", p], text=True, capture_output=True)
        if r.returncode == 0:
            return r.stdout.split(":")[0].split(",")[0].strip()
    die(f"no Debian package owns {path}")


def download(packages, cache):
    os.makedirs(cache, exist_ok=True)
    want = [p for p in sorted(packages) if not glob.glob(os.path.join(cache, f"{p}_*.deb"))]
    if want:
        print(f"downloading {len(want)} packages into {cache}", flush=True)
        subprocess.run(["apt-get", "download", "-q", *want], cwd=cache, check=True)
    debs = []
    for p in sorted(packages):
        found = sorted(glob.glob(os.path.join(cache, f"{p}_*.deb")))
        if not found:
            die(f"apt-get download gave no .deb for {p}")
        debs.append(found[-1])
    return debs


def staged_libs(stage):
    """soname (file name) -> path, for the runtime library folders of the extracted packages."""
    libs = {}
    for d in (f"{stage}/{LIB}", f"{stage}/lib/{policy.ARCH}", f"{stage}/usr/lib", f"{stage}/lib"):
        for f in glob.glob(f"{d}/lib*.so*"):
            libs.setdefault(os.path.basename(f), f)
    return libs


def copy(src, dst):
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if os.path.lexists(dst):
        return
    if os.path.islink(src):
        os.symlink(os.readlink(src), dst)
    else:
        shutil.copy2(src, dst)


def dest(prefix, stage, path):
    """Where a staged file goes in the prefix: the same place, /lib folded into /usr/lib."""
    rel = os.path.relpath(path, stage)
    return f"{prefix}/{'usr/' if rel.startswith('lib/') else ''}{rel}"


def carry_libs(real, stage, prefix):
    """Each real library: its file, and the soname link to it beside it (ITK's live in usr/lib)."""
    for so, path in real.items():
        target = os.path.realpath(path)
        copy(target, dest(prefix, stage, target))
        link = os.path.join(os.path.dirname(dest(prefix, stage, target)), so)
        if os.path.basename(target) != so and not os.path.lexists(link):
            os.symlink(os.path.basename(target), link)


def carry_dev_links(stage, prefix):
    """The link-time names (libfoo.so) whose library travels, and LINK_ONLY files."""
    for link in glob.glob(f"{stage}/usr/lib/**/*.so", recursive=True):
        if not os.path.islink(link):
            continue
        target = os.path.realpath(link)
        carried = dest(prefix, stage, target)
        if os.path.basename(link) in policy.LINK_ONLY:
            copy(target, carried)
        if os.path.exists(carried):
            copy(link, dest(prefix, stage, link))


def carry_headers(stage, prefix):
    """Every header of the -dev packages: ~5 MiB, against a failed build on the machine if its
    compiler took a path the local build's dependency files do not list."""
    shutil.copytree(f"{stage}/usr/include", f"{prefix}/usr/include", symlinks=True, dirs_exist_ok=True)
    return sum(len(files) for _, _, files in os.walk(f"{prefix}/usr/include"))


def relocate_cmake(path):
    """Absolute /usr paths in CMake package files -> paths relative to the file's own prefix, and
    the find_package calls of policy.DROP_FINDS commented out."""
    text = open(path).read()
    if re.search(r"targets|Targets|OpenCVModules", os.path.basename(path)):
        # generated export files: only the target properties, never the _realOrig test
        text = re.sub(r'(?m)^(\s+(?:INTERFACE|IMPORTED)_\w+ ".*)$',
                      lambda m: re.sub(r'(?<=[";])/usr/', "${_IMPORT_PREFIX}/", m.group(1)), text)
    elif "/ITK-5.2/" in path:
        # ITK's module files name /usr/include, /usr/lib/...: ITKConfig.cmake's prefix instead, except
        # in the "/usr move" test (_realOrig), which must keep comparing against the original place
        text = re.sub(r'(?m)^(?!.*_realOrig)(.*)$',
                      lambda m: re.sub(r'(?<=[";])/usr/', "${ITK_INSTALL_PREFIX}/", m.group(1)), text)
    for pkg in policy.DROP_FINDS:
        text = re.sub(rf"(?m)^(find_package\({pkg}\b.*)$", r"# \1  (not carried: tools/gpu/app_carry/policy.py)", text)
    open(path, "w").write(text)


def carry_cmake(stage, prefix):
    """Package configs, relocated; empty placeholders for the files their targets list but that do
    not travel (the export files check that every library of the package exists)."""
    placeholders = 0
    for d in policy.CMAKE_DIRS:
        for src in glob.glob(f"{stage}/{d}/**/*.cmake", recursive=True):
            dst = f"{prefix}/{os.path.relpath(src, stage)}"
            copy(src, dst)
            relocate_cmake(dst)
        for f in glob.glob(f"{prefix}/{d}/**/*.cmake", recursive=True):
            base = os.path.normpath(f"{prefix}/usr")
            for rel in re.findall(r'"\$\{_IMPORT_PREFIX\}/([^"$;]+)"', open(f).read()):
                p = f"{base}/{rel}"
                if re.search(r"\.so(\.[0-9.]+)?$|^bin/", rel) and not os.path.lexists(p):
                    os.makedirs(os.path.dirname(p), exist_ok=True)
                    open(p, "w").close()
                    placeholders += 1
    return placeholders


def carry_pkgconfig(stage, prefix):
    """pkg-config files made relocatable (${pcfiledir}); the private fields only matter to static links."""
    for name in policy.PC_FILES:
        text = open(f"{stage}/{LIB}/pkgconfig/{name}.pc").read()
        text = re.sub(r"(?m)^(\w+)=/usr", r"\1=${pcfiledir}/../../..", text)
        text = re.sub(r"(?m)^(Requires|Libs)\.private:.*\n", "", text)
        os.makedirs(f"{prefix}/{LIB}/pkgconfig", exist_ok=True)
        open(f"{prefix}/{LIB}/pkgconfig/{name}.pc", "w").write(text)


def write_pkg_config(prefix):
    """usr/bin/pkg-config: pkgconf with its library and only the carried .pc files. The prefix's
    library folder must not be on LD_LIBRARY_PATH for the build tools (its stubs would shadow the
    machine's real libxml2, curl, ... under cmake itself), so pkgconf gets it alone."""
    path = f"{prefix}/usr/bin/pkg-config"
    open(path, "w").write(
        "#!/bin/sh\n"
        'd=$(cd "$(dirname "$0")/.." && pwd)\n'
        f'PKG_CONFIG_LIBDIR="$d/lib/{policy.ARCH}/pkgconfig" LD_LIBRARY_PATH="$d/lib/{policy.ARCH}" exec "$d/bin/pkgconf" "$@"\n')
    os.chmod(path, 0o755)


def verify(prefix, system):
    """Every symbol a carried library or stub imports is defined by a carried library, a stub or a
    SYSTEM library (here: Debian's version, which the machine's newer one contains)."""
    files = [f for f in glob.glob(f"{prefix}/{LIB}/lib*.so*") + glob.glob(f"{prefix}/usr/lib/lib*.so*")
             if not os.path.islink(f) and os.path.getsize(f)]
    provided = set()
    carried = {elf.soname(f) or os.path.basename(f): f for f in files}
    for so in set(carried) | (policy.SYSTEM & set(system)):
        path = carried.get(so) or system[so]
        d, _ = elf.dynsyms(path)
        provided |= set(d)
    bad = []
    for so, f in carried.items():
        for need in elf.needed(f):
            if need not in carried and need not in policy.SYSTEM:
                bad.append(f"{so} needs {need}, which neither travels nor is on the machine")
        for name, _ in elf.dynsyms(f)[1]:
            if name not in provided:
                bad.append(f"{so}: {name} is defined nowhere")
    if bad:
        die("unresolved after assembly:\n  " + "\n  ".join(sorted(set(bad))[:40]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True)
    ap.add_argument("--cache", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    cli = f"{a.build}/apps/tessera"
    if not os.access(cli, os.X_OK):
        die(f"{cli}: build the CLI first (ninja -C {a.build} tessera)")
    system = system_libs()
    roots = elf.needed(cli) + elf.needed("/usr/bin/pkgconf") + policy.EXTRA_ROOTS
    real, _, missing = walk(roots, system.get)
    if missing:
        die(f"not found here: {sorted(missing)}")
    packages = {package_of(p) for p in real.values()} | set(policy.DEV_PACKAGES)
    debs = download(packages, a.cache)

    with tempfile.TemporaryDirectory() as tmp:
        stage, prefix = f"{tmp}/stage", f"{tmp}/prefix"
        for deb in debs:
            subprocess.run(["dpkg-deb", "-x", deb, stage], check=True)
        libs = staged_libs(stage)
        real, importers, missing = walk(roots, libs.get)
        if missing:
            die(f"the downloaded packages lack {sorted(missing)}")
        carry_libs(real, stage, prefix)
        carry_dev_links(stage, prefix)
        for t in policy.TOOLS:
            copy(f"{stage}/{t}", f"{prefix}/{t}")
        write_pkg_config(prefix)
        for so, imps in sorted(importers.items()):
            if so not in system:
                die(f"{so} is to be stubbed but is not installed here (its symbols come from it)")
            stubs.build(so, system[so], sorted(imps), f"{prefix}/{LIB}")
        headers = carry_headers(stage, prefix)
        placeholders = carry_cmake(stage, prefix)
        carry_pkgconfig(stage, prefix)
        verify(prefix, system)
        os.makedirs(a.out, exist_ok=True)
        versions = sorted(os.path.basename(d).rsplit("_", 1)[0] for d in debs)
        manifest = (["# real (from these Debian packages)"] + versions + ["", "# real libraries"] + sorted(real) +
                    ["", "# stubs"] + sorted(importers) + ["", "# on the machine (SYSTEM)"] + sorted(policy.SYSTEM))
        os.makedirs(f"{prefix}/usr/share/tessera-carry", exist_ok=True)
        open(f"{prefix}/usr/share/tessera-carry/manifest.txt", "w").write("\n".join(manifest) + "\n")
        shutil.copy(f"{prefix}/usr/share/tessera-carry/manifest.txt", f"{a.out}/manifest.txt")
        tarball = f"{a.out}/prefix.tar.xz"
        subprocess.run(["tar", "-C", prefix, "--sort=name", "--owner=0", "--group=0", "-cf", tarball, "-I", "xz -9e -T2",
                        "usr"], check=True)
    print(f"{len(real)} libraries from {len(debs)} packages, {len(importers)} stubs, {headers} headers, "
          f"{placeholders} placeholders -> {tarball} ({os.path.getsize(tarball) / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()

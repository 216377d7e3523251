"""Stub libraries: a shared object with a library's soname that defines every symbol the carried
libraries import from it (functions that return 0, zero-filled objects, the same symbol versions).

Why: FFmpeg, OpenCV, HDF5 and cairo link dozens of libraries that Tessera never calls (external
codecs, network protocols, GDAL, X11, hardware back ends). They are bound at load time (BIND_NOW),
so each must exist and define what is imported, but a call never comes on Tessera's paths. A stub
is a few kilobytes where the real library and everything it needs would be tens of megabytes. If a
stub is ever called, it says so on stderr (once per library; every call with TESSERA_STUB_TRACE=1)
and returns 0.
"""
import os
import subprocess
import tempfile

# Called on Tessera's paths with no harm from a stub, so silent (prefixes of symbol names):
# OpenSlide's constructor initialises libxml2; OpenCV's imgcodecs builds an OpenEXR default at load
# time and registers GDAL's drivers with its codecs; FFmpeg asks the external encoders what they
# support when it lists its codecs (and checks the answers) and probes every input with libopenmpt.
QUIET = ["xmlInitParser", "xmlCleanupParser", "GDALAllRegister", "_ZN7Imf_3_114ChromaticitiesC",
         "aom_codec_", "vpx_codec_", "x265_api_get_",
         "openmpt_probe_file_header"]

_REPORTER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static const char* const quiet[] = {%s 0};
__attribute__((visibility("hidden"))) long tessera_stub_called(const char* name) {
  static int told;
  if (getenv("TESSERA_STUB_TRACE")) fprintf(stderr, "tessera stub: %%s (%s)\n", name);
  for (const char* const* q = quiet; *q; ++q)
    if (!strncmp(*q, name, strlen(*q))) return 0;
  if (!told++)
    fprintf(stderr, "tessera: %%s from %s was called, but that library is a stub on this machine "
                    "(not carried: tools/gpu/make_app_carry.sh)\n", name);
  return 0;
}
"""


def _assembly(symbols):
    """symbols: [(name, version, default, type, size)] -> GNU assembler source."""
    out = []
    for i, (name, ver, default, typ, size) in enumerate(symbols):
        label = name if default else f"tessera_stub_{i}"
        if typ == "OBJECT" or typ == "TLS":
            section = '.section .tbss,"awT",@nobits' if typ == "TLS" else ".bss"
            kind = "@tls_object" if typ == "TLS" else "@object"
            n = max(size, 8)
            out += [section, ".balign 16", f".globl {label}", f".type {label}, {kind}", f".size {label}, {n}",
                    f"{label}:", f".zero {n}"]
        else:  # FUNC, IFUNC, NOTYPE: a function that reports and returns 0
            out += [".text", f".globl {label}", f".type {label}, @function", f"{label}:",
                    f"leaq .Ltessera_name_{i}(%rip), %rdi", "jmp tessera_stub_called",
                    ".section .rodata", f".Ltessera_name_{i}: .string \"{name}\""]
        if not default:
            out.append(f".symver {label}, {name}@{ver}")
    out.append('.section .note.GNU-stack,"",@progbits')  # no executable stack
    return "\n".join(out) + "\n"


def _version_script(symbols):
    """Named version nodes as the real library has them. Symbols of the base version (no suffix in
    readelf) stay out of the script and so stay global and unversioned, as in the real library."""
    nodes = {}
    for name, ver, default, _, _ in symbols:
        if ver is not None:
            nodes.setdefault(ver, [])
            if default:
                nodes[ver].append(name)
    return "".join(f"{ver} {{ {'global: ' + ''.join(f'{n}; ' for n in names) if names else ''}}};\n"
                   for ver, names in sorted(nodes.items()))


def build(soname, real_path, importers, out_dir):
    """Writes out_dir/soname, defining what `importers` (ELF paths) import that `real_path` defines."""
    from elf import dynsyms

    defined, _ = dynsyms(real_path)
    wanted = set()
    for imp in importers:
        wanted |= {(n, v) for n, v in dynsyms(imp)[1] if n in defined}
    symbols = []
    for name, ver in sorted(wanted, key=lambda s: (s[0], s[1] or "")):
        match = [d for d in defined[name] if d[2] == ver] or [d for d in defined[name] if ver is None and d[3]]
        if not match:
            raise SystemExit(f"stub {soname}: {name}@{ver} is imported but {real_path} defines no such version")
        typ, size, dver, default = match[0]
        symbols.append((name, dver, default, typ, size))
    with tempfile.TemporaryDirectory() as tmp:
        paths = {k: os.path.join(tmp, k) for k in ("s.S", "r.c", "v.map")}
        open(paths["s.S"], "w").write(_assembly(symbols))
        quiet = "".join(f'"{q}", ' for q in QUIET)
        open(paths["r.c"], "w").write(_REPORTER % (quiet, soname, soname))
        script = _version_script(symbols)
        open(paths["v.map"], "w").write(script)
        subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", os.path.join(out_dir, soname), paths["s.S"], paths["r.c"],
                        f"-Wl,-soname,{soname}"] + ([f"-Wl,--version-script,{paths['v.map']}"] if script else []), check=True)
    return len(symbols)

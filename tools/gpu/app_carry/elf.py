"""ELF facts through binutils' readelf: NEEDED entries and dynamic symbols."""
import re
import subprocess

_SYM = re.compile(r"^\s*\d+:\s+[0-9a-f]+\s+(\d+|0x[0-9a-f]+)\s+(\w+)\s+(\w+)\s+\w+\s+(\w+)\s+(\S+)")


def readelf(*args):
    return subprocess.run(["readelf", "-W", *args], check=True, text=True, capture_output=True).stdout


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", readelf("-d", path))


def soname(path):
    m = re.search(r"\(SONAME\)\s+Library soname: \[(.+?)\]", readelf("-d", path))
    return m.group(1) if m else None


def _split(name):
    """'f@@V' -> (f, V, True), 'f@V' -> (f, V, False), 'f' -> (f, None, True); drops readelf's ' (n)'."""
    name = name.split(" ")[0]
    if "@@" in name:
        n, v = name.split("@@", 1)
        return n, v, True
    if "@" in name:
        n, v = name.split("@", 1)
        return n, v, False
    return name, None, True


def dynsyms(path):
    """(defined, undefined): defined maps name -> [(type, size, version, default)], undefined is a
    set of (name, version) that must resolve (weak references may stay unresolved)."""
    defined, undefined = {}, set()
    for line in readelf("--dyn-syms", path).splitlines():
        m = _SYM.match(line)
        if not m:
            continue
        size, typ, bind, ndx = int(m.group(1), 0), m.group(2), m.group(3), m.group(4)
        name, ver, default = _split(line[m.start(5):])
        if not name or bind == "LOCAL":
            continue
        if ndx == "UND":
            if bind == "GLOBAL":
                undefined.add((name, ver))
        elif ndx != "ABS":  # ABS entries name the version nodes themselves
            defined.setdefault(name, []).append((typ, size, ver, default))
    return defined, undefined

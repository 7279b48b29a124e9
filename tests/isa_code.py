#!/usr/bin/env python3
"""isa_code.py — the JIT's machine code holds only the target's vectors.

    isa_code.py DCC MODEL_DIR CPU MAX_REGISTER CACHE_DIR

Compiles MODEL_DIR for CPU (`dcc check --backend cpu --cpu CPU`) into an
empty CACHE_DIR, then disassembles every object in the cached file
(objdump -d) and fails if an instruction names a vector register wider
than MAX_REGISTER (xmm: SSE only; ymm: AVX2 at most). A kernel that picks
up this machine's features instead of the target's (a function without
its own target-features, codegen/driver.c) fails it.
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile

WIDER = {"xmm": ("ymm", "zmm"), "ymm": ("zmm",), "zmm": ()}


def elf_objects(data):
    """Each ELF object in data, by its section header table's end."""
    i = data.find(b"\x7fELF")
    while i >= 0:
        shoff, = struct.unpack_from("<Q", data, i + 0x28)
        shentsize, shnum = struct.unpack_from("<HH", data, i + 0x3A)
        end = i + shoff + shentsize * shnum
        yield data[i:end]
        i = data.find(b"\x7fELF", end)


def main():
    dcc, model, cpu, widest, cache = sys.argv[1:6]
    shutil.rmtree(cache, ignore_errors=True)
    os.makedirs(cache)
    p = subprocess.run([dcc, "check", model, "--backend", "cpu", "--cpu", cpu, "--cache-dir", cache],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode:
        sys.exit(f"isa_code: dcc check failed:\n{p.stdout}")
    files = [os.path.join(cache, f) for f in os.listdir(cache) if f.endswith(".jit")]
    if not files:
        sys.exit(f"isa_code: no cached object in {cache}")
    nins, bad = 0, []
    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            for k, obj in enumerate(elf_objects(open(f, "rb").read())):
                path = os.path.join(tmp, f"{k}.o")
                open(path, "wb").write(obj)
                asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path], stdout=subprocess.PIPE,
                                     text=True, check=True).stdout
                for line in asm.splitlines():
                    if "\t" not in line:
                        continue
                    nins += 1
                    if any("%" + r in line for r in WIDER[widest]):
                        bad.append(line.strip())
    print(f"isa_code: {cpu}: {nins} instructions, {len(bad)} with registers wider than {widest}")
    for line in bad[:10]:
        print("  " + line)
    sys.exit(1 if bad or nins == 0 else 0)


if __name__ == "__main__":
    main()

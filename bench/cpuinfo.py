"""cpuinfo.py — the line every bench table starts with: the CPU and its vector ISA."""
import os


def vector_isa(flags):
    """The widest vector ISA in /proc/cpuinfo's flags, with the extensions that matter for matmuls."""
    if "avx512f" in flags:
        isa = "avx512f"
        extra = [f for f in ("avx512_bf16", "amx_tile") if f in flags]
        return isa + (" (" + ", ".join("amx" if f == "amx_tile" else f for f in extra) + ")" if extra else "")
    for f in ("avx2", "avx", "sse4_2", "sse2"):
        if f in flags:
            return f
    return "unknown"


def cpu_line():
    model, flags = "unknown", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                k = k.strip()
                if k == "model name" and model == "unknown":
                    model = v.strip()
                elif k == "flags" and not flags:
                    flags = set(v.split())
    except OSError:
        pass
    return f"CPU: {model}, vector ISA {vector_isa(flags)}, {os.cpu_count()} cores"


if __name__ == "__main__":
    print(cpu_line())

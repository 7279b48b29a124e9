"""test_perf_map.py — DISC_PERF_MAP=1 (codegen/perfmap.c): a dcc bench of the
BERT encoder test model, compiled and then taken from the cache, writes
/tmp/perf-<pid>.map lines "START SIZE NAME" for the host flow and every
kernel, each kernel named with its description, no two functions
overlapping; without the variable no map is written. Usage:
test_perf_map.py BUILD_DIR"""
import os
import re
import subprocess
import sys
import tempfile

build = sys.argv[1]
src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
dcc = os.path.join(build, "dcc")
model = os.path.join(src, "tests", "models", "bert_encoder")
fails = 0


def check(cond, what):
    global fails
    if not cond:
        fails += 1
        print("FAIL: " + what)


def run(cache, perf):
    env = dict(os.environ)
    env.pop("DISC_PERF_MAP", None)
    if perf:
        env["DISC_PERF_MAP"] = "1"
    p = subprocess.run([dcc, "bench", model, "--runs", "1", "-v", "--cache-dir", cache], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, env=env)
    return p.returncode, p.stdout


def lines_of(out):
    """The map the run names, its lines parsed; the path."""
    m = re.search(r"dcc: perf map: (\d+) functions in (\S+)", out)
    if not m:
        return None, None
    path = m.group(2)
    rows = []
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split(" ", 2)
            rows.append((int(parts[0], 16), int(parts[1], 16), parts[2]))
    os.remove(path)
    check(len(rows) == int(m.group(1)), "the count printed is the lines written: %s" % m.group(0))
    return rows, path


with tempfile.TemporaryDirectory() as d:
    for hit in (False, True):
        what = "from the cache" if hit else "compiled"
        rc, out = run(d, True)
        check(rc == 0, what + ": dcc bench: " + out)
        check(("cache hit" in out) == hit, what + ": the cache was %s" % ("hit" if hit else "missed"))
        rows, path = lines_of(out)
        check(rows, what + ": no perf map, or an empty one: " + out)
        if not rows:
            continue
        check(path == "/tmp/perf-%s.map" % path.split("-")[-1].split(".")[0] and path.startswith("/tmp/perf-"),
              what + ": the map is perf's file: " + path)
        names = [r[2] for r in rows]
        check(any(n.startswith("disc_main [") for n in names), what + ": the host flow: %s" % names)
        kernels = [n for n in names if re.match(r"disc_k\d+ ", n)]
        nk = re.search(r"(\d+) distinct kernels", out)
        check(nk and len(kernels) == int(nk.group(1)), what + ": every kernel: %s against %s" % (kernels, nk))
        check(all(re.match(r"disc_k\d+ (loop|stitch|input|split|rows|column)", n) for n in kernels),
              what + ": kernels carry their descriptions: %s" % kernels)
        check(all(size > 0 and start > 0 for start, size, _ in rows), what + ": addresses and sizes")
        spans = sorted((s, s + n) for s, n, _ in rows)
        check(all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), what + ": functions overlap: %s" % spans)
    rc, out = run(d, False)
    check(rc == 0 and "perf map" not in out, "without DISC_PERF_MAP no map: " + out)

print("test_perf_map: " + ("PASS" if fails == 0 else "FAIL (%d)" % fails))
sys.exit(1 if fails else 0)

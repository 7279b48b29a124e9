"""test_dcc_cache.py — `dcc cache` on a directory of its own: what it
holds after a check of the BERT encoder test model (compiled code, the
model's weights laid out aligned, their marks), --verify finding it
whole, then finding and removing a damaged weights file and a damaged
code file (which the next check makes again), --clear, and the usage
errors. Usage: test_dcc_cache.py BUILD_DIR"""
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


def run(*args):
    p = subprocess.run([dcc, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def counts(out):
    got = {}
    for kind, ext in (("compiled code", "jit"), ("weights", "wts"), ("marks", "chk")):
        m = re.search(r"%s \(\.%s\)\s+(\d+) files" % (kind, ext), out)
        got[ext] = int(m.group(1)) if m else -1
    return got


def files(d, ext):
    return sorted(f for f in os.listdir(d) if f.endswith("." + ext))


def poke(path, at):
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0x5A]))


with tempfile.TemporaryDirectory() as d:
    rc, out = run("cache", "--cache-dir", os.path.join(d, "none"))
    check(rc == 0 and "no cache directory yet" in out, "a missing directory: " + out)
    rc, out = run("check", model, "--backend", "cpu", "--cache-dir", d)
    check(rc == 0, "dcc check: " + out)
    rc, out = run("cache", "--cache-dir", d)
    c = counts(out)
    check(rc == 0 and c["jit"] >= 1 and c["wts"] >= 1, "after a check: " + out)
    rc, out = run("cache", "--cache-dir", d, "--verify")
    n = c["jit"] + c["wts"]
    check(rc == 0 and ("verified: %d intact, 0 damaged" % n) in out, "--verify of a whole cache: " + out)
    check(len(files(d, "chk")) == c["wts"], "every intact weights file marked: %s" % files(d, "chk"))
    # one weights file and one code file damaged
    wts = max(files(d, "wts"), key=lambda f: os.path.getsize(os.path.join(d, f)))
    jit = files(d, "jit")[0]
    poke(os.path.join(d, wts), 4096 + 100)  # in its first weight
    poke(os.path.join(d, jit), os.path.getsize(os.path.join(d, jit)) - 10)
    rc, out = run("cache", "--cache-dir", d, "--verify")
    check(rc == 0 and ("verified: %d intact, 2 damaged" % (n - 2)) in out, "--verify of damage: " + out)
    check(wts not in files(d, "wts") and jit not in files(d, "jit"), "the damaged files removed")
    check(wts[:-3] + "chk" not in files(d, "chk"), "the damaged weights file's mark removed")
    rc, out = run("check", model, "--backend", "cpu", "--cache-dir", d)
    check(rc == 0, "dcc check after the removal: " + out)
    rc, out = run("cache", "--cache-dir", d, "--verify")
    check(rc == 0 and " 0 damaged" in out, "made again, whole: " + out)
    rc, out = run("cache", "--cache-dir", d, "--clear")
    check(rc == 0 and "files removed" in out, "--clear: " + out)
    check(not files(d, "jit") and not files(d, "wts") and not files(d, "chk"), "--clear left %s" % os.listdir(d))

for args, want in ((["--verify", "--clear"], 2), (["--bogus"], 2), (["--cache-dir"], 2), (["--help"], 0)):
    rc, out = run("cache", *args)
    check(rc == want and ("usage: dcc cache" in out), "dcc cache %s: exit %d, want %d: %s" % (args, rc, want, out))

print("test_dcc_cache: %s" % ("PASS" if fails == 0 else "%d FAILED" % fails))
sys.exit(1 if fails else 0)

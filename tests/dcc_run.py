"""dcc_run.py — runs one `dcc check` for the expectation runners
(tests/zoo/run.py, tests/trained/run.py): prints the command and its
output, and turns a timeout, a death by signal or a sanitizer report into
a failure, whatever the expectation."""
import shlex
import signal
import subprocess
import sys


def run_check(cmd, timeout):
    """(returncode, output) of cmd, or None after printing why it failed."""
    print("$ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        print("FAIL: timed out after %d s" % timeout)
        return None
    sys.stdout.write(p.stdout)
    if p.returncode < 0:
        print("FAIL: dcc died of signal %s" % signal.Signals(-p.returncode).name)
        return None
    for line in p.stdout.splitlines():
        if "Sanitizer" in line or "runtime error:" in line:
            print("FAIL: sanitizer report: " + line.strip())
            return None
    return p.returncode, p.stdout


def expect_pass(rc):
    """The exit status for an expectation that every data set passes."""
    if rc != 0:
        print("FAIL: expected every data set to pass, dcc exited %d" % rc)
        return 1
    print("ok: every data set passes")
    return 0

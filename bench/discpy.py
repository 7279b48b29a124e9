"""discpy.py — disc's C API (include/disc.h) from Python, through ctypes and
build/public/libdisc.so.

    import discpy
    m = discpy.Model("model.onnx")
    c = m.compile(threads=1)                # disc_compile, once for every shape
    outs = c.run([x, mask])                 # numpy arrays in, numpy arrays out
    ms = c.time_runs([x, mask], 10)         # seconds per run, outputs freed untimed

The bench (run_bench.py --inproc) uses it to time disc and ONNX Runtime in
one process, run batches of each alternating within seconds of each other,
which a machine whose speed drifts over seconds (a shared VM) disturbs far
less than two processes a minute apart. Errors raise DiscError with
disc_last_error's message.
"""
import ctypes as C
import os
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_LIB = os.path.join(os.path.dirname(HERE), "build", "public", "libdisc.so")
MAX_RANK = 16
# disc_dtype's order (include/disc.h)
DTYPES = [np.float32, np.float16, None, np.float64, np.int8, np.uint8, np.int32, np.int64, np.bool_]


class DiscError(RuntimeError):
    pass


class Tensor(C.Structure):
    _fields_ = [("dtype", C.c_int), ("rank", C.c_int), ("shape", C.c_int64 * MAX_RANK),
                ("data", C.c_void_p), ("nbytes", C.c_size_t), ("owned", C.c_int)]


class Options(C.Structure):
    _fields_ = [("backend", C.c_char_p), ("opt_level", C.c_int), ("threads", C.c_int),
                ("assume", C.POINTER(C.c_char_p)), ("nassume", C.c_int), ("verbose", C.c_int),
                ("cpu", C.c_char_p), ("no_cache", C.c_int), ("cache_dir", C.c_char_p)]


_lib = None


def lib(path=None):
    """The loaded libdisc.so (DISC_LIB, else build/public/libdisc.so)."""
    global _lib
    if _lib is None:
        path = path or os.environ.get("DISC_LIB") or DEFAULT_LIB
        if not os.path.exists(path):
            raise DiscError(f"{path}: no such file (make build makes it)")
        # oneDNN runs on libgomp, whose threads spin after each library
        # call by default and take the cores disc's pool needs next; libgomp
        # reads its wait policy when it loads (with libdisc.so, here), so the
        # launcher sets it, as dcc does (dcc.c, passive_openmp). Without it
        # BERT-base at 1 x 8 on 2 threads ran 11.5-13.7 ms here against 8.3-10.3
        # in dcc bench (AVX-512 EPYC).
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        L = C.CDLL(path)
        L.disc_last_error.restype = C.c_char_p
        L.disc_version.restype = C.c_char_p
        L.disc_default_options.restype = Options
        L.disc_load.restype = C.c_void_p
        L.disc_load.argtypes = [C.c_char_p]
        L.disc_model_free.argtypes = [C.c_void_p]
        L.disc_model_num_inputs.argtypes = [C.c_void_p]
        L.disc_model_num_outputs.argtypes = [C.c_void_p]
        L.disc_model_op_count.argtypes = [C.c_void_p]
        L.disc_compile.restype = C.c_void_p
        L.disc_compile.argtypes = [C.c_void_p, C.POINTER(Options)]
        L.disc_compiled_free.argtypes = [C.c_void_p]
        L.disc_compiled_kernel_count.argtypes = [C.c_void_p]
        L.disc_run.argtypes = [C.c_void_p, C.POINTER(Tensor), C.c_int, C.POINTER(Tensor), C.c_int]
        L.disc_tensor_free.argtypes = [C.POINTER(Tensor)]
        _lib = L
    return _lib


def _error(what):
    msg = lib().disc_last_error()
    return DiscError(f"{what}: {msg.decode() if msg else 'failed'}")


def _tensor(a):
    a = np.ascontiguousarray(a)
    t = Tensor()
    try:
        t.dtype = next(i for i, d in enumerate(DTYPES) if d is not None and a.dtype == d)
    except StopIteration:
        raise DiscError(f"no disc dtype for numpy's {a.dtype}") from None
    if a.ndim > MAX_RANK:
        raise DiscError(f"rank {a.ndim} is above disc's {MAX_RANK}")
    t.rank = a.ndim
    for i, d in enumerate(a.shape):
        t.shape[i] = d
    t.data = a.ctypes.data
    t.nbytes = a.nbytes
    return t, a


class Compiled:
    def __init__(self, model, ptr, nout, compile_s):
        self.model, self.ptr, self.nout, self.compile_s = model, ptr, nout, compile_s

    def __del__(self):
        if getattr(self, "ptr", None) and _lib is not None:
            _lib.disc_compiled_free(self.ptr)
            self.ptr = None

    @property
    def kernels(self):
        return lib().disc_compiled_kernel_count(self.ptr)

    def _inputs(self, arrays):
        held = [_tensor(a) for a in arrays]
        ins = (Tensor * max(1, len(held)))(*[t for t, _ in held])
        return ins, held

    def _run(self, ins, n, outs):
        if lib().disc_run(self.ptr, ins, n, outs, self.nout) != 0:
            raise _error("disc_run")

    def run(self, arrays):
        """The outputs of one run, as numpy arrays (copies)."""
        ins, held = self._inputs(arrays)
        outs = (Tensor * max(1, self.nout))()
        self._run(ins, len(held), outs)
        res = []
        for t in outs[:self.nout]:
            shape = tuple(t.shape[i] for i in range(t.rank))
            buf = (C.c_char * t.nbytes).from_address(t.data) if t.nbytes else b""
            res.append(np.frombuffer(bytes(buf), dtype=DTYPES[t.dtype]).reshape(shape).copy())
            lib().disc_tensor_free(C.byref(t))
        return res

    def time_runs(self, arrays, runs, clock=time.perf_counter):
        """Seconds of each of `runs` runs (disc_run alone: outputs are freed
        after the clock stops, as dcc bench does)."""
        ins, held = self._inputs(arrays)
        outs = (Tensor * max(1, self.nout))()
        ts = []
        for _ in range(runs):
            for t in outs:
                t.data, t.nbytes = None, 0
            t0 = clock()
            self._run(ins, len(held), outs)
            ts.append(clock() - t0)
            for t in outs[:self.nout]:
                lib().disc_tensor_free(C.byref(t))
        return ts


class Model:
    def __init__(self, path):
        t0 = time.perf_counter()
        self.ptr = lib().disc_load(os.fsencode(path))
        self.load_s = time.perf_counter() - t0
        if not self.ptr:
            raise _error(f"disc_load {path}")
        self.ops = lib().disc_model_op_count(self.ptr)
        self.nin = lib().disc_model_num_inputs(self.ptr)
        self.nout = lib().disc_model_num_outputs(self.ptr)

    def __del__(self):
        if getattr(self, "ptr", None) and _lib is not None:
            _lib.disc_model_free(self.ptr)
            self.ptr = None

    def compile(self, threads=0, cpu=None, no_cache=False, backend="cpu"):
        o = lib().disc_default_options()
        o.threads = threads
        o.backend = backend.encode()
        if cpu:
            o.cpu = cpu.encode()
        o.no_cache = int(no_cache)
        t0 = time.perf_counter()
        ptr = lib().disc_compile(self.ptr, C.byref(o))
        dt = time.perf_counter() - t0
        if not ptr:
            raise _error("disc_compile")
        return Compiled(self, ptr, self.nout, dt)

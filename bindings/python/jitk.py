"""jitk for Python: list, explain and precompile kernels, and launch them on
PyTorch tensors, through plain ctypes (no build step).

    import torch, jitk
    rt = jitk.Runtime()                      # device 0, default specs and cache
    rt.configure_input_scale(s)              # once: s is a float32 [1] CUDA tensor
    y, q, fused = rt.auto_norm_scale_shift_fp8(x, scale, shift, s)

Tensors are checked before anything is launched (device, dtype, shape,
contiguity); kernels run on PyTorch's current stream of the tensor's
device. Failures raise jitk.Error with the library's status and message;
a fused path that does not apply is not an error (see try_ and auto). A bad
argument raises jitk.ArgumentError (also a ValueError) or
jitk.ArgumentTypeError (also a TypeError), status EINVAL, before anything
reaches the library: a string with a NUL character, a number that does not
fit its C type, a wrong type.

libjitk is found through $JITK_LIBRARY, else next to this file in a
source tree (build/libjitk.so), else the system's library path.
"""
import ctypes
import ctypes.util
import math
import operator
import os

__all__ = ["Error", "ArgumentError", "ArgumentTypeError", "Compiler", "Runtime", "version",
           "i32"]

# ----------------------------------------------------------------- library

_STATUS = {
    0: "OK", 1: "FALLBACK", -1: "EINVAL", -2: "ENOMEM", -3: "ENOENT", -4: "ESPEC",
    -5: "EARCH", -6: "ECOMPILE", -7: "ENOCOMPILE", -8: "EIO", -9: "ENODEV",
    -10: "EDRIVER", -11: "ECAPTURE",
}


def _load():
    names = []
    if os.environ.get("JITK_LIBRARY"):
        names.append(os.environ["JITK_LIBRARY"])
    here = os.path.dirname(os.path.abspath(__file__))
    names.append(os.path.join(here, "..", "..", "build", "libjitk.so"))
    found = ctypes.util.find_library("jitk")
    if found:
        names.append(found)
    names.append("libjitk.so.0")
    errors = []
    for n in names:
        try:
            return ctypes.CDLL(n)
        except OSError as e:
            errors.append(f"{n}: {e}")
    raise ImportError("cannot load libjitk: " + "; ".join(errors))


_lib = _load()
_c = ctypes


class _Error(_c.Structure):
    _fields_ = [("status", _c.c_int), ("message", _c.c_char_p), ("detail", _c.c_char_p)]


_LOG_FN = _c.CFUNCTYPE(None, _c.c_void_p, _c.c_int, _c.c_char_p)


class _CompilerOptions(_c.Structure):
    _fields_ = [("version", _c.c_uint), ("specs", _c.c_char_p), ("cache_dir", _c.c_char_p),
                ("cache_path", _c.c_char_p), ("no_compile", _c.c_int),
                ("force_compile", _c.c_int), ("dump_dir", _c.c_char_p), ("log", _LOG_FN),
                ("log_payload", _c.c_void_p), ("log_level", _c.c_int),
                ("cache_read_only", _c.c_int)]


class _RuntimeOptions(_c.Structure):
    _fields_ = [("version", _c.c_uint), ("device", _c.c_int), ("capture", _c.c_int),
                ("compiler", _CompilerOptions), ("programmatic", _c.c_int)]


class _NormArgs(_c.Structure):
    _fields_ = [(n, _c.c_uint64) for n in ("y", "q", "residual_out", "x", "residual", "gate",
                                           "scale", "shift", "input_scale", "weight", "bias")] + \
               [("rows", _c.c_int64), ("hidden", _c.c_int32), ("eps", _c.c_float)]


class _ArgValue(_c.Union):
    _fields_ = [("ptr", _c.c_uint64), ("i32", _c.c_int32), ("i64", _c.c_int64), ("f32", _c.c_float)]


class _Arg(_c.Structure):
    _fields_ = [("name", _c.c_char_p), ("type", _c.c_int), ("v", _ArgValue)]


class _Stats(_c.Structure):
    _fields_ = [(n, _c.c_uint64) for n in ("compiles", "cache_hits", "cache_misses",
                                           "cache_rejects", "loads", "load_failures",
                                           "launches")] + \
               [("compile_ms", _c.c_double), ("load_ms", _c.c_double)]


def _sig(name, restype, *argtypes):
    f = getattr(_lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_P = _c.c_void_p
_error_last = _sig("jitk_error_last", _c.POINTER(_Error))
_strerror = _sig("jitk_strerror", _c.c_char_p, _c.c_int)
_compiler_new = _sig("jitk_compiler_new", _c.c_int, _c.POINTER(_P), _c.POINTER(_CompilerOptions))
_compiler_free = _sig("jitk_compiler_free", None, _P)
_symbol_count = _sig("jitk_symbol_count", _c.c_size_t, _P)
_symbol_name = _sig("jitk_symbol_name", _c.c_char_p, _P, _c.c_size_t)
_explain = _sig("jitk_explain", _c.c_int, _c.POINTER(_P), _P, _c.c_char_p, _c.c_char_p)
_precompile = _sig("jitk_precompile", _c.c_int, _c.POINTER(_c.c_int), _P, _c.c_char_p, _c.c_char_p)
_runtime_new = _sig("jitk_runtime_new", _c.c_int, _c.POINTER(_P), _c.POINTER(_RuntimeOptions))
_runtime_free = _sig("jitk_runtime_free", None, _P)
_runtime_arch = _sig("jitk_runtime_arch", _c.c_char_p, _P)
_preload = _sig("jitk_preload", _c.c_int, _P, _c.POINTER(_c.c_char_p), _c.c_size_t)
_launch = _sig("jitk_launch", _c.c_int, _P, _c.c_char_p, _c.POINTER(_Arg), _c.c_size_t, _P)
_stats_get = _sig("jitk_stats_get", _c.c_int, _c.POINTER(_Stats), _P, _c.c_char_p)
_configure = _sig("jitk_configure_input_scale", _c.c_int, _P, _c.c_uint64)
_quant = _sig("jitk_static_quant_fp8", _c.c_int, _P, _c.c_uint64, _c.c_uint64, _c.c_uint64,
              _c.c_int64, _P)
_NORM = {name: _sig("jitk_" + name, _c.c_int, _P, _c.POINTER(_NormArgs), _P) for name in (
    "fused_norm_scale_shift", "fused_scale_residual_norm_scale_shift",
    "fused_norm_scale_shift_fp8", "fused_scale_residual_norm_scale_shift_fp8")}
_TRY = {name: _sig("jitk_try_" + name, _c.c_int, _P, _c.POINTER(_NormArgs), _P,
                   _c.POINTER(_c.c_char_p)) for name in (
    "fused_norm_scale_shift_fp8", "fused_scale_residual_norm_scale_shift_fp8")}
_AUTO = {name: _sig("jitk_auto_" + name, _c.c_int, _P, _c.POINTER(_NormArgs), _P,
                    _c.POINTER(_c.c_int)) for name in (
    "norm_scale_shift_fp8", "scale_residual_norm_scale_shift_fp8")}
_libc_free = _c.CDLL(None).free
_libc_free.argtypes = [_P]


class Error(Exception):
    """A jitk failure: .status (e.g. 'ESPEC'), .message (one line: file:line:col
    for specs; symbol, variant and architecture for compiles), .detail (the
    quoted spec line, or the full NVRTC log)."""

    def __init__(self, code, message, detail=""):
        self.code = code
        self.status = _STATUS.get(code, str(code))
        self.message = message
        self.detail = detail
        super().__init__(f"{self.status}: {message}")


class ArgumentError(Error, ValueError):
    """A bad argument value (status EINVAL), refused by the binding before the
    library saw it, or by the library."""

    def __init__(self, message, detail=""):
        super().__init__(-1, message, detail)


class ArgumentTypeError(Error, TypeError):
    """An argument of the wrong type (status EINVAL)."""

    def __init__(self, message, detail=""):
        super().__init__(-1, message, detail)


def _check(rc):
    if rc < 0:
        e = _error_last().contents
        message = (e.message or b"").decode(errors="replace")
        detail = (e.detail or b"").decode(errors="replace")
        if rc == -1:  # EINVAL: an argument the library refused
            raise ArgumentError(message, detail)
        raise Error(rc, message, detail)
    return rc


def _b(s, what):
    """s (str, bytes or path) as the bytes C receives; None stays None. C
    strings end at a NUL, so one inside would silently cut the value."""
    if s is None:
        return None
    if not isinstance(s, (str, bytes, os.PathLike)):
        raise ArgumentTypeError(f"{what} must be a str, not {type(s).__name__}")
    b = os.fsencode(s)
    if not isinstance(b, bytes):
        raise ArgumentTypeError(f"{what} must be a str, not {type(s).__name__}")
    if b"\0" in b:
        raise ArgumentError(f"{what} {s!r} contains a NUL character")
    return b


def _int(v, what, lo, hi):
    """v as an int from lo to hi (no bool, no float), else an argument error."""
    if isinstance(v, bool):
        raise ArgumentTypeError(f"{what} must be an int, not bool")
    try:
        n = operator.index(v)
    except TypeError:
        raise ArgumentTypeError(f"{what} must be an int, not {type(v).__name__}") from None
    if not lo <= n <= hi:
        raise ArgumentError(f"{what} {n} is out of range ({lo} to {hi})")
    return n


def _tri(v, what):
    """None (the environment decides), or a flag."""
    if v is None:
        return -1
    if not isinstance(v, (bool, int)):
        raise ArgumentTypeError(f"{what} must be True, False or None, not {type(v).__name__}")
    return int(bool(v))


_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)
_F32_MAX = 3.4028234663852886e38


def _f32(v, what):
    """v as a float that fits an fp32 (infinities and NaN pass as they are)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ArgumentTypeError(f"{what} must be a float, not {type(v).__name__}")
    f = float(v)
    if math.isfinite(f) and abs(f) > _F32_MAX:
        raise ArgumentError(f"{what} {f} does not fit in a 32-bit float")
    return f


def version():
    """The library's version string."""
    return "0.1.0" if not hasattr(_lib, "jitk_version") else _lib.jitk_version().decode()


def _compiler_options(specs, cache_dir, cache_path, no_compile, force_compile):
    o = _CompilerOptions()
    o.version = 1
    o.specs = _b(specs, "specs")
    o.cache_dir = _b(cache_dir, "cache_dir")
    o.cache_path = _b(cache_path, "cache_path")
    o.no_compile = _tri(no_compile, "no_compile")
    o.force_compile = _tri(force_compile, "force_compile")
    o.log_level = -1
    o.cache_read_only = -1
    return o


# ---------------------------------------------------------------- handles

class _Handle:
    """A library object freed by close(), on garbage collection, or at the end
    of a with block."""
    _free = None

    def close(self):
        if getattr(self, "_h", None):
            type(self)._free(self._h)
            self._h = None

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---------------------------------------------------------------- compiler

class Compiler(_Handle):
    """The GPU-free half: specs, NVRTC and the cache. Arguments left None come
    from the environment (JITK_SPECS, JITK_CACHE_DIR...), else the defaults."""

    _free = staticmethod(_compiler_free)

    def __init__(self, specs=None, cache_dir=None, cache_path=None, no_compile=None,
                 force_compile=None):
        self._opts = _compiler_options(specs, cache_dir, cache_path, no_compile, force_compile)
        h = _P()
        _check(_compiler_new(_c.byref(h), _c.byref(self._opts)))
        self._h = h

    def symbols(self):
        """Every symbol instance's name."""
        return [_symbol_name(self._h, i).decode() for i in range(_symbol_count(self._h))]

    def explain(self, name, arch):
        """(runs, text): whether name or its fallback runs on arch, and why."""
        out = _P()
        rc = _explain(_c.byref(out), self._h, _b(name, "name"), _b(arch, "arch"))
        text = ""
        if out.value:
            text = _c.cast(out, _c.c_char_p).value.decode()
            _libc_free(out)
        if rc == -5:  # EARCH: neither the symbol nor its fallback runs there
            return False, text
        _check(rc)
        return True, text

    def precompile(self, name, arch):
        """Make sure name's cubin for arch is cached: 'compiled', 'cache', 'layer'
        (a read-only layer) or 'memory' (compiled, no writable cache)."""
        origin = _c.c_int(-1)
        _check(_precompile(_c.byref(origin), self._h, _b(name, "name"), _b(arch, "arch")))
        return {0: "compiled", 1: "cache", 2: "layer", 3: "memory"}.get(origin.value,
                                                                        str(origin.value))


# ----------------------------------------------------------------- runtime

class i32(int):
    """Marks an integer argument of the generic launch as 32-bit."""


def _torch():
    try:
        import torch
    except ImportError as e:  # the CPU parts of jitk need no torch
        raise Error(-1, "this needs PyTorch: " + str(e)) from None
    return torch


class Runtime(_Handle):
    """A runtime bound to one CUDA device (default: PyTorch's current device
    when PyTorch is imported, else 0). capture: 'error' (an unresolved kernel
    requested during graph capture raises ECAPTURE; use preload) or
    'resolve'. programmatic: launch with programmatic dependent launch
    where the spec family allows it (sm_90+): each kernel's launch overlaps
    the end of the one before it on the stream; results are the same."""

    _free = staticmethod(_runtime_free)

    def __init__(self, device=None, specs=None, cache_dir=None, cache_path=None,
                 no_compile=None, force_compile=None, capture="error", programmatic=False):
        if device is None:
            import sys
            torch = sys.modules.get("torch")
            device = torch.cuda.current_device() if torch and torch.cuda.is_available() else 0
        self.device = _int(device, "device", 0, _INT32[1])
        if capture not in ("error", "resolve"):
            raise ArgumentError(f"capture must be 'error' or 'resolve', not {capture!r}")
        o = _RuntimeOptions()
        o.version = 2
        o.device = self.device
        o.programmatic = 1 if programmatic else 0
        o.capture = {"error": 0, "resolve": 1}[capture]
        o.compiler = _compiler_options(specs, cache_dir, cache_path, no_compile, force_compile)
        self._opts = o
        h = _P()
        _check(_runtime_new(_c.byref(h), _c.byref(o)))
        self._h = h

    @property
    def arch(self):
        return _runtime_arch(self._h).decode()

    def preload(self, names=None):
        """Resolve these symbols (all that run here when None) before capture."""
        if names is None:
            _check(_preload(self._h, None, 0))
            return
        if isinstance(names, (str, bytes)):
            raise ArgumentTypeError("names must be a list of symbol names, not one string")
        names = [_b(n, f"names[{i}]") for i, n in enumerate(names)]
        if any(n is None for n in names):
            raise ArgumentTypeError("names must not hold None")
        arr = (_c.c_char_p * max(1, len(names)))(*names)
        _check(_preload(self._h, arr, len(names)))

    def stats(self, name=None):
        s = _Stats()
        _check(_stats_get(_c.byref(s), self._h, _b(name, "name")))
        return {f: getattr(s, f) for f, _ in _Stats._fields_}

    # -- tensor checks
    def _stream(self):
        return _P(_torch().cuda.current_stream(self.device).cuda_stream)

    def _tensor(self, t, what, dtype, shape):
        torch = _torch()
        if not isinstance(t, torch.Tensor):
            raise ArgumentTypeError(f"{what} must be a torch.Tensor, not {type(t).__name__}")
        if t.device.type != "cuda" or t.device.index != self.device:
            raise ArgumentError(f"{what} is on {t.device}, not cuda:{self.device}")
        if t.dtype != dtype:
            raise ArgumentTypeError(f"{what} is {t.dtype}, not {dtype}")
        if tuple(t.shape) != tuple(shape):
            raise ArgumentError(f"{what} has shape {tuple(t.shape)}, not {tuple(shape)}")
        if not t.is_contiguous():
            raise ArgumentError(f"{what} must be contiguous")
        return t.data_ptr()

    def _norm_args(self, x, scale, shift, input_scale=None, residual=None, gate=None,
                   y=None, q=None, residual_out=None, eps=1e-6, quantize=False):
        torch = _torch()
        if not isinstance(x, torch.Tensor):
            raise ArgumentTypeError(f"x must be a torch.Tensor, not {type(x).__name__}")
        if x.dim() != 2:
            raise ArgumentError(f"x must be 2-D [rows, hidden], not {x.dim()}-D")
        rows, hidden = x.shape
        bf, f8 = torch.bfloat16, torch.float8_e4m3fn
        a = _NormArgs()
        a.x = self._tensor(x, "x", bf, (rows, hidden))
        a.scale = self._tensor(scale, "scale", bf, (hidden,))
        a.shift = self._tensor(shift, "shift", bf, (hidden,))
        if y is None:
            y = torch.empty_like(x)
        a.y = self._tensor(y, "y", bf, (rows, hidden))
        outs = [y]
        if quantize:
            if q is None:
                q = torch.empty((rows, hidden), dtype=f8, device=x.device)
            a.q = self._tensor(q, "q", f8, (rows, hidden))
            a.input_scale = self._tensor(input_scale, "input_scale", torch.float32, (1,))
            outs.append(q)
        if residual is not None:
            a.residual = self._tensor(residual, "residual", bf, (rows, hidden))
            a.gate = self._tensor(gate, "gate", bf, (hidden,))
            if residual_out is None:
                residual_out = torch.empty_like(x)
            a.residual_out = self._tensor(residual_out, "residual_out", bf, (rows, hidden))
            outs.append(residual_out)
        a.rows = rows
        a.hidden = _int(hidden, "hidden", 0, _INT32[1])
        a.eps = _f32(eps, "eps")
        return a, outs

    # -- the reference symbols
    def configure_input_scale(self, input_scale):
        """Validate a static scale once (a device read): one finite, positive fp32."""
        _check(_configure(self._h, self._tensor(input_scale, "input_scale",
                                                _torch().float32, (1,))))

    def fused_norm_scale_shift(self, x, scale, shift, y=None, eps=1e-6):
        a, outs = self._norm_args(x, scale, shift, y=y, eps=eps)
        _check(_NORM["fused_norm_scale_shift"](self._h, a, self._stream()))
        return outs[0]

    def fused_scale_residual_norm_scale_shift(self, x, residual, gate, scale, shift, y=None,
                                              residual_out=None, eps=1e-6):
        """Returns (y, residual_out)."""
        a, outs = self._norm_args(x, scale, shift, residual=residual, gate=gate, y=y,
                                  residual_out=residual_out, eps=eps)
        _check(_NORM["fused_scale_residual_norm_scale_shift"](self._h, a, self._stream()))
        return tuple(outs)

    def fused_norm_scale_shift_fp8(self, x, scale, shift, input_scale, y=None, q=None,
                                   eps=1e-6):
        """Returns (y, q); raises EARCH where the gate forbids the fused path."""
        a, outs = self._norm_args(x, scale, shift, input_scale, y=y, q=q, eps=eps,
                                  quantize=True)
        _check(_NORM["fused_norm_scale_shift_fp8"](self._h, a, self._stream()))
        return tuple(outs)

    def fused_scale_residual_norm_scale_shift_fp8(self, x, residual, gate, scale, shift,
                                                  input_scale, y=None, q=None,
                                                  residual_out=None, eps=1e-6):
        """Returns (y, q, residual_out)."""
        a, outs = self._norm_args(x, scale, shift, input_scale, residual, gate, y, q,
                                  residual_out, eps, quantize=True)
        _check(_NORM["fused_scale_residual_norm_scale_shift_fp8"](self._h, a, self._stream()))
        return tuple(outs)

    def static_quant_fp8(self, x, input_scale, q=None):
        torch = _torch()
        if not isinstance(x, torch.Tensor):
            raise ArgumentTypeError(f"x must be a torch.Tensor, not {type(x).__name__}")
        if q is None:
            q = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device)
        _check(_quant(self._h, self._tensor(q, "q", torch.float8_e4m3fn, x.shape),
                      self._tensor(x, "x", torch.bfloat16, x.shape),
                      self._tensor(input_scale, "input_scale", torch.float32, (1,)),
                      x.numel(), self._stream()))
        return q

    def try_fused_norm_scale_shift_fp8(self, x, scale, shift, input_scale, residual=None,
                                       gate=None, y=None, q=None, residual_out=None,
                                       eps=1e-6):
        """(outputs, None) when the fused kernel ran, (None, reason) when a guard
        sent the caller to the split path. With residual and gate, the gated
        residual variant."""
        a, outs = self._norm_args(x, scale, shift, input_scale, residual, gate, y, q,
                                  residual_out, eps, quantize=True)
        name = ("fused_scale_residual_norm_scale_shift_fp8" if residual is not None
                else "fused_norm_scale_shift_fp8")
        why = _c.c_char_p()
        rc = _check(_TRY[name](self._h, a, self._stream(), _c.byref(why)))
        if rc == 1:
            return None, why.value.decode()
        return tuple(outs), None

    def auto_norm_scale_shift_fp8(self, x, scale, shift, input_scale, residual=None,
                                  gate=None, y=None, q=None, residual_out=None, eps=1e-6):
        """(*outputs, fused): the fused kernel where allowed, else the split
        path; the same bytes either way."""
        a, outs = self._norm_args(x, scale, shift, input_scale, residual, gate, y, q,
                                  residual_out, eps, quantize=True)
        name = ("scale_residual_norm_scale_shift_fp8" if residual is not None
                else "norm_scale_shift_fp8")
        fused = _c.c_int(0)
        _check(_AUTO[name](self._h, a, self._stream(), _c.byref(fused)))
        return (*outs, bool(fused.value))

    def launch(self, name, *args):
        """Generic launch of any symbol, arguments in the spec's order:
        tensors (pointers), ints (64-bit; jitk.i32(v) for 32-bit), floats."""
        torch = None
        name = _b(name, "name")
        if name is None:
            raise ArgumentTypeError("name must be a str, not None")
        arr = (_Arg * max(1, len(args)))()
        for i, v in enumerate(args):
            what = f"argument {i}"
            if isinstance(v, i32):
                arr[i].type, arr[i].v.i32 = 2, _int(int(v), what, *_INT32)
            elif isinstance(v, bool):
                raise ArgumentTypeError(f"{what}: bool is not a kernel argument type")
            elif isinstance(v, int):
                arr[i].type, arr[i].v.i64 = 3, _int(v, what, *_INT64)
            elif isinstance(v, float):
                arr[i].type, arr[i].v.f32 = 4, _f32(v, what)
            elif v is None or isinstance(v, (str, bytes)):
                raise ArgumentTypeError(
                    f"{what} must be a CUDA tensor, an int or a float, not {type(v).__name__}")
            else:
                torch = torch or _torch()
                if not isinstance(v, torch.Tensor):
                    raise ArgumentTypeError(
                        f"{what} must be a CUDA tensor, an int or a float, not {type(v).__name__}")
                if v.device.type != "cuda" or v.device.index != self.device:
                    raise ArgumentError(f"{what} is on {v.device}, not cuda:{self.device}")
                arr[i].type, arr[i].v.ptr = 1, v.data_ptr()
        stream = self._stream() if torch else None
        _check(_launch(self._h, name, arr, len(args), stream))

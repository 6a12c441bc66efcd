"""jitk for Python through ctypes (no build step): list, explain and
precompile kernels (Compiler), and the generic call of any symbol on any
DLPack tensor (Runtime.call). The PyTorch ops are the C++ extension's
(jitk/_torch.cpp, jitk/_ops.py); this module never reads a torch.Tensor
itself: a torch.Tensor goes through DLPack like any other framework's.

    import torch, jitk
    rt = jitk.Runtime()                      # device 0, default specs and cache
    rt.configure_input_scale(s)              # once: s is a float32 [1] CUDA tensor
    y, q, fused = rt.auto_norm_scale_shift_fp8(x, scale, shift, s)

Any symbol is called with Runtime.call(selector, mode, **arguments): the
library checks every tensor against the spec's argument table (dtype,
shape, strides, alignment, aliasing) before anything is launched; kernels
run on PyTorch's current stream of the device. Failures raise jitk.Error with the library's status and message;
a fused path that does not apply is not an error (see try_ and auto). A bad
argument raises jitk.ArgumentError (also a ValueError) or
jitk.ArgumentTypeError (also a TypeError), status EINVAL, before anything
reaches the library: a string with a NUL character, a number that does not
fit its C type, a wrong type.

Tensors (PyTorch, CuPy, JAX: any object with __dlpack__) are passed
through DLPack (jitk_op_call_dlpack), on that framework's stream.

libjitk is found through $JITK_LIBRARY, else inside the installed
package (jitk/lib/libjitk.so.0, with specs/ and templates/ beside it), else
in the source tree (build/libjitk.so), else on the system's library path.
"""
import ctypes
import ctypes.util
import math
import operator
import os
import sys
import warnings

__all__ = ["Error", "ArgumentError", "ArgumentTypeError", "Compiler", "Runtime", "version"]

# ----------------------------------------------------------------- library

_STATUS = {
    0: "OK", 1: "FALLBACK", -1: "EINVAL", -2: "ENOMEM", -3: "ENOENT", -4: "ESPEC",
    -5: "EARCH", -6: "ECOMPILE", -7: "ENOCOMPILE", -8: "EIO", -9: "ENODEV",
    -10: "EDRIVER", -11: "ECAPTURE",
}


def _preload(d):
    """The libraries the wheel vendors beside libjitk (jitk/lib/: libyaml,
    libcrypto, what they need), loaded first so that libjitk's needs are
    met on a machine without them; each one whose own needs are not met
    yet is tried again after the others."""
    if not d or os.path.basename(d) != "lib" or not os.path.isdir(d):
        return
    todo = sorted(n for n in os.listdir(d) if ".so" in n and not n.startswith("libjitk"))
    while todo:
        left = []
        for n in todo:
            try:
                ctypes.CDLL(os.path.join(d, n), mode=ctypes.RTLD_GLOBAL)
            except OSError:
                left.append(n)
        if len(left) == len(todo):
            return  # libjitk's own load then says what is missing
        todo = left


def _load():
    names = []
    if os.environ.get("JITK_LIBRARY"):
        names.append(os.environ["JITK_LIBRARY"])
    here = os.path.dirname(os.path.abspath(__file__))
    names.append(os.path.join(here, "lib", "libjitk.so.0"))          # the installed package
    names.append(os.path.join(here, "..", "..", "..", "build", "libjitk.so"))  # a source tree
    found = ctypes.util.find_library("jitk")
    if found:
        names.append(found)
    names.append("libjitk.so.0")
    errors = []
    for n in names:
        if os.sep in n and not os.path.exists(n):
            errors.append(f"{n}: no such file")
            continue
        try:
            _preload(os.path.dirname(n))
            return ctypes.CDLL(n), n
        except OSError as e:
            errors.append(f"{n}: {e}")
    raise ImportError("cannot load libjitk: " + "; ".join(errors))


_lib, library_path = _load()
_c = ctypes


class _Error(_c.Structure):
    _fields_ = [("status", _c.c_int), ("message", _c.c_char_p), ("detail", _c.c_char_p)]


_LOG_FN = _c.CFUNCTYPE(None, _c.c_void_p, _c.c_int, _c.c_char_p)


# The option structs as jitk.h declares them now (the versions below); the
# library fills the defaults (jitk_*_options_init), so a field the package
# does not set keeps the library's meaning (-1: from the environment).
_COMPILER_OPTIONS_VERSION = 3
_RUNTIME_OPTIONS_VERSION = 4
_CALL_INFO_VERSION = 1  # jitk_call_info, an output struct
_STATS_VERSION = 1      # jitk_stats
_SEAL_MODES = {"off": 0, "warn": 1, "error": 2}  # jitk_seal_mode


class _CompilerOptions(_c.Structure):
    _fields_ = [("version", _c.c_uint), ("specs", _c.c_char_p), ("cache_dir", _c.c_char_p),
                ("cache_path", _c.c_char_p), ("no_compile", _c.c_int),
                ("force_compile", _c.c_int), ("dump_dir", _c.c_char_p), ("log", _LOG_FN),
                ("log_payload", _c.c_void_p), ("log_level", _c.c_int),
                ("cache_read_only", _c.c_int),
                # version 2
                ("remote", _c.c_char_p), ("remote_read_only", _c.c_int),
                ("remote_lease", _c.c_char_p), ("remote_connect_timeout_ms", _c.c_int),
                ("remote_timeout_ms", _c.c_int), ("remote_lease_ttl_ms", _c.c_int),
                # version 3
                ("signing_key", _c.c_char_p), ("trusted_keys", _c.c_char_p),
                ("require_sigs", _c.c_int)]


class _RuntimeOptions(_c.Structure):
    _fields_ = [("version", _c.c_uint), ("device", _c.c_int), ("capture", _c.c_int),
                ("programmatic", _c.c_int), ("compiler", _c.POINTER(_CompilerOptions)),
                # version 4
                ("seal", _c.c_int), ("manifest", _c.c_char_p)]


_MAX_DIMS = 6


class _DType(_c.Structure):
    _fields_ = [("code", _c.c_uint8), ("bits", _c.c_uint8), ("lanes", _c.c_uint16)]


class _Tensor(_c.Structure):
    _fields_ = [("data", _c.c_uint64), ("dtype", _DType), ("ndim", _c.c_int32),
                ("shape", _c.c_int64 * _MAX_DIMS), ("strides", _c.c_int64 * _MAX_DIMS)]


class _ArgValue(_c.Union):
    _fields_ = [("tensor", _c.POINTER(_Tensor)), ("dlpack", _c.c_void_p), ("i32", _c.c_int32),
                ("i64", _c.c_int64), ("f32", _c.c_float)]


class _Arg(_c.Structure):
    _fields_ = [("name", _c.c_char_p), ("type", _c.c_int), ("v", _ArgValue)]


class _CallInfo(_c.Structure):
    # an output struct (jitk.h): version first, set by the constructor
    _fields_ = [("version", _c.c_uint), ("fallback", _c.c_int), ("reason", _c.c_char_p),
                ("instance", _c.c_char_p)]

    def __init__(self):
        super().__init__(_CALL_INFO_VERSION)


class _Stats(_c.Structure):
    # an output struct (jitk.h): version first, set by the constructor
    _fields_ = [("version", _c.c_uint)] + \
               [(n, _c.c_uint64) for n in ("compiles", "cache_hits", "cache_misses",
                                           "cache_rejects", "loads", "load_failures",
                                           "launches")] + \
               [("compile_ms", _c.c_double), ("load_ms", _c.c_double)]

    def __init__(self):
        super().__init__(_STATS_VERSION)


def _sig(name, restype, *argtypes):
    f = getattr(_lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_P = _c.c_void_p
_error_last = _sig("jitk_error_last", _c.POINTER(_Error))
_strerror = _sig("jitk_strerror", _c.c_char_p, _c.c_int)
_version = _sig("jitk_version", _c.c_char_p)
_free = _sig("jitk_free", None, _P)
_compiler_new = _sig("jitk_compiler_new", _c.c_int, _c.POINTER(_P), _c.POINTER(_CompilerOptions))
_compiler_options_init = _sig("jitk_compiler_options_init", _c.c_int,
                              _c.POINTER(_CompilerOptions), _c.c_uint)
_runtime_options_init = _sig("jitk_runtime_options_init", _c.c_int,
                             _c.POINTER(_RuntimeOptions), _c.c_uint)
_compiler_free = _sig("jitk_compiler_free", None, _P)
_symbol_count = _sig("jitk_symbol_count", _c.c_size_t, _P)
_symbol_name = _sig("jitk_symbol_name", _c.c_char_p, _P, _c.c_size_t)
_instance_count = _sig("jitk_instance_count", _c.c_size_t, _P)
_instance_name = _sig("jitk_instance_name", _c.c_char_p, _P, _c.c_size_t)
_describe = _sig("jitk_describe", _c.c_int, _c.POINTER(_P), _P, _c.c_char_p)
_explain = _sig("jitk_explain", _c.c_int, _c.POINTER(_P), _P, _c.c_char_p, _c.c_char_p)
_precompile = _sig("jitk_precompile", _c.c_int, _c.POINTER(_c.c_int), _P, _c.c_char_p, _c.c_char_p)
_runtime_new = _sig("jitk_runtime_new", _c.c_int, _c.POINTER(_P), _c.POINTER(_RuntimeOptions))
_runtime_free = _sig("jitk_runtime_free", None, _P)
_runtime_arch = _sig("jitk_runtime_arch", _c.c_char_p, _P)
_runtime_compiler = _sig("jitk_runtime_compiler", _P, _P)
_preload = _sig("jitk_preload", _c.c_int, _P, _c.POINTER(_c.c_char_p), _c.c_size_t)
_runtime_seal = _sig("jitk_runtime_seal", _c.c_int, _P, _c.c_int)
_runtime_manifest = _sig("jitk_runtime_manifest", _c.c_int, _P, _c.c_char_p)
_op_get = _sig("jitk_op_get", _c.c_int, _c.POINTER(_P), _P, _c.c_char_p)
_op_call = _sig("jitk_op_call", _c.c_int, _c.POINTER(_CallInfo), _P, _c.c_int,
                _c.POINTER(_Arg), _c.c_size_t, _P)
_op_call_dlpack = _sig("jitk_op_call_dlpack", _c.c_int, _c.POINTER(_CallInfo), _P, _c.c_int,
                       _c.POINTER(_Arg), _c.c_size_t, _P)
_list = _sig("jitk_list", _c.c_int, _c.POINTER(_P), _P, _c.c_char_p)
_check_target = _sig("jitk_check_target", _c.c_int, _P, _c.c_char_p)
_select = _sig("jitk_select", _c.c_int, _c.POINTER(_c.POINTER(_c.c_size_t)),
                _c.POINTER(_c.c_size_t), _P, _c.c_char_p)
_compiler_cache_dir = _sig("jitk_compiler_cache_dir", _c.c_char_p, _P)
_configure = _sig("jitk_configure", _c.c_int, _P, _c.c_char_p, _c.c_char_p, _c.POINTER(_Tensor))
_unconfigure = _sig("jitk_unconfigure", _c.c_int, _P, _c.c_uint64)
_stats_get = _sig("jitk_stats_get", _c.c_int, _c.POINTER(_Stats), _P, _c.c_char_p)


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


_ENV_TRUE = ("1", "true", "yes", "on")
_ENV_FALSE = ("0", "false", "no", "off")
_env_warned = set()


def _env_flag(name, default, unknown):
    """A boolean environment variable, read as the library reads its own:
    1/true/yes/on or 0/false/no/off in any case; unset or empty: default;
    anything else (" 1", "2") is warned about once per process and taken as
    unknown, the meaning that does less."""
    v = os.environ.get(name, "")
    if not v:
        return default
    low = v.lower() if v.isascii() else v
    if low in _ENV_TRUE:
        return True
    if low in _ENV_FALSE:
        return False
    if name not in _env_warned:
        _env_warned.add(name)
        warnings.warn(f"jitk: {name}={v!r} is not one of 1/true/yes/on or 0/false/no/off: "
                      f"taken as {'on' if unknown else 'off'}", RuntimeWarning, stacklevel=3)
    return unknown


def _current_device():
    """PyTorch's current CUDA device when PyTorch is imported and sees one,
    else 0."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return torch.cuda.current_device()
    return 0


def _device(device, what="device"):
    """A CUDA device index from None or "cuda" (the current device), an
    int, "cuda:N", or a torch.device of type cuda."""
    if device is None:
        return _current_device()
    if isinstance(device, str):
        if device == "cuda":
            return _current_device()
        n = device[5:] if device.startswith("cuda:") else ""
        if not (n.isascii() and n.isdigit()):
            raise ArgumentError(f"{what} {device!r} is not a CUDA device ('cuda' or 'cuda:N')")
        return _int(int(n), what, 0, _INT32[1])
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(device, torch.device):
        if device.type != "cuda":
            raise ArgumentError(f"{what} {device} is not a CUDA device")
        return _current_device() if device.index is None else device.index
    if isinstance(device, bool) or not hasattr(device, "__index__"):
        raise ArgumentTypeError(f"{what} must be an int, 'cuda:N' or a torch.device, not "
                                f"{type(device).__name__}")
    return _int(device, what, 0, _INT32[1])


def version():
    """The library's version string."""
    return _version().decode()


def _text(out):
    """A string the library returned through an out-parameter, freed."""
    if not out.value:
        return ""
    text = _c.cast(out, _c.c_char_p).value.decode()
    _free(out)
    return text


def _compiler_options(specs, cache_dir, cache_path, no_compile, force_compile):
    o = _CompilerOptions()
    _check(_compiler_options_init(_c.byref(o), _COMPILER_OPTIONS_VERSION))
    o.specs = _b(specs, "specs")
    o.cache_dir = _b(cache_dir, "cache_dir")
    o.cache_path = _b(cache_path, "cache_path")
    o.no_compile = _tri(no_compile, "no_compile")
    o.force_compile = _tri(force_compile, "force_compile")
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

def _describe_json(h, selector):
    import json
    out = _P()
    _check(_describe(_c.byref(out), h, _b(selector, "selector")))
    return json.loads(_text(out))


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
        """Every symbol's name (see instances for their instances)."""
        return [_symbol_name(self._h, i).decode() for i in range(_symbol_count(self._h))]

    def instances(self):
        """Every instance's name: "symbol[param=value,...]", or the symbol's
        name when it has one instance."""
        return [_instance_name(self._h, i).decode() for i in range(_instance_count(self._h))]

    def select(self, selector):
        """The names of the instances a selector selects."""
        idx = _c.POINTER(_c.c_size_t)()
        n = _c.c_size_t()
        _check(_select(_c.byref(idx), _c.byref(n), self._h, _b(selector, "selector")))
        try:
            return [_instance_name(self._h, idx[i]).decode() for i in range(n.value)]
        finally:
            _free(idx)

    def cache_dir(self):
        """The writable cache directory, or None without one."""
        d = _compiler_cache_dir(self._h)
        return d.decode() if d else None

    def describe(self, selector=None):
        """The specs' symbols as a dict (jitk_describe's JSON): parameters,
        instances, argument tables with dtypes and shapes, fallbacks."""
        return _describe_json(self._h, selector)

    def explain(self, name, arch):
        """(runs, text): whether name (a selector) or its fallback runs on
        arch, and why."""
        out = _P()
        rc = _explain(_c.byref(out), self._h, _b(name, "name"), _b(arch, "arch"))
        text = _text(out)
        if rc == -5:  # EARCH: neither the symbol nor its fallback runs there
            return False, text
        _check(rc)
        return True, text

    def precompile(self, name, arch):
        """Make sure name's cubin for arch is cached: 'compiled', 'cache', 'layer'
        (a read-only layer), 'memory' (compiled, no writable cache) or 'remote'
        (from the remote tier, now in the writable cache too)."""
        origin = _c.c_int(-1)
        _check(_precompile(_c.byref(origin), self._h, _b(name, "name"), _b(arch, "arch")))
        names = {0: "compiled", 1: "cache", 2: "layer", 3: "memory", 4: "remote"}
        return names.get(origin.value, str(origin.value))


# ----------------------------------------------------------------- runtime

def _torch(what="this"):
    try:
        import torch
    except ImportError as e:  # the CPU parts of jitk need no torch
        raise Error(-1, f"{what} needs PyTorch, which does not import here ({e}); "
                    "PyTorch-free: jitk.Compiler, and jitk.Runtime(device=N) with DLPack "
                    "tensors (CuPy, JAX)") from None
    return torch


_MODES = {"strict": 0, "try": 1, "auto": 2}
_ARG_I32, _ARG_I64, _ARG_F32, _ARG_TENSOR, _ARG_DLPACK = 2, 3, 4, 5, 6


def _make_args(kinds, args, tensor):
    """The C argument array of a call: each value checked against its kind
    in the spec (kinds: name -> 'tensor', 'i32', 'i64' or 'f32'); tensor(v,
    name) describes a tensor: a _Tensor, or the address of a DLTensor (an
    int). A tensor given as None is left out (a nullable argument). Returns
    the array, its length and the tensor descriptions it points to (keep
    them alive for the call)."""
    arr = (_Arg * max(1, len(args)))()
    keep = []
    i = 0
    for name, v in args.items():
        kind = kinds.get(name)
        if kind == "tensor" and v is None:
            continue
        arr[i].name = _b(name, "argument name")
        if kind == "tensor":
            t = tensor(v, name)
            keep.append(t)
            if isinstance(t, int):
                arr[i].type, arr[i].v.dlpack = _ARG_DLPACK, t
            else:
                arr[i].type = _ARG_TENSOR
                arr[i].v.tensor = _c.pointer(t)
        elif kind == "i32":
            arr[i].type, arr[i].v.i32 = _ARG_I32, _int(v, name, *_INT32)
        elif kind == "i64":
            arr[i].type, arr[i].v.i64 = _ARG_I64, _int(v, name, *_INT64)
        elif kind == "f32":
            arr[i].type, arr[i].v.f32 = _ARG_F32, _f32(v, name)
        else:  # not an argument of the symbol: the library names it
            arr[i].type = _ARG_I64
        i += 1
    return arr, i, keep


def _version_of(t):
    """A torch.Tensor's version counter (bumped by every in-place write), or
    None where it has none (an inference tensor)."""
    try:
        return t._version
    except (AttributeError, RuntimeError):
        return None


def _exportable(v):
    """v as DLPack exports it: a torch.Tensor that requires grad detached
    (the same memory and version counter; PyTorch refuses to export it)."""
    if _is_torch_tensor(v) and v.requires_grad:
        return v.detach()
    return v


# what else watches configured tensors: jitk._torch once the ops are
# registered (watch(device, data, version), unwatch(device, data))
watcher = None


def _is_torch_tensor(v):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(v, torch.Tensor)


_cuda = None


def _sync_legacy_stream():
    """Wait for CUDA's legacy default stream (the DLPack path of a
    framework that has no stream to share)."""
    global _cuda
    if _cuda is None:
        _cuda = _c.CDLL("libcuda.so.1")
        _cuda.cuStreamSynchronize.argtypes = [_P]
    rc = _cuda.cuStreamSynchronize(None)
    if rc:
        raise Error(-10, f"cuStreamSynchronize failed with CUresult {rc}")


class Runtime(_Handle):
    """A runtime bound to one CUDA device (default: PyTorch's current device
    when PyTorch is imported, else 0). capture: 'error' (an unresolved kernel
    requested during graph capture raises ECAPTURE; use preload) or
    'resolve'. programmatic: launch with programmatic dependent launch
    where the spec family allows it (sm_90+): each kernel's launch overlaps
    the end of the one before it on the stream; results are the same
    (None: $JITK_PROGRAMMATIC 1, true, yes or on, else off).

    Every symbol is called through call(selector, mode, **arguments), which
    the library checks against the spec's argument table; the norm family's
    methods below are written on it."""

    _free = staticmethod(_runtime_free)

    def __init__(self, device=None, specs=None, cache_dir=None, cache_path=None,
                 no_compile=None, force_compile=None, capture="error", programmatic=None,
                 seal=None, manifest=None):
        """seal: "off", "warn" or "error" (what a resolve that would compile
        does: docs/ci-images.md), None: $JITK_SEAL; manifest: a file recording
        every instance resolved (a warmup manifest), None: $JITK_MANIFEST_OUT."""
        self.device = _device(device)
        if capture not in ("error", "resolve"):
            raise ArgumentError(f"capture must be 'error' or 'resolve', not {capture!r}")
        if seal is not None and seal not in _SEAL_MODES:
            raise ArgumentError(f"seal must be 'off', 'warn' or 'error', not {seal!r}")
        self._copts = _compiler_options(specs, cache_dir, cache_path, no_compile, force_compile)
        o = _RuntimeOptions()
        _check(_runtime_options_init(_c.byref(o), _RUNTIME_OPTIONS_VERSION))
        o.device = self.device
        if programmatic is not None:
            o.programmatic = 1 if programmatic else 0
        o.capture = {"error": 0, "resolve": 1}[capture]
        o.compiler = _c.pointer(self._copts)
        if seal is not None:
            o.seal = _SEAL_MODES[seal]
        self._manifest = _b(manifest, "manifest")  # kept alive with the options
        o.manifest = self._manifest
        self._opts = o
        h = _P()
        _check(_runtime_new(_c.byref(h), _c.byref(o)))
        self._h = h
        self._ops = {}
        self._kinds = {}
        self._args = {}
        self._configured_args = {}
        # the tensors configure validated, by data address: the version
        # PyTorch's counter had then (None: a tensor without one) and what
        # keeps the memory from being freed and handed to another tensor
        # (the caching allocator reuses addresses inside its blocks, where
        # the driver's buffer id stays the same) until unconfigure
        self._configured = {}
        self._configured_keep = {}

    def close(self):
        """Free the runtime; its configured tensors are released."""
        _Handle.close(self)
        if hasattr(self, "_configured"):
            self._configured.clear()
            self._configured_keep.clear()

    __del__ = close

    @property
    def arch(self):
        return _runtime_arch(self._h).decode()

    def describe(self, selector=None):
        """As Compiler.describe, for this runtime's specs."""
        return _describe_json(_runtime_compiler(self._h), selector)

    def preload(self, names=None):
        """Resolve the instances these selectors select (all that run here
        when None) before capture."""
        if names is None:
            _check(_preload(self._h, None, 0))
            return
        if isinstance(names, (str, bytes)):
            raise ArgumentTypeError("names must be a list of selectors, not one string")
        names = [_b(n, f"names[{i}]") for i, n in enumerate(names)]
        if any(n is None for n in names):
            raise ArgumentTypeError("names must not hold None")
        arr = (_c.c_char_p * max(1, len(names)))(*names)
        _check(_preload(self._h, arr, len(names)))

    def seal(self, mode="error"):
        """From now on, a resolve that would compile ("off": compiles,
        "warn": compiles after a warning naming it, "error": is refused,
        nothing launched) - after preload, for a deployment that must not
        compile (docs/ci-images.md)."""
        if mode not in _SEAL_MODES:
            raise ArgumentError(f"mode must be 'off', 'warn' or 'error', not {mode!r}")
        _check(_runtime_seal(self._h, _SEAL_MODES[mode]))

    def manifest(self, path):
        """Record every instance this runtime resolves (those so far too)
        into path, a warmup manifest for jitk precompile --manifest."""
        _check(_runtime_manifest(self._h, _b(path, "path")))

    def stats(self, name=None):
        s = _Stats()
        _check(_stats_get(_c.byref(s), self._h, _b(name, "name")))
        return {f: getattr(s, f) for f, _ in _Stats._fields_ if f != "version"}

    # -- the generic call
    def _stream(self):
        """PyTorch's current stream of the device, as an int handle."""
        return _torch().cuda.current_stream(self.device).cuda_stream

    def _op(self, selector):
        op = self._ops.get(selector)
        if op is None:
            op = _P()
            _check(_op_get(_c.byref(op), self._h, _b(selector, "selector")))
            sym = selector.split("[", 1)[0]
            d = self.describe(sym)["symbols"][0]
            self._kinds[selector] = {a["name"]: a["kind"] for a in d["args"]}
            self._configured_args[selector] = {a["name"] for a in d["args"]
                                               if a.get("configured")}
            self._args[op.value] = d["args"]
            self._ops[selector] = op
        return op

    def call(self, selector, mode="strict", stream=None, **args):
        """Call any symbol: tensors and scalars by the spec's names. The
        instance is picked from the shapes; every dtype, shape, stride,
        alignment and aliasing rule is checked by the library. mode:
        'strict', 'try' or 'auto'. Returns (fallback, reason, instance):
        fallback is True when 'auto' ran the spec's fallback (or when 'try'
        launched nothing: then reason says why).

        Tensors are torch.Tensors (the kernel runs on PyTorch's current
        stream) or any objects with __dlpack__ (CuPy, JAX...): then every
        tensor goes through DLPack, exported for the stream of the first
        tensor's framework (CuPy's current stream; PyTorch's); a framework
        without one (JAX) gets the legacy default stream, and the call
        waits for it before returning. stream (an int handle) overrides the
        choice."""
        if mode not in _MODES:
            raise ArgumentError(f"mode must be 'strict', 'try' or 'auto', not {mode!r}")
        op = self._op(selector)
        kinds = self._kinds[selector]
        for name in self._configured_args.get(selector, ()):
            if _is_torch_tensor(args.get(name)):
                self._check_configured(args[name])
        tensors = [v for n, v in args.items() if kinds.get(n) == "tensor" and v is not None]
        info = _CallInfo()
        rc = self._call_dlpack(op, kinds, info, mode, args, tensors, stream)
        reason = info.reason.decode() if info.reason else None
        inst = info.instance.decode() if info.instance else None
        return (rc == 1 or bool(info.fallback)), reason, inst

    def _call_dlpack(self, op, kinds, info, mode, args, tensors, stream):
        from . import _dlpack
        for name, v in args.items():
            if kinds.get(name) == "tensor" and v is not None:
                self._dlpack_device(v, name)
        wait = False
        if stream is None:
            stream = _dlpack.framework_stream(tensors[0], self.device)
            wait = stream is None
        capsules = []
        outs = {a["name"] for a in self._args[op.value] if a.get("io") in ("out", "inout")}

        def tensor(v, name):
            if not hasattr(v, "__dlpack__"):
                raise ArgumentTypeError(f"{name} must be a tensor with __dlpack__, not "
                                        f"{type(v).__name__}")
            try:
                cap = _dlpack.export(_exportable(v), stream, name)
                capsules.append(cap)
                addr, read_only = _dlpack.view(cap, name)
            except ValueError as e:
                raise ArgumentError(str(e)) from None
            if read_only and name in outs:
                raise ArgumentError(f"{name}: the DLPack tensor is read-only, and jitk writes it")
            return addr
        arr, n, _ = _make_args(kinds, args, tensor)
        rc = _check(_op_call_dlpack(_c.byref(info), op, _MODES[mode], arr, n,
                                    _P(stream or None)))
        if wait:
            _sync_legacy_stream()
        del capsules
        return rc

    def _dlpack_device(self, v, name):
        """Refuse a DLPack tensor that says it is not on this runtime's
        CUDA device (a NumPy array: on the CPU) before it is exported."""
        from . import _dlpack
        if not hasattr(v, "__dlpack__"):
            raise ArgumentTypeError(f"{name} must be a tensor with __dlpack__, not "
                                    f"{type(v).__name__}")
        try:
            where = _dlpack.device(v, name)
        except ValueError as e:
            raise ArgumentError(str(e)) from None
        if where is None:
            return
        kind, index = where
        if kind not in _dlpack.CUDA_DEVICES:
            raise ArgumentError(f"{name} is on {_dlpack.device_name(kind, index)}, not "
                                f"cuda:{self.device}")
        if kind == _dlpack.CUDA and index != self.device:
            raise ArgumentError(f"{name} is on cuda:{index}, not cuda:{self.device}")

    def configure(self, symbol, arg, t):
        """Validate a tensor a `configured:` argument of symbol needs (one
        device read). Until unconfigure (or close), the runtime holds a
        reference to the tensor, so that its memory is not handed to another
        tensor (PyTorch's caching allocator, CuPy's pool); an in-place
        write into a torch.Tensor after configure (its version counter
        moves) undoes the validation at the next call (the fused kernel's
        guard refuses it: its fallback in AUTO); configure it again after
        writing."""
        from . import _dlpack
        self._dlpack_device(t, arg)
        try:
            cap = _dlpack.export(_exportable(t), None, arg)
            addr, _ = _dlpack.view(cap, arg)
        except ValueError as e:
            raise ArgumentError(str(e)) from None
        dl = _dlpack.DLTensor.from_address(addr)
        d = _Tensor()
        d.data = (dl.data or 0) + dl.byte_offset
        d.dtype.code, d.dtype.bits, d.dtype.lanes = dl.dtype.code, dl.dtype.bits, dl.dtype.lanes
        d.ndim = dl.ndim
        for i in range(min(dl.ndim, _MAX_DIMS)):
            d.shape[i] = dl.shape[i]
            d.strides[i] = dl.strides[i] if dl.strides else 1
        _check(_configure(self._h, _b(symbol, "symbol"), _b(arg, "arg"), _c.byref(d)))
        if _is_torch_tensor(t):
            version = _version_of(t)
            self._configured_keep[d.data] = (t, getattr(t, "untyped_storage", lambda: None)())
        else:
            version = None  # no version counter to watch
            self._configured_keep[d.data] = t
        self._configured[d.data] = version
        if watcher is not None:  # the torch ops watch it too (jitk/_torch.cpp)
            watcher.watch(self.device, d.data, -1 if version is None else version)

    def _check_configured(self, t):
        """Undo the validation of a configured torch.Tensor written since
        (the plans do the same in C)."""
        p = t.data_ptr()
        if p in self._configured:
            v = self._configured[p]
            if v is not None and _version_of(t) != v:
                self._stale(p)

    def _stale(self, data):
        """Forget a configured address whose tensor was written after
        configure: the library no longer takes it as validated. Forgotten
        before the warning, as the C++ kernels do, so that a filter making
        the warning an error leaves it unconfigured too."""
        was = data in self._configured
        self._forget(data)
        if was:
            warnings.warn(f"jitk: the configured tensor at 0x{data:x} was written after "
                          "configure: it is no longer taken as validated (configure it again)",
                          RuntimeWarning, stacklevel=2)

    def _forget(self, data):
        self._configured.pop(data, None)
        self._configured_keep.pop(data, None)
        if watcher is not None:
            watcher.unwatch(self.device, data)
        if self._h:
            _unconfigure(self._h, data)  # ENOENT: already forgotten

    def unconfigure(self, t):
        """Forget a configured tensor (or data address): the library no
        longer takes its address as validated, and the runtime lets go of
        it (its memory may then be reused)."""
        if _is_torch_tensor(t):
            data = t.data_ptr()
        elif hasattr(t, "__dlpack__"):
            from . import _dlpack
            try:
                addr, _ = _dlpack.view(_dlpack.export(t, None, "tensor"), "tensor")
            except ValueError as e:
                raise ArgumentError(str(e)) from None
            dl = _dlpack.DLTensor.from_address(addr)
            data = (dl.data or 0) + dl.byte_offset
        else:
            data = _int(t, "data", 0, (1 << 64) - 1)
        known = data in self._configured
        self._configured.pop(data, None)
        self._configured_keep.pop(data, None)
        if watcher is not None:
            watcher.unwatch(self.device, data)
        rc = _unconfigure(self._h, data)
        if rc < 0 and not known:
            _check(rc)

    # -- the norm family, on the generic call
    def configure_input_scale(self, input_scale):
        """Validate a static scale once (a device read): one finite, positive fp32."""
        self.configure("fused_norm_scale_shift_fp8", "input_scale", input_scale)

    def _norm(self, sym, mode, x, scale, shift, input_scale=None, residual=None, gate=None,
              y=None, q=None, residual_out=None, eps=1e-6, quantize=False):
        torch = _torch()
        if not isinstance(x, torch.Tensor) or x.dim() != 2:
            raise ArgumentError("x must be a 2-D [rows, hidden] torch.Tensor")
        args = {}
        y = torch.empty(x.shape, dtype=torch.bfloat16, device=x.device) if y is None else y
        args["y"] = y
        outs = [y]
        if quantize:
            q = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device) if q is None else q
            args["q"] = q
            outs.append(q)
        if residual is not None:
            residual_out = (torch.empty(x.shape, dtype=torch.bfloat16, device=x.device)
                            if residual_out is None else residual_out)
            args["residual_out"] = residual_out
            outs.append(residual_out)
        args["x"] = x
        if residual is not None:
            args["residual"], args["gate"] = residual, gate
        args["scale"], args["shift"] = scale, shift
        if quantize:
            args["input_scale"] = input_scale
        args["eps"] = eps
        fallback, reason, _ = self.call(sym, mode, **args)
        return outs, fallback, reason

    def fused_norm_scale_shift(self, x, scale, shift, y=None, eps=1e-6):
        return self._norm("fused_norm_scale_shift", "strict", x, scale, shift, y=y, eps=eps)[0][0]

    def fused_scale_residual_norm_scale_shift(self, x, residual, gate, scale, shift, y=None,
                                              residual_out=None, eps=1e-6):
        """Returns (y, residual_out)."""
        outs, _, _ = self._norm("fused_scale_residual_norm_scale_shift", "strict", x, scale, shift,
                                residual=residual, gate=gate, y=y, residual_out=residual_out,
                                eps=eps)
        return tuple(outs)

    def fused_norm_scale_shift_fp8(self, x, scale, shift, input_scale, y=None, q=None,
                                   eps=1e-6):
        """Returns (y, q); raises EARCH where the gate forbids the fused path."""
        outs, _, _ = self._norm("fused_norm_scale_shift_fp8", "strict", x, scale, shift,
                                input_scale, y=y, q=q, eps=eps, quantize=True)
        return tuple(outs)

    def fused_scale_residual_norm_scale_shift_fp8(self, x, residual, gate, scale, shift,
                                                  input_scale, y=None, q=None,
                                                  residual_out=None, eps=1e-6):
        """Returns (y, q, residual_out)."""
        outs, _, _ = self._norm("fused_scale_residual_norm_scale_shift_fp8", "strict", x, scale,
                                shift, input_scale, residual, gate, y, q, residual_out, eps,
                                quantize=True)
        return tuple(outs)

    def static_quant_fp8(self, x, input_scale, q=None):
        torch = _torch()
        if q is None:
            q = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device)
        self.call("static_quant_fp8", "strict", q=q.view(-1), x=x.view(-1),
                  input_scale=input_scale)
        return q

    def _fused_name(self, residual):
        return ("fused_scale_residual_norm_scale_shift_fp8" if residual is not None
                else "fused_norm_scale_shift_fp8")

    def try_fused_norm_scale_shift_fp8(self, x, scale, shift, input_scale, residual=None,
                                       gate=None, y=None, q=None, residual_out=None,
                                       eps=1e-6):
        """(outputs, None) when the fused kernel ran, (None, reason) when a guard
        sent the caller to the split path. With residual and gate, the gated
        residual variant."""
        outs, fallback, reason = self._norm(self._fused_name(residual), "try", x, scale, shift,
                                            input_scale, residual, gate, y, q, residual_out, eps,
                                            quantize=True)
        return (None, reason) if fallback else (tuple(outs), None)

    def auto_norm_scale_shift_fp8(self, x, scale, shift, input_scale, residual=None,
                                  gate=None, y=None, q=None, residual_out=None, eps=1e-6):
        """(*outputs, fused): the fused kernel where allowed, else the spec's
        fallback (the split path); the same bytes either way."""
        outs, fallback, _ = self._norm(self._fused_name(residual), "auto", x, scale, shift,
                                       input_scale, residual, gate, y, q, residual_out, eps,
                                       quantize=True)
        return (*outs, not fallback)

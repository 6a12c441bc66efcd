"""Every symbol of the specs as a PyTorch op: jitk::S and jitk::S.out,
defined and implemented in C++ by the extension jitk._torch (its CUDA and
Meta kernels; jitk/_torch.cpp) from the tables of jitk._schema.OpSpec.
register() runs once, at import jitk where PyTorch imports.

Calls run in AUTO mode: the spec's fallback runs where the fused instance
cannot. The first call of an op on a device asks resolve(device) (below)
for the op handle: it makes the device's runtime and resolves every
instance of the symbol and of its fallback steps there, so that CUDA graph
capture never meets an unresolved kernel; after that the kernels touch no
Python.
"""
import os
import threading

from . import _core, _schema

__all__ = ["OpSpec", "register", "runtime", "skipped", "specs_registered"]

OpSpec = _schema.OpSpec
TORCH_DTYPES = _schema.TORCH_DTYPES

# symbol -> why it has no op (or no functional variant)
skipped = {}
# symbol -> its OpSpec, for every symbol registered
specs_registered = {}

_lock = threading.Lock()
_runtimes = {}
_registered = False


def runtime(device=None):
    """The Runtime the ops use on a CUDA device (default: the current
    one), created on first use with the default options (JITK_SPECS and
    the other environment variables apply); use it to configure tensors
    (configure, configure_input_scale) and read stats."""
    device = _core._device(device)
    rt = _runtimes.get(device)
    if rt is None:
        with _lock:
            rt = _runtimes.get(device)
            if rt is None:
                rt = _runtimes[device] = _core.Runtime(device=device)
    return rt


def _preload(rt, spec, specs):
    """Resolve spec's instances and its fallback steps' (gated ones are
    skipped): nothing compiles or loads inside a later graph capture."""
    seen, todo = set(), [spec.name]
    while todo:
        s = todo.pop()
        if s in seen or s not in specs:
            continue
        seen.add(s)
        for inst in specs[s].instances:
            try:
                rt.preload([inst])
            except _core.Error as e:
                if e.status != "EARCH":
                    raise
        todo.extend(specs[s].fallback)


BUILD_HINT = ("build it with `python3 bindings/python/_build/backend.py torch-ext` in the source "
              "tree, or install the package where PyTorch imports: pip install "
              "--no-build-isolation ./bindings/python")


def torch_module(torch):
    """(jitk._torch, None) when it was built for this PyTorch, else (None,
    why not)."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        with open(os.path.join(here, "_torch.version")) as f:
            built = f.read().strip()
    except OSError:
        return None, f"jitk._torch (the ops' C++ extension) is not built: {BUILD_HINT}"
    if built != torch.__version__:
        return None, (f"jitk._torch was built for torch {built}, this is torch "
                      f"{torch.__version__}: {BUILD_HINT}")
    try:
        from . import _torch
    except ImportError as e:
        return None, f"jitk._torch does not load: {e}"
    if _torch.torch_version != torch.__version__:
        return None, f"jitk._torch says torch {_torch.torch_version}, this is {torch.__version__}"
    return _torch, None


def _address(fn):
    return _core._c.cast(fn, _core._c.c_void_p).value


def register(describe=None):
    """Define torch.ops.jitk.<symbol> (and .out) for every symbol of the
    default specs (or of a describe() dict); once per process. Returns the
    OpSpecs by name. Raises jitk.Error when jitk._torch is missing or was
    built for another PyTorch, or the specs do not load."""
    global _registered
    import torch
    if _registered:
        return specs_registered
    tmod, why = torch_module(torch)
    if tmod is None:
        raise _core.Error(-3, why)
    lib = _core._lib
    tmod.init(_address(lib.jitk_op_call), _address(lib.jitk_error_last),
              _address(lib.jitk_status_name), _address(lib.jitk_unconfigure))
    if describe is None:
        with _core.Compiler(cache_dir="") as c:
            describe = c.describe()
    specs = {}
    for sym in describe["symbols"]:
        spec = OpSpec(sym)
        if spec.reason:
            skipped[spec.name] = spec.reason
            continue
        specs[spec.name] = spec
        if spec.no_functional:
            skipped[spec.name] = "no functional variant: " + spec.no_functional

    def resolve_of(name):
        spec = specs[name]

        def resolve(device):
            rt = runtime(device)
            op = rt._op(spec.name)
            _preload(rt, spec, specs)
            return op.value, rt._h.value
        return resolve
    tmod.register([s.table() for s in specs.values()], resolve_of)
    _core.watcher = tmod
    for rt in list(_runtimes.values()):  # configured before the ops were there
        for data, version in rt._configured.items():
            tmod.watch(rt.device, data, -1 if version is None else version)
    _registered = True
    specs_registered.update(specs)
    return specs

"""jitk for Python: list, explain and precompile kernels, call any symbol
of the specs on PyTorch tensors or on any DLPack tensor (CuPy, JAX), and,
with PyTorch installed, every symbol as torch.ops.jitk.<symbol>.

    import torch, jitk
    y, q = torch.ops.jitk.fused_norm_scale_shift_fp8(x, scale, shift, s)   # any code
    y, q = jitk.ops.fused_norm_scale_shift_fp8(x, scale, shift, s)         # the same op
    torch.ops.jitk.static_quant_fp8.out(x.view(-1), s, q=q.view(-1))      # into given tensors

    rt = jitk.Runtime()                      # the generic call, any framework
    rt.call("tadd3", "auto", out=o, x=a, y=b, z=c)

docs/python.md is the guide; `python -m jitk` mirrors the jitk command
(list, explain, precompile).
"""
from ._core import (ArgumentError, ArgumentTypeError, Compiler, Error, Runtime,  # noqa: F401
                    library_path, version)
from . import _ops  # needs no PyTorch until register()

__all__ = ["Error", "ArgumentError", "ArgumentTypeError", "Compiler", "Runtime", "version",
           "library_path", "ops", "runtime", "configure", "unconfigure"]


def _register_torch_ops():
    """torch.ops.jitk.<symbol> for every symbol, and jitk.ops, when PyTorch
    and the package's C++ extension (jitk._torch) are there. Without them,
    or when a spec does not load, there are no ops (jitk.ops is None and
    jitk.ops_error says why); import jitk still works, for the CLI and the
    generic call."""
    global ops_error
    try:
        import torch  # noqa: F401
    except ImportError as e:
        ops_error = Error(-3, f"PyTorch does not import here ({e}): no ops")
        return None
    try:
        _ops.register()
    except Error as e:
        ops_error = e
        if "jitk._torch" in e.message:  # PyTorch, but not the extension: say so now
            import warnings
            warnings.warn(f"jitk: no torch.ops.jitk: {e.message}", RuntimeWarning, stacklevel=3)
        return None
    from . import ops as front
    front._bind(_ops.specs_registered)
    return front


ops_error = None
ops = _register_torch_ops()


def runtime(device=None):
    """The Runtime the ops use on a CUDA device: None or "cuda" (PyTorch's
    current device; 0 without PyTorch), an int, "cuda:N" or a
    torch.device."""
    return _ops.runtime(device)


def _device_of(tensor, what):
    """The CUDA device a torch.Tensor or a DLPack tensor is on."""
    from . import _core
    if _core._is_torch_tensor(tensor):
        d = tensor.get_device()
        if d < 0:
            raise ArgumentError(f"{what} is on the CPU, not a CUDA device")
        return d
    if hasattr(tensor, "__dlpack__"):
        from . import _dlpack
        try:
            where = _dlpack.device(tensor, what)
        except ValueError as e:
            raise ArgumentError(str(e)) from None
        if where is None:
            return None
        if where[0] not in _dlpack.CUDA_DEVICES:
            raise ArgumentError(f"{what} is on {_dlpack.device_name(*where)}, not a CUDA device")
        return where[1]
    raise ArgumentTypeError(f"{what} must be a torch.Tensor or a tensor with __dlpack__, not "
                            f"{type(tensor).__name__}")


def configure(symbol, arg, tensor):
    """Validate a tensor that a `configured:` argument needs (a static fp8
    scale: one finite, positive fp32), for the ops on its device: once, at
    model load (a device read; not during capture). Until then the fused
    kernels that need it run their fallback (the same bytes). The ops'
    runtime keeps the tensor until unconfigure; an in-place write into it
    undoes the validation (configure it again after writing)."""
    runtime(_device_of(tensor, arg)).configure(symbol, arg, tensor)


def unconfigure(tensor):
    """Forget a tensor configure validated, and let go of it."""
    runtime(_device_of(tensor, "tensor")).unconfigure(tensor)

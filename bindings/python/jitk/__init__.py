"""jitk for Python: list, explain and precompile kernels, call any symbol
of the specs on PyTorch tensors or on any DLPack tensor (CuPy, JAX), and,
with PyTorch installed, every symbol as torch.ops.jitk.<symbol>.

    import torch, jitk
    y, q = torch.ops.jitk.fused_norm_scale_shift_fp8(x, scale, shift, s)   # any code
    y, q = jitk.ops.fused_norm_scale_shift_fp8(x, scale, shift, s)         # eager, fastest
    torch.ops.jitk.static_quant_fp8.out(x.view(-1), s, q=q.view(-1))      # into given tensors

    rt = jitk.Runtime()                      # the generic call, any framework
    rt.call("tadd3", "auto", out=o, x=a, y=b, z=c)

docs/python.md is the guide; `python -m jitk` mirrors the jitk command
(list, explain, precompile).
"""
from ._core import (ArgumentError, ArgumentTypeError, Compiler, Error, Runtime,  # noqa: F401
                    library_path, version)

__all__ = ["Error", "ArgumentError", "ArgumentTypeError", "Compiler", "Runtime", "version",
           "library_path", "ops", "runtime", "configure"]


def _register_torch_ops():
    """torch.ops.jitk.<symbol> for every symbol, when PyTorch is installed.
    A spec that does not load leaves the ops out (jitk.ops_error says why);
    import jitk still works, for the CLI and the generic call."""
    global ops_error
    try:
        import torch  # noqa: F401
    except ImportError:
        return None
    from . import _ops
    try:
        _ops.register()
    except Error as e:
        ops_error = e
    return _ops.ops


ops_error = None
ops = _register_torch_ops()


def runtime(device=None):
    """The Runtime the ops use on a CUDA device (default: the current one)."""
    from . import _ops
    return _ops.runtime(device)


def configure(symbol, arg, tensor):
    """Validate a tensor that a `configured:` argument needs (a static fp8
    scale: one finite, positive fp32), for the ops on its device: once, at
    model load (a device read; not during capture). Until then the fused
    kernels that need it run their fallback (the same bytes)."""
    runtime(tensor.get_device() if hasattr(tensor, "get_device") else None).configure(
        symbol, arg, tensor)

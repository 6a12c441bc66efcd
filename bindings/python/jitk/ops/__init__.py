"""jitk's ops, per family, for code that likes a Python function to read:
each function calls its op through PyTorch's dispatcher
(torch.ops.jitk.<symbol>), so the two are the same call, in eager code,
under torch.compile(fullgraph=True) and in CUDA graphs.

    y, q = jitk.ops.fused_norm_scale_shift_fp8(x, scale, shift, s)
    jitk.ops.out.fused_norm_scale_shift_fp8(x, scale, shift, s, y=y, q=q)
    jitk.ops.norm_scale_shift.fused_norm_scale_shift_fp8   # the same, by family

The family modules beside this file (<family>.py, with <family>.pyi for
IDEs and type checkers) are generated from the specs when the wheel is built
(`python3 bindings/python/_build/backend.py frontend` in a source tree).
A symbol that has none (a family added as YAML after the build, through
JITK_SPECS), or whose generated signature is not the registered op's,
is the op itself here: torch.ops.jitk.<symbol>.default, and out.<symbol>
torch.ops.jitk.<symbol>.out. Imported by jitk once the ops are registered.
"""
import importlib
import os

from . import out

__all__ = ["out"]

_HERE = os.path.dirname(os.path.abspath(__file__))
FAMILIES = sorted(n[:-3] for n in os.listdir(_HERE)
                  if n.endswith(".py") and n[:-3].isidentifier() and
                  n not in ("__init__.py", "out.py"))


def _bind(specs):
    """Make jitk.ops.<symbol> and jitk.ops.out.<symbol> for every
    registered symbol (specs: name -> jitk._schema.OpSpec): the generated
    function where its schemas are the op's, else the op itself; a
    generated function whose symbol is not registered is left out."""
    import torch
    generated = {}
    for family in FAMILIES:
        # (the import makes jitk.ops.<family>; a symbol of the same name,
        # such as rope, takes the name below: the module stays importable)
        mod = importlib.import_module(f"{__name__}.{family}")
        for name in mod.__all__:
            generated[name] = mod
    for name, spec in specs.items():
        packet = getattr(torch.ops.jitk, name)
        mod = generated.get(name)
        same = mod is not None and mod.SCHEMAS.get(name) == (
            "" if spec.no_functional else spec.schema(), spec.out_schema())
        if not spec.no_functional:
            globals()[name] = getattr(mod, name) if same else packet.default
            __all__.append(name)
        setattr(out, name, getattr(mod.out, name) if same else packet.out)
        out.__all__.append(name)

"""The Python front end of the ops, written as real files: one module per
family, jitk/ops/<family>.py, with its stub <family>.pyi, from the specs'
describe JSON (no PyTorch needed). bindings/python/_build/backend.py runs
it when it builds the wheel (and `backend.py frontend` in a source tree).

Each function is the op through the dispatcher, with the schema's
signature and a docstring from the spec (what it computes, each tensor's
dtype and shape); the class `out` holds the .out variants. SCHEMAS records
the schemas each function was written for, so that jitk.ops uses it only
for an op registered with the same ones.
"""
import os

from ._schema import OpSpec

__all__ = ["family_sources", "write"]

_HEADER = '''"""jitk's {family} family as PyTorch ops ({nsym} symbol{s}): generated from the
spec by bindings/python/_build/backend.py frontend; do not edit.

Each function calls torch.ops.jitk.<symbol> (the dispatcher: the C++
kernels of jitk._torch), in AUTO mode: the spec's fallback runs where the
fused kernel cannot, with the same bytes out. out.<symbol> is the .out
variant: it writes into the tensors given by keyword.
"""
'''


def _params(spec, variant):
    """(Python parameters, call arguments, stub parameters) of a variant."""
    decl = spec.schema() if variant == "default" else spec.out_schema()
    inner = decl[1:decl.index(") -> ")]
    py, call, stub = [], [], []
    keyword = False
    for d in inner.split(", ") if inner else []:
        if d == "*":
            py.append("*")
            stub.append("*")
            keyword = True
            continue
        typ, rest = d.split(" ", 1)
        name, _, default = rest.partition("=")
        ann = {"float": "float", "int": "int"}.get(typ, "Tensor")
        if typ.endswith("?"):
            ann = "Optional[Tensor]"
        py.append(rest)
        stub.append(f"{name}: {ann}" + (" = ..." if default else ""))
        call.append(f"{name}={name}" if keyword else name)
    return ", ".join(py), ", ".join(call), ", ".join(stub)


def _describe_tensor(a):
    shape = ", ".join(str(e) for e in a.get("shape") or [])
    opt = ", optional" if a.get("optional") else ""
    cfg = ", configured (jitk.configure it once)" if a.get("configured") else ""
    return f"{a['name']}: {a['dtype']} [{shape}]{opt}{cfg}"


def _doc(spec, variant):
    d = spec.description.rstrip(".")
    lines = [d[:1].upper() + d[1:] + "." if d else spec.name + "."]
    if variant == "default":
        rets = spec.returns()
        names = ", ".join(a["name"] for a in rets)
        lines += ["", f"Returns {names if len(rets) == 1 else '(' + names + ')'}"
                  + (" (an inout argument's updated copy)" if spec.inouts else "") + "."]
    else:
        lines += ["", "Writes " + ", ".join(a["name"] for a in spec.outputs + spec.inouts) +
                  "; returns None."]
    lines += [""] + [_describe_tensor(a) for a in spec.inputs + spec.inouts + spec.outputs]
    lines += [f"{a['name']}: {a['kind']}" + (f" = {a['default']!r}" if "default" in a else "")
              for a in spec.scalars]
    schema = spec.schema() if variant == "default" else spec.out_schema()
    lines += ["", f"Schema: jitk::{spec.name}{'' if variant == 'default' else '.out'}{schema}"]
    return lines


def _indent(lines, n):
    pad = " " * n
    return "\n".join((pad + _safe(ln)) if ln else "" for ln in lines)


def _safe(text):
    """text inside a triple-quoted docstring, as written."""
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def family_sources(family, specs):
    """(module source, stub source) of one family's OpSpecs (in spec order)."""
    specs = [s for s in specs if not s.reason]
    names = [s.name for s in specs if not s.no_functional]
    for s in specs:
        if not s.name.isidentifier() or s.name in ("out", "torch", "SCHEMAS"):
            raise ValueError(f"{family}: symbol {s.name!r} cannot be a function name here")
    src = [_HEADER.format(family=family, nsym=len(specs), s="" if len(specs) == 1 else "s"),
           "import torch", "", f"__all__ = {names!r}", "",
           "# symbol -> (functional schema or '', .out schema): what these functions were",
           "# written for (jitk.ops takes one only for an op registered with the same)",
           "SCHEMAS = {"]
    for s in specs:
        src.append(f"    {s.name!r}: ({'' if s.no_functional else s.schema()!r},")
        src.append(f"        {s.out_schema()!r}),")
    src += ["}", ""]
    stub = [f'"""Types of jitk.ops.{family} (generated; see {family}.py)."""',
            "from typing import Optional, Tuple", "", "from torch import Tensor", "",
            "SCHEMAS: dict", ""]
    for s in specs:
        if s.no_functional:
            continue
        py, call, st = _params(s, "default")
        doc = _doc(s, "default")
        src += ["", f"def {s.name}({py}):", '    """' + _safe(doc[0]), _indent(doc[1:], 4), '    """',
                f"    return torch.ops.jitk.{s.name}.default({call})", ""]
        n = len(s.returns())
        ret = "Tensor" if n == 1 else "Tuple[" + ", ".join(["Tensor"] * n) + "]"
        stub += [f"def {s.name}({st}) -> {ret}: ...", ""]
    src += ["", "class out:", '    """The .out variants: each writes into the tensors given by '
            'keyword and returns None."""', ""]
    stub += ["class out:"]
    for s in specs:
        py, call, st = _params(s, "out")
        doc = _doc(s, "out")
        src += ["    @staticmethod", f"    def {s.name}({py}):", '        """' + _safe(doc[0]),
                _indent(doc[1:], 8), '        """',
                f"        torch.ops.jitk.{s.name}.out({call})", ""]
        stub += ["    @staticmethod", f"    def {s.name}({st}) -> None: ..."]
    if not specs:
        src.append("    pass")
        stub.append("    pass")
    return "\n".join(src).rstrip() + "\n", "\n".join(stub).rstrip() + "\n"


def write(describe, out_dir):
    """Write <family>.py and <family>.pyi for every family of a describe()
    dict into out_dir (jitk/ops), removing the generated files of families
    no longer there; returns the families written."""
    by_family = {}
    for sym in describe["symbols"]:
        spec = OpSpec(sym)
        by_family.setdefault(spec.family, []).append(spec)
    for family in by_family:
        if not family.isidentifier() or family in ("out", "__init__"):
            raise ValueError(f"family {family!r} cannot be a module name in jitk.ops")
    for n in os.listdir(out_dir):
        stem, ext = os.path.splitext(n)
        if ext in (".py", ".pyi") and stem not in by_family and stem not in ("__init__", "out"):
            os.unlink(os.path.join(out_dir, n))
    for family, specs in sorted(by_family.items()):
        py, pyi = family_sources(family, specs)
        for ext, text in ((".py", py), (".pyi", pyi)):
            path = os.path.join(out_dir, family + ext)
            tmp = path + ".tmp"
            with open(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, path)
    return sorted(by_family)

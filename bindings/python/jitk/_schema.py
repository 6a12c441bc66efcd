"""One symbol's PyTorch op, from its jitk_describe entry (no PyTorch
needed): the schemas of jitk::S and jitk::S.out, and the table the C++
extension (jitk/_torch.cpp) registers its kernels from.

For each symbol S (any family, including those added as YAML only):

- jitk::S(inputs..., scalars...) -> outputs: the functional variant; it
  allocates its outputs and returns them; an `inout` argument is copied and
  the updated copy returned.
- jitk::S.out(inputs..., scalars..., *, outputs...) -> (): writes into the
  given tensors (the schema marks exactly the outputs and inouts mutated).

The schema comes from the argument table: tensors by name, optional where
the spec says nullable (or where an instance lacks the argument), integer
and float scalars with the spec's defaults; integer scalars that a
tensor's shape or strides name bare (rows, n) are bound by the library and
are not arguments.

Output shapes are the spec's shape expressions, compiled to small programs
that the extension evaluates on concrete sizes (the CUDA kernel) and on
symbolic ones (the Meta kernel, under torch.compile), so the two agree. A
name in an output's shape is an input's dimension or stride it names bare,
a scalar argument, a parameter with one value, or a parameter of the
instance the inputs select: each instance's input shapes are matched, as
the library's call matches them (x: [rows, 2 * hidden] with hidden in
{3072, 12288} selects the instance, and y: [rows, hidden] gets its hidden).
When no such source exists the symbol has the .out variant only
(no_functional says why).
"""
import keyword

from . import _shapes

__all__ = ["OpSpec", "TORCH_DTYPES", "PROGRAM_OPS"]

# jitk dtype names -> torch dtype attribute names
TORCH_DTYPES = {"bf16": "bfloat16", "fp8_e4m3": "float8_e4m3fn", "f32": "float32",
                "i32": "int32", "i64": "int64", "u8": "uint8"}

# a shape program's opcodes, as jitk/_torch.cpp reads them: leaves
# (CONST v, DIM arg d, STRIDE arg d, SCALAR arg, PARAM index) and operators
PROGRAM_OPS = {"const": 0, "dim": 1, "stride": 2, "scalar": 3, "param": 4,
               "+": 10, "-": 11, "*": 12, "/": 13, "%": 14, "min": 15, "max": 16, "cdiv": 17,
               "==": 18, "!=": 19, "<": 20, "<=": 21, ">": 22, ">=": 23, "&&": 24, "||": 25,
               "neg": 26, "!": 27}


class OpSpec:
    """One symbol's op: schemas, arguments and output shapes."""

    def __init__(self, sym):
        self.name = sym["name"]
        self.family = sym.get("family") or self.name
        self.description = sym.get("description") or ""
        self.instances = [i["name"] for i in sym["instances"]]
        self._instances = sym["instances"]
        self.fallback = [s["symbol"] for s in sym.get("fallback") or []]
        # scratch is the runtime's (io: scratch): no argument of an op
        self.args = [a for a in sym["args"] if any(a.get("present", [True])) and
                     a.get("io") != "scratch"]
        self.reason = None         # why there is no op at all
        self.no_functional = None  # why there is no functional variant
        for a in self.args:
            if not a["name"].isidentifier() or keyword.iskeyword(a["name"]) or \
                    a["name"].startswith("_"):
                self.reason = f"argument name {a['name']!r} is not usable in Python"
            a["optional"] = a["kind"] == "tensor" and (bool(a.get("nullable")) or
                                                      not all(a.get("present", [True])))
            if a["kind"] == "tensor" and a["dtype"] not in TORCH_DTYPES:
                self.reason = f"{a['name']}: dtype {a['dtype']} has no torch dtype"
        tensors = [a for a in self.args if a["kind"] == "tensor"]
        bare = set()
        for a in tensors:
            for e in (a.get("shape") or []) + (a.get("strides") or []):
                if isinstance(e, str) and e.isidentifier():
                    bare.add(e)
        self.scalars = [a for a in self.args if a["kind"] != "tensor" and a["name"] not in bare]
        self.inputs = [a for a in tensors if a["io"] == "in"]
        self.inouts = [a for a in tensors if a["io"] == "inout"]
        self.outputs = [a for a in tensors if a["io"] == "out"]
        self.mutated = [a["name"] for a in tensors if a["io"] != "in"]
        # the C call's arguments, in the spec's order
        self.call_args = [a for a in self.args if a["kind"] == "tensor" or a in self.scalars]
        self._index = {a["name"]: i for i, a in enumerate(self.call_args)}
        self.consts = {}
        self.multi = []  # the int parameters with several values, in the spec's order
        for p in sym.get("params", []):
            if p["type"] in ("int", "bool") and len(p["values"]) == 1:
                self.consts[p["name"]] = int(p["values"][0])
            elif p["type"] == "int":
                self.multi.append(p["name"])
        self.programs = None  # output name -> (shape programs, stride programs or None)
        self.select = False
        if not self.reason:
            try:
                self._plan_shapes()
            except (_shapes.ExprError, KeyError) as e:
                self.no_functional = str(e)
        if not (self.inputs or self.inouts):
            self.no_functional = self.no_functional or "no input tensor gives a device"

    # -- output shapes
    def _sources(self):
        """name -> the program leaf that gives it from the call's inputs."""
        known = {}
        for a in self.inputs + self.inouts:
            if a["optional"]:
                continue
            i = self._index[a["name"]]
            for what, exprs in (("dim", a.get("shape") or []), ("stride", a.get("strides") or [])):
                for d, e in enumerate(exprs):
                    if isinstance(e, str) and e.isidentifier() and e not in known and \
                            e not in self.consts and not self._is_scalar(e):
                        known[e] = [PROGRAM_OPS[what], i, d]
        for s in self.scalars:
            if s["kind"] != "f32":
                known[s["name"]] = [PROGRAM_OPS["scalar"], self._index[s["name"]]]
        return known

    def _program(self, text, known, allow_params):
        used = []

        def leaf(n):
            if n in known:
                return list(known[n])
            if n in self.consts:
                return [PROGRAM_OPS["const"], self.consts[n]]
            if allow_params and n in self.multi:
                used.append(n)
                return [PROGRAM_OPS["param"], self.multi.index(n)]
            raise _shapes.ExprError(f"the shape of an output needs {n!r}, which no input's "
                                    "shape, no scalar argument and no parameter gives")
        return _compile(_shapes.parse(text), leaf), used

    def _plan_shapes(self):
        known = self._sources()
        programs, params = {}, set()
        for a in self.outputs:
            if a["optional"]:
                raise _shapes.ExprError(f"{a['name']} is an output only some instances have")
            shape = []
            for e in a["shape"]:
                p, used = self._program(e, known, True)
                shape.append(p)
                params.update(used)
            strides = None
            if a.get("strides"):
                strides = []
                for e in a["strides"]:
                    if isinstance(e, str) and e.isidentifier() and e not in known and \
                            e not in self.consts:
                        strides.append([])  # bound from this tensor: contiguous
                        continue
                    p, used = self._program(e, known, True)
                    strides.append(p)
                    params.update(used)
            programs[a["name"]] = (shape, strides)
        self.programs = programs
        self.select = bool(params)
        if self.select:
            self._plan_selection(known)

    def _plan_selection(self, known):
        """Each instance's parameters and the input dimensions that select
        it: every dimension of a required input whose expression uses a
        parameter with several values, and otherwise only what is known."""
        self.selection = []
        for k, inst in enumerate(self._instances):
            values = [int(inst["params"][n]) for n in self.multi]
            checks = []
            for a in self.inputs + self.inouts:
                present = a.get("present") or []
                if k < len(present) and not present[k]:
                    continue
                for d, e in enumerate(a.get("shape") or []):
                    try:
                        names = _shapes.names(_shapes.parse(e))
                    except _shapes.ExprError:
                        continue
                    if not any(n in self.multi for n in names):
                        continue
                    try:
                        p, _ = self._program(e, {n: v for n, v in known.items()
                                                 if n not in self.multi}, True)
                    except _shapes.ExprError:
                        continue
                    checks.append((self._index[a["name"]], d, p))
            self.selection.append((values, checks))

    def _is_scalar(self, n):
        return any(s["name"] == n for s in self.scalars)

    # -- schemas
    def _scalar_decl(self, a):
        t = "float" if a["kind"] == "f32" else "int"
        if "default" in a:
            return f"{t} {a['name']}={a['default']!r}"
        return f"{t} {a['name']}"

    def _in_order(self):
        """The schema's arguments before the outputs, by Python's rule -
        nothing without a default after something with one: required
        tensors, required scalars, then the optional tensors and the
        scalars with defaults (each in spec order)."""
        tens = [a for a in self.args if a["kind"] == "tensor" and a["io"] in ("in", "inout")]
        return ([a for a in tens if not a["optional"]] +
                [a for a in self.scalars if "default" not in a] +
                [a for a in tens if a["optional"]] +
                [a for a in self.scalars if "default" in a])

    def _in_decls(self, mutating):
        decls, alias = [], iter("abcdefghijklmnopqrstuvwxyz")
        for a in self._in_order():
            if a["kind"] != "tensor":
                decls.append(self._scalar_decl(a))
                continue
            mut = f"({next(alias)}!)" if mutating and a["io"] == "inout" else ""
            decls.append(f"Tensor{mut}? {a['name']}=None" if a["optional"]
                         else f"Tensor{mut} {a['name']}")
        return decls, alias

    def returns(self):
        """What the functional variant returns, in order: the outputs, then
        the inouts."""
        return self.outputs + self.inouts

    def schema(self):
        """The functional variant's schema (after the op's name)."""
        decls, _ = self._in_decls(False)
        rets = self.returns()
        ret = "Tensor" if len(rets) == 1 else "(" + ", ".join("Tensor" for _ in rets) + ")"
        return "(" + ", ".join(decls) + ") -> " + ret

    def out_schema(self):
        """The out variant's schema: the outputs keyword-only."""
        decls, alias = self._in_decls(True)
        outs = []
        for a in self.outputs:
            mut = f"({next(alias)}!)"
            outs.append(f"Tensor{mut}? {a['name']}=None" if a["optional"]
                        else f"Tensor{mut} {a['name']}")
        if outs:
            decls = decls + ["*"] + outs
        return "(" + ", ".join(decls) + ") -> ()"

    # -- the extension's table
    def table(self):
        """What jitk._torch.register takes for this symbol (a dict of plain
        values): the schemas, each C call argument as (name, kind, io,
        optional, configured, position on the functional variant's stack
        (-1: an output it allocates), position on the .out variant's,
        dtype), the outputs' shape programs, the functional results and
        the instances' selection."""
        order = self._in_order()
        fpos = {a["name"]: i for i, a in enumerate(order)}
        opos = dict(fpos)
        for a in self.outputs:
            opos[a["name"]] = len(opos)
        kinds = {"tensor": "t", "i32": "i", "i64": "l", "f32": "f"}
        ios = {"in": "i", "out": "o", "inout": "x"}
        functional = not self.no_functional
        args = [(a["name"], kinds[a["kind"]], ios.get(a.get("io"), "i"),
                 bool(a.get("optional")), bool(a.get("configured")),
                 fpos.get(a["name"], -1), opos[a["name"]], a.get("dtype") or "")
                for a in self.call_args]
        outputs, instances = [], []
        if functional:
            for a in self.outputs:
                shape, strides = self.programs[a["name"]]
                outputs.append((self._index[a["name"]], shape, strides))
            if self.select:
                instances = self.selection
        return {"name": self.name, "schema": self.name + self.schema() if functional else "",
                "out_schema": self.name + ".out" + self.out_schema(),
                "functional": functional, "nf": len(order), "no": len(opos), "args": args,
                "outputs": outputs, "returns": [self._index[a["name"]] for a in self.returns()],
                "select": bool(self.select and functional), "instances": instances}


_BINARY = ("+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "&&", "||")


def _compile(tree, leaf):
    """A parsed expression as a postfix program; leaf(name) gives a name's."""
    op = tree[0]
    if op == "num":
        return [PROGRAM_OPS["const"], tree[1]]
    if op == "name":
        return leaf(tree[1])
    if op in ("neg", "!"):
        return _compile(tree[1], leaf) + [PROGRAM_OPS[op]]
    if op in _BINARY or op in ("min", "max", "cdiv"):
        return _compile(tree[1], leaf) + _compile(tree[2], leaf) + [PROGRAM_OPS[op]]
    raise _shapes.ExprError(f"unknown operator {op!r}")


def run_program(program, dims=None, strides=None, scalars=None, params=None):
    """A program's value in Python (the tests' reference for the
    extension's evaluator): dims[arg][d], strides[arg][d], scalars[arg],
    params[index]."""
    ops = {v: k for k, v in PROGRAM_OPS.items()}
    st, i = [], 0
    while i < len(program):
        name = ops[program[i]]
        i += 1
        if name == "const":
            st.append(program[i])
            i += 1
        elif name in ("dim", "stride"):
            st.append((dims if name == "dim" else strides)[program[i]][program[i + 1]])
            i += 2
        elif name in ("scalar", "param"):
            st.append((scalars if name == "scalar" else params)[program[i]])
            i += 1
        elif name in ("neg", "!"):
            v = st.pop()
            st.append(-v if name == "neg" else int(not v))
        else:
            b, a = st.pop(), st.pop()
            tree = (name, ("num", a), ("num", b))
            st.append(_shapes.evaluate(tree, {}))
    assert len(st) == 1
    return st[0]

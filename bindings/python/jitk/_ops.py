"""Every symbol of the specs as a PyTorch op, generated from jitk_describe.

For each symbol S (any family, including those added as YAML only):

- torch.ops.jitk.S(inputs..., scalars...) -> outputs: the functional
  variant; it allocates its outputs (shapes from the spec's shape
  expressions, evaluated from the inputs' shapes) and returns them; an
  `inout` argument is copied and the updated copy returned.
- torch.ops.jitk.S.out(inputs..., scalars..., *, outputs...) -> (): the
  out variant; it writes into the given tensors (mutates_args: exactly the
  outputs and inouts).
- jitk.ops.S and jitk.ops.out.S: the same two with the same arguments,
  for eager code: they call the library directly (no dispatcher) and, under
  torch.compile, are the torch.ops above.

The schema comes from the argument table: tensors by name, optional where
the spec says nullable (or where an instance lacks the argument), integer
and float scalars with the spec's defaults; integer scalars that a tensor's
shape or strides name bare (rows, n) are bound by the library and are not
arguments. Fake (register_fake, which is also the Meta kernel) and real
kernels share one generated function, so shapes and strides agree. Calls
run in AUTO mode: the spec's fallback runs where the fused instance cannot.

Preloading: the first call of an op on a device (eager, or the fake kernel
while torch.compile traces) resolves every instance of the symbol and of
its fallback steps on that device, so that CUDA graph capture
(mode="reduce-overhead") never meets an unresolved kernel.
"""
import keyword
import re
import threading
import types

from . import _core, _shapes

__all__ = ["OpSpec", "register", "runtime", "skipped"]

# jitk dtype names -> torch dtype attribute names
TORCH_DTYPES = {"bf16": "bfloat16", "fp8_e4m3": "float8_e4m3fn", "f32": "float32",
                "i32": "int32", "i64": "int64", "u8": "uint8"}

_MODE_AUTO = 2
NOT_PLAIN = -100  # a plan's answer when a tensor is not a plain torch.Tensor

# symbol -> why it has no op (or no functional variant)
skipped = {}


class OpSpec:
    """One symbol's op, from its jitk_describe entry (no PyTorch needed):
    the schemas and the Python source of its kernels."""

    def __init__(self, sym):
        self.name = sym["name"]
        self.instances = [i["name"] for i in sym["instances"]]
        self.fallback = [s["symbol"] for s in sym.get("fallback") or []]
        self.args = [a for a in sym["args"] if any(a.get("present", [True]))]
        self.reason = None       # why there is no op at all
        self.no_functional = None  # why there is no functional variant
        for a in self.args:
            if not a["name"].isidentifier() or keyword.iskeyword(a["name"]) or \
                    a["name"].startswith("_"):
                self.reason = f"argument name {a['name']!r} is not usable in Python"
            a["optional"] = a["kind"] == "tensor" and (a.get("nullable") or
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
        consts = {}
        for p in sym.get("params", []):
            if len(p["values"]) == 1 and p["type"] in ("int", "bool"):
                consts[p["name"]] = int(p["values"][0])
        self.consts = consts
        if not self.reason:
            try:
                self._plan_shapes()
            except (_shapes.ExprError, KeyError) as e:
                self.no_functional = str(e)
        if not (self.inputs or self.inouts):
            self.no_functional = self.no_functional or "no input tensor gives a device"

    # -- output shapes
    def _plan_shapes(self):
        known = {}  # name -> Python source
        reads = {}  # local -> the input's shape or strides it holds
        for a in self.inputs + self.inouts:
            if a["optional"]:
                continue
            n = a["name"]
            for i, e in enumerate(a.get("shape") or []):
                if isinstance(e, str) and e.isidentifier() and e not in known and \
                        e not in self.consts and not self._is_scalar(e):
                    known[e] = f"_sh_{n}[{i}]"
                    reads[f"_sh_{n}"] = f"{n}.shape"
            for i, e in enumerate(a.get("strides") or []):
                if isinstance(e, str) and e.isidentifier() and e not in known and \
                        e not in self.consts and not self._is_scalar(e):
                    known[e] = f"_st_{n}[{i}]"
                    reads[f"_st_{n}"] = f"{n}.stride()"
        for s in self.scalars:
            known[s["name"]] = s["name"]
        self._solve_linear(known, reads)

        def name(n):
            if n in known:
                return known[n]
            if n in self.consts:
                return str(self.consts[n])
            raise _shapes.ExprError(f"the shape of an output needs {n!r}, which no input's "
                                    "shape, no scalar argument and no parameter gives")
        allocs = []
        for a in self.outputs:
            if a["optional"]:
                raise _shapes.ExprError(f"{a['name']} is an output only some instances have")
            shape = [_shapes.to_python(_shapes.parse(e), name) for e in a["shape"]]
            strides = None
            if a.get("strides"):
                strides = []
                for i, e in enumerate(a["strides"]):
                    if isinstance(e, str) and e.isidentifier() and e not in known and \
                            e not in self.consts:
                        tail = " * ".join(f"({d})" for d in shape[i + 1:]) or "1"
                        strides.append(tail)  # bound from this tensor: contiguous
                    else:
                        strides.append(_shapes.to_python(_shapes.parse(e), name))
            allocs.append((a["name"], shape, strides, a["dtype"]))
        self.allocs = allocs
        # the reads the allocations use, each once (a Python attribute
        # read makes a new object)
        used = " ".join(s for _, sh, st, _ in allocs for s in sh + (st or []))
        self.shape_lines = [f"    {v} = {src}" for v, src in reads.items()
                            if re.search(r"\b" + v + r"\b", used)]

    def _solve_linear(self, known, reads):
        """Names an input's dimension gives through a simple expression:
        a dimension a * NAME + b (a > 0; every other name in it a
        parameter with one value) tells NAME = (dim - b) / a, so that
        x: [rows, 2 * hidden] decides y: [rows, hidden] whichever hidden
        the instance has. A dimension the division does not fit is
        refused by the call's own shape check before any launch."""
        progress = True
        while progress:
            progress = False
            for a in self.inputs + self.inouts:
                if a["optional"]:
                    continue
                n = a["name"]
                for i, e in enumerate(a.get("shape") or []):
                    if not isinstance(e, str) or e.isidentifier():
                        continue
                    try:
                        tree = _shapes.parse(e)
                    except _shapes.ExprError:
                        continue
                    used = _shapes.names(tree)
                    free = [u for u in used if u not in known and u not in self.consts]
                    if len(free) != 1 or self._is_scalar(free[0]) or \
                            any(u not in self.consts for u in used if u != free[0]):
                        continue
                    u = free[0]
                    try:
                        f = [_shapes.evaluate(tree, dict(self.consts, **{u: v}))
                             for v in (0, 1, 2, 7)]
                    except (_shapes.ExprError, ZeroDivisionError):
                        continue
                    slope, base = f[1] - f[0], f[0]
                    if slope <= 0 or f[2] != 2 * slope + base or f[3] != 7 * slope + base:
                        continue  # not linear in u
                    known[u] = f"((_sh_{n}[{i}] - {base}) // {slope})" if base else \
                        f"(_sh_{n}[{i}] // {slope})" if slope != 1 else f"_sh_{n}[{i}]"
                    reads[f"_sh_{n}"] = f"{n}.shape"
                    progress = True

    def _shaped_like(self, shape):
        """The index in the C call of the input whose whole shape shape is
        (each of its dimensions, in order), or None."""
        m = re.fullmatch(r"_sh_(\w+)\[0\]", shape[0]) if shape else None
        if not m:
            return None
        n = m.group(1)
        src = next((a for a in self.inputs + self.inouts if a["name"] == n), None)
        if src is None or len(src.get("shape") or []) != len(shape) or \
                shape != [f"_sh_{n}[{i}]" for i in range(len(shape))]:
            return None
        return next(i for i, a in enumerate(self.call_args) if a["name"] == n)

    def _is_scalar(self, n):
        return any(s["name"] == n for s in self.scalars)

    # -- schemas
    def _scalar_decl(self, a):
        t = "float" if a["kind"] == "f32" else "int"
        if "default" in a:
            return f"{t} {a['name']}={a['default']!r}"
        return f"{t} {a['name']}"

    def _in_decls(self, mutating):
        decls, alias = [], iter("abcdefghijklmnopqrstuvwxyz")
        for a in self.args:
            if a["kind"] == "tensor" and a["io"] in ("in", "inout"):
                mut = f"({next(alias)}!)" if mutating and a["io"] == "inout" else ""
                decls.append(f"Tensor{mut}? {a['name']}=None" if a["optional"]
                             else f"Tensor{mut} {a['name']}")
        # Python's rule - nothing without a default after something with
        # one: required tensors, required scalars, then the optional
        # tensors and the scalars with defaults (each in spec order)
        req = [self._scalar_decl(a) for a in self.scalars if "default" not in a]
        opt = [self._scalar_decl(a) for a in self.scalars if "default" in a]
        tens = [d for d in decls if not d.endswith("=None")]
        decls = tens + req + [d for d in decls if d.endswith("=None")] + opt
        return decls, alias

    def schema(self):
        """The functional variant's schema (after the op's name)."""
        decls, _ = self._in_decls(False)
        rets = [a["name"] for a in self.outputs + self.inouts]
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

    def _params(self, schema):
        return schema[1:schema.index(") -> ")]

    # -- the generated kernels
    def source(self, torch_plan=False):
        """Python source of: _fn (functional), _fake (its fake kernel),
        _out (the out variant), _eager and _eager_out (jitk.ops). With
        torch_plan, _eager and _eager_out call _tp and _tpo, jitk._torch.Plans
        (the outputs allocated by _tp), else the plan of _fast.c / ctypes."""
        fparams = self._params(self.schema())
        oparams = self._params(self.out_schema())

        def pyparams(p):
            out = []
            for d in p.split(", ") if p else []:
                if d == "*":
                    out.append("*")
                    continue
                typ, rest = d.split(" ", 1)
                out.append(rest)
            return ", ".join(out)
        fp, op_ = pyparams(fparams), pyparams(oparams)
        first = (self.inputs + self.inouts + self.outputs)
        first = next((a["name"] for a in first if not a["optional"]), None)
        call = ", ".join(a["name"] for a in self.call_args)
        fargs = ", ".join(n.split("=")[0] for n in fp.split(", ") if n and n != "*")
        okw = []
        for n in op_.split(", "):
            if not n or n == "*":
                continue
            okw.append(n.split("=")[0])
        ocall = ", ".join(f"{n}={n}" for n in okw)
        fcall = ", ".join(f"{n}={n}" for n in fargs.split(", ") if n)
        src = []
        launch = [
            "    _d = _dev.index",
            "    _p = _plans.get(_d)",
            "    if _p is None:",
            "        _p = _plan(_d)",
            f"    _rc = _p(_stream(_d), {call})",
            "    if _rc < 0:",
            "        _fail(_rc)",
        ]
        if not self.no_functional:
            body = [f"    _dev = {first}.device"] + self.shape_lines
            for name, shape, strides, dt in self.allocs:
                shp = "(" + "".join(f"{s}, " for s in shape) + ")"
                if strides is None:
                    body.append(f"    {name} = _empty({shp}, dtype=_dt_{dt}, device=_dev)")
                else:
                    st = "(" + "".join(f"{s}, " for s in strides) + ")"
                    body.append(f"    {name} = _empty_strided({shp}, {st}, dtype=_dt_{dt}, "
                                "device=_dev)")
            for a in self.inouts:
                body.append(f"    {a['name']} = {a['name']}.clone()")
            rets = [a["name"] for a in self.outputs + self.inouts]
            ret = f"    return {rets[0]}" if len(rets) == 1 else \
                f"    return ({', '.join(rets)})"
            src += [f"def _fake({fp}):"] + body + ["    _touch(_dev)", ret, ""]
            src += [f"def _fn({fp}):"] + body + launch + [ret, ""]
            if torch_plan:
                # the outputs' slots hold their shapes: _tp allocates them;
                # an output shaped like an input holds that input's index
                # in the call (its shape read in C)
                shapes, slots = [], []
                for name, shape, strides, dt in self.allocs:
                    like = self._shaped_like(shape) if strides is None else None
                    if like is not None:
                        shapes.append(f"        {name} = {like}")
                        continue
                    shp = "(" + "".join(f"{s}, " for s in shape) + ")"
                    if strides is not None:
                        shp = "(" + shp + ", (" + "".join(f"{s}, " for s in strides) + "))"
                    shapes.append(f"        {name} = {shp}")
                    slots.append(shp)
                outs = [name for name, _, _, _ in self.allocs]
                if self.inouts or not outs:
                    done = ([f"            {', '.join(outs)}, = _r"] if outs else []) + \
                        ["            " + ret.strip()]
                else:  # the plan's tuple is the return value
                    done = ["            return _r" + ("[0]" if len(outs) == 1 else "")]
                # (a value without a shape is the dispatcher's to name)
                lines = [ln for ln in self.shape_lines
                         if any(re.search(r"\b" + ln.split()[0] + r"\b", t) for t in slots)]
                reads = ["        try:"] + ["        " + ln for ln in lines] + \
                    ["        except AttributeError:", f"            return _op({fcall})"] \
                    if lines else []
                src += [f"def _eager({fp}):",
                        "    if not _compiling():"] + reads + shapes + \
                    [f"        {a['name']} = {a['name']}.clone()" for a in self.inouts] + [
                    f"        _r = _tp({call})",
                    "        if type(_r) is not int:"] + done + [
                    f"    return _op({fcall})", ""]
        if not self.no_functional and not torch_plan:
            src += [f"def _eager({fp}):",
                    f"    if _compiling() or _modes() or type({first}) not in _plain or "
                    f"{first}.get_device() < 0:",
                    f"        return _op({fcall})"] + body + [
                    "    _d = _dev.index",
                    "    _p = _eplans.get(_d)",
                    "    if _p is None:",
                    "        _p = _eplan(_d)",
                    f"    _rc = _p(_stream(_d), {call})",
                    "    if _rc < 0:",
                    f"        if _rc == {NOT_PLAIN}:",
                    f"            return _op({fcall})",
                    "        _fail(_rc)",
                    ret, ""]
        src += [f"def _out({op_}):", f"    _dev = {first}.device"] + launch + [""]
        src += [f"def _fake_out({op_}):", f"    _touch({first}.device)", ""]
        if torch_plan:
            src += [f"def _eager_out({op_}):",
                    f"    if _compiling() or _tpo({call}) is not None:",
                    f"        return _op_out({ocall})", ""]
            return "\n".join(src)
        src += [f"def _eager_out({op_}):",
                f"    if _compiling() or _modes() or type({first}) not in _plain or "
                f"{first}.get_device() < 0:",
                f"        return _op_out({ocall})",
                f"    _d = {first}.get_device()",
                "    _p = _eplans.get(_d)",
                "    if _p is None:",
                "        _p = _eplan(_d)",
                f"    _rc = _p(_stream(_d), {call})",
                "    if _rc < 0:",
                f"        if _rc == {NOT_PLAIN}:",
                f"            return _op_out({ocall})",
                "        _fail(_rc)", ""]
        return "\n".join(src)


# ------------------------------------------------------------ runtimes

_lock = threading.Lock()
_runtimes = {}


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


def _fail(rc):
    _core._check(rc)
    raise _core.Error(rc, "the call failed")


def _plan_factory(spec, specs, torch, tmod=None):
    """The names the generated kernels call for spec's plans: _plan(device)
    -> the kernels' plan on that device (preloaded; it reads a subclass of
    torch.Tensor as a tensor: under the dispatcher it is one), kept in
    _plans; _eplan / _eplans the same for the eager calls (which leave a
    subclass to the dispatcher); _tp: the jitk._torch.Plan of the eager
    calls when tmod (jitk._torch) is given, else None."""
    names = tuple(a["name"] for a in spec.call_args)
    kinds = "".join(("o" if a["optional"] else "t") if a["kind"] == "tensor" else
                    {"i32": "i", "i64": "l", "f32": "f"}[a["kind"]] for a in spec.call_args)
    dtypes = tuple((dt, c, b) for dt, (c, b) in _core._dtype_codes(torch).items())
    plain = (torch.Tensor, torch.nn.Parameter)
    plans, eplans, handles = {}, {}, {}
    # the arguments a `configured:` rule guards: each plan looks them up in
    # its runtime's configured tensors and undoes a validation whose tensor
    # was written since (Runtime.configure)
    cfg = tuple(i for i, a in enumerate(spec.call_args) if a.get("configured"))

    def make(device):
        with _lock:
            p = plans.get(device)
            if p is not None:
                return p
        rt = runtime(device)
        op = rt._op(spec.name)
        _preload(rt, spec, specs)
        watch = (cfg, rt._configured, rt._stale) if cfg else None
        p = make_plan(op.value, _MODE_AUTO, device, names, kinds, dtypes, plain, True, watch)
        e = make_plan(op.value, _MODE_AUTO, device, names, kinds, dtypes, plain, False, watch)
        with _lock:
            plans[device], eplans[device], handles[device] = p, e, op.value
        return p

    def make_eager(device):
        make(device)
        return eplans[device]

    def resolve(device):
        make(device)
        return handles[device]
    def registry(device):
        rt = runtime(device)
        return rt._configured, rt._stale
    tp = tpo = None
    if tmod is not None:
        def tplan(odt):
            return tmod.Plan(_core._c.cast(_core._lib.jitk_op_call, _core._c.c_void_p).value,
                             _MODE_AUTO, names, kinds, dtypes, odt, plain, resolve, _fail,
                             _core.ArgumentError, _core.ArgumentTypeError,
                             (cfg, registry) if cfg else None)
        # the functional variant's plan allocates the outputs; the out
        # variant's allocates nothing (a shape given for an output is an error)
        tp = tplan(tuple(getattr(torch, TORCH_DTYPES[a["dtype"]])
                         if any(a is o for o in spec.outputs) else None for a in spec.call_args))
        tpo = tplan((None,) * len(spec.call_args))
    return dict(_plans=plans, _plan=make, _eplans=eplans, _eplan=make_eager, _tp=tp, _tpo=tpo)


def torch_module(torch):
    """(jitk._torch, None) when it was built for this PyTorch, else (None,
    why not). JITK_TORCH_PLAN=0 leaves it out."""
    import os
    if not _core._env_flag("JITK_TORCH_PLAN", True, False):
        return None, f"JITK_TORCH_PLAN={os.environ['JITK_TORCH_PLAN']}"
    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                               "_torch.version")) as f:
            built = f.read().strip()
    except OSError:
        return None, "jitk._torch is not built (the package builds it where PyTorch is " \
            "importable at build time)"
    if built != torch.__version__:
        return None, f"jitk._torch was built for torch {built}, this is torch {torch.__version__}"
    try:
        from . import _torch
    except ImportError as e:
        return None, f"jitk._torch does not load: {e}"
    if _torch.torch_version != torch.__version__:
        return None, f"jitk._torch says torch {_torch.torch_version}, this is {torch.__version__}"
    return _torch, None


def _plan_kind():
    try:
        from . import _fast  # noqa: F401
        return "C (jitk._fast)"
    except ImportError:
        return "ctypes"


def make_plan(op, mode, device, names, kinds, dtypes, plain, subclasses=False, configured=None):
    """A callable plan(stream, *values) -> status for one op handle: the
    compiled extension's when it is built, else ctypes. With subclasses, an
    instance of a subclass of plain[0] is read as a plain[0]; else it is
    NOT_PLAIN. configured: None, or (indices, versions, stale): the
    arguments at those indices are looked up by data address in versions
    (a Runtime's configured tensors: address -> version counter, or None)
    and stale(address) is called, before the call, for one whose
    _version moved."""
    try:
        from . import _fast
    except ImportError:
        _fast = None
    if _fast is not None:
        fn = _core._c.cast(_core._lib.jitk_op_call, _core._c.c_void_p).value
        return _fast.Plan(op, fn, mode, device, names, kinds, dtypes, plain,
                          _core.ArgumentError, _core.ArgumentTypeError, subclasses, configured)
    return _PyPlan(op, mode, device, names, kinds, dtypes, plain, subclasses, configured)


class _PyPlan:
    """The plan through ctypes (no compiled extension)."""

    def __init__(self, op, mode, device, names, kinds, dtypes, plain, subclasses=False,
                 configured=None):
        self.op, self.mode, self.device = _core._P(op), mode, device
        self.subclasses = subclasses
        self.configured = configured
        self.names, self.kinds, self.plain = names, kinds, plain
        self.codes = {dt: (c, b) for dt, c, b in dtypes}
        self.kmap = {n: ("tensor" if k in "to" else {"i": "i32", "l": "i64", "f": "f32"}[k])
                     for n, k in zip(names, kinds)}

    def _tensor(self, t, what):
        if type(t) not in self.plain and not (self.subclasses and isinstance(t, self.plain[0])):
            raise _NotPlain()
        dev = t.get_device()
        if dev != self.device:
            where = "the CPU" if dev < 0 else f"cuda:{dev}"
            raise _core.ArgumentError(f"{what} is on {where}, not cuda:{self.device}")
        code = self.codes.get(t.dtype)
        if code is None:
            raise _core.ArgumentTypeError(f"{what}: dtype {t.dtype} is not a kernel argument type")
        d = _core._Tensor()
        d.data = t.data_ptr()
        d.dtype.code, d.dtype.bits, d.dtype.lanes = code[0], code[1], 1
        d.ndim = t.dim()
        if d.ndim > _core._MAX_DIMS:
            raise _core.ArgumentError(f"{what} has {t.dim()} dimensions, more than "
                                      f"{_core._MAX_DIMS}")
        for i, (n, st) in enumerate(zip(t.shape, t.stride())):
            d.shape[i], d.strides[i] = n, st
        return d

    def __call__(self, stream, *values):
        if self.configured is not None and self.configured[1]:
            indices, versions, stale = self.configured
            for i in indices:
                v = values[i] if i < len(values) else None
                if v is None or not hasattr(v, "data_ptr"):
                    continue
                p = v.data_ptr()
                if versions.get(p) is not None and _core._version_of(v) != versions[p]:
                    stale(p)
        try:
            arr, n, keep = _core._make_args(self.kmap, dict(zip(self.names, values)),
                                            self._tensor)
        except _NotPlain:
            return NOT_PLAIN
        info = _core._CallInfo()
        rc = _core._op_call(_core._c.byref(info), self.op, self.mode, arr, n,
                            _core._P(stream or None))
        if rc < 0:
            return rc
        return 2 if info.fallback else rc


class _NotPlain(Exception):
    pass


# ------------------------------------------------------------ registration

ops = types.ModuleType("jitk.ops", "jitk's ops for eager code (see jitk._ops)")
ops.out = types.ModuleType("jitk.ops.out", "the out variants")
_lib = None
specs_registered = {}
# what jitk.ops' eager calls go through, and why not libtorch when not
# (without PyTorch: None, and the note says so; jitk/__init__.py)
eager_plan, eager_plan_note = None, None


def _modes_factory(torch):
    """modes() -> whether a torch function or dispatch mode is active (the
    C plan's eager calls then take the dispatcher's path, so the modes see
    them; the libtorch plan asks the same in C++)."""
    tfm = torch._C._is_torch_function_mode_enabled
    tdm = torch._C._len_torch_dispatch_stack

    def modes():
        return tfm() or tdm() > 0
    return modes


def _touch_factory(make, torch):
    def touch(dev):
        # the fake kernel under torch.compile: preload on the real device
        if dev.type == "cuda" and torch.cuda.is_available():
            try:
                make(dev.index if dev.index is not None else torch.cuda.current_device())
            except _core.Error:
                pass  # the real call reports it
    return touch


def register(describe=None):
    """Define torch.ops.jitk.<symbol> (and .out) for every symbol of the
    default specs (or of a describe() dict), and jitk.ops.<symbol>; once
    per process. Returns the OpSpecs by name."""
    global _lib
    import torch
    if _lib is not None:
        return specs_registered
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
    global eager_plan, eager_plan_note
    tmod, eager_plan_note = torch_module(torch)
    eager_plan = "libtorch (jitk._torch)" if tmod else _plan_kind()
    _lib = torch.library.Library("jitk", "DEF")
    raw_stream = torch._C._cuda_getCurrentRawStream if hasattr(torch._C, "_cuda_getCurrentRawStream") \
        else (lambda d: torch.cuda.current_stream(d).cuda_stream)
    for spec in specs.values():
        plans = _plan_factory(spec, specs, torch, tmod)
        tp = plans["_tp"]
        env = dict(_shapes.HELPERS, **plans, _empty=torch.empty,
                   _empty_strided=torch.empty_strided, _stream=raw_stream, _fail=_fail,
                   _touch=_touch_factory(plans["_plan"], torch),
                   _compiling=torch.compiler.is_compiling, _modes=_modes_factory(torch),
                   _plain=(torch.Tensor, torch.nn.Parameter))
        for k, v in TORCH_DTYPES.items():
            env["_dt_" + k] = getattr(torch, v)
        exec(compile(spec.source(tp is not None), f"<jitk op {spec.name}>", "exec"),  # noqa: S102
             env)
        name = spec.name
        if spec.no_functional:
            skipped[name] = "no functional variant: " + spec.no_functional
        else:
            _lib.define(name + spec.schema(), tags=())
            _lib.impl(name, env["_fn"], "CUDA")
            torch.library.register_fake("jitk::" + name, env["_fake"], lib=_lib)
            env["_op"] = getattr(torch.ops.jitk, name).default
            fn = env["_eager"]
            fn.__name__ = fn.__qualname__ = name
            fn.__doc__ = f"jitk {name}{spec.schema()} (eager: the library directly)"
            setattr(ops, name, fn)
        _lib.define(name + ".out" + spec.out_schema())
        _lib.impl(name + ".out", env["_out"], "CUDA")
        torch.library.register_fake("jitk::" + name + ".out", env["_fake_out"], lib=_lib)
        env["_op_out"] = getattr(torch.ops.jitk, name).out
        fn = env["_eager_out"]
        fn.__name__ = fn.__qualname__ = name
        fn.__doc__ = f"jitk {name}.out{spec.out_schema()} (eager: the library directly)"
        setattr(ops.out, name, fn)
    specs_registered.update(specs)
    return specs

"""The spec format's integer expressions in Python, for output shapes.

The grammar is the library's (runtime/spec/expr.c), loosest binding first:

    or:  and ("||" and)*         and: cmp ("&&" cmp)*
    cmp: sum (("=="|"!="|"<"|"<="|">"|">=") sum)?
    sum: term (("+"|"-") term)*  term: unary (("*"|"/"|"%") unary)*
    unary: ("-"|"!") unary | primary
    primary: NUMBER | NAME | NAME "(" or "," or ")" | "(" or ")"

with min, max and cdiv, and C's integer division (truncating toward
zero). parse() gives a small tree; evaluate() computes it from a dict of
names; to_python() turns it into Python source over the helpers in
HELPERS, so that an op's output shapes are one generated function (which
also runs on PyTorch's symbolic sizes under torch.compile).
"""
import re

__all__ = ["ExprError", "parse", "names", "evaluate", "to_python", "HELPERS"]


class ExprError(ValueError):
    """An expression that does not parse or cannot be evaluated."""


_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z_0-9]*)|(&&|\|\||==|!=|<=|>=|[-+*/%()<>!,]))")
_FUNCS = ("min", "max", "cdiv")


def _tokens(text):
    pos, out = 0, []
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ExprError(f"{text!r}: unexpected character at offset {pos}")
        num, name, op = m.groups()
        out.append(("num", int(num)) if num is not None else
                   ("name", name) if name is not None else ("op", op))
        pos = m.end()
    out.append(("end", None))
    return out


class _Parser:
    def __init__(self, text):
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def peek(self):
        return self.toks[self.i]

    def take(self, op=None):
        t = self.toks[self.i]
        if op is not None and t != ("op", op):
            raise ExprError(f"{self.text!r}: expected {op!r}")
        self.i += 1
        return t

    def binary(self, ops, sub):
        left = sub()
        while self.peek()[0] == "op" and self.peek()[1] in ops:
            op = self.take()[1]
            left = (op, left, sub())
        return left

    def or_(self):
        return self.binary(("||",), self.and_)

    def and_(self):
        return self.binary(("&&",), self.cmp)

    def cmp(self):
        left = self.sum()
        if self.peek()[0] == "op" and self.peek()[1] in ("==", "!=", "<", "<=", ">", ">="):
            op = self.take()[1]
            return (op, left, self.sum())
        return left

    def sum(self):
        return self.binary(("+", "-"), self.term)

    def term(self):
        return self.binary(("*", "/", "%"), self.unary)

    def unary(self):
        if self.peek() in (("op", "-"), ("op", "!")):
            op = self.take()[1]
            return ("neg" if op == "-" else "!", self.unary())
        return self.primary()

    def primary(self):
        kind, v = self.take()
        if kind == "num":
            return ("num", v)
        if kind == "name":
            if self.peek() == ("op", "("):
                if v not in _FUNCS:
                    raise ExprError(f"{self.text!r}: unknown function {v!r} (known: min, max, cdiv)")
                self.take("(")
                a = self.or_()
                self.take(",")
                b = self.or_()
                self.take(")")
                return (v, a, b)
            return ("name", v)
        if (kind, v) == ("op", "("):
            e = self.or_()
            self.take(")")
            return e
        raise ExprError(f"{self.text!r}: expected a number, a name or '('")


def parse(text):
    """The tree of one expression (a str, or an int for a constant)."""
    if isinstance(text, int) and not isinstance(text, bool):
        return ("num", text)
    p = _Parser(str(text))
    e = p.or_()
    if p.peek()[0] != "end":
        raise ExprError(f"{text!r}: unexpected text after the expression")
    return e


def names(e):
    """The names an expression uses, in order of first use."""
    out = []

    def walk(n):
        if n[0] == "name":
            if n[1] not in out:
                out.append(n[1])
        elif n[0] != "num":
            for c in n[1:]:
                walk(c)
    walk(e)
    return out


def _div(a, b):
    """C's a / b (toward zero); floor division where both are >= 0, so
    that PyTorch's symbolic sizes stay simple."""
    if b == 0:
        raise ExprError("division by zero")
    if isinstance(a, int) and isinstance(b, int) and (a < 0) != (b < 0):
        return -(-a // b) if a < 0 else -(a // -b)
    return a // b


def _mod(a, b):
    if b == 0:
        raise ExprError("division by zero")
    if isinstance(a, int) and isinstance(b, int) and (a < 0 or b < 0):
        return a - b * _div(a, b)
    return a % b


def _cdiv_simple(a, b):
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:
            raise ExprError("division by zero")
        q = _div(a, b)
        return q + (1 if (a - q * b) != 0 and (a < 0) == (b < 0) else 0)
    return (a + b - 1) // b  # symbolic sizes: both non-negative


def _min(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a if a < b else b
    import torch
    return torch.sym_min(a, b)


def _max(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a if a > b else b
    import torch
    return torch.sym_max(a, b)


HELPERS = {"_div": _div, "_mod": _mod, "_cdiv": _cdiv_simple, "_min": _min, "_max": _max}
_BIN = {"+": "+", "-": "-", "*": "*", "==": "==", "!=": "!=", "<": "<", "<=": "<=",
        ">": ">", ">=": ">="}


def to_python(e, name):
    """Python source computing e; name(n) gives the source of a name."""
    op = e[0]
    if op == "num":
        return str(e[1])
    if op == "name":
        return name(e[1])
    if op == "neg":
        return f"(-{to_python(e[1], name)})"
    if op == "!":
        return f"int(not {to_python(e[1], name)})"
    a, b = to_python(e[1], name), to_python(e[2], name)
    if op in _BIN:
        s = f"({a} {_BIN[op]} {b})"
        return f"int{s}" if op in ("==", "!=", "<", "<=", ">", ">=") else s
    if op == "&&":
        return f"int(bool({a}) and bool({b}))"
    if op == "||":
        return f"int(bool({a}) or bool({b}))"
    if op == "/":
        return f"_div({a}, {b})"
    if op == "%":
        return f"_mod({a}, {b})"
    return f"_{op}({a}, {b})"  # min, max, cdiv


def evaluate(e, env):
    """e's value with names from env (a dict); ExprError for an unknown name."""
    def name(n):
        if n not in env:
            raise ExprError(f"unknown name {n!r}")
        return f"_env[{n!r}]"
    src = to_python(e, name)
    return eval(src, dict(HELPERS, _env=env))  # noqa: S307 - our own generated source

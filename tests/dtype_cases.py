"""The cases of the dtype-promotion table (tests/test_dtype_promotion.py): every
binary op, operator and reduction tapegrad has, applied to every operand kind, as
functions of the library module ``L`` (``torch`` or ``tapegrad``), so that one
definition runs on both.  ``tests/data/make_dtype_table.py`` runs them on PyTorch
(default dtype float64, as tapegrad's) and writes the table the test reads."""
import operator

import numpy as np

DTYPES = ("bool", "int32", "int64", "float32", "float64")

# values that raise no error of their own in any op below (no integer ** negative,
# no 0 ** negative, no log of a negative number)
_VECTOR = {"bool": [True, False, True], "int": [3, 1, 2], "float": [0.5, 1.5, 2.5]}
_NUMBER = {"bool": True, "int": 2, "float": 1.5}
_COND = [True, False, True]


def _family(dtype):
    return "bool" if dtype == "bool" else ("int" if "int" in dtype else "float")


TENSORS = ["t:" + d for d in DTYPES] + ["0d:" + d for d in DTYPES]     # 1-d of 3 elements; 0-d
NUMBERS = ["py:bool", "py:int", "py:float", "np:bool_", "np:int64", "np:float64"]     # Python and NumPy numbers
OPERANDS = TENSORS + NUMBERS


def operand(L, spec):
    """A fresh operand of kind ``spec`` (see OPERANDS) made with library ``L``."""
    kind, what = spec.split(":")
    if kind == "py":
        return _NUMBER[what]
    if kind == "np":
        return getattr(np, what)(_NUMBER[_family(what.rstrip("_"))])
    data = _VECTOR[_family(what)] if kind == "t" else _NUMBER[_family(what)]
    return L.tensor(data, dtype=getattr(L, what))


def _inplace(op):
    def f(L, a, b):
        a = op(a, b)        # (``a += b`` returns a itself)
        return a
    return f


# binary: (name, function of (L, a, b), which operands: "any" = any pair with a
# tensor, "tensor_first" = a tensor on the left, "tensors" = two tensors)
BINARY = [
    ("+", lambda L, a, b: a + b, "any"),
    ("-", lambda L, a, b: a - b, "any"),
    ("*", lambda L, a, b: a * b, "any"),
    ("/", lambda L, a, b: a / b, "any"),
    ("**", lambda L, a, b: a ** b, "any"),
    ("&", lambda L, a, b: a & b, "any"),
    ("|", lambda L, a, b: a | b, "any"),
    ("^", lambda L, a, b: a ^ b, "any"),
    ("<", lambda L, a, b: a < b, "any"),
    ("<=", lambda L, a, b: a <= b, "any"),
    (">", lambda L, a, b: a > b, "any"),
    (">=", lambda L, a, b: a >= b, "any"),
    ("==", lambda L, a, b: a == b, "any"),
    ("!=", lambda L, a, b: a != b, "any"),
    ("@", lambda L, a, b: a @ b, "tensors"),
    ("add", lambda L, a, b: L.add(a, b), "tensor_first"),
    ("add_alpha2", lambda L, a, b: L.add(a, b, alpha=2), "tensor_first"),
    ("sub", lambda L, a, b: L.sub(a, b), "tensor_first"),
    ("mul", lambda L, a, b: L.mul(a, b), "tensor_first"),
    ("div", lambda L, a, b: L.div(a, b), "tensor_first"),
    ("pow", lambda L, a, b: L.pow(a, b), "tensor_first"),
    ("maximum", lambda L, a, b: L.maximum(a, b), "tensors"),
    ("minimum", lambda L, a, b: L.minimum(a, b), "tensors"),
    ("where", lambda L, a, b: L.where(L.tensor(_COND), a, b), "any"),
    ("clamp_min_tensor", lambda L, a, b: L.clamp(a, min=b), "tensors"),
    ("clamp_max_tensor", lambda L, a, b: L.clamp(a, max=b), "tensors"),
    ("clamp_min", lambda L, a, b: L.clamp(a, min=b), "tensor_number"),
    ("clamp_max", lambda L, a, b: L.clamp(a, max=b), "tensor_number"),
    ("cat", lambda L, a, b: L.cat([a, b]), "tensors"),
    ("stack", lambda L, a, b: L.stack([a, b]), "tensors"),
    ("+=", _inplace(operator.iadd), "tensor_first"),
    ("-=", _inplace(operator.isub), "tensor_first"),
    ("*=", _inplace(operator.imul), "tensor_first"),
    ("/=", _inplace(operator.itruediv), "tensor_first"),
]

# unary ops and reductions: (name, function of (L, x)), on every tensor operand
UNARY = [
    ("neg", lambda L, x: -x),
    ("abs", lambda L, x: L.abs(x)),
    ("exp", lambda L, x: L.exp(x)),
    ("log", lambda L, x: L.log(x)),
    ("sqrt", lambda L, x: L.sqrt(x)),
    ("sin", lambda L, x: L.sin(x)),
    ("tanh", lambda L, x: L.tanh(x)),
    ("sigmoid", lambda L, x: L.sigmoid(x)),
    ("relu", lambda L, x: L.relu(x)),
    ("sign", lambda L, x: L.sign(x)),
    ("floor", lambda L, x: L.floor(x)),
    ("round", lambda L, x: L.round(x)),
    ("~", lambda L, x: ~x),
    ("clamp(1, 2)", lambda L, x: L.clamp(x, 1, 2)),
    ("clamp(min=1)", lambda L, x: L.clamp(x, min=1)),
    ("clamp(max=0.5)", lambda L, x: L.clamp(x, max=0.5)),
    ("clamp(0.5, 2)", lambda L, x: L.clamp(x, 0.5, 2)),
    ("clamp(min=True)", lambda L, x: L.clamp(x, min=True)),
    ("x ** 2.0", lambda L, x: x ** 2.0),
    ("x ** 2", lambda L, x: x ** 2),
    ("x ** -1", lambda L, x: x ** -1),
    ("x ** 0.5", lambda L, x: x ** 0.5),
    ("2 ** x", lambda L, x: 2 ** x),
    ("2.0 ** x", lambda L, x: 2.0 ** x),
    ("sum", lambda L, x: x.sum()),
    ("sum(0)", lambda L, x: x.sum(0)),
    ("mean", lambda L, x: x.mean()),
    ("prod", lambda L, x: x.prod()),
    ("amax", lambda L, x: x.amax()),
    ("amin", lambda L, x: x.amin()),
    ("max", lambda L, x: x.max()),
    ("min", lambda L, x: x.min()),
    ("max(0)", lambda L, x: tuple(x.max(0))),
    ("min(0)", lambda L, x: tuple(x.min(0))),
    ("var", lambda L, x: x.var()),
    ("std", lambda L, x: x.std()),
    ("logsumexp(0)", lambda L, x: L.logsumexp(x, 0)),
    ("softmax(0)", lambda L, x: L.softmax(x, 0)),
    ("log_softmax(0)", lambda L, x: L.log_softmax(x, 0)),
    ("argmax", lambda L, x: x.argmax()),
    ("argmin", lambda L, x: x.argmin()),
    ("all", lambda L, x: x.all()),
    ("any", lambda L, x: x.any()),
]


def _pairs(which):
    for a in OPERANDS:
        for b in OPERANDS:
            na, nb = a in NUMBERS, b in NUMBERS
            if (na and nb) or (which == "tensor_first" and na) or (which == "tensors" and (na or nb)) \
                    or (which == "tensor_number" and (na or not nb)):
                continue
            yield a, b


# the other dtypes both libraries have, with fewer partners and ops (the promotion
# code does not single them out, so these check the tables it relies on)
RARE_DTYPES = ("float16", "uint8", "int8", "int16")
RARE = ["t:" + d for d in RARE_DTYPES] + ["0d:" + d for d in RARE_DTYPES]
RARE_PARTNERS = RARE + ["t:bool", "t:int32", "t:float32", "0d:float64", "py:int", "py:float"]
RARE_BINARY = ("+", "*", "/", "**", "&", "<", "maximum", "where", "cat")


def _rare_pairs(which):
    for a in RARE:
        for b in RARE_PARTNERS:
            for x, y in ((a, b), (b, a)) if b not in RARE else ((a, b),):
                nx, ny = x in NUMBERS, y in NUMBERS
                if not ((which == "tensor_first" and nx) or (which == "tensors" and (nx or ny))):
                    yield x, y


def cases():
    """Every case as (key, op name, function of L returning the result)."""
    out = []

    def binary(name, f, a, b):
        out.append(("%s %s %s" % (a, name, b), name, lambda L: f(L, operand(L, a), operand(L, b))))
    for name, f, which in BINARY:
        for a, b in _pairs(which):
            binary(name, f, a, b)
        if name in RARE_BINARY:
            for a, b in _rare_pairs(which):
                binary(name, f, a, b)
    for name, f in UNARY:
        for a in TENSORS + RARE:
            out.append(("%s %s" % (name, a), name, lambda L, f=f, a=a: f(L, operand(L, a))))
    return out


def outcome(L, fn):
    """What ``fn(L)`` gives, as the table stores it: {"dtype": ["float32", ...],
    "value": [...]} (one item per output tensor) or {"error": "RuntimeError"}."""
    try:
        r = fn(L)
    except Exception as e:      # noqa: BLE001 (the error's type is the result)
        return {"error": type(e).__name__}
    outs = r if isinstance(r, tuple) else (r,)
    return {"dtype": [str(o.dtype).replace("torch.", "") for o in outs],
            "value": [o.detach().tolist() for o in outs]}

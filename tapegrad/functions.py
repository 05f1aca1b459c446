"""The public operations (``tg.sin``, ``tg.cat``...) and the Tensor methods and
operators that call them.  Each forwards to its op family in ``tapegrad/ops``."""

import builtins as _builtins

import numpy as np

from .ops import compose as _co
from .ops import gathers as _ga
from .ops import inplace as _ip
from .ops import linalg as _la
from .ops import order as _od
from .ops import reduce as _rd
from .ops import shape as _sh
from .ops.elementwise import BINARY_BY_NAME as _B
from .ops.elementwise import UNARY_BY_NAME as _U
from .ops.elementwise import binary as _binary
from .ops.elementwise import unary as _unary
from .core.registry import name_id as _name_id
from .ops._args import numpy_names as _numpy_names
from .ops import elementwise as _el
from .core import promotion as _pr
from .core.dtypes import torch_name as _torch_name
from .autograd import engine as _engine
from .core import tape as _tp
from .core import tensor as _tensor_mod
from .core.tensor import NumberTensor, Tensor
from .core.tensor import _SCALARS, _Unsupported, _bad_array, _is_scalar, _overflow
from .core.tensor import to_operand as _tensor

_NM = {k: _name_id(k) for k in ("SubBackward0", "DivBackward0", "PowBackward0", "ClampBackward1",
                              "ToCopyBackward0", "AddBackward0", "MulBackward0")}


# -- arithmetic -------------------------------------------------------------------
# Python numbers ride in the op's scalar parameter (one tape entry, no constant slot).
_ADD, _SUB, _MUL, _DIV, _POW = (_B[k].record for k in ("add", "sub", "mul", "div", "pow"))
_ADD_S, _MUL_S, _DIV_S, _RSUB_S, _RDIV_S, _POW_S, _RPOW_S = (
    _U[k].record for k in ("add_s", "mul_s", "div_s", "rsub_s", "rdiv_s", "pow_s", "rpow_s"))


_TENSORS = (Tensor, NumberTensor)


def _scalar(v):
    t = type(v)
    return t is float or t is int or (isinstance(v, _SCALARS) and not isinstance(v, np.ndarray))


def _python_number(v):
    """A NumPy scalar operand as the Python number PyTorch reads it as (so that
    np.float64(2) does not raise a float32 tensor's dtype; a NumPy bool reads as a
    float in PyTorch)."""
    if isinstance(v, np.generic):
        return float(v) if isinstance(v, np.bool_) else v.item()
    return v


COMPLEX_ARITH = {}      # name -> the op with a complex number or array operand: filled by complex_tensor.py


def _complex_operand(v):
    return isinstance(v, (_builtins.complex, np.complexfloating)) or (isinstance(v, np.ndarray) and v.dtype.kind == "c")


def _arith(name, symbol, both, tensor_scalar, scalar_tensor):
    """``a <op> b`` for any mix of tensors, arrays and Python numbers: two tensors
    -> the binary op; a number on either side -> the unary op with the number as
    its parameter (``tensor_scalar(t, x)`` / ``scalar_tensor(t, x)``)."""
    def f(input, other):
        a, b = input, other
        try:                # (free unless something raises)
            if type(b) in _TENSORS:
                if type(a) in _TENSORS:
                    return both(a, b)
                if _scalar(a):
                    return scalar_tensor(b, a if type(a) is float or type(a) is int else _python_number(a))
            elif type(a) in _TENSORS and (type(b) is float or _scalar(b)):
                return tensor_scalar(a, b if type(b) is float or type(b) is int else _python_number(b))
        except ValueError as e:
            _value_error(e)
            raise
        if name in COMPLEX_ARITH and (_complex_operand(a) or _complex_operand(b)):
            return COMPLEX_ARITH[name](a, b)
        try:
            ta, tb = _tensor(a, b if isinstance(b, Tensor) else None), _tensor(b, a)
        except _Unsupported:
            raise TypeError("unsupported operand type(s) for %s: '%s' and '%s'"
                            % (symbol, type(a).__name__, type(b).__name__)) from None
        try:
            return both(ta, tb)
        except ValueError as e:
            _value_error(e)
            raise
    f.__name__ = f.__qualname__ = name
    return f


_NEG_INT_POW = "Integers to negative integer powers are not allowed."


def _value_error(e):
    """NumPy's ValueErrors that PyTorch raises as RuntimeErrors."""
    if str(e) == _NEG_INT_POW:          # integer ** negative integer
        raise RuntimeError(_NEG_INT_POW) from None


_SUB_NM = _NM["SubBackward0"]


def _sub_float(t, x):
    return _ADD_S(t, -x, name=_SUB_NM)


def _is_bool(v):
    return isinstance(v, (bool, np.bool_)) or (isinstance(v, Tensor) and v.dtype.kind == "b")


def _sub_number(t, x):
    if x is True or x is False:     # (a Python bool counts as a bool tensor, as in PyTorch)
        raise RuntimeError(_el.SUB_TWO_BOOLS if t.dtype.kind == "b" else _el.SUB_BOOL)
    return _ADD_S(t, -x, name=_SUB_NM)


def _rsub_number(t, x):
    if x is True or x is False:
        raise RuntimeError(_el.SUB_TWO_BOOLS if t.dtype.kind == "b" else _el.SUB_BOOL)
    return _RSUB_S(t, x)


_add = _arith("add", "+", _ADD, _ADD_S, _ADD_S)
_sub = _arith("sub", "-", _SUB, _sub_number, _rsub_number)
mul = _arith("mul", "*", _MUL, _MUL_S, _MUL_S)
_true_div = _arith("div", "/", _DIV, _DIV_S, _RDIV_S)
_pow = _arith("pow", "** or pow()", _POW, _POW_S, _RPOW_S)


def _pow_number(t, x):
    """``t ** x`` for a Python number ``x``, as ``_pow`` gives it (errors included)."""
    try:
        return _POW_S(t, x)
    except ValueError as e:
        _value_error(e)
        raise


def pow(input, exponent):
    """``input ** exponent`` (either may be a number)."""
    return _pow(input, exponent)


def _scaled(a, b, alpha):
    """``alpha * b`` as PyTorch computes it for add/sub: in the dtype of the result
    (``alpha`` is cast to it), not promoted by ``alpha`` itself."""
    if type(alpha) is float and type(b) is Tensor and b.dtype.kind == "f":     # the common case
        return mul(b, alpha)
    ad = a._data if isinstance(a, Tensor) else a
    bd = b._data if isinstance(b, Tensor) else b
    dt = _pr.result_type(ad, bd)
    if isinstance(alpha, (bool, np.bool_)):
        if dt.kind != "b":
            raise RuntimeError("Boolean alpha only supported for Boolean results.")
    elif dt.kind != "f" and not isinstance(alpha, (int, np.integer)):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    if isinstance(b, Tensor) and b.dtype.kind == "f":
        return mul(b, alpha)
    if dt.kind == "b":          # a bool result: alpha * b is b and alpha
        v = np.logical_and(bd, bool(alpha))
    else:
        v = np.asarray(bd).astype(dt) * dt.type(alpha)
    v = np.asarray(v, dt)
    return v.item() if not isinstance(b, Tensor) else Tensor._wrap(v)


def add(input, other, *, alpha=1, out=None):
    if out is not None:
        raise TypeError("out= is not supported by tapegrad")
    return _add(input, other if alpha == 1 and type(alpha) is not bool else _scaled(input, other, alpha))


def sub(input, other, *, alpha=1, out=None):
    if out is not None:
        raise TypeError("out= is not supported by tapegrad")
    if alpha == 1 and type(alpha) is not bool:
        return _sub(input, other)
    if _is_bool(input) or _is_bool(other):
        raise RuntimeError(_el.SUB_TWO_BOOLS if _is_bool(input) and _is_bool(other) else _el.SUB_BOOL)
    return _sub(input, _scaled(input, other, alpha))


def div(input, other, *, rounding_mode=None, out=None):
    """``input / other``; ``rounding_mode="trunc"`` rounds the quotient toward zero,
    ``"floor"`` toward -inf (integer inputs then stay integer); those have a zero
    gradient, as in PyTorch."""
    if out is not None:
        raise TypeError("out= is not supported by tapegrad")
    if rounding_mode is None:
        return _true_div(input, other)
    if rounding_mode not in ("trunc", "floor"):
        raise RuntimeError("div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '%s'"
                           % rounding_mode)
    try:
        a, b = _tensor(input, other if isinstance(other, Tensor) else None), _tensor(other, input)
    except _Unsupported:
        raise TypeError("div(): expected a Tensor or a number, got %s and %s"
                        % (type(input).__name__, type(other).__name__)) from None
    ad, bd = a._data, b._data
    if ad.dtype.kind in "biu" and bd.dtype.kind in "biu":
        return _int_div(ad, bd, rounding_mode, input, other)
    return _binary(_B["div_" + rounding_mode], a, b)


def floor_divide(input, other, *, out=None):
    """``input // other``: ``div(rounding_mode="floor")``.  PyTorch defines no
    derivative for it (its backward raises), so the result does not require grad."""
    r = div(input, other, rounding_mode="floor", out=out)
    return r.detach() if r._requires_grad else r


def _int_div(ad, bd, mode, input, other):
    if ad.dtype.kind == "b" and bd.dtype.kind == "b":
        raise NotImplementedError('"div_%s_cpu" not implemented for \'Bool\'' % mode)
    # a Python number takes the tensor's integer dtype; two tensors promote
    if not isinstance(other, Tensor) and ad.dtype.kind != "b":
        dt = ad.dtype
    elif not isinstance(input, Tensor) and bd.dtype.kind != "b":
        dt = bd.dtype
    else:
        dt = _pr.result_type(ad, bd)
    if (bd == 0).any():
        raise RuntimeError("ZeroDivisionError")
    q = np.floor_divide(ad, bd)
    if mode == "trunc":       # floor + 1 where the exact quotient is negative and not whole
        q = q + ((ad - q * bd != 0) & ((ad < 0) != (bd < 0)))
    return Tensor._wrap(np.asarray(q, dt))


def neg(input):
    return _unary(_U["neg"], input)


def maximum(input, other):
    return _binary(_B["maximum"], _tensor(input), _tensor(other, input))


def minimum(input, other):
    return _binary(_B["minimum"], _tensor(input), _tensor(other, input))


def _public_binary(op, name, method=False):
    """``tg.<name>(input, other)`` (or the method) of a binary row: two tensors, as
    PyTorch's (``Binary(..., public=...)`` in ops/elementwise.py makes them for a row)."""
    def f(input, other):
        for pos, v, arg in ((1, input, "input"), (2, other, "other")):
            if not isinstance(v, Tensor):
                raise TypeError("%s(): argument '%s' (position %d) must be Tensor, not %s"
                                % (name, arg, pos - method, type(v).__name__))
        return op.record(input, other)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = "Elementwise %s (reverse: ``%s``, ``%s``)." % (op.name, op.rule_a, op.rule_b)
    return f


atan2 = _public_binary(_B["atan2"], "atan2")
arctan2 = _public_binary(_B["atan2"], "arctan2")


_WHERE_FORMS = ("where() received an invalid combination of arguments - got (%s), but expected one of:\n"
                " * (Tensor condition)\n * (Tensor condition, Tensor input, Tensor other, *, Tensor out = None)\n"
                " * (Tensor condition, Number self, Tensor other)\n * (Tensor condition, Tensor input, Number other)\n"
                " * (Tensor condition, Number self, Number other)\n")


def where(condition, input=None, other=None, *, out=None):
    """``input`` where ``condition`` holds, else ``other``; ``where(condition)`` alone
    is ``nonzero(condition, as_tuple=True)``."""
    if out is not None:
        raise TypeError("out= is not supported by tapegrad")
    x, y = input, other
    if x is None and y is None:
        return nonzero(condition, as_tuple=True)
    if x is None or y is None:
        got = [type(condition).__name__, type(x).__name__ if y is None else "other=" + type(y).__name__]
        raise TypeError(_WHERE_FORMS % ", ".join(got))
    c = _tensor(condition)
    if c.dtype != np.bool_:
        raise RuntimeError("where expected condition to be a boolean tensor, but got a tensor with dtype %s"
                           % _torch_name(c.dtype))
    like = x if isinstance(x, Tensor) else (y if isinstance(y, Tensor) else None)
    return _binary(_B["where"], _tensor(x, like), _tensor(y, like), c)


def _where_m(self, condition, y):
    return where(condition, self, y)


def is_floating_point(input):
    """Whether ``input``'s dtype is a floating-point one."""
    _need_tensor("is_floating_point", input, 1, "input")
    return input.dtype.kind == "f"


def get_default_dtype():
    """The dtype of a float made without one: float64 in tapegrad (float32 in PyTorch)."""
    return _DEFAULT_FLOAT


_DEFAULT_FLOAT = np.dtype(np.float64)


def nonzero(input, *, out=None, as_tuple=False):
    """The indices of the nonzero elements: an int64 tensor of one row per element
    (``as_tuple=False``), or one 1-D tensor per dimension (``as_tuple=True``)."""
    if out is not None:
        raise TypeError("out= is not supported by tapegrad")
    _need_tensor("nonzero", input, 1, "input")
    d = input._data
    if as_tuple:
        return tuple(Tensor._wrap(np.asarray(i, np.int64)) for i in np.nonzero(d.reshape(1) if d.ndim == 0 else d))
    return Tensor._wrap(np.asarray(np.argwhere(d), np.int64))


def _need_tensor(name, v, pos, arg):
    if not isinstance(v, Tensor):
        raise TypeError("%s(): argument '%s' (position %d) must be Tensor, not %s"
                        % (name, arg, pos, type(v).__name__))


# -- predicates (bool results, off the tape) -------------------------------------------
def _predicate(name, ufunc, ints):
    """``tg.<name>(input)``: a bool tensor; ``ints`` its value on integer and bool
    tensors (which hold no NaN or infinity).  A replay recomputes it from its input."""
    def f(input):
        _need_tensor(name, input, 1, "input")
        d = input._data
        if d.dtype.kind != "f":         # (its value depends on the shape only)
            return Tensor._const(np.full(d.shape, ints))
        out = Tensor._wrap(np.asarray(ufunc(d), np.bool_))
        if _tp.recording[0]:
            rec = _tp.state().rec
            if rec is not None:
                rec.compared(ufunc, input, None, out)
        return out
    f.__name__ = f.__qualname__ = name
    f.__doc__ = "Elementwise: whether each element %s (a bool tensor)." % {
        "isnan": "is NaN", "isinf": "is infinite", "isfinite": "is finite", "isposinf": "is +inf",
        "isneginf": "is -inf"}[name]
    return f


isnan = _predicate("isnan", np.isnan, False)
isinf = _predicate("isinf", np.isinf, False)
isfinite = _predicate("isfinite", np.isfinite, True)
_isposinf = _predicate("isposinf", np.isposinf, False)
_isneginf = _predicate("isneginf", np.isneginf, False)


def isposinf(input, *, out=None):
    if out is not None:
        raise TypeError("out= is not supported by tapegrad")
    return _isposinf(input)


def isneginf(input, *, out=None):
    if out is not None:
        raise TypeError("out= is not supported by tapegrad")
    return _isneginf(input)


def _close_args(name, input, other, rtol, atol):
    _need_tensor(name, input, 1, "input")
    _need_tensor(name, other, 2, "other")
    if input.dtype != other.dtype:
        raise RuntimeError("%s did not match %s" % (_torch_name(input.dtype), _torch_name(other.dtype)))
    if rtol < 0:
        raise RuntimeError("rtol must be greater than or equal to zero, but got %s" % _num(rtol))
    if atol < 0:
        raise RuntimeError("atol must be greater than or equal to zero, but got %s" % _num(atol))


def _num(v):
    """A number as PyTorch's messages print it (``-1``, ``1.3``, ``-inf``)."""
    f = float(v)
    return "%d" % f if f == f and _builtins.abs(f) != float("inf") and f == _builtins.int(f) else "%g" % f


def _isclose(a, b, rtol, atol, equal_nan):
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise RuntimeError(_broadcast_msg(a.shape, b.shape)) from None
    if a.dtype.kind == "b":
        return np.asarray(a == b)
    if a.dtype.kind in "iu":        # (exactly equal, or close in float64)
        fa, fb = a.astype(np.float64), b.astype(np.float64)
        return np.asarray((a == b) | (np.abs(fa - fb) <= atol + rtol * np.abs(fb)))
    return np.asarray(np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))


def _broadcast_msg(a, b):
    n = _builtins.max(len(a), len(b))
    for i in range(1, n + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and x != 1 and y != 1:
            return ("The size of tensor a (%d) must match the size of tensor b (%d) at non-singleton dimension %d"
                    % (x, y, n - i))
    return "shapes do not broadcast"


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether each element of ``input`` is within ``atol + rtol * |other|`` of
    ``other``'s (both of one dtype, broadcast; NaNs equal when ``equal_nan``)."""
    _close_args("isclose", input, other, rtol, atol)
    return Tensor._wrap(_isclose(input._data, other._data, rtol, atol, equal_nan))


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether ``isclose`` holds everywhere (a Python bool)."""
    _close_args("allclose", input, other, rtol, atol)
    # (a recording's guards are the values compared: a replay decides again)
    a, b = _tp.checked_values(input), _tp.checked_values(other)
    return _builtins.bool(_isclose(a, b, rtol, atol, equal_nan).all())


def equal(input, other):
    """Whether the two tensors have the same shape and elements (a Python bool)."""
    _need_tensor("equal", input, 1, "input")
    _need_tensor("equal", other, 2, "other")
    a, b = _tp.checked_values(input), _tp.checked_values(other)      # (guards of a recording, as allclose's)
    return a.shape == b.shape and _builtins.bool((a == b).all())


def clamp(input, min=None, max=None):
    x = input
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return _clamp_by_tensors(x, None if min is None else _tensor(min, x), None if max is None else _tensor(max, x))
    if x.dtype.kind != "f":
        return _clamp_integral(x, min, max)
    lo = -np.inf if min is None else float(min)
    hi = np.inf if max is None else float(max)
    return _unary(_U["clamp"], x, lo, hi)


def _clamp_by_tensors(x, lo, hi):
    """PyTorch's min(max(x, lo), hi) (hi where lo > hi; NaN where any of them is NaN), the
    gradient by its masks: x's where lo <= x <= hi, lo's where x < lo < hi, hi's where
    x > hi or hi < lo (also where the value is NaN).  Where x < lo == hi, PyTorch's masks
    give nobody the gradient; here lo gets it, as with lo alone.  Selected by ``where`` on
    tensor comparisons, so that a replay compares its own inputs."""
    floats = [t for t in (x, lo, hi) if t is not None and t.dtype.kind == "f"]
    # NaN of a floating operand's dtype, with no gradient (a float literal would promote an
    # integer operand to the default dtype, not PyTorch's result type); integers have none
    nan = floats[0] * 0.0 + _builtins.float("nan") if floats else None
    if hi is None:
        return where(x < lo, lo, x) if nan is None else where(x >= lo, x, where(x < lo, lo, nan))
    if lo is None:
        return where(x > hi, hi, x) if nan is None else where(x <= hi, x, where(x > hi, hi, nan))
    if nan is None:
        return where((x >= lo) & (x <= hi), x, where((x > hi) | (hi < lo), hi, lo))
    some_nan = (x != x) | (lo != lo) | (hi != hi)
    out = where((x >= lo) & (x <= hi), x, where((x > hi) | (hi < lo), hi,
                                                 where((x < lo) & ~some_nan, lo, nan)))
    # NaN also where a mask chose an operand (whose gradient stays: PyTorch's masks)
    return where(some_nan, out + _builtins.float("nan"), out)


def _clamp_integral(x, lo, hi):
    """clamp of an integer or bool tensor by numbers: in the dtype PyTorch gives
    the tensor with the bounds (int bounds keep an int tensor's dtype, float
    bounds make it the default float)."""
    d = x._data
    dt = _pr.result_type(d, *[v for v in (lo, hi) if v is not None])
    if dt.kind == "b":
        which = "clamp" if lo is not None and hi is not None else ("clamp_min" if lo is not None else "clamp_max")
        raise NotImplementedError("\"%s_scalar_cpu\" not implemented for 'Bool'" % which)
    out = d.astype(dt)
    try:
        if lo is not None:
            out = np.maximum(out, lo)
        if hi is not None:
            out = np.minimum(out, hi)
    except OverflowError:
        raise _overflow(dt) from None
    return Tensor._wrap(np.asarray(out, dt))


def _u(name):
    op = _U[name]
    f = op.record
    f.__doc__ = "Elementwise %s (reverse: ``%s``)." % (name, op.rule)
    return f


abs = _u("abs")
exp = _u("exp")
log = _u("log")
log1p = _u("log1p")
expm1 = _u("expm1")
sqrt = _u("sqrt")
sin = _u("sin")
cos = _u("cos")
tan = _u("tan")
tanh = _u("tanh")
sigmoid = _u("sigmoid")
relu = _u("relu")
sign = _u("sign")
floor = _u("floor")
round = _u("round")
asin = _u("asin")
acos = _u("acos")
atan = _u("atan")
sinh = _u("sinh")
cosh = _u("cosh")
asinh = _u("asinh")
acosh = _u("acosh")
atanh = _u("atanh")
log2 = _u("log2")
log10 = _u("log10")
exp2 = _u("exp2")
reciprocal = _u("reciprocal")
rsqrt = _u("rsqrt")
ceil = _u("ceil")
trunc = _u("trunc")
frac = _u("frac")
# NumPy's spellings, PyTorch's aliases
arcsin, arccos, arctan, arcsinh, arccosh, arctanh = asin, acos, atan, asinh, acosh, atanh


def square(input):
    """``input ** 2``: PyTorch's square is pow(input, 2) (grad_fn PowBackward0; integer
    dtypes kept, bool to int64), and so is this composition."""
    if not isinstance(input, Tensor):
        raise TypeError("square(): argument 'input' (position 1) must be Tensor, not %s" % type(input).__name__)
    return pow(input, 2)


# -- the second table's binary ops and their compositions ------------------------
def _either_number(name, input, other, number_first=True, number_second=True):
    """The two operands as tensors, a Python number taking the tensor's dtype (PyTorch's
    Scalar overloads); PyTorch's TypeError for a combination it has no overload for."""
    ok_a = isinstance(input, Tensor) or (number_first and _scalar(input) and isinstance(other, Tensor))
    ok_b = isinstance(other, Tensor) or (number_second and _scalar(other) and isinstance(input, Tensor))
    if not (ok_a and ok_b):
        raise TypeError("%s() received an invalid combination of arguments - got (%s, %s)"
                        % (name, type(input).__name__, type(other).__name__))
    like = input if isinstance(input, Tensor) else other
    a = input if isinstance(input, Tensor) else _tensor(_python_number(input), like)
    b = other if isinstance(other, Tensor) else _tensor(_python_number(other), like)
    return a, b


def _integral_result(name, a, b, f):
    """``f`` of two integer (or bool) tensors: no gradient, PyTorch's integer rules."""
    ad, bd = a._data, b._data
    if ad.dtype.kind == "b" and bd.dtype.kind == "b":
        raise NotImplementedError("\"%s_cpu\" not implemented for 'Bool'" % name)
    if (bd == 0).any():
        raise RuntimeError("ZeroDivisionError")
    dt = _pr.result_type(ad, bd)
    return Tensor._wrap(np.asarray(f(ad.astype(dt), bd.astype(dt)), dt))


def hypot(input, other):
    """``sqrt(input**2 + other**2)`` without overflow (floats only, as in PyTorch)."""
    for pos, v, arg in ((1, input, "input"), (2, other, "other")):
        if not isinstance(v, Tensor):
            raise TypeError("hypot(): argument '%s' (position %d) must be Tensor, not %s"
                            % (arg, pos, type(v).__name__))
    return _B["hypot"].record(input, other)


def remainder(input, other):
    """Python's ``%``: the remainder has the divisor's sign (``fmod``: the dividend's).
    Either operand may be a number; integers stay integers."""
    a, b = _either_number("remainder", input, other)
    if a.dtype.kind in "biu" and b.dtype.kind in "biu":
        return _integral_result("remainder", a, b, np.remainder)
    return _B["remainder"].record(a, b)


def fmod(input, other):
    """C's ``fmod``: the remainder has the dividend's sign.  ``other`` may be a number."""
    a, b = _either_number("fmod", input, other, number_first=False)
    if a.dtype.kind in "biu" and b.dtype.kind in "biu":
        return _integral_result("fmod", a, b, np.fmod)
    return _B["fmod"].record(a, b)


def copysign(input, other):
    """``|input|`` with the sign of ``other`` (a tensor or a number); the gradient of
    ``other`` is zero."""
    a, b = _either_number("copysign", input, other, number_first=False)
    return _B["copysign"].record(a, b)


def xlogy(input, other):
    """``input * log(other)``, 0 where ``input`` is 0 (unless ``other`` is nan).
    Either operand may be a number."""
    a, b = _either_number("xlogy", input, other)
    return _B["xlogy"].record(a, b)


def logit(input, eps=None):
    """``log(p / (1 - p))``; with ``eps``, ``p`` is first clamped to ``[eps, 1 - eps]``."""
    if not isinstance(input, Tensor):
        raise TypeError("logit(): argument 'input' (position 1) must be Tensor, not %s" % type(input).__name__)
    return _U["logit"].record(input, -1.0 if eps is None else float(eps))


sinc = _u("sinc")
erf = _u("erf")
erfc = _u("erfc")
erfinv = _u("erfinv")
lgamma = _u("lgamma")
digamma = _u("digamma")
i0 = _u("i0")


def _incomplete_gamma(name, op, torch_name):
    def f(input, other, *, out=None):
        for pos, v, arg in ((1, input, "input"), (2, other, "other")):
            if not isinstance(v, Tensor):
                raise TypeError("%s(): argument '%s' (position %d) must be Tensor, not %s"
                                % (name, arg, pos, type(v).__name__))
        _ga._no_out(out)
        if input._requires_grad and _tp.state().grad:
            # (PyTorch's derivative in ``input`` is not implemented; it raises in the backward)
            raise NotImplementedError("the derivative for '%s: input' is not implemented." % torch_name)
        return _B[op].record(input, other)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = ("The regularized %s incomplete gamma function of ``input`` (a) at ``other`` (x), SciPy's %s; "
                 "differentiable in ``other`` only, as in PyTorch." % ("lower" if op == "gammainc" else "upper", op))
    return f


igamma = _incomplete_gamma("igamma", "gammainc", "igamma")
igammac = _incomplete_gamma("igammac", "gammaincc", "igammac")


def polygamma(n, input):
    """The ``n``-th derivative of ``digamma`` (``n`` a non-negative integer)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError("polygamma(): argument 'n' (position 1) must be int, not %s" % type(n).__name__)
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    if not isinstance(input, Tensor):
        raise TypeError("polygamma(): argument 'input' (position 2) must be Tensor, not %s" % type(input).__name__)
    return _U["polygamma"].record(input, float(n))


def _float_tensor(name, v, pos, arg):
    if not isinstance(v, Tensor):
        raise TypeError("%s(): argument '%s' (position %d) must be Tensor, not %s"
                        % (name, arg, pos, type(v).__name__))
    return v if v.dtype.kind == "f" else v.to(_pr.DEFAULT)


def _log_add(a, b, exp_, scale):
    """PyTorch's ``max + log1p(exp_(-|a - b|)) * scale`` (``exp_`` exp or exp2; ``scale`` None
    for 1), with the side each tensor takes chosen by ``where`` rather than by ``maximum``
    and ``abs``: their kinks at a tie cancel in the value, but their second derivatives are
    zero there, which lost the curvature.  Equal infinities are kept."""
    first = a >= b
    tail = log1p(exp_(where(first, b - a, a - b)))
    out = where(first, a, b) + (tail if scale is None else tail * scale)
    return where((a == b) & (abs(a) == np.inf), a, out)


def logaddexp(input, other):
    """``log(exp(input) + exp(other))`` without overflow."""
    a, b = _float_tensor("logaddexp", input, 1, "input"), _float_tensor("logaddexp", other, 2, "other")
    return _log_add(a, b, exp, None)


def logaddexp2(input, other):
    """``log2(2**input + 2**other)`` without overflow."""
    a, b = _float_tensor("logaddexp2", input, 1, "input"), _float_tensor("logaddexp2", other, 2, "other")
    return _log_add(a, b, exp2, 1.0 / 0.6931471805599453)


def lerp(input, end, weight):
    """``input + weight * (end - input)``, PyTorch's two-sided formula (exact at
    ``weight`` 0 and 1); ``weight`` a number or a tensor."""
    if not isinstance(input, Tensor) or not isinstance(end, Tensor):
        raise TypeError("lerp(): argument 'input' and 'end' must be Tensors")
    if isinstance(weight, Tensor):
        return where(abs(weight) < 0.5, input + weight * (end - input), end - (end - input) * (1 - weight))
    if not _scalar(weight):
        raise TypeError("lerp(): argument 'weight' must be Tensor or Number, not %s" % type(weight).__name__)
    w = _python_number(weight)
    if _builtins.abs(w) < 0.5:
        return input + w * (end - input)
    return end - (end - input) * (1 - w)


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """nan, +inf and -inf replaced (by default with 0 and the dtype's largest and
    smallest finite values); the gradient passes where ``input`` is finite."""
    if not isinstance(input, Tensor):
        raise TypeError("nan_to_num(): argument 'input' (position 1) must be Tensor, not %s" % type(input).__name__)
    if input.dtype.kind != "f":
        return clone(input)
    fi = np.finfo(input.dtype)
    hi = float(fi.max) if posinf is None else posinf
    lo = float(fi.min) if neginf is None else neginf
    out = where(input == np.inf, hi, where(input == -np.inf, lo, input))
    return where(input != input, nan, out)


def clone(input):
    return _sh._record(_sh.RESHAPE, input, input._data.copy(), "CloneBackward0")


to_dtype = _sh.to_dtype


# -- reductions and shape ops (re-exported) ----------------------------------------
sum = _rd.sum
mean = _rd.mean
prod = _rd.prod
var = _rd.var
std = _rd.std
amax = _rd.amax
amin = _rd.amin
logsumexp = _rd.logsumexp
globals().update(_rd.PUBLIC)        # the reductions ops/reduce.py marks @public (nansum, nanmean)
softmax = _rd.softmax
log_softmax = _rd.log_softmax
cumsum = _rd.cumsum
cumprod = _rd.cumprod
logcumsumexp = _rd.logcumsumexp
def reshape(input, shape):
    return _sh.reshape(input, shape)


def transpose(input, dim0, dim1):
    return _sh.transpose(input, dim0, dim1)


flatten = _sh.flatten
unflatten = _sh.unflatten
squeeze = _sh.squeeze
unsqueeze = _sh.unsqueeze
def permute(input, *dims, **kw):
    if kw:
        dims = _keyword_only("permute", "dims", dims, kw)
    return _sh.permute(input, *dims)
t = _sh.t
broadcast_to = _sh.broadcast_to
diagonal = _sh.diagonal
cat = _sh.cat
concat = _sh.cat
stack = _sh.stack
split = _sh.split
chunk = _sh.chunk
unbind = _sh.unbind
tensor_split = _sh.tensor_split
narrow = _sh.narrow
select = _sh.select
tile = _sh.tile
roll = _sh.roll
flip = _sh.flip
fliplr = _sh.fliplr
flipud = _sh.flipud
rot90 = _sh.rot90
diag = _sh.diag
diag_embed = _sh.diag_embed
movedim = _sh.movedim
moveaxis = _sh.movedim
swapaxes = _sh.swapaxes
swapdims = _sh.swapdims
atleast_1d = _sh.atleast_1d
atleast_2d = _sh.atleast_2d
atleast_3d = _sh.atleast_3d
vstack = _sh.vstack
hstack = _sh.hstack
dstack = _sh.dstack
column_stack = _sh.column_stack
meshgrid = _sh.meshgrid
cartesian_prod = _sh.cartesian_prod
block_diag = _sh.block_diag
trace = _rd.trace
tril = _la.tril
triu = _la.triu
outer = _la.outer
ger = _la.outer
inner = _la.inner
kron = _la.kron
matmul = _la.matmul
mm = _la.mm
mv = _la.mv
dot = _la.dot
bmm = _la.bmm
einsum = _co.einsum
tensordot = _co.tensordot
cross = _co.cross
repeat_interleave = _co.repeat_interleave


# -- gathers and scatters (ops/gathers.py) ---------------------------------------------
gather = _ga.gather
take_along_dim = _ga.take_along_dim
take = _ga.take
put = _ga.put
index_select = _ga.index_select
masked_fill = _ga.masked_fill
masked_select = _ga.masked_select
masked_scatter = _ga.masked_scatter
scatter = _ga.scatter
scatter_add = _ga.scatter_add
index_add = _ga.index_add
index_copy = _ga.index_copy
index_fill = _ga.index_fill
scatter_reduce = _ga.scatter_reduce

# -- sorting, selection and scans (ops/order.py) -----------------------------------------
sort = _od.sort
argsort = _od.argsort
msort = _od.msort
topk = _od.topk
kthvalue = _od.kthvalue
median = _od.median
nanmedian = _od.nanmedian
quantile = _od.quantile
nanquantile = _od.nanquantile
cummax = _od.cummax
cummin = _od.cummin
diff = _od.diff
searchsorted = _od.searchsorted
unique = _od.unique


# (the methods whose parameters PyTorch names differently from its functions')
def _take_m(self, indices):
    return take(self, indices)


def _index_copy_m(self, dim, index, tensor2):
    return index_copy(self, dim, index, tensor2)


def _index_copy__m(self, dim, index, tensor):
    return index_copy(self, dim, index, tensor)


def _masked_scatter_m(self, mask, tensor):
    return masked_scatter(self, mask, tensor)

def _extreme(x, dim, keepdim, largest):
    """max/min: of another tensor (elementwise), of everything (ties split the
    gradient), or along ``dim`` (values and indices)."""
    what = "max" if largest else "min"
    if isinstance(dim, Tensor):
        return (maximum if largest else minimum)(x, dim)
    if dim is None:
        _rd._check_nonempty(x, what, None)
        out = x._data.max() if largest else x._data.min()
        return _rd._record(_rd.EXTREMUM, x, out, tuple(range(x.ndim)), what.capitalize() + "Backward1")
    return _rd.max_dim(x, dim, keepdim, largest)


def max(input, dim=None, keepdim=False, **kw):
    if kw:
        dim, keepdim = _numpy_names("max", kw, dim, keepdim)
    return _extreme(input, dim, keepdim, True)


def min(input, dim=None, keepdim=False, **kw):
    if kw:
        dim, keepdim = _numpy_names("min", kw, dim, keepdim)
    return _extreme(input, dim, keepdim, False)


def _arg_extreme(x, dim, keepdim, what):
    d = x._data
    if d.dtype.kind == "b":
        raise RuntimeError("%s(): does not support bool input" % what)
    try:
        if dim is None:
            return Tensor._wrap(np.asarray(getattr(d, what)(), np.int64))
        ax = _rd.normalize_dims(dim, x.ndim)
        if not ax:          # a 0-d tensor
            return Tensor._wrap(np.zeros((), np.int64))
        return Tensor._wrap(np.asarray(getattr(d, what)(axis=ax[0], keepdims=keepdim), np.int64))
    except ValueError:      # NumPy's "attempt to get argmax of an empty sequence"
        if d.size == 0:
            if dim is None:
                raise IndexError("%s(): Expected reduction dim to be specified for input.numel() == 0." % what) \
                    from None
            raise IndexError("%s(): Expected reduction dim %d to have non-zero size." % (what, ax[0])) from None
        raise


def argmax(input, dim=None, keepdim=False, **kw):
    if kw:
        dim, keepdim = _numpy_names("argmax", kw, dim, keepdim)
    return _arg_extreme(input, dim, keepdim, "argmax")


def argmin(input, dim=None, keepdim=False, **kw):
    if kw:
        dim, keepdim = _numpy_names("argmin", kw, dim, keepdim)
    return _arg_extreme(input, dim, keepdim, "argmin")


def _truth(name, reduce):
    def f(input, dim=None, keepdim=False, **kw):
        if kw:
            dim, keepdim = _numpy_names(name, kw, dim, keepdim)
        d = input._data
        axes = None if dim is None else _rd.normalize_dims(dim, d.ndim)
        return _all_any(reduce(d, axis=axes, keepdims=keepdim), input)
    f.__name__ = f.__qualname__ = name
    return f


all = _truth("all", np.all)
any = _truth("any", np.any)


# -- Tensor methods and operators -----------------------------------------------------
def _cmp(ufunc):
    def f(self, other):
        d = self._data
        if isinstance(other, Tensor):
            o = other._data
            if o.dtype != d.dtype:      # compared in PyTorch's common dtype (float32 with 0-d float64: float32)
                d, o = _el._promote(d, o)
        else:
            o = other
            if type(o) is int and d.dtype.kind in "iu":
                o = _el.wrap_int(o, d.dtype)
        out = Tensor._wrap(np.asarray(ufunc(d, o)))
        if _tp.recording[0]:
            rec = _tp.state().rec
            if rec is not None:
                if _is_scalar(o):       # (replayed as an array of the dtype it was compared in)
                    o = np.asarray(o, _pr.with_number(self.dtype, o))
                rec.compared(ufunc, self, other if isinstance(other, Tensor) else o, out)
        return out
    return f


def _bitwise(ufunc, name):
    """``&``, ``|``, ``^`` on boolean and integer tensors (never differentiable)."""
    def f(self, other):
        d = self._data
        o = other._data if isinstance(other, Tensor) else other
        if _is_scalar(o):
            dt = _pr.with_number(d.dtype, o)
            o = np.asarray(o)       # (an int beyond the dtype wraps, as in PyTorch)
        else:
            o = np.asarray(o)
            dt = _pr.result_type(d, o)
        if dt.kind not in "biu":
            raise NotImplementedError('"%s_cpu" not implemented for \'%s\'' % (name, _torch_name(dt)))
        if d.dtype != dt:
            d = d.astype(dt)
        if o.dtype != dt:
            o = o.astype(dt)
        out = Tensor._wrap(np.asarray(ufunc(d, o)))
        if _tp.recording[0]:
            rec = _tp.state().rec
            if rec is not None:
                rec.compared(ufunc, self, other if isinstance(other, Tensor) else o, out)
        return out
    return f


def _invert(self):
    if self.dtype.kind not in "biu":
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
    out = Tensor._wrap(np.asarray(np.invert(self._data)))
    if _tp.recording[0]:
        rec = _tp.state().rec
        if rec is not None:
            rec.compared(np.invert, self, None, out)
    return out


def _all_any(out, x):
    # (PyTorch keeps uint8 for uint8 input, an old convention)
    return Tensor._wrap(np.asarray(out, np.uint8 if x.dtype == np.uint8 else np.bool_))


def _inplace(fn):
    def f(self, *args, **kw):
        return _ip.apply(self, lambda: fn(self, *args, **kw))
    f.__wrapped__ = fn          # (its signature is fn's)
    return f


def _zero_(self):
    return _fill_(self, 0)


def _fill_(self, value):
    _sh.setitem(self, Ellipsis, value, view_op=False)
    return self


def _copy_(self, src, non_blocking=False):
    _sh.setitem(self, Ellipsis, src, view_op=False)
    return self


def _number_on_left(by_number, general):
    """``number <op> x``: a Python float or int goes to the op's number recorder
    ``by_number`` (what ``general`` would call, with fewer calls), anything else to
    ``general(other, x)``."""
    def reflected(self, other):
        t = type(other)
        if t is float or t is int:
            return by_number(self, other)
        return general(other, self)
    return reflected


_rsub = _number_on_left(_RSUB_S, sub)
_radd = _number_on_left(_ADD_S, _add)
_rmul = _number_on_left(_MUL_S, mul)


def _rdiv(self, other):
    return _true_div(other, self)


def _rpow(self, other):
    return _pow(other, self)


def _rmatmul(self, other):
    return matmul(_tensor(other), self)


def _view(self, *shape, dtype=None):
    if dtype is None and len(shape) == 1 and _is_dtype(shape[0]):
        dtype = shape[0]
    elif dtype is None:
        if not self._data.flags.c_contiguous and _copy_needed(self._data, shape):
            raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one "
                               "dimension spans across two contiguous subspaces). Use .reshape(...) instead.")
        return _sh.reshape(self, shape)
    elif shape:
        raise TypeError("view() received an invalid combination of arguments: a shape and dtype=")
    return _view_dtype(self, np.dtype(dtype))


def _copy_needed(d, shape):
    """Whether ``shape`` (of ``d``'s size) fits ``d`` only as a copy: then ``view``
    refuses, as PyTorch's (a size that does not fit at all is ``reshape``'s error)."""
    try:
        shape = _sh._shape_arg(shape)
        fits = d.reshape(shape)
    except (ValueError, TypeError):
        return False
    return d.size > 0 and not np.may_share_memory(fits, d)     # (a copy is new memory; an empty one is any view)


def _is_dtype(v):
    return isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic))


def _view_dtype(self, dt):
    """The same bytes read as ``dt`` (PyTorch's ``view(dtype)``): shares storage and
    version with ``self`` and, as in PyTorch, does not require grad."""
    d = self._data
    old = d.dtype
    if dt.itemsize != old.itemsize:
        what = "view %s as %s (different element sizes)" % (_torch_name(old), _torch_name(dt))
        if d.ndim == 0:
            raise RuntimeError("self.dim() cannot be 0 to " + what)
        if d.shape[-1] != 1 and d.strides[-1] != old.itemsize:
            raise RuntimeError("self.stride(-1) must be 1 to %s, but got %d" % (what, d.strides[-1] // old.itemsize))
        if dt.itemsize > old.itemsize and d.shape[-1] % (dt.itemsize // old.itemsize):
            raise RuntimeError("self.size(-1) must be divisible by %d to %s, but got %d"
                               % (dt.itemsize // old.itemsize, what, d.shape[-1]))
    if dt.kind not in "biuf":
        raise TypeError("tapegrad does not support %s tensors" % dt.name)
    t = Tensor._wrap(d.view(dt))
    t._ver = self._ver          # shares storage, so shares the version counter
    return t


def _split_m(self, split_size, dim=0):
    return _sh.split(self, split_size, dim)


def _narrow_m(self, dimension, start, length):
    return _sh.narrow(self, dimension, start, length)


def _roll_m(self, shifts, dims=None):
    return _sh.roll(self, shifts, dims)


def _rot90_m(self, k=1, dims=(0, 1)):
    return _sh.rot90(self, k, dims)


def _keyword_only(name, arg, given, kw):
    """``x.reshape(shape=...)``, ``x.permute(dims=...)``: the keyword PyTorch's parser
    accepts for a variadic parameter it documents as ``*shape``, ``*dims``."""
    if arg in kw:
        if given:
            raise TypeError("%s() got multiple values for argument '%s'" % (name, arg))
        given = (kw.pop(arg),)
    if kw:
        raise TypeError("%s() got an unexpected keyword argument '%s'" % (name, next(iter(kw))))
    return given


def _reshape_m(self, *shape, **kw):
    if kw:
        shape = _keyword_only("reshape", "shape", shape, kw)
    return _sh.reshape(self, shape)


def _expand(self, *size):
    return _sh.expand(self, *size)


def _expand_as(self, other):
    return _sh.expand(self, *other.shape)


def _other_tensor(fname, other):
    if not isinstance(other, Tensor):
        raise TypeError("%s(): argument 'other' (position 1) must be Tensor, not %s" % (fname, type(other).__name__))


def _view_as(self, other):
    _other_tensor("view_as", other)
    return _sh.reshape(self, other.shape)


def _reshape_as(self, other):
    _other_tensor("reshape_as", other)
    return _sh.reshape(self, other.shape)


def _contiguous(self):
    """``self`` when its array is C-contiguous, else a contiguous copy (CloneBackward0)."""
    if self._data.flags.c_contiguous:
        return self
    return _sh._record(_sh.RESHAPE, self, np.ascontiguousarray(self._data), "CloneBackward0")


def _cross_m(self, other, dim=None):
    return _co.cross(self, other, dim)


def _repeat_interleave_m(self, repeats, dim=None, *, output_size=None):
    return _co.repeat_interleave(self, repeats, dim, output_size=output_size)


_TO_FORMS = ("to() received an invalid combination of arguments - got (%s), but expected one of:\n"
             " * (device device = None, dtype dtype = None, bool non_blocking = False, bool copy = False, *, "
             "memory_format memory_format = None)\n"
             " * (dtype dtype, bool non_blocking = False, bool copy = False, *, memory_format memory_format = None)\n"
             " * (Tensor tensor, bool non_blocking = False, bool copy = False, *, "
             "memory_format memory_format = None)\n")


def _to(self, *args, device=None, dtype=None, non_blocking=False, copy=False, memory_format=None):
    """``to(dtype)``, ``to(device, dtype)``, ``to(other)``: tapegrad has the CPU only,
    so another device raises as PyTorch built without it does."""
    rest = list(args)
    if rest and isinstance(rest[0], Tensor):
        dtype = rest.pop(0).dtype
    elif rest and (isinstance(rest[0], (str, _tensor_mod.device)) or type(rest[0]) is int):
        device = rest.pop(0)
        if rest and _is_dtype(rest[0]):
            dtype = rest.pop(0)
    elif rest and _is_dtype(rest[0]):
        dtype = rest.pop(0)
    flags = [non_blocking, copy]
    if len(rest) > 2 or not _builtins.all(type(v) is bool for v in rest):
        raise TypeError(_TO_FORMS % ", ".join("dtype" if isinstance(a, np.dtype) else type(a).__name__ for a in args))
    flags[:len(rest)] = rest
    if device is not None:
        _tensor_mod.check_device(device)
    out = self if dtype is None else to_dtype(self, dtype)
    if flags[1] and out is self:
        out = clone(self)
    return out


def _clamp_m(self, min=None, max=None):
    return clamp(self, min, max)


def _prod_m(self, dim=None, keepdim=False, dtype=None, **kw):
    return _rd.prod(self, dim, keepdim, dtype=dtype, **kw)


def _sum_m(self, dim=None, keepdim=False, dtype=None, **kw):
    return _rd.sum(self, dim, keepdim, dtype=dtype, **kw)


def _backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate the gradient of this tensor into the leaves (see tg.autograd.backward)."""
    if gradient is None and inputs is None and not create_graph and self._tape is not None \
            and self._data.size == 1 and not _tp.anomaly[0]:
        # the common ``loss.backward()``: nothing to validate beyond this
        _engine.run_backward([(self, _ONE)], bool(retain_graph))
        return
    from .autograd import backward
    backward(self, gradient, retain_graph, create_graph, inputs=inputs)


_ONE = np.ones(1)
_ONE.flags.writeable = False


_backward.__name__ = "backward"
_backward.__qualname__ = "Tensor.backward"


def _getitem(self, idx):
    return _sh.getitem(self, idx)


def _setitem(self, idx, value):
    _sh.setitem(self, idx, value)


def _operator(name, dispatcher, by_float=None):
    """Tensor <op> Tensor goes straight to the op's recorder, which hands a Python
    float or int on its right to ``by_float`` (when given: what ``dispatcher`` calls
    for one) and anything else to ``dispatcher``."""
    _B[name].operator[:] = [dispatcher, by_float]
    return _B[name].record


class _TensorMethods:
    """Tensor's methods and operators, each bound to the function that records it:
    ``x * y`` is ``_TensorMethods.__mul__``, the elementwise recorder of ``mul``.  The
    Tensor type sits in the core, which knows no op, so ``_bind`` copies this class
    body onto it at import (one attribute each: no extra call per op)."""
    __add__ = _operator("add", _add, _ADD_S)
    __radd__ = _radd
    __sub__ = _operator("sub", _sub, _sub_float)
    __rsub__ = _rsub
    __mul__ = _operator("mul", mul, _MUL_S)
    __rmul__ = _rmul
    __truediv__ = _operator("div", _true_div, _DIV_S)
    __rtruediv__ = _rdiv
    __pow__ = _operator("pow", _pow, _pow_number)
    __rpow__ = _rpow
    __matmul__ = matmul
    __rmatmul__ = _rmatmul
    __neg__ = neg
    __abs__ = abs
    __pos__ = lambda s: s
    __iadd__ = _inplace(add)
    __isub__ = _inplace(sub)
    __imul__ = _inplace(mul)
    __itruediv__ = _inplace(_true_div)
    __ipow__ = _inplace(_pow)
    __lt__ = _cmp(np.less)
    __le__ = _cmp(np.less_equal)
    __gt__ = _cmp(np.greater)
    __ge__ = _cmp(np.greater_equal)
    __eq__ = _cmp(np.equal)
    __ne__ = _cmp(np.not_equal)
    __and__ = _bitwise(np.bitwise_and, "bitwise_and")
    __or__ = _bitwise(np.bitwise_or, "bitwise_or")
    __xor__ = _bitwise(np.bitwise_xor, "bitwise_xor")
    __invert__ = _invert
    __rand__ = _bitwise(np.bitwise_and, "bitwise_and")
    __ror__ = _bitwise(np.bitwise_or, "bitwise_or")
    __rxor__ = _bitwise(np.bitwise_xor, "bitwise_xor")
    __floordiv__ = floor_divide
    __rfloordiv__ = lambda s, o: floor_divide(o, s)
    __ifloordiv__ = _inplace(floor_divide)
    floor_divide = floor_divide
    floor_divide_ = _inplace(floor_divide)
    __getitem__ = _getitem
    __setitem__ = _setitem
    add = add
    sub = sub
    mul = mul
    div = div
    pow = pow
    neg = neg
    matmul = matmul
    mm = mm
    mv = mv
    dot = dot
    bmm = bmm
    maximum = maximum
    minimum = minimum
    clamp = _clamp_m
    clip = _clamp_m
    add_ = _inplace(add)
    sub_ = _inplace(sub)
    mul_ = _inplace(mul)
    div_ = _inplace(div)
    pow_ = _inplace(pow)
    neg_ = _inplace(neg)
    clamp_ = _inplace(_clamp_m)
    exp_ = _inplace(exp)
    relu_ = _inplace(relu)
    zero_ = _zero_
    fill_ = _fill_
    copy_ = _copy_
    sum = _sum_m
    mean = mean
    prod = _prod_m
    var = var
    std = std
    amax = amax
    amin = amin
    max = max
    min = min
    argmax = argmax
    argmin = argmin
    logsumexp = logsumexp
    softmax = softmax
    log_softmax = log_softmax
    cumsum = cumsum
    cumprod = cumprod
    cumprod_ = _inplace(cumprod)
    logcumsumexp = logcumsumexp
    sort = sort
    argsort = argsort
    msort = msort
    topk = topk
    kthvalue = kthvalue
    median = median
    nanmedian = nanmedian
    quantile = quantile
    nanquantile = nanquantile
    cummax = cummax
    cummin = cummin
    diff = diff
    unique = unique
    atan2 = _public_binary(_B["atan2"], "atan2", True)
    hypot = hypot
    def remainder(self, divisor):
        return remainder(self, divisor)

    def fmod(self, divisor):
        return fmod(self, divisor)

    copysign = copysign
    xlogy = xlogy
    logit = logit
    sinc = sinc
    erf = erf
    erfc = erfc
    erfinv = erfinv
    lgamma = lgamma
    digamma = digamma
    i0 = i0

    def polygamma(self, n):
        return polygamma(n, self)

    def igamma(self, other):
        return igamma(self, other)

    def igammac(self, other):
        return igammac(self, other)

    igamma_ = _inplace(igamma)
    igammac_ = _inplace(igammac)
    logaddexp = logaddexp
    logaddexp2 = logaddexp2
    lerp = lerp
    nan_to_num = nan_to_num
    __mod__ = remainder
    __rmod__ = lambda s, o: remainder(o, s)
    isnan = isnan
    isinf = isinf
    isfinite = isfinite
    isposinf = lambda self: _isposinf(self)
    isneginf = lambda self: _isneginf(self)
    isclose = isclose
    allclose = allclose
    equal = equal
    nonzero = lambda self, *, as_tuple=False: nonzero(self, as_tuple=as_tuple)
    where = _where_m
    is_floating_point = is_floating_point
    arctan2 = _public_binary(_B["atan2"], "arctan2", True)
    gather = gather
    take_along_dim = take_along_dim
    take = _take_m
    put = put
    put_ = _inplace(put)
    index_select = index_select
    masked_fill = masked_fill
    masked_fill_ = _inplace(masked_fill)
    masked_select = masked_select
    masked_scatter = _masked_scatter_m
    masked_scatter_ = _inplace(_ga.masked_scatter)
    scatter = scatter
    scatter_ = _inplace(scatter)
    scatter_add = scatter_add
    scatter_add_ = _inplace(scatter_add)
    index_add = index_add
    index_add_ = _inplace(index_add)
    index_copy = _index_copy_m
    index_copy_ = _inplace(_index_copy__m)
    index_fill = index_fill
    index_fill_ = _inplace(index_fill)
    scatter_reduce = scatter_reduce
    scatter_reduce_ = _inplace(scatter_reduce)
    reshape = _reshape_m
    view = _view
    flatten = flatten
    squeeze = squeeze
    unsqueeze = unsqueeze
    permute = permute
    transpose = transpose
    t = t
    expand = _expand
    expand_as = _expand_as
    view_as = _view_as
    reshape_as = _reshape_as
    contiguous = _contiguous
    unflatten = unflatten
    cross = _cross_m
    repeat_interleave = _repeat_interleave_m
    broadcast_to = broadcast_to
    diagonal = diagonal
    split = _split_m
    chunk = chunk
    unbind = unbind
    tensor_split = tensor_split
    narrow = _narrow_m
    select = _sh.select
    unfold = _sh.unfold
    repeat = _sh.repeat
    tile = _sh.tile_method
    roll = _roll_m
    flip = _sh.flip_method
    fliplr = fliplr
    flipud = flipud
    rot90 = _rot90_m
    tril = tril
    triu = triu
    tril_ = _inplace(tril)
    triu_ = _inplace(triu)
    diag = diag
    diag_embed = diag_embed
    trace = trace
    movedim = movedim
    moveaxis = moveaxis
    swapaxes = swapaxes
    swapdims = swapdims
    outer = outer
    ger = ger
    inner = inner
    kron = kron
    clone = clone
    to = _to
    double = lambda s: to_dtype(s, np.float64)
    float = lambda s: to_dtype(s, np.float32)
    long = lambda s: to_dtype(s, np.int64)
    int = lambda s: to_dtype(s, np.int32)
    bool = lambda s: to_dtype(s, np.bool_)
    type_as = lambda self, tensor: to_dtype(self, tensor.dtype)
    backward = _backward
    all = all
    any = any
    abs = abs
    exp = exp
    log = log
    log1p = log1p
    expm1 = expm1
    sqrt = sqrt
    sin = sin
    cos = cos
    tan = tan
    tanh = tanh
    sigmoid = sigmoid
    relu = relu
    sign = sign
    floor = floor
    round = round
    asin = asin
    acos = acos
    atan = atan
    sinh = sinh
    cosh = cosh
    asinh = asinh
    acosh = acosh
    atanh = atanh
    arcsin = asin
    arccos = acos
    arctan = atan
    arcsinh = asinh
    arccosh = acosh
    arctanh = atanh
    log2 = log2
    log10 = log10
    exp2 = exp2
    square = square
    reciprocal = reciprocal
    rsqrt = rsqrt
    ceil = ceil
    trunc = trunc
    frac = frac


# What Python itself puts in a class body (``__hash__ = None`` because the table
# defines ``__eq__``: a Tensor stays hashable by identity, as in PyTorch).
_CLASS_BODY_NAMES = {"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__hash__",
                     "__firstlineno__", "__static_attributes__"}


def _bind(cls, methods):
    """Give ``cls`` every attribute of the class body ``methods`` (not Python's own)."""
    for name, fn in vars(methods).items():
        if name not in _CLASS_BODY_NAMES:
            setattr(cls, name, fn)


_bind(Tensor, _TensorMethods)


# -- PyTorch's other spellings: aliases, comparisons and logical ops as functions, addcmul and
# addcdiv, the in-place variants of the elementwise methods ------------------------------------
def _no_out(out, name):
    if out is not None:
        raise TypeError("%s(): out= is not supported by tapegrad" % name)


def _comparison(name, op):
    def f(input, other, *, out=None):
        _no_out(out, name)
        _need_tensor(name, input, 1, "input")
        return op(input, other)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = "``input %s other`` elementwise, as a bool tensor (no gradient)." % {
        "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}[name]
    return f


eq = _comparison("eq", lambda a, b: a == b)
ne = not_equal = _comparison("ne", lambda a, b: a != b)
lt = less = _comparison("lt", lambda a, b: a < b)
le = less_equal = _comparison("le", lambda a, b: a <= b)
gt = greater = _comparison("gt", lambda a, b: a > b)
ge = greater_equal = _comparison("ge", lambda a, b: a >= b)


def _truthy(x):
    return x if isinstance(x, Tensor) and x.dtype.kind == "b" else (x != 0)


def logical_not(input, *, out=None):
    _no_out(out, "logical_not")
    _need_tensor("logical_not", input, 1, "input")
    return _truthy(input) == False      # noqa: E712  (elementwise)


def _logical(name, op):
    def f(input, other, *, out=None):
        _no_out(out, name)
        _need_tensor(name, input, 1, "input")
        other = other if isinstance(other, Tensor) else _tensor(other)
        return op(_truthy(input), _truthy(other))
    f.__name__ = f.__qualname__ = name
    f.__doc__ = "The %s of the truth values (nonzero) of ``input`` and ``other``, as a bool tensor." % name[8:]
    return f


logical_and = _logical("logical_and", lambda a, b: a & b)
logical_or = _logical("logical_or", lambda a, b: a | b)
logical_xor = _logical("logical_xor", lambda a, b: a ^ b)


def _bitwise_fn(name, op):
    def f(input, other, *, out=None):
        _no_out(out, name)
        return op(input, other)
    f.__name__ = f.__qualname__ = name
    return f


bitwise_and = _bitwise_fn("bitwise_and", lambda a, b: a & b)
bitwise_or = _bitwise_fn("bitwise_or", lambda a, b: a | b)
bitwise_xor = _bitwise_fn("bitwise_xor", lambda a, b: a ^ b)


def bitwise_not(input, *, out=None):
    _no_out(out, "bitwise_not")
    return ~input


_ADDCDIV_INT = ("Integer division with addcdiv is no longer supported, and in a future  release addcdiv will perform "
                "a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as (input + "
                "value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + value * "
                "tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter implementation: "
                "(input + value * tensor1 / tensor2), for all dtypes.")


def addcmul(input, tensor1, tensor2, *, value=1, out=None):
    """``input + value * tensor1 * tensor2``."""
    _no_out(out, "addcmul")
    prod = mul(tensor1, tensor2)
    return add(input, prod if value == 1 else mul(prod, value))


def addcdiv(input, tensor1, tensor2, *, value=1, out=None):
    """``input + value * tensor1 / tensor2``."""
    _no_out(out, "addcdiv")
    if _builtins.all(isinstance(t, Tensor) and t.dtype.kind in "biu" for t in (tensor1, tensor2)):
        raise RuntimeError(_ADDCDIV_INT)
    q = _true_div(tensor1, tensor2)
    return add(input, q if value == 1 else mul(q, value))


def rsub(input, other, *, alpha=1):
    """``other - alpha * input``."""
    return sub(other, input, alpha=alpha)


def sgn(input, *, out=None):
    """The sign (for a real tensor, ``sign``)."""
    _no_out(out, "sgn")
    return sign(input)


def fix(input, *, out=None):
    """``trunc``: round toward zero."""
    _no_out(out, "fix")
    return trunc(input)


absolute = abs
negative = neg
multiply = mul
divide = div
subtract = sub


def true_divide(dividend, divisor, *, out=None):
    _no_out(out, "true_divide")
    return _true_div(dividend, divisor)


class _SpellingMethods:
    eq = eq
    ne = not_equal = ne
    lt = less = lt
    le = less_equal = le
    gt = greater = gt
    ge = greater_equal = ge
    logical_not = logical_not
    logical_and = logical_and
    logical_or = logical_or
    logical_xor = logical_xor
    bitwise_and = bitwise_and
    bitwise_or = bitwise_or
    bitwise_xor = bitwise_xor
    bitwise_not = bitwise_not
    addcmul = addcmul
    addcdiv = addcdiv
    sgn = sgn
    fix = fix
    absolute = abs
    negative = neg
    subtract = sub

    def multiply(self, value):
        return mul(self, value)

    def divide(self, value, *, rounding_mode=None):
        return div(self, value, rounding_mode=rounding_mode)

    def true_divide(self, value):
        return _true_div(self, value)

    half = lambda s: to_dtype(s, np.float16)
    short = lambda s: to_dtype(s, np.int16)
    cdouble = lambda s: to_dtype(s, np.complex128)
    cfloat = lambda s: to_dtype(s, np.complex64)


_bind(Tensor, _SpellingMethods)

# the in-place variant of each elementwise method PyTorch has one of (the result written into
# the tensor, in its dtype: ``x.eq_(y)`` on floats holds 1.0 and 0.0)
INPLACE_SPELLINGS = (
    "abs acos acosh arccos arccosh arcsin arcsinh arctan2 arctan arctanh asin asinh atan2 atan atanh ceil clip "
    "copysign cos cosh cumsum digamma erf erfc erfinv exp2 expm1 floor fmod frac hypot i0 lerp lgamma log10 "
    "log1p log2 log logit mvlgamma nan_to_num polygamma reciprocal remainder round rsqrt sigmoid sign sin sinc "
    "sinh sqrt square tan tanh trunc xlogy addcmul addcdiv eq ne lt le gt ge not_equal less less_equal greater "
    "greater_equal logical_not logical_and logical_or logical_xor sgn fix absolute negative multiply divide "
    "subtract true_divide bitwise_and bitwise_or bitwise_xor bitwise_not").split()
_BY_METHOD = ("polygamma", "remainder", "fmod", "multiply", "divide", "true_divide")
for _name in INPLACE_SPELLINGS:
    if hasattr(Tensor, _name) and not hasattr(Tensor, _name + "_"):     # (mvlgamma_: numeric.py)
        # (the public function, whose signature is PyTorch's; the method where it differs: polygamma(n,
        # input) takes the tensor second, remainder and fmod name their argument divisor)
        _fn = globals().get(_name)
        setattr(Tensor, _name + "_", _inplace(getattr(Tensor, _name) if _name in _BY_METHOD or not callable(_fn)
                                              else _fn))
del _name, _fn

for _name, _fn in _rd.PUBLIC.items():
    setattr(Tensor, _name, _rd.METHODS.get(_name, _fn))
# the public names a row of the elementwise tables declares (its ``public`` column)
for _op in _el.ALL_BINARY:
    if _op.public is not None:
        globals()[_op.public] = _public_binary(_op, _op.public)
        setattr(Tensor, _op.public, _public_binary(_op, _op.public, True))
        setattr(Tensor, _op.public + "_", _inplace(getattr(Tensor, _op.public)))
del _op


def _function_of_method(name):
    def f(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)
    f.__name__ = f.__qualname__ = name
    f.__wrapped__ = getattr(Tensor, name)
    return f


# torch.exp_(x), torch.detach(x)...: PyTorch's functions that are a method
exp_, neg_, relu_, clamp_, fill_, zero_, detach, detach_ = [_function_of_method(n) for n in (
    "exp_", "neg_", "relu_", "clamp_", "fill_", "zero_", "detach", "detach_")]


# torch.abs_(x), torch.sin_(x)...: the function form of every in-place elementwise method
# PyTorch has one of
_TORCH_INPLACE_FUNCTIONS = (
    "abs_ acos_ acosh_ arccos_ arccosh_ arcsin_ arcsinh_ arctan_ arctanh_ asin_ asinh_ atan_ atanh_ ceil_ "
    "clip_ cos_ cosh_ erf_ erfc_ exp2_ expm1_ fix_ floor_ frac_ i0_ log10_ log1p_ log2_ log_ logit_ "
    "nan_to_num_ negative_ reciprocal_ round_ rsqrt_ sigmoid_ sin_ sinc_ sinh_ sqrt_ square_ tan_ tanh_ "
    "trunc_ xlogy_").split()
globals().update({_n: _function_of_method(_n) for _n in _TORCH_INPLACE_FUNCTIONS})


# -- addmm, addmv, addbmm, baddbmm, addr: beta * input + alpha * (a product) -------------------
def _beta_alpha(input, prod, beta, alpha):
    """``beta * input + alpha * prod``; with ``beta == 0`` input is not read (its NaN and
    inf do not reach the result), as in PyTorch."""
    if alpha != 1:
        prod = mul(prod, alpha)
    if beta == 0:       # (input's gradient is zero: it is selected nowhere)
        _need_tensor("addmm", input, 1, "input")
        return add(where(Tensor._wrap(np.zeros(input.shape, np.bool_)), input, 0), prod)
    return add(input if beta == 1 else mul(input, beta), prod)


def addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * (mat1 @ mat2)`` (input broadcast to the product's shape)."""
    _no_out(out, "addmm")
    return _beta_alpha(input, mm(mat1, mat2), beta, alpha)


def addmv(input, mat, vec, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * (mat @ vec)``."""
    _no_out(out, "addmv")
    return _beta_alpha(input, mv(mat, vec), beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * sum_b(batch1[b] @ batch2[b])``."""
    _no_out(out, "addbmm")
    return _beta_alpha(input, sum(bmm(batch1, batch2), 0), beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * (batch1 @ batch2)``, batch by batch."""
    _no_out(out, "baddbmm")
    return _beta_alpha(input, bmm(batch1, batch2), beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * outer(vec1, vec2)``."""
    _no_out(out, "addr")
    return _beta_alpha(input, outer(vec1, vec2), beta, alpha)


def clamp_min(input, min):
    """``clamp(input, min=min)``."""
    return clamp(input, min=min)


def clamp_max(input, max):
    """``clamp(input, max=max)``."""
    return clamp(input, max=max)


def positive(input):
    """``input`` itself (PyTorch's unary plus); refused for a bool tensor."""
    _need_tensor("positive", input, 1, "input")
    if input.dtype.kind == "b":
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


def concatenate(tensors, axis=0, out=None):
    """``cat`` under NumPy's name."""
    _no_out(out, "concatenate")
    return cat(tensors, axis)


def _method_of(fn):
    def m(self, *args, **kw):
        return fn(self, *args, **kw)
    m.__name__ = m.__qualname__ = fn.__name__
    m.__doc__ = fn.__doc__
    return m


class _ProductMethods:
    def addmm(self, mat1, mat2, *, beta=1, alpha=1):
        return addmm(self, mat1, mat2, beta=beta, alpha=alpha)

    def addmv(self, mat, vec, *, beta=1, alpha=1):
        return addmv(self, mat, vec, beta=beta, alpha=alpha)

    def addbmm(self, batch1, batch2, *, beta=1, alpha=1):
        return addbmm(self, batch1, batch2, beta=beta, alpha=alpha)

    def baddbmm(self, batch1, batch2, *, beta=1, alpha=1):
        return baddbmm(self, batch1, batch2, beta=beta, alpha=alpha)

    def addr(self, vec1, vec2, *, beta=1, alpha=1):
        return addr(self, vec1, vec2, beta=beta, alpha=alpha)

    def clamp_min(self, min):
        return clamp(self, min=min)

    def clamp_max(self, max):
        return clamp(self, max=max)

    def positive(self):
        return positive(self)


_bind(Tensor, _ProductMethods)
for _name in ("addmm", "addmv", "addbmm", "baddbmm", "addr", "clamp_min", "clamp_max"):
    setattr(Tensor, _name + "_", _inplace(getattr(_ProductMethods, _name)))
addmv_, clamp_min_, clamp_max_ = [_function_of_method(_n) for _n in ("addmv_", "clamp_min_", "clamp_max_")]
del _name


# -- unsqueeze_ and squeeze_: the tensor takes the view's shape (its storage unchanged) -------
def _shape_inplace(name):
    view = getattr(Tensor, name)

    def f(self, *args, **kw):
        _ip.check_inplace(self)
        r = view(self, *args, **kw)
        if r is self:
            return self
        self._data = r._data            # (a view of the same storage: views of self still alias it)
        if r._tape is None:
            self._written_()
            return self
        _tp.inplace_counter[0] += 1     # (PyTorch bumps the version: entries that saved self raise)
        self._ver[0] += 1
        T = r._tape
        self._tape, self._slot, self._tape_id, self._requires_grad = T, r._slot, T.id, True
        T.versions[r._slot] = self._ver
        T.set_field(r._slot, _tp.VERSION, self._ver[0])
        self._slot_version = self._ver[0]
        _ip._set_producer(self._ver, T.field(r._slot, _tp.NAME))
        return self
    f.__name__ = f.__qualname__ = name + "_"
    f.__wrapped__ = view
    return f


Tensor.unsqueeze_ = _shape_inplace("unsqueeze")
Tensor.squeeze_ = _shape_inplace("squeeze")

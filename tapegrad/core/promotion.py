"""PyTorch's type promotion, for the rare operands the recorders hand over (two
tensors of different dtypes, or an integer or bool tensor).

PyTorch ranks operands in three groups: tensors with dimensions, 0-d tensors and
Python numbers (a Python float counts as the default dtype, an int as int64, a
bool as bool).  The result is the dtype of the highest group unless a lower group
holds a higher category (bool < integer < float), in which case the two are
promoted: ``float32 tensor * 0-d float64 tensor`` is float32, like
``float32 tensor * 2.5``, but ``int32 tensor + 0-d float32 tensor`` is float32.
Within a group, dtypes promote as ``torch.promote_types`` (where, unlike NumPy, a
float dtype beats any integer: int64 with float32 is float32).
"""
import numpy as np

BOOL = np.dtype(np.bool_)
INT64 = np.dtype(np.int64)
DEFAULT = np.dtype(np.float64)      # tapegrad's default dtype (tensor.DEFAULT_DTYPE)

def promote_types(x, y):
    """``torch.promote_types`` on NumPy dtypes."""
    if x == y:
        return x
    xf, yf = x.kind == "f", y.kind == "f"
    if xf != yf:
        return x if xf else y
    return np.promote_types(x, y)


def number_dtype(v):
    """The dtype a Python (or NumPy) number takes as an operand (PyTorch reads a
    NumPy bool as a float)."""
    if isinstance(v, bool):
        return BOOL
    if isinstance(v, (int, np.integer)):
        return INT64
    return DEFAULT


def _combine(higher, lower):
    """c10's combine_categories: the higher group's dtype, unless the lower group
    holds a higher category."""
    if higher is None:
        return lower
    if lower is None or higher.kind == "f":
        return higher
    if higher.kind == "b" or lower.kind == "f":
        return promote_types(higher, lower)
    return higher


def result_type(*operands):
    """The dtype PyTorch computes ``operands`` in (ndarrays or Python numbers)."""
    dim = zero = number = None
    for v in operands:
        if isinstance(v, np.ndarray):
            dt = v.dtype
            if v.ndim:
                dim = dt if dim is None else promote_types(dim, dt)
            else:
                zero = dt if zero is None else promote_types(zero, dt)
        else:
            dt = number_dtype(v)
            number = dt if number is None else promote_types(number, dt)
    return _combine(dim, _combine(zero, number))


def with_number(dt, v):
    """The dtype of ``tensor <op> v`` for a tensor of dtype ``dt`` and a number ``v``."""
    return _combine(dt, number_dtype(v))


def infer_dtype(data):
    """The dtype ``torch.tensor(data)`` infers: each element's own (a Python float
    the default dtype, an int int64, a bool bool, a NumPy scalar, array or tensor
    its dtype), promoted as ``torch.promote_types`` over the whole sequence."""
    dt = None
    stack = [data]
    while stack:
        v = stack.pop()
        if isinstance(v, (list, tuple)):
            stack.extend(v)
            continue
        d = getattr(v, "dtype", None)
        if d is None:
            d = number_dtype(v)
        elif not isinstance(d, np.dtype):
            return None
        dt = d if dt is None else promote_types(dt, d)
    return dt

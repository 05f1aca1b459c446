"""Argument spellings every op family accepts: PyTorch's NumPy-style keywords."""


REQUIRED = type("Required", (), {"__repr__": lambda self: "<required>"})()    # a dim with no default


def numpy_names(fname, kw, dim, keepdim, dim_default=None):
    """PyTorch's NumPy spellings of the keywords (``axis=`` for ``dim=``,
    ``keepdims=`` for ``keepdim=``) and its refusal of any other keyword, naming the
    public function; ``out=None`` is accepted and any other ``out=`` refused."""
    for k, v in kw.items():
        if k == "axis":
            if dim is not dim_default and dim != dim_default:
                raise TypeError("%s() got multiple values for argument 'dim'" % fname)
            dim = v
        elif k == "keepdims" and keepdim is not None:
            keepdim = v
        elif k == "out":
            if v is not None:
                raise TypeError("out= is not supported by tapegrad")
        else:
            raise TypeError("%s() got an unexpected keyword argument '%s'" % (fname, k))
    return dim, keepdim

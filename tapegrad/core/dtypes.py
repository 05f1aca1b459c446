"""PyTorch's spellings of a dtype, for the messages that name one.

PyTorch names a dtype three ways in its messages: the scalar type name
(``not implemented for 'Double'``, ``expected scalar type Float``), the C++ type
name (``got: long int != double``, ``a gradient with dtype 'double'``) and the
legacy tensor type name (``torch.DoubleTensor``, which tapegrad spells
``tapegrad.DoubleTensor``).  One row per dtype tapegrad can hold; a dtype outside
the table (a NumPy ``longdouble``) falls back to NumPy's name.
"""

# NumPy name: (scalar type name, C++ type name, tensor type name), as PyTorch 2.13 spells them
SPELLINGS = {
    "float64": ("Double", "double", "DoubleTensor"),
    "float32": ("Float", "float", "FloatTensor"),
    "float16": ("Half", "c10::Half", "HalfTensor"),
    "int64": ("Long", "long int", "LongTensor"),
    "int32": ("Int", "int", "IntTensor"),
    "int16": ("Short", "short int", "ShortTensor"),
    "int8": ("Char", "signed char", "CharTensor"),
    "uint64": ("UInt64", "long unsigned int", "UInt64Tensor"),
    "uint32": ("UInt32", "unsigned int", "UInt32Tensor"),
    "uint16": ("UInt16", "short unsigned int", "UInt16Tensor"),
    "uint8": ("Byte", "unsigned char", "ByteTensor"),
    "bool": ("Bool", "bool", "BoolTensor"),
}


def torch_name(dt):
    """The scalar type name: ``Double`` for float64 (``Float128`` outside the table)."""
    row = SPELLINGS.get(dt.name)
    return row[0] if row is not None else dt.name.capitalize()


def cpp_name(dt):
    """The C++ type name: ``double`` for float64, ``long int`` for int64."""
    row = SPELLINGS.get(dt.name)
    return row[1] if row is not None else dt.name


def tensor_type_name(dt, default=None):
    """The tensor type name: ``DoubleTensor`` for float64; outside the table
    ``default``, or NumPy's name when none is given."""
    row = SPELLINGS.get(dt.name)
    if row is not None:
        return row[2]
    return dt.name if default is None else default

"""PyTorch's three spellings of a dtype (core/dtypes.py) and the messages that use them.

Each spelling is stated literally (the test runs without torch) and, where torch is
installed, compared with what torch itself prints: ``Tensor.type()`` for the tensor
type name, the ``.grad`` assignment error for the C++ name (the gradient's dtype) and
the scalar type name (the tensor's).
"""
import re

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.core import dtypes
from tapegrad.nn import functional as F

# NumPy name: (scalar type name, C++ type name, tensor type name), as PyTorch 2.13 prints them
EXPECTED = {
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
NAMES = sorted(EXPECTED)


def _grad_message(tensor_dtype, grad_dtype, lib):
    x = lib.zeros(2, dtype=tensor_dtype)
    with pytest.raises(RuntimeError) as e:
        x.grad = lib.zeros(2, dtype=grad_dtype)
    return str(e.value)


def test_the_table_holds_every_dtype_once():
    assert dtypes.SPELLINGS == EXPECTED


@pytest.mark.parametrize("name", NAMES)
def test_spellings(name):
    dt = np.dtype(name)
    scalar, cpp, tensor_type = EXPECTED[name]
    assert dtypes.torch_name(dt) == scalar
    assert dtypes.cpp_name(dt) == cpp
    assert dtypes.tensor_type_name(dt) == tensor_type
    assert dtypes.tensor_type_name(dt, "Tensor") == tensor_type


@pytest.mark.skipif(np.dtype(np.longdouble).itemsize == 8, reason="longdouble is float64 here")
def test_a_dtype_outside_the_table_takes_numpy_s_name():
    dt = np.dtype(np.longdouble)
    assert dtypes.torch_name(dt) == dt.name.capitalize()          # "Float128"
    assert dtypes.cpp_name(dt) == dt.name
    assert dtypes.tensor_type_name(dt) == dt.name
    assert dtypes.tensor_type_name(dt, "Tensor") == "Tensor"


@pytest.mark.parametrize("name", NAMES)
def test_spellings_are_torch_s(name):
    torch = pytest.importorskip("torch")
    scalar, cpp, tensor_type = EXPECTED[name]
    tdt = getattr(torch, name)
    assert torch.empty(1, dtype=tdt).type() == "torch." + tensor_type
    other = torch.float32 if tdt != torch.float32 else torch.float64
    as_grad = _grad_message(other, tdt, torch)
    assert re.search("a gradient with dtype '([^']*)'", as_grad).group(1) == cpp
    as_tensor = _grad_message(tdt, other, torch)
    assert re.search("a tensor with grad_dtype '([^']*)'", as_tensor).group(1) == scalar


# -- the messages, literally and against torch's --------------------------------------------
GRAD_PAIRS = [("float64", "float32"), ("float32", "float64"), ("float32", "float16"), ("float32", "int64"),
              ("uint8", "float32"), ("int16", "float64")]


@pytest.mark.parametrize("tensor_dtype, grad_dtype", GRAD_PAIRS)
def test_grad_assignment_message(tensor_dtype, grad_dtype):
    msg = _grad_message(np.dtype(tensor_dtype), np.dtype(grad_dtype), tg)
    assert msg.startswith("attempting to assign a gradient with dtype '%s' to a tensor with grad_dtype '%s'. "
                          % (EXPECTED[grad_dtype][1], EXPECTED[tensor_dtype][0]))


def test_grad_assignment_message_literal():
    msg = _grad_message(tg.float32, tg.float64, tg)
    assert msg.startswith("attempting to assign a gradient with dtype 'double' to a tensor with grad_dtype 'Float'.")
    msg = _grad_message(tg.float64, tg.int64, tg)
    assert msg.startswith("attempting to assign a gradient with dtype 'long int' to a tensor with grad_dtype "
                          "'Double'.")


@pytest.mark.parametrize("tensor_dtype, grad_dtype", GRAD_PAIRS)
def test_grad_assignment_message_is_torch_s(tensor_dtype, grad_dtype):
    torch = pytest.importorskip("torch")
    assert (_grad_message(np.dtype(tensor_dtype), np.dtype(grad_dtype), tg)
            == _grad_message(getattr(torch, tensor_dtype), getattr(torch, grad_dtype), torch))


NLL_TARGETS = [("float64", "Double"), ("float32", "Float"), ("bool", "Bool")]


@pytest.mark.parametrize("name, expected", NLL_TARGETS)
def test_nll_loss_target_dtype_message(name, expected):
    msg = "expected target dtype to be Long or Byte, but got %s" % expected
    with pytest.raises(RuntimeError, match="^%s$" % msg):
        F.nll_loss(tg.zeros(2, 3), tg.zeros(2, dtype=np.dtype(name)))


@pytest.mark.parametrize("name, expected", NLL_TARGETS)
def test_nll_loss_target_dtype_message_is_torch_s(name, expected):
    torch = pytest.importorskip("torch")
    msg = "expected target dtype to be Long or Byte, but got %s" % expected
    with pytest.raises(RuntimeError, match="^%s$" % msg):
        torch.nn.functional.nll_loss(torch.zeros(2, 3), torch.zeros(2, dtype=getattr(torch, name)))


MM_DTYPES = ["float32", "int64", "int16", "uint8", "bool"]


def _mm_message(name):
    return "expected m1 and m2 to have the same dtype, but got: double != %s" % EXPECTED[name][1]


@pytest.mark.parametrize("name", MM_DTYPES)
def test_mm_message_names_the_cpp_types(name):
    with pytest.raises(RuntimeError, match="^%s$" % re.escape(_mm_message(name))):
        tg.mm(tg.zeros(2, 2), tg.zeros(2, 2, dtype=np.dtype(name)))


@pytest.mark.parametrize("name", MM_DTYPES)
def test_mm_message_is_torch_s(name):
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="^%s$" % re.escape(_mm_message(name))):
        torch.mm(torch.zeros(2, 2, dtype=torch.float64), torch.zeros(2, 2, dtype=getattr(torch, name)))


def _typename_messages(lib, dtype):
    """(the error of assigning a plain tensor to a Linear's weight, of an optimizer given a tensor)"""
    m = lib.nn.Linear(2, 2)
    with pytest.raises(TypeError) as e:
        m.weight = lib.zeros(2, 2, dtype=dtype)
    with pytest.raises(TypeError) as o:
        lib.optim.SGD(lib.zeros(2, dtype=dtype), lr=0.1)
    return str(e.value), str(o.value)


TYPENAME_DTYPES = ["float32", "float64", "int8"]


@pytest.mark.parametrize("name", TYPENAME_DTYPES)
def test_typename_of_a_tensor_in_module_and_optimizer_messages(name):
    tensor_type = EXPECTED[name][2]
    assert _typename_messages(tg, np.dtype(name)) == (
        "cannot assign 'tapegrad.%s' as parameter 'weight' (tapegrad.nn.Parameter or None expected)" % tensor_type,
        "params argument given to the optimizer should be an iterable of Tensors or dicts, but got tapegrad.%s"
        % tensor_type)


@pytest.mark.parametrize("name", TYPENAME_DTYPES)
def test_typename_messages_are_torch_s(name):
    torch = pytest.importorskip("torch")
    ours = _typename_messages(tg, np.dtype(name))
    assert tuple(m.replace("tapegrad.", "torch.") for m in ours) == _typename_messages(torch, getattr(torch, name))

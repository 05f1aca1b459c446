"""tapegrad: reverse-mode automatic differentiation on a flat Wengert tape.

Operations run eagerly on NumPy arrays and append one entry each to a per-thread
tape; ``backward()`` walks the tape once in compiled (Numba) code.
"""

import numpy as np

from . import autograd  # noqa: F401  (tg.autograd)
from .autograd import gradcheck  # noqa: F401
from .autograd.grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled,  # noqa: F401
                                 no_grad, set_grad_enabled)
from .functions import *  # noqa: F401,F403
del to_dtype    # noqa: F821  (internal: ``Tensor.to``)
from .functions import (abs, add, amax, amin, argmax, argmin, bmm, broadcast_to, cat, clamp, clone,  # noqa: F401
                        concat, cos, diagonal, div, dot, exp, expm1, flatten, floor, log, log1p, log_softmax,
                        logsumexp, matmul, max, maximum, mean, min, minimum, mm, mul, mv, neg, permute, pow,
                        prod, relu, reshape, round, sigmoid, sign, sin, softmax, sqrt, squeeze, stack, std, sub,
                        sum, t, tan, tanh, transpose, unsqueeze, var, where)
from .core import tape as _tape
from .replay import NotReplayable, RecordedTape, TapeDivergence, compile, load_tape, record  # noqa: F401
from .profile import profile  # noqa: F401
from .core.tape import memory_stats  # noqa: F401
from .core.tensor import Tensor, device
from .creation import *  # noqa: F401,F403
from .numeric import *  # noqa: F401,F403
from .compat import *  # noqa: F401,F403  (legacy tensor types, as_strided, promote_types, default dtype/device)

from ._version import __version__  # noqa: F401
from .core.random import (Generator, default_generator, get_rng_state, initial_seed, manual_seed,  # noqa: F401
                          seed, set_rng_state)
from . import cuda  # noqa: F401

float64 = double = np.dtype(np.float64)
float32 = float = np.dtype(np.float32)
float16 = half = np.dtype(np.float16)
int64 = long = np.dtype(np.int64)
int32 = int = np.dtype(np.int32)
int16 = short = np.dtype(np.int16)
int8 = np.dtype(np.int8)
uint8 = np.dtype(np.uint8)
bool = np.dtype(np.bool_)

clip = clamp


from . import nn, optim, utils  # noqa: E402,F401
from .nn._losses import cdist  # noqa: E402,F401  (torch.cdist, beside nn's distances)
from . import special  # noqa: E402,F401  (tg.special)
from .serialization import load, save  # noqa: E402,F401
from . import linalg  # noqa: E402,F401  (tg.linalg)
from . import complex_tensor as _complex_tensor  # noqa: E402
_complex_tensor.public_names(globals())     # tg.complex, tg.view_as_real...; tg.add, tg.abs... take complex tensors
from . import fft  # noqa: E402,F401  (tg.fft)
from . import func  # noqa: E402,F401  (tg.func)
from .func import vmap  # noqa: E402,F401  (torch.vmap)
from . import accelerator, amp, backends, onnx  # noqa: E402,F401  (CPU-only answers: tg.accelerator...)
from .cuda import amp as _cuda_amp  # noqa: E402,F401  (tg.cuda.amp)
from .amp import autocast  # noqa: E402,F401
globals().update(linalg.TORCH_FUNCTIONS)     # tg.det, tg.inverse, tg.cholesky_solve, ... (PyTorch's names outside torch.linalg)
from .replay.compile import register_wrapper as _register_wrapper  # noqa: E402
from .replay.tapefile import register_function as _register_function  # noqa: E402
_register_wrapper(nn.Module, nn.modules.OptimizedModule)            # tg.compile(module), as torch.compile
_register_function("label_flags", nn.functional.label_flags)        # the labels' guard of a loss, in tape files
from . import _out  # noqa: E402
_out.install(globals())                 # out= on the functions that take it in PyTorch
# create_graph gradients of a scalar as one entry (registers its host op and api.grad's entry
# point; imported after tg.linalg and tg.fft, so their host ops keep their opcodes)
from .autograd import grad_entry as _grad_entry  # noqa: F401,E402


def __getattr__(name):
    if name in ("distributions", "distributed"):     # imported on first use
        import importlib
        return importlib.import_module("." + name, __name__)
    if name == "Tape":
        import warnings
        warnings.warn("tapegrad.Tape is deprecated and will be removed in the next release: the recorded "
                      "tape of tg.record is tapegrad.RecordedTape", DeprecationWarning, stacklevel=2)
        return RecordedTape
    raise AttributeError("module 'tapegrad' has no attribute %r" % name)

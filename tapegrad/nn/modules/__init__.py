"""The modules of ``tg.nn``, one file per kind as PyTorch's ``torch.nn.modules``
(``tapegrad.nn.modules.linear.Linear`` is ``torch.nn.modules.linear.Linear``)."""
from ..parameter import Buffer, Parameter  # noqa: F401
from .module import (Module, OptimizedModule, RemovableHandle, register_module_forward_hook,  # noqa: F401
                     register_module_forward_pre_hook, register_module_full_backward_hook,
                     register_module_full_backward_pre_hook)
from .activation import *  # noqa: F401,F403
from .container import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .flatten import *  # noqa: F401,F403
from .linear import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from . import activation, container, conv, flatten, linear, loss  # noqa: F401

__all__ = (["Module", "Parameter", "Buffer"] + activation.__all__ + container.__all__ + conv.__all__ + flatten.__all__
           + linear.__all__ + loss.__all__)

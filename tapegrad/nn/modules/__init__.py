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
from .batchnorm import *  # noqa: F401,F403
from .distance import *  # noqa: F401,F403
from .fold import *  # noqa: F401,F403
from .instancenorm import *  # noqa: F401,F403
from .pixelshuffle import *  # noqa: F401,F403
from .dropout import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403
from .padding import *  # noqa: F401,F403
from .pooling import *  # noqa: F401,F403
from .rnn import *  # noqa: F401,F403
from .sparse import *  # noqa: F401,F403
from .transformer import *  # noqa: F401,F403
from .upsampling import *  # noqa: F401,F403
from . import (activation, batchnorm, container, conv, distance, dropout, flatten, fold, instancenorm,  # noqa: F401
               linear, loss, normalization, padding, pixelshuffle, pooling, rnn, sparse, transformer, upsampling)

__all__ = (["Module", "Parameter", "Buffer"] + activation.__all__ + container.__all__ + conv.__all__ + flatten.__all__
           + linear.__all__ + loss.__all__ + batchnorm.__all__ + distance.__all__ + dropout.__all__ + fold.__all__
           + instancenorm.__all__ + pixelshuffle.__all__
           + normalization.__all__ + padding.__all__ + pooling.__all__ + rnn.__all__ + sparse.__all__
           + transformer.__all__ + upsampling.__all__)

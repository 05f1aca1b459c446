"""Neural-network building blocks (``tg.nn``): Parameter, Module, layers and losses."""
from . import functional  # noqa: F401
from . import init  # noqa: F401
from . import modules  # noqa: F401
from . import parameter  # noqa: F401
from .modules import *  # noqa: F401,F403
from .modules import (register_module_forward_hook, register_module_forward_pre_hook,  # noqa: F401
                      register_module_full_backward_hook, register_module_full_backward_pre_hook)
from .parameter import Buffer, Parameter  # noqa: F401
from . import utils  # noqa: F401,E402  (tg.nn.utils: clip_grad_norm_, parameters_to_vector, rnn.pad_sequence)
from . import parallel  # noqa: F401,E402  (tg.nn.parallel)
from .parallel import DataParallel  # noqa: F401,E402

"""tg.autograd: backward and grad (``api``), gradcheck, anomaly and grad modes,
``tg.autograd.functional``; the backward passes themselves are ``engine``
(compiled), ``differentiable`` (create_graph) and what they share, ``walk``."""
from .anomaly import detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled, set_detect_anomaly  # noqa
from .api import backward, grad  # noqa: F401
from .grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled  # noqa: F401
from .gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: F401
from . import functional, graph  # noqa: F401
from . import function  # noqa: F401
from .function import Function, FunctionCtx  # noqa: F401  (and tg.autograd.function.once_differentiable)
from .variable import Variable  # noqa: F401  (the legacy name of a tensor)

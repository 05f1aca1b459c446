"""``tg.backends.cudnn``: no cuDNN (no CUDA); its flags are accepted and do nothing."""
enabled = True
benchmark = False
deterministic = False
allow_tf32 = True
benchmark_limit = 10


def is_available():
    return False


def version():
    return None

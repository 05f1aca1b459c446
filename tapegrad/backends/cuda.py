"""``tg.backends.cuda``: not built with CUDA; the matmul flags are accepted and do nothing."""


class _MatmulFlags:
    allow_tf32 = False
    allow_fp16_reduced_precision_reduction = True
    allow_bf16_reduced_precision_reduction = True


matmul = _MatmulFlags()


def is_built():
    return False


def flash_sdp_enabled():
    return False


def mem_efficient_sdp_enabled():
    return False


def math_sdp_enabled():
    return True

"""``tg.onnx``: importable, for scripts that import it without exporting; tapegrad
records tapes (``tg.record``), not ONNX graphs, so ``export`` raises."""

__all__ = ["export", "is_in_onnx_export"]


def is_in_onnx_export():
    return False


def export(*args, **kwargs):
    raise NotImplementedError("tapegrad cannot export ONNX graphs; tg.record(f, *args).save(path) saves a "
                              "replayable tape of a function instead")

import os

# The suite compiles kernels in the foreground, at the first backward that wants them,
# so that what a test sees does not depend on a background compile's progress
# (tests/test_background.py starts that compile on purpose; subprocesses inherit this).
os.environ.setdefault("TAPEGRAD_BACKGROUND_COMPILE", "0")

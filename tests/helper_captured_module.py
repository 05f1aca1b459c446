"""A module of its own for tests/test_replay_guards.py: a function that reads this
module's globals, called by a function compiled in another module."""
SCALE = 2.0


def scaled(x):
    return x * SCALE

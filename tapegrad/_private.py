"""Where tapegrad writes, and what it trusts there.

tapegrad writes files that it later runs or unpickles: the kernels it generates from
its op table and per tape (Python modules it imports), Numba's cache of the compiled
kernels (pickles Numba loads) and the background compile's stamp, lock and log.  A
file another user could plant there would run as code in this process, so each lives
only in a directory that ``problem`` accepts, checked again before every use: a real
directory (not a symbolic link) owned by this user, that neither its group nor others
can write, in a parent directory others cannot rename it out of (one they cannot
write, or a sticky one such as /tmp).  Those tapegrad makes get mode 0700.  The root
user is not denied access by modes, so the checks look at ownership and modes
themselves rather than trying to write.

Where (docs/environment.md):

* generated modules: ``tapegrad/_generated/`` in the package, else
  ``$XDG_CACHE_HOME/tapegrad`` (``~/.cache/tapegrad``);
* Numba's cache: ``NUMBA_CACHE_DIR`` when set (one subdirectory per source directory,
  as Numba names them), else the ``__pycache__`` beside each source, else
  ``$XDG_CACHE_HOME/tapegrad/numba``;
* the background compile's files: beside Numba's cache of the sweep.

Where no directory qualifies (a read-only installation and home, a directory of
another user's, a file where a directory should be), there is one RuntimeWarning
naming the directory and why, and tapegrad goes on without the disk: generated
modules are executed from their text in memory, kernels are compiled without a disk
cache (each process compiles them again), and the background compile is off.
"""
import hashlib
import os
import stat
import threading
import warnings

WINDOWS = os.name == "nt"       # (access is by ACLs there: only the kind of file is checked)
PACKAGE = os.path.dirname(os.path.abspath(__file__))

_LOCK = threading.Lock()
_WARNED = set()


class Refused(OSError):
    """A directory tapegrad does not use: ``path`` and why (``reason``)."""

    def __init__(self, path, reason):
        super().__init__("%s: %s" % (path, reason))
        self.path, self.reason = path, reason


def problem(path):
    """Why directory ``path`` is not to be trusted with files tapegrad runs, or None."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "it does not exist"
    except OSError as e:
        return "it cannot be examined (%s)" % (e.strerror or e)
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    if WINDOWS:
        return None
    if st.st_uid != os.geteuid():
        return "it belongs to another user (uid %d)" % st.st_uid
    if st.st_mode & 0o022:
        return "others can write to it (mode %03o)" % (st.st_mode & 0o777)
    parent = os.path.dirname(os.path.abspath(path))
    try:
        pst = os.stat(parent)
    except OSError as e:
        return "its parent cannot be examined (%s)" % (e.strerror or e)
    if pst.st_mode & 0o022 and not pst.st_mode & stat.S_ISVTX and pst.st_uid != os.geteuid():
        return "others can rename it: its parent %s is writable by them and not sticky" % parent
    return None


def ensure(path):
    """``path`` as a directory ``problem`` accepts and this user can write into, made
    (mode 0700) when it does not exist; raises ``Refused``."""
    path = os.path.abspath(path)
    if not os.path.lexists(path):
        try:
            os.makedirs(path, 0o700)
        except FileExistsError:
            pass
        except OSError as e:
            raise Refused(path, "it cannot be made (%s)" % (e.strerror or e)) from None
    why = problem(path)
    if why is None and not os.access(path, os.W_OK | os.X_OK):
        why = "it is not writable"
    if why is not None:
        raise Refused(path, why)
    return path


def checked(path):
    """Whether ``path`` still passes ``problem`` (before each use of a directory chosen before)."""
    return path is not None and problem(path) is None


def warn_once(key, msg, stacklevel=3):
    with _LOCK:
        if key in _WARNED:
            return
        _WARNED.add(key)
    warnings.warn("tapegrad: " + msg, RuntimeWarning, stacklevel=stacklevel)


def user_cache():
    """tapegrad's directory in the user's cache (not made here)."""
    if WINDOWS:
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~\\AppData\\Local")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "tapegrad")


def _first(candidates, what):
    """The first of ``candidates`` that ``ensure`` accepts, or None after one warning
    naming each and why (once per ``what``); a candidate that is a place tapegrad may not
    write (a read-only installation) passes silently to the next."""
    refused = []
    for path in candidates:
        try:
            return ensure(path)
        except Refused as e:
            refused.append(e)
    warn_once(("none", what), "no private directory for %s (%s); %s" % (
        what, "; ".join("%s: %s" % (e.path, e.reason) for e in refused), _WITHOUT[what]))
    return None


_WITHOUT = {
    "its generated kernels": "they are run from memory",
    "Numba's cache of its kernels": "they are compiled without a disk cache (again in each process)",
}


def generated_dir():
    """The directory of the generated modules, or None (run them from memory)."""
    return _first([os.path.join(PACKAGE, "_generated"), user_cache()], "its generated kernels")


def numba_root():
    """The directory under which Numba caches tapegrad's kernels, one subdirectory per
    source directory (``subdir``), when that is not beside their sources: an accepted
    ``NUMBA_CACHE_DIR``, or the user cache's when the sources' own ``__pycache__`` is not
    usable.  None: beside the sources (Numba's default).  False: no disk cache at all."""
    env = os.environ.get("NUMBA_CACHE_DIR")
    if env:
        try:
            return ensure(env)
        except Refused as e:
            warn_once(("env", env), "NUMBA_CACHE_DIR=%s is not used: %s" % (env, e.reason))
            root = _first([os.path.join(user_cache(), "numba")], "Numba's cache of its kernels")
            return root if root is not None else False
    if _in_tree_ok(os.path.join(PACKAGE, "kernels", "__pycache__")):
        return None
    root = _first([os.path.join(user_cache(), "numba")], "Numba's cache of its kernels")
    return root if root is not None else False


def _in_tree_ok(d):
    try:
        ensure(d)
        return True
    except Refused:
        return False


def subdir(source_dir):
    """The subdirectory of a cache root for the sources in ``source_dir``, named as
    Numba names it under NUMBA_CACHE_DIR (the directory's name and the SHA-1 of its path)."""
    src = os.path.abspath(source_dir)
    return "%s_%s" % (os.path.basename(src), hashlib.sha1(src.encode()).hexdigest())


def numba_dir(source_file):
    """Where Numba caches the functions of ``source_file``, checked and made; None: no
    disk cache for them (compiled in memory)."""
    src = os.path.dirname(os.path.abspath(source_file))
    root = numba_root()
    if root is None:
        beside = os.path.join(src, "__pycache__")
        if _in_tree_ok(beside):
            return beside
        root = _first([os.path.join(user_cache(), "numba")], "Numba's cache of its kernels")
    if not root:
        return None
    try:
        return ensure(os.path.join(root, subdir(src)))
    except Refused as e:
        warn_once(("sub", e.path), "Numba's cache directory %s is not used: %s; compiling without it"
                  % (e.path, e.reason))
        return None


def open_private(path, flags, mode=0o600):
    """``os.open`` of a file in a checked directory, never through a symbolic link
    (O_NOFOLLOW) and never a file that is not a regular one."""
    fd = os.open(path, flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), mode)
    regular = False
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    finally:
        if not regular:
            os.close(fd)
    if not regular:
        raise OSError("%s is not a regular file" % path)
    return fd

"""Where the user's code is: the frames outside the ferrax package.

Errors and warnings name the user's line, however deep in ferrax they are raised. A leaf
module (it imports nothing of ferrax), so that every layer can use it.
"""

from __future__ import annotations

import linecache
import os
import sys
from types import FrameType

__all__ = ["in_ferrax", "user_location", "user_stacklevel"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def in_ferrax(filename: str) -> bool:
    """True for a source file of the ferrax package."""
    return os.path.abspath(filename).startswith(_PACKAGE_DIR)


def user_location() -> str:
    """``file:line`` and the source line of the innermost frame outside ferrax."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not in_ferrax(filename):
            line = linecache.getline(filename, frame.f_lineno).strip()
            return f"{filename}:{frame.f_lineno}" + (f": {line}" if line else "")
        frame = frame.f_back
    return "<unknown>"


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a ``warnings.warn`` in the caller of this function
    name the innermost frame outside ferrax."""
    frame = sys._getframe(1)
    level = 1
    while frame.f_back is not None and in_ferrax(frame.f_code.co_filename):
        frame = frame.f_back
        level += 1
    return level

"""Imported by the forkserver that forks a sweep's runs (its preload, :mod:`netfl.study.local`), and only there.

The forkserver reports an exception raised in a process it forked before that process reached netfl's code by
printing its traceback. One such exception is expected: the driver killed outright while it was starting a
run, so that the run's process finds the pipe its orders come through closed (EOFError, BrokenPipeError).
That run never began, and its driver is gone: there is nobody to tell, and a traceback on the terminal would
only alarm. Every other exception is printed as before.
"""

from __future__ import annotations

import sys

#: The driver's end of the pipe closed.
DRIVER_GONE = (EOFError, BrokenPipeError, ConnectionResetError)


def quiet_when_the_driver_is_gone(kind, value, traceback) -> None:
    if not issubclass(kind, DRIVER_GONE):
        sys.__excepthook__(kind, value, traceback)


sys.excepthook = quiet_when_the_driver_is_gone

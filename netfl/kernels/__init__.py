"""Compiled loops (numba) for the steps that run once per device change, where numpy's passes cost too much.

Ten million phones change some 1.5e9 times a day (availability, chargers, their owners' use, the battery's
marks). As vectorised numpy steps, each change is some sixty passes over temporaries and is bound by memory
bandwidth (about 150 ns a change); compiled, a device is taken through its changes in one pass, in registers
(about 30 ns). These modules are the one implementation of that step and of the models' next-change draws:

* :mod:`netfl.kernels.keyed` -- :mod:`netfl.keyed_random`'s counter-based draws, one value at a time;
* :mod:`netfl.kernels.models` -- the continuous-time population models' next change (sessions, diurnal, daily);
* :mod:`netfl.kernels.idle_step` -- an idle device's changes in its own time order, with its battery.

They import numba, so nothing imports them before a world needs them (a population model of those kinds, or the
array form of the engine): a small world with per-round availability never loads numba. Every function is
compiled with explicit signatures and ``cache=True``: the first import on a machine compiles them (about 70 s
of CPU: the helpers are inlined into the entry points, so that no tuple of arrays is handed over by value at
every change; the per-change body is compiled twice, in ``take_rows`` and ``take_due``: one entry point for both
compiled in 40 s but took 2-7 % longer a change, 10^5 phones, three alternated pairs) and stores
the machine code in ``__pycache__`` beside these files, or, where that folder is not writable (a wheel installed
read-only), in numba's user-wide cache (``~/.cache/numba``; ``NUMBA_CACHE_DIR`` chooses another folder); later
imports load it (numba's import, about 0.2 s, and the first load, about 0.45 s of CPU on an idle machine, most of
it numba's own set-up of its CPU target, which imports scipy.linalg to look for a BLAS). The test suite's
controller compiles them before xdist starts its workers (tests/conftest.py), so that they are not compiled in
each worker at once. The
cache is keyed by each file's contents: a change to the options in :mod:`netfl.kernels.keyed` alone leaves the
other files' entries as they were (remove ``__pycache__/*.nbi`` then). Every parameter a model or a device
has is passed as an array with one value per device (a read-only broadcast when a group shares one value), so
a parameter made per-device changes no kernel.

The arithmetic is numpy's, operation for operation (no fast-math, no fused multiply-adds), and the
transcendental functions are the C library's, which numpy's float64 ufuncs call too on a CPU without AVX-512:
the results are those of the vectorised steps these replace, to the bit (tests/engine/test_kernels.py).
"""

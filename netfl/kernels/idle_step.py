"""An idle device's changes in its own time order, with its battery: the engine's per-change step, compiled.

:class:`netfl.sim.idle_changes.IdleChanges` holds the arrays and hands them over as tuples (below); these
functions take each due device through its changes one at a time -- its battery's marks (empty while draining,
its min_level while charging below it), its availability, its charger and its owner's use, whichever comes
first (at one instant, in that order) -- settling the battery between them and drawing each model's next change
(:mod:`netfl.kernels.models`), one pass per device and no temporaries. The physics is
:class:`~netfl.sim.battery.Battery`'s, as netfl/sim/idle_battery.py describes it; every sum is the one the
vectorised step took before, in the same order (a load zeroed by multiplying with 0 or 1, as numpy did).

A model whose draws are Python's (:data:`~netfl.kernels.models.EXTERNAL`) stops its device at its change
(settled up to it): the caller flips those models for all the stopped devices at once and calls
:func:`take_rows` again, saying which change each device has had. The events of a change go into a buffer the
caller empties; a device whose next change might not fit stops before it, to be taken on the next call.

The tuples: ``state`` (:data:`STATE`): level, since, alive, charging, using, energy idle, energy in use,
charged, below min_level (events only), online, online since, online time, the battery's next mark, the next
change, held by an actor -- per device; ``columns`` (:data:`COLUMNS`): idle, charger and use power, capacity,
min_level, a finite battery -- per device (broadcasts where a group shares them) -- and the logged levels
(:data:`LEVELS_T`, netfl/sim/logged_levels.py): each device's logged power (its battery's slope between two
logged levels: positive while the level falls, 0 without) and when its next logged level comes (inf: none),
which the step moves on at each logged level (a source of changes of its own), from the levels' points
(``offsets``, ``times`` and the power from each, CSR, and each device's next point); ``group`` (:data:`GROUP`):
its first device, whether its availability changes in continuous time, whether it asks for the charger,
its cause code, whether events are logged; the three models (availability, charger, use), indexed by the
device's row in its group; ``events`` (:data:`EVENTS`) and ``stops`` (:data:`STOPS`): buffers with a count.
"""

from __future__ import annotations

import math

from numba import njit, types

from netfl.kernels.codes import ABSENT, EXTERNAL
from netfl.kernels.keyed import _INLINE, _JIT
from netfl.kernels.models import B1, F8, I8, MODEL, PARAM, array, flip

# sources of a change, in the order changes at one instant are taken (LEVELS: the logged battery's next level)
BATTERY, AVAILABILITY, CHARGER, USAGE = 0, 1, 2, 3
#: The device stopped before a change because the event buffer might not hold its events.
FULL = 4
LEVELS = 5
#: At most this many events come of one change (a settle's two marks, an emptying's four).
EVENTS_PER_CHANGE = 8
# the idle events' codes (netfl/sim/idle_events.py: KINDS, and its fixed causes)
ONLINE, OFFLINE, BATTERY_EMPTY, POWER_ON, CHARGE_START, CHARGE_STOP = 0, 1, 2, 3, 4, 5
BELOW_MIN_LEVEL, ABOVE_MIN_LEVEL, BATTERY_FULL, USE_START, USE_END = 6, 7, 8, 9, 10
NO_CAUSE, CAUSE_BATTERY_EMPTY, CAUSE_CHARGING = 0, 1, 2
# group fields
_START, _CONTINUOUS, _REQUIRES_CHARGING, _CAUSE, _EVENTS = 0, 1, 2, 3, 4

STATE = types.Tuple((F8, F8, B1, B1, B1, F8, F8, F8, B1, B1, F8, F8, F8, F8, B1))
#: The logged levels: power now, next level's time, next point -- per device -- and the points (offsets, times,
#: the power from each).
LEVELS_T = types.Tuple((F8, F8, I8, array(types.int64, readonly=True), PARAM, PARAM))
COLUMNS = types.Tuple((PARAM, PARAM, PARAM, PARAM, PARAM, array(types.boolean, readonly=True), LEVELS_T))
GROUP = array(types.int64, readonly=True)
EVENTS = types.Tuple((F8, I8, I8, I8, F8, I8))
STOPS = types.Tuple((I8, I8, F8, I8))
ROWS = array(types.int64, readonly=True)


@njit(**_INLINE)
def _log(events, kind, d, t, cause, level):
    n = events[5][0]
    events[0][n], events[1][n], events[2][n], events[3][n], events[4][n] = t, d, kind, cause, level
    events[5][0] = n + 1


@njit(**_INLINE)
def _mask(flag):
    return 1.0 if flag else 0.0


@njit(**_INLINE)
def net_drain(state, columns, d):
    """The rate at which device d's level falls (negative while the charger out-supplies its loads)."""
    load = _mask(state[2][d]) * columns[0][d]
    load += _mask(state[4][d]) * columns[4][d]
    load -= _mask(state[3][d]) * columns[1][d]
    logged = columns[6][0][d]
    if logged != 0.0 and (state[2][d] or logged < 0.0):  # a dead device draws nothing; a logged rise still charges
        load += logged
    return load


@njit(**_INLINE)
def _clip(x, lo, hi):
    return min(max(x, lo), hi)


@njit(**_INLINE)
def settle(state, columns, group, events, d, t):
    """Account device d's energy and charge from its ``since`` up to ``t``; log the marks its level passed."""
    level, since, alive, using = state[0], state[1], state[2], state[4]
    dt = t - since[d]
    state[5][d] += _mask(alive[d]) * (columns[0][d] * dt)
    if using[d]:
        state[6][d] += columns[4][d] * dt
    if columns[5][d]:
        before = level[d]
        drain = net_drain(state, columns, d)
        capacity = columns[2][d]
        after = _clip(before - drain * dt, 0.0, capacity)
        if group[_EVENTS]:
            _marks_passed(events, state[8], d, since[d], capacity, columns[3][d], before, after, drain, t)
        gained = after - before
        if gained > 0:
            state[7][d] += gained
        level[d] = after
    since[d] = t


@njit(**_JIT)
def _marks_passed(events, below, d, since, capacity, min_level, before, after, drain, until):
    """The marks at which the actor's battery watch wakes, passed between two changes: full while charging,
    min_level on the way down, each at the instant the level reached it (called, not inlined: events only)."""
    if drain < 0 and after >= capacity and before < capacity:
        at = since + (before - capacity) / drain
        _log(events, BATTERY_FULL, d, _clip(at, since, until), NO_CAUSE, math.nan)
    floor = min_level * capacity
    if drain > 0 and min_level > 0 and after <= floor and not below[d]:
        at = since + (before - floor) / drain
        below[d] = True
        _log(events, BELOW_MIN_LEVEL, d, _clip(at, since, until), NO_CAUSE, min_level)


@njit(**_INLINE)
def battery_at(state, columns, d):
    """When device d reaches its battery's next mark at its present drain: empty while it drains, its min_level
    while it charges below it (inf: neither, on mains power, or off)."""
    drain = net_drain(state, columns, d)
    level, since = state[0][d], state[1][d]
    finite = columns[5][d]
    live = state[2][d] and finite
    out = since + level / drain
    if not (live and drain > 0):
        out = math.inf
    floor = columns[3][d] * (columns[2][d] if finite else 0.0)
    if live and drain < 0 and level < floor:
        out = since + (floor - level) / -drain
    return out


@njit(**_INLINE)
def _says_online(state, group, availability, j, d):
    online = availability[2][j] and state[2][d]
    if group[_REQUIRES_CHARGING]:
        online = online and state[3][d]
    return online


@njit(**_INLINE)
def _set_online(state, group, events, d, online, t, emptied):
    was = state[9][d]
    if was and not online:
        state[11][d] += t - state[10][d]
        if group[_EVENTS]:
            _log(events, OFFLINE, d, t, CAUSE_BATTERY_EMPTY if emptied else group[_CAUSE], math.nan)
    elif online and not was:
        state[10][d] = t
        if group[_EVENTS]:
            _log(events, ONLINE, d, t, group[_CAUSE], math.nan)
    state[9][d] = online


@njit(**_INLINE)
def _boot(state, columns, group, events, availability, j, d, t):
    """A dead device on a charger that out-supplies its idle draw, or whose logged level rises, powers on (its
    availability asked again)."""
    if not state[2][d] and ((state[3][d] and columns[1][d] > columns[0][d]) or columns[6][0][d] < 0.0):
        state[2][d] = True
        if group[_EVENTS]:
            _log(events, POWER_ON, d, t, CAUSE_CHARGING, math.nan)
        if group[_CONTINUOUS]:
            _set_online(state, group, events, d, _says_online(state, group, availability, j, d), t, False)


@njit(**_INLINE)
def _battery_mark(state, columns, group, events, availability, j, d, t):
    """Device d reached its battery's mark: emptied if draining, else at its min_level."""
    if net_drain(state, columns, d) > 0:
        state[0][d] = 0.0
        state[2][d] = False
        state[4][d] = False
        if group[_EVENTS]:
            _log(events, BATTERY_EMPTY, d, t, NO_CAUSE, math.nan)
            if columns[3][d] > 0:
                state[8][d] = True
        _set_online(state, group, events, d, False, t, True)
        _boot(state, columns, group, events, availability, j, d, t)
    else:
        state[0][d] = columns[3][d] * columns[2][d]  # exact: no rounding short
        if group[_EVENTS] and state[8][d]:
            _log(events, ABOVE_MIN_LEVEL, d, t, NO_CAUSE, columns[3][d])
        state[8][d] = False


@njit(**_INLINE)
def _flipped(state, columns, group, events, availability, charger, usage, source, j, d, t):
    """What a flip of ``source``'s model (done) changes for device d."""
    if source == AVAILABILITY:
        _set_online(state, group, events, d, _says_online(state, group, availability, j, d), t, False)
    elif source == CHARGER:
        state[3][d] = charger[2][j]
        if group[_EVENTS]:
            fraction = state[0][d] / columns[2][d] if columns[5][d] else 1.0
            _log(events, CHARGE_START if state[3][d] else CHARGE_STOP, d, t, NO_CAUSE, fraction)
        _boot(state, columns, group, events, availability, j, d, t)
        if group[_REQUIRES_CHARGING] and group[_CONTINUOUS]:
            _set_online(state, group, events, d, _says_online(state, group, availability, j, d), t, False)
    else:
        was = state[4][d]
        using = usage[2][j] and state[2][d]
        if group[_EVENTS]:
            if using and not was:
                _log(events, USE_START, d, t, NO_CAUSE, math.nan)
            elif was and not using:
                _log(events, USE_END, d, t, NO_CAUSE, math.nan)
        state[4][d] = using


@njit(**_INLINE)
def _next_level(levels, d):
    """Device d is at its next logged level: the power from it on, and when the level after it comes."""
    power, next_at, position, offsets, times, powers = levels
    k = position[d]
    power[d] = powers[k]
    k += 1
    position[d] = k
    next_at[d] = times[k] if k < offsets[d + 1] else math.inf


@njit(**_INLINE)
def _change_of(model, j):
    return math.inf if model[0] == ABSENT else model[3][j]


@njit(**_INLINE)
def _next_of(state, columns, group, availability, charger, usage, j, d):
    """Device d's earliest change and its source (the first source holding it)."""
    t, source = state[12][d], BATTERY
    if group[_CONTINUOUS]:
        a = _change_of(availability, j)
        if a < t:
            t, source = a, AVAILABILITY
    c = _change_of(charger, j)
    if c < t:
        t, source = c, CHARGER
    u = _change_of(usage, j)
    if u < t:
        t, source = u, USAGE
    v = columns[6][1][d]
    if v < t:
        t, source = v, LEVELS
    return t, source


@njit(**_INLINE)
def _take(state, columns, group, availability, charger, usage, events, j, now, pending, pending_t):
    """Take row j's changes up to ``now``, ``pending`` (a source, or -1) first: the change at ``pending_t`` of an
    external model, flipped by the caller since this device stopped at it (settled up to it). Returns -1, or the
    source it stops at (FULL: the event buffer might not hold the next change's events)."""
    d = group[_START] + j
    while True:
        if group[_EVENTS] and events[5][0] + EVENTS_PER_CHANGE > events[0].size:
            return FULL
        if pending >= 0:
            source, t, pending = pending, pending_t, -1
            _flipped(state, columns, group, events, availability, charger, usage, source, j, d, t)
        else:
            t, source = _next_of(state, columns, group, availability, charger, usage, j, d)
            if t > now:
                break
            if source != AVAILABILITY:  # availability alone changes no load: the battery stays linear
                settle(state, columns, group, events, d, t)
            if source == BATTERY:
                _battery_mark(state, columns, group, events, availability, j, d, t)
            elif source == LEVELS:  # the logged power from this level on; a rise powers a dead device on
                _next_level(columns[6], d)
                _boot(state, columns, group, events, availability, j, d, t)
            else:  # each model by name: a tuple of arrays chosen at run time would count references each time
                if source == AVAILABILITY:
                    if availability[0] == EXTERNAL:
                        return source
                    flip(availability, j)
                elif source == CHARGER:
                    if charger[0] == EXTERNAL:
                        return source
                    flip(charger, j)
                else:
                    if usage[0] == EXTERNAL:
                        return source
                    flip(usage, j)
                _flipped(state, columns, group, events, availability, charger, usage, source, j, d, t)
        if source != AVAILABILITY:  # a load or the level changed: the battery's next mark moves
            state[12][d] = battery_at(state, columns, d)
    state[13][d] = t
    return -1


@njit(**_INLINE)
def _stop(stops, k, source, t):
    n = stops[3][0]
    stops[0][n], stops[1][n], stops[2][n] = k, source, t
    stops[3][0] = n + 1


@njit(
    types.int64(STATE, COLUMNS, GROUP, MODEL, MODEL, MODEL, EVENTS, ROWS, PARAM, ROWS, PARAM, STOPS),
    **_JIT,
)
def take_rows(state, columns, group, availability, charger, usage, events, rows, now, pending, pending_t, stops):
    """Take rows ``rows`` through their changes up to ``now[k]`` each (``pending``, ``pending_t``: see
    :func:`_take`); those that stop at an external model's change go into ``stops`` (their position k in
    ``rows``, the source, the change's time). Returns the position of the row at which the event buffer filled,
    whose changes and the following rows' are still to take (``rows.size``: none)."""
    for k in range(rows.size):
        j = rows[k]
        stopped = _take(
            state, columns, group, availability, charger, usage, events, j, now[k], pending[k], pending_t[k]
        )
        if stopped == FULL:
            return k
        if stopped >= 0:
            d = group[_START] + j
            _stop(stops, k, stopped, _next_of(state, columns, group, availability, charger, usage, j, d)[0])
    return rows.size


@njit(
    types.int64(STATE, COLUMNS, GROUP, MODEL, MODEL, MODEL, EVENTS, types.int64, types.int64, types.float64, STOPS),
    **_JIT,
)
def take_due(state, columns, group, availability, charger, usage, events, first, last, now, stops):
    """Take every row from ``first`` to ``last`` (excluded) whose next change is due by ``now`` through its
    changes; those that stop at an external model's change go into ``stops`` (row, source, time). Returns the
    row at which the event buffer filled, from which to scan on (``last``: none)."""
    start, next_at = group[_START], state[13]
    for j in range(first, last):
        if next_at[start + j] <= now:
            stopped = _take(state, columns, group, availability, charger, usage, events, j, now, -1, 0.0)
            if stopped == FULL:
                return j
            if stopped >= 0:
                _stop(stops, j, stopped, _next_of(state, columns, group, availability, charger, usage, j, start + j)[0])
    return last


@njit(**_INLINE)
def _schedule(state, columns, group, availability, charger, usage, j, d):
    state[12][d] = battery_at(state, columns, d)
    state[13][d] = math.inf if state[14][d] else _next_of(state, columns, group, availability, charger, usage, j, d)[0]


@njit(types.void(STATE, COLUMNS, GROUP, MODEL, MODEL, MODEL, EVENTS, ROWS), **_JIT)
def start_rows(state, columns, group, availability, charger, usage, events, rows):
    """Rows ``rows`` at time 0: plugged in, in use and online as their models start, their first change due."""
    for k in range(rows.size):
        j = rows[k]
        d = group[_START] + j
        if charger[0] != ABSENT:
            state[3][d] = charger[2][j]
            _boot(state, columns, group, events, availability, j, d, 0.0)
        if usage[0] != ABSENT:
            state[4][d] = usage[2][j] and state[2][d]
        if group[_CONTINUOUS]:
            state[9][d] = _says_online(state, group, availability, j, d)
        _schedule(state, columns, group, availability, charger, usage, j, d)


@njit(types.void(STATE, COLUMNS, GROUP, MODEL, MODEL, MODEL, ROWS), **_JIT)
def schedule_rows(state, columns, group, availability, charger, usage, rows):
    """Rows ``rows`` start, or are idle again: their battery's next mark and their next change."""
    for k in range(rows.size):
        _schedule(state, columns, group, availability, charger, usage, rows[k], group[_START] + rows[k])


@njit(types.void(STATE, COLUMNS, GROUP, EVENTS, ROWS, PARAM), **_JIT)
def settle_devices(state, columns, group, events, devices, until):
    """Settle each of ``devices`` (any groups) up to ``until[k]``: their energy, charge and the marks passed."""
    for k in range(devices.size):
        settle(state, columns, group, events, devices[k], until[k])


@njit(types.int64(STATE, COLUMNS, types.int64, types.int64, types.boolean, types.float64, I8), **_JIT)
def eligible_rows(state, columns, first, last, exclude_using, now, out):
    """Devices ``first`` to ``last`` (excluded; idle ones advanced to ``now``) that are idle, online, on, not in
    use where ``exclude_using`` (use excludes training) and not below their min_level at ``now``, as
    :meth:`~netfl.sim.idle_battery.IdleBattery.below_min` says it, into ``out``, ascending; returns their number.
    One pass, no temporaries: the round's check of every device, which as numpy's passes cost more than the
    changes did at ten million devices."""
    level, since, alive, using, online, busy = state[0], state[1], state[2], state[4], state[9], state[14]
    capacity, min_level, finite = columns[2], columns[3], columns[5]
    n = 0
    for d in range(first, last):
        if not (online[d] and alive[d]) or busy[d] or (exclude_using and using[d]):
            continue
        if min_level[d] > 0 and finite[d]:
            drain = net_drain(state, columns, d)
            at = _clip(level[d] - drain * (now - since[d]), 0.0, capacity[d])
            threshold = min_level[d] * capacity[d]
            if at < threshold or (at == threshold and drain > 0):
                continue
        out[n] = d
        n += 1
    return n

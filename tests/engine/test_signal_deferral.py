"""A deferred signal is never lost: what a critical section noted and did not act on is delivered as it ends, to
the handler in force outside it (an enclosing section's, the default's), whenever in the section it came."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from netfl.signals import signals_deferred


def send(signum: int = signal.SIGINT) -> None:
    os.kill(os.getpid(), signum)


@pytest.fixture(autouse=True)
def ctrl_c_as_at_a_terminal() -> Iterator[None]:
    """Ctrl-C raising KeyboardInterrupt outside the sections, whatever this process inherited: a suite started
    in the background by a shell without job control (as CI may be) starts with SIGINT ignored, and Python
    then installs no handler for it."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_signal_noted_inside_is_raised_as_the_section_ends() -> None:
    reached_the_end = []
    with pytest.raises(KeyboardInterrupt):
        with signals_deferred() as noted:
            send()
            assert list(noted) == [signal.SIGINT]  # noted, not raised: the step goes on
            reached_the_end.append(True)
    assert reached_the_end == [True]


def test_a_nested_section_hands_its_signal_to_the_enclosing_one() -> None:
    """The sweep writes sweep.json in a section of its own inside the driver's: a SIGTERM there was once lost."""
    with signals_deferred() as outer:
        with signals_deferred() as inner:
            send(signal.SIGTERM)
        assert list(inner) == [signal.SIGTERM] and list(outer) == [signal.SIGTERM]
        outer.take()  # the driver acts on it itself


def test_a_signal_the_section_took_is_not_delivered_again_but_a_later_one_is() -> None:
    with signals_deferred() as outer:
        with signals_deferred() as inner:
            send(signal.SIGTERM)
            assert inner.take()
        assert list(outer) == []
        with signals_deferred() as inner:
            send(signal.SIGTERM)
            assert inner.take()
            send(signal.SIGINT)  # after the section acted: still delivered
        assert list(outer) == [signal.SIGINT]
        outer.take()


def test_repeats_are_delivered_once_each_kind_in_order() -> None:
    with signals_deferred() as outer:
        with signals_deferred():
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGTERM):
                send(signum)
        assert list(outer) == [signal.SIGTERM, signal.SIGINT]
        outer.take()


def test_an_ignored_signal_stays_ignored() -> None:
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with signals_deferred() as noted:
            send(signal.SIGTERM)
        assert list(noted) == [signal.SIGTERM]  # noted inside, and ignored after, as outside
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_nothing_noted_nothing_delivered() -> None:
    with signals_deferred() as noted:
        assert not noted.take()

"""How a run's first Ctrl-C / SIGTERM is told apart from a second one (no JVM)."""

from __future__ import annotations

import os
import signal

import pytest

from deltaflow.cli import main as cli


def test_a_second_sigterm_landing_inside_the_first_ones_handler_is_the_same_stop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``timeout`` signals the run, then its group: the second signal can land while the first is handled."""
    said: list[str] = []

    def say(line: str, *args: object) -> None:
        said.append(line)
        if len(said) == 1:
            os.kill(os.getpid(), signal.SIGTERM)  # its Python handler runs before this call returns

    monkeypatch.setattr(cli, "say", say)
    with cli.stop_on_signals() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.is_set()
    assert said == ["\nSIGTERM: stopping after the current batch (again to stop now)..."]


def test_a_signal_a_second_after_the_first_interrupts(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(cli.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(cli, "say", lambda *args: None)
    before = signal.getsignal(signal.SIGTERM)
    with cli.stop_on_signals() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        now[0] += cli.SAME_STOP_SECONDS / 2
        os.kill(os.getpid(), signal.SIGTERM)  # the same stop: nothing raised
        assert stop.is_set()
        now[0] += cli.SAME_STOP_SECONDS
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is before  # the run's handlers are gone with it

"""A fleet of sandboxes that does not fall over (issue 26): starts wait their turn in arrival
order."""

from __future__ import annotations

import threading
import time

import pytest

from deepswe.env.sandbox.admission import Admission

# --- admission ----------------------------------------------------------------------------------


def test_admission_is_first_come_first_served_and_bounded():
    gate = Admission("test", limit=2)
    order, inside, most = [], [0], [0]
    lock = threading.Lock()

    def start(i: int) -> None:
        with gate.slot():
            with lock:
                order.append(i)
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.05)
            with lock:
                inside[0] -= 1

    threads = []
    for i in range(12):
        threads.append(threading.Thread(target=start, args=(i,)))
        threads[-1].start()
        time.sleep(0.01)  # arrival order is the order of the calls
    for t in threads:
        t.join()
    assert order == list(range(12))
    assert most[0] == 2
    status = gate.status()
    assert (status.queued, status.starting, status.failed) == (0, 0, 0)


def test_admission_reports_queued_starting_ready_and_failed():
    gate = Admission("test", limit=1)
    seen = []
    gate.watch(seen.append)
    let_go = threading.Event()

    def second() -> None:
        with gate.slot():
            let_go.wait(10)

    with gate.slot():
        waiting = threading.Thread(target=second)
        waiting.start()
        while gate.status().queued == 0:
            time.sleep(0.01)
        assert (gate.status().queued, gate.status().starting) == (1, 1)
    let_go.set()
    waiting.join()
    gate.ready()
    with pytest.raises(RuntimeError), gate.slot():
        raise RuntimeError("engine said no")
    status = gate.status()
    assert (status.queued, status.starting, status.ready, status.failed) == (0, 0, 1, 1)
    assert "1 ready" in status.line() and seen[-1] == status

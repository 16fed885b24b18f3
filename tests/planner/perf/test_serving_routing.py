"""Requests running at once when slot-blind round-robin routers place a closed loop on decode
workers (``planner.perf.serving.routed_running``), against a simulation of that loop."""

from __future__ import annotations

import heapq
import random

import numpy as np
import pytest

from planner.perf.serving import routed_running

SIM_REQUESTS = 20_000
WAIT_TOLERANCE = 0.08
"""Absolute tolerance on the wait, in request times: the formula treats each router's share of the
workers as independent of the others', which the simulation does not."""


def _simulated_wait(workers: int, slots: int, clients: int, routers: int, seed: int = 1) -> float:
    """Mean wait for a slot, in request times (each 0.8-1x), of a closed loop of ``clients``: a
    round-robin balancer hands requests to ``routers`` routers in turn, each sending its requests
    to the workers in turn; a request routed to a full worker queues there."""
    rnd = random.Random(seed)
    busy = [0] * workers
    queues: list[list[float]] = [[] for _ in range(workers)]
    events: list[tuple[float, int]] = []
    turn = [0]
    pointers = [rnd.randrange(workers) for _ in range(routers)]
    waits: list[float] = []

    def start(t: float, w: int) -> None:
        busy[w] += 1
        heapq.heappush(events, (t + rnd.uniform(0.8, 1.0), w))

    def arrive(t: float) -> None:
        r = turn[0] % routers
        turn[0] += 1
        w = pointers[r] % workers
        pointers[r] += 1
        if busy[w] < slots:
            start(t, w)
            waits.append(0.0)
        else:
            queues[w].append(t)

    for _ in range(clients):
        arrive(0.0)
    for _ in range(SIM_REQUESTS):
        t, w = heapq.heappop(events)
        busy[w] -= 1
        if queues[w]:
            waits.append(t - queues[w].pop(0))
            start(t, w)
        arrive(t)
    steady = waits[clients * 20 :]
    return sum(steady) / len(steady)


def _wait(workers: int, slots: int, clients: int, routers: int) -> float:
    """The wait the formula implies (Little's law, request time 0.9: N / running - 1 in request
    times, the running requests' mean time being that of a request)."""
    running = routed_running(
        np.array([clients], float),
        np.array([workers], float),
        np.array([slots], float),
        np.array([routers], float),
    )[0]
    return float(clients / running - 1.0)


@pytest.mark.parametrize(
    ("workers", "slots", "clients", "routers"),
    [(3, 1, 3, 7), (4, 1, 4, 9), (7, 1, 7, 10), (3, 2, 6, 7), (5, 8, 30, 10), (4, 8, 36, 9)],
)
def test_the_wait_follows_a_simulated_loop(
    workers: int, slots: int, clients: int, routers: int
) -> None:
    """Shapes of InferenceMAX's srt-slurm deployments (7-10 frontends): as many clients as slots
    at one or two slots per worker leaves a third to half a request time of wait; at eight slots
    the misplacements are absorbed (30 clients on 40 slots) or only the pooled wait is left (36
    on 32: 0.125)."""
    simulated = _simulated_wait(workers, slots, clients, routers)
    assert abs(_wait(workers, slots, clients, routers) - simulated) < WAIT_TOLERANCE


def test_one_router_fills_every_worker_and_many_place_at_random() -> None:
    n = np.array([4.0, 3.0, 40.0, 4.0])
    w = np.array([4.0, 4.0, 4.0, 4.0])
    s = np.array([1.0, 1.0, 8.0, 1.0])
    one = routed_running(n, w, s, np.ones(4))
    np.testing.assert_allclose(one, np.minimum(n, w * s))  # no wait while a slot is free
    # a router per request: C ~ Binomial(4, 1/4) on each worker, E[min(C, 1)] = 1 - (3/4)^4
    many = routed_running(np.array([4.0]), np.array([4.0]), np.array([1.0]), np.array([100.0]))
    np.testing.assert_allclose(many, 4 * (1 - 0.75**4))
    assert np.all(routed_running(n, w, s, np.full(4, 7.0)) <= one + 1e-12)


def test_one_worker_runs_its_slots_whatever_the_routers() -> None:
    """Every request lands on the one worker: min(N, S), with no spread from the routers."""
    n, s = np.array([10.0, 3.0, 16.0]), np.array([4.0, 4.0, 13.0])
    got = routed_running(n, np.ones(3), s, np.full(3, 10.0))
    np.testing.assert_allclose(got, [4.0, 3.0, 13.0])
    got = routed_running(np.array([16.0]), np.ones(1), np.array([16.0]), np.array([10.0]))
    np.testing.assert_allclose(got, [16.0])

"""The asyncio body of `WorkQueue.get_async` (see `litemq._aio` for the bridge).

The task tries a non-blocking ``get(0)``; when there is no job it registers
with the queue handle's tail watch for the next message published and waits
for that, or 50 ms at most: jobs also come back without a publish (leases
that run out, workers that die, nacks, acks that free a full ring), and the
blocking ``get`` looks for them as often. A cancelled wait has taken no job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from litemq._aio import _bridge, _woken

if TYPE_CHECKING:
    from litemq._litemq import Job, WorkQueue

__all__ = ["get"]

#: Longest wait between two looks for jobs that came back without a publish.
_LOOK_EVERY = 0.05


async def get(wq: WorkQueue, timeout: float | None) -> Job | None:
    """The body of `WorkQueue.get_async` (arguments checked there)."""
    loop, bridge = _bridge()
    deadline = None if timeout is None else loop.time() + timeout
    while True:
        job = wq.get(0)
        if job is not None:
            return job
        remaining = None if deadline is None else deadline - loop.time()
        if remaining is not None and remaining <= 0:
            return None
        wait = _LOOK_EVERY if remaining is None else min(remaining, _LOOK_EVERY)
        await _woken(bridge, wq, wait)

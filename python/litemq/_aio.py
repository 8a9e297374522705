"""The asyncio bridge behind `Tailer.read_next_async`, `Tailer.follow_async`
and `Appender.flush_async`.

No thread per waiter and no polling. Each event loop gets one native
`_Notifier` (a socket pair watched with ``loop.add_reader``). A waiting task
registers a token with its queue handle's tail watch (one native thread per
handle, asleep on the queue's wake-up word while anyone waits) or with the
I/O thread (for a flush); the engine reports the token through the socket,
and the loop resolves the task's future. The read itself always happens in
the task, with a non-blocking ``read_next(0)``: a wait that is cancelled has
read nothing, so the next read returns the message.
"""

from __future__ import annotations

import asyncio
import itertools
import weakref
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol

from litemq import _litemq

if TYPE_CHECKING:
    from litemq._litemq import Appender, Message, Tailer, _Notifier

__all__ = ["FollowAsync", "flush", "read_next"]

#: Longest pause after a wake-up that found nothing to read (a hole not yet
#: known as damage): keeps such a tailer from spinning the loop.
_MAX_BACKOFF = 0.05


class _Bridge:
    """One event loop's notifier and the futures waiting on it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.notifier = _litemq._Notifier()
        self.futures: dict[int, asyncio.Future[None]] = {}
        self._tokens = itertools.count()
        self._loop = weakref.ref(loop)
        loop.add_reader(self.notifier.fileno(), self._drain)

    def future(self) -> tuple[int, asyncio.Future[None]]:
        loop = self._loop()
        assert loop is not None, "the bridge lives only as long as its loop"
        token = next(self._tokens)
        fut: asyncio.Future[None] = loop.create_future()
        self.futures[token] = fut
        return token, fut

    def forget(self, token: int) -> None:
        self.futures.pop(token, None)

    def _drain(self) -> None:
        for token, err in self.notifier.drain():
            fut = self.futures.pop(token, None)
            if fut is None or fut.done():
                continue
            if err is None:
                fut.set_result(None)
            else:
                fut.set_exception(err)


_bridges: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Bridge] = (
    weakref.WeakKeyDictionary()
)


def _bridge() -> tuple[asyncio.AbstractEventLoop, _Bridge]:
    loop = asyncio.get_running_loop()
    bridge = _bridges.get(loop)
    if bridge is None:
        bridge = _bridges[loop] = _Bridge(loop)
    return loop, bridge


async def read_next(tailer: Tailer, timeout: float | None) -> Message | None:
    """The body of `Tailer.read_next_async` (arguments checked there)."""
    if tailer.direction == "backward":
        return tailer.read_next(0)  # nothing older is ever written
    loop, bridge = _bridge()
    deadline = None if timeout is None else loop.time() + timeout
    backoff = 0.0
    while True:
        msg = tailer.read_next(0)
        if msg is not None:
            return msg
        remaining = None if deadline is None else deadline - loop.time()
        if remaining is not None and remaining <= 0:
            return None
        if backoff:
            await asyncio.sleep(min(backoff, remaining) if remaining is not None else backoff)
            remaining = None if deadline is None else max(deadline - loop.time(), 0.0)
        if await _woken(bridge, tailer, remaining):
            # Woken: read again. A wake-up that finds nothing (rare: a hole
            # at the tail) backs off before waiting again.
            msg = tailer.read_next(0)
            if msg is not None:
                return msg
            backoff = min(max(backoff * 2, 0.001), _MAX_BACKOFF)
        else:
            backoff = 0.0


class _Watchable(Protocol):
    """A handle whose tail watch reports the next publish (`Tailer`, `WorkQueue`)."""

    def _watch(self, notifier: _Notifier, token: int) -> int: ...
    def _unwatch(self, id: int) -> None: ...


async def _woken(bridge: _Bridge, handle: _Watchable, timeout: float | None) -> bool:
    """Waits for `handle`'s next publish, at most `timeout` seconds (None: no
    limit). True when woken, False at the timeout; ClosedError when the handle
    or its queue closed. A cancelled wait leaves nothing registered."""
    token, fut = bridge.future()
    try:
        watch = handle._watch(bridge.notifier, token)
    except BaseException:
        bridge.forget(token)
        _settle(fut)
        raise
    try:
        done, _ = await asyncio.wait({fut}, timeout=timeout)
        if fut in done:
            fut.result()  # raises ClosedError when the handle or queue closed
            return True
        return False
    finally:
        handle._unwatch(watch)
        bridge.forget(token)
        _settle(fut)


def _settle(fut: asyncio.Future[None]) -> None:
    """Leaves `fut` with nothing to report: cancelled if pending, its error
    retrieved if it failed while the task was being cancelled (else asyncio
    logs "Future exception was never retrieved")."""
    if not fut.done():
        fut.cancel()
    elif not fut.cancelled():
        fut.exception()


class FollowAsync(AsyncIterator["Message"]):
    """The async iterator from `Tailer.follow_async(idle_timeout=...)`."""

    def __init__(self, tailer: Tailer, idle_timeout: float | None) -> None:
        self._tailer = tailer
        self._idle = idle_timeout

    def __aiter__(self) -> FollowAsync:
        return self

    async def __anext__(self) -> Message:
        msg = await read_next(self._tailer, self._idle)
        if msg is None:
            raise StopAsyncIteration
        return msg

    def __repr__(self) -> str:
        return f"<litemq.FollowAsync over {self._tailer!r}>"


async def flush(appender: Appender) -> None:
    """The body of `Appender.flush_async`."""
    _, bridge = _bridge()
    token, fut = bridge.future()
    try:
        appender._flush_notify(bridge.notifier, token)
        await fut
    finally:
        bridge.forget(token)
        _settle(fut)

"""The bridge between episodes and a generator: episodes (on the rollout's event loop) queue their
generation requests, and :class:`GenerationBatcher` answers them on the trainer's thread, in batches
or (for a streaming generator) one by one as they arrive.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import queue
import threading
import time

from rl.generation import GenRequest, GenResult, Generator, RolloutError

__all__ = ["GenerationBatcher"]


class GenerationBatcher:
    """Collects generation requests from episodes on the portal's loop and answers them in batches
    on the thread that calls :meth:`serve` (the trainer's)."""

    def __init__(self, generator: Generator, *, max_wait_s: float = 1.0, seed: int | None = None):
        self.generator = generator
        self.max_wait_s = max_wait_s
        self.seed = seed  # a streaming generator's session seed
        self._queue: queue.Queue[tuple[GenRequest, concurrent.futures.Future] | None] = queue.Queue()
        self._lock = threading.Lock()
        self._active = 0
        self.error: BaseException | None = None
        self.batches: list[int] = []  # sizes, for the stats
        self.generate_s = 0.0

    # --- episode side (event loop thread)
    def enter(self) -> None:
        with self._lock:
            self._active += 1

    def leave(self) -> None:
        with self._lock:
            self._active -= 1
        self._queue.put(None)  # wake serve(): a batch it holds may now be complete

    async def generate(self, request: GenRequest) -> GenResult:
        if self.error is not None:
            raise RolloutError(f"generation failed earlier in this batch: {self.error!r}")
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self._queue.put((request, fut))
        return await asyncio.wrap_future(fut)

    # --- trainer side
    def serve(self, done: concurrent.futures.Future) -> None:
        """Answer requests until ``done`` (the episodes' future) completes.

        A batch is sent when every live episode is waiting in it; only if none arrives for
        ``max_wait_s`` (a slow LLM user, say) does a partial batch go. With the scripted user and
        sandboxed tools every episode arrives within milliseconds, so batches are the same from
        run to run, and so are the samples (vLLM's numerics depend on the batch).

        A streaming generator (``generator.streaming``, e.g. rl.continuous's) gets each request
        the moment it arrives instead: see :meth:`_serve_streaming`."""
        if getattr(self.generator, "streaming", False):
            return self._serve_streaming(done)
        # a sharded policy (rl.distributed.LockstepHFGenerator): every rank takes part in every round
        lockstep = getattr(self.generator, "lockstep", False)
        batch: list[tuple[GenRequest, concurrent.futures.Future]] = []
        deadline = None
        while True:
            timeout = 0.02 if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                item = self._queue.get(timeout=timeout)
            except queue.Empty:
                item = None
                if not batch:
                    if done.done() and self._queue.empty():
                        if not lockstep or not self.generator.sync(busy=False):
                            return
                        self.generator.idle()  # another rank generates this round
                    continue
            if item is not None:
                batch.append(item)
                deadline = time.monotonic() + self.max_wait_s
            with self._lock:
                waiting_for = self._active
            if batch and (len(batch) >= waiting_for or time.monotonic() >= deadline):
                if lockstep:
                    self.generator.sync(busy=True)
                self._answer(batch, lockstep=lockstep)
                batch, deadline = [], None

    def _serve_streaming(self, done: concurrent.futures.Future) -> None:
        """Submit requests to one generator session as they arrive and answer each as it ends:
        an episode's next turn joins the running batch instead of waiting for the slowest sequence."""
        pending: dict[str, concurrent.futures.Future] = {}
        with contextlib.ExitStack() as stack:
            session = None
            while True:
                try:
                    item = self._queue.get(timeout=0.02) if not pending else self._queue.get_nowait()
                except queue.Empty:
                    item = None
                if item is not None:
                    req, fut = item
                    if not fut.set_running_or_notify_cancel():
                        continue
                    if self.error is not None:
                        fut.set_exception(RolloutError(f"generation failed earlier in this batch: {self.error!r}"))
                        continue
                    try:
                        if session is None:
                            stack.callback(self._add_generate_s, time.perf_counter())
                            session = stack.enter_context(self.generator.session(seed=self.seed))
                        pending[session.submit(req)] = fut
                        self.batches.append(len(pending))  # requests in flight at each submission
                    except BaseException as e:  # noqa: BLE001 - handed to the episode, re-raised by the rollout
                        self.error = e
                        fut.set_exception(e)
                    continue
                if pending:
                    try:
                        finished = session.poll(0.005)
                    except BaseException as e:  # noqa: BLE001 - the session died: every waiting episode fails
                        self.error = e
                        for f in pending.values():
                            f.set_exception(e)
                        pending.clear()
                        continue
                    for rid, res in finished:
                        f = pending.pop(rid)
                        if isinstance(res, BaseException):
                            self.error = res
                            f.set_exception(res)
                        else:
                            f.set_result(res)
                elif done.done() and self._queue.empty():
                    return

    def _add_generate_s(self, t0: float) -> None:
        self.generate_s += time.perf_counter() - t0

    def _answer(self, batch: list[tuple[GenRequest, concurrent.futures.Future]], *, lockstep: bool = False) -> None:
        live = [(r, f) for r, f in batch if f.set_running_or_notify_cancel()]
        # arrival order is timing; a fixed order keeps the samples reproducible
        live.sort(key=lambda rf: (rf[0].seed is None, rf[0].seed or 0, rf[0].prompt_ids))
        if self.error is not None:
            for _, f in live:
                f.set_exception(RolloutError(f"generation failed earlier in this batch: {self.error!r}"))
            live = []
        if not live:
            if lockstep:  # the round was announced: the other ranks generate in it
                self.generator.idle()
            return
        t0 = time.perf_counter()
        try:
            results = self.generator.generate([r for r, _ in live])
            if len(results) != len(live):
                raise RolloutError(f"the generator returned {len(results)} results for {len(live)} requests")
        except BaseException as e:  # noqa: BLE001 - handed to every waiting episode, re-raised by the rollout
            self.error = e
            for _, f in live:
                f.set_exception(e)
            return
        finally:
            self.generate_s += time.perf_counter() - t0
        self.batches.append(len(live))
        for (_, f), res in zip(live, results, strict=True):
            f.set_result(res)

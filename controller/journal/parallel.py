"""``journal verify`` on every core: the chain cut at its snapshots, one segment a process.

Each record's seal covers the stored MAC of the one before it, and each snapshot is
inside its record's seal; so the journal splits at snapshots into segments that check
apart: a segment starts from its first snapshot (proven by the segment before, which
folds to exactly that state) and ends at the next one it proves. When every segment is
clean the whole chain is; when one is not, the caller walks again from genesis on one
core for the exact report (damage set aside by a clear-halt, and where the prefix ends).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from controller.core.config import FireBetRules
from controller.journal import store
from controller.journal.walk import Problem, start_at_anchor

SEGMENTS_PER_WORKER = 4
T = TypeVar("T")


def workers() -> int:
    """The processes a check may use: the cores this process may run on."""
    return max(1, len(os.sched_getaffinity(0)))


def _segment(path: str, key: bytes, rules: FireBetRules, first: int, last: int) -> tuple[
    int, int, list[Problem]
]:  # fmt: skip
    """Check records ``first + 1``..``last`` from the snapshot at ``first`` (0: genesis),
    under the rules in force there."""
    db = store.connect(Path(path), read_only=True)
    try:
        db.execute("BEGIN")
        walk, problem = start_at_anchor(db, key, rules, first)
        if problem is not None:
            return 0, 0, [problem]
        rows = db.execute(
            f"SELECT {store.RAW_COLUMNS} FROM records WHERE record > ? AND record <= ? "
            "ORDER BY record",
            (first, last),
        )
        snaps = {n: s for n, s in store.snapshots(db, after=first).items() if n <= last}
        walk.run(rows, snaps, stop_at_damage=True)
        if not walk.problems and walk.expect != last + 1:
            walk.problems.append((walk.expect, f"record {walk.expect} is missing"))
        return walk.records, walk.snapshots, walk.problems
    finally:
        db.close()


PROGRESS_EVERY = 4096  # rows between two calls of a progress callback


def counted(
    rows: Iterable[T],
    total: int,
    progress: Callable[[int, int], None],
    every: int = PROGRESS_EVERY,
) -> Iterator[T]:
    """``rows`` unchanged, with ``progress(done, total)`` told every ``every`` rows."""
    done = 0
    for row in rows:
        done += 1
        if done % every == 0:
            progress(done, total)
        yield row
    progress(done, total)


def verify_segments(
    path: Path,
    key: bytes,
    rules: FireBetRules,
    anchors: list[int],
    last: int,
    processes: int,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[int, int] | None:
    """(records, snapshots) when every segment is clean; None when one is not (or there is
    too little to split). ``progress(done, total)`` hears each segment checked, in order."""
    if processes < 2 or len(anchors) < 2:
        return None
    count = processes * SEGMENTS_PER_WORKER
    step = max(1, len(anchors) // count)
    cuts = [0, *anchors[step::step]]
    if cuts[-1] != last:
        cuts.append(last)
    jobs = [(str(path), key, rules, a, b) for a, b in itertools.pairwise(cuts) if b > a]
    # never fork this process: with threads (the service, a test run) one of them may hold
    # a SQLite or interpreter lock at the fork, and the child then waits on it for ever.
    # The fork server is a fresh single-threaded interpreter, started once, that has this
    # module loaded already: each worker forks from it in milliseconds.
    import multiprocessing  # here: the service's start-up never needs it (SPEC section 7)
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    try:
        with ProcessPoolExecutor(max_workers=processes, mp_context=context) as pool:
            results = []
            for result in pool.map(_segment, *zip(*jobs, strict=True)):
                results.append(result)
                if progress is not None:
                    progress(sum(r for r, _, _ in results), last)
    except Exception:  # a worker that failed proves nothing: the one-core walk decides
        return None
    if any(problems for _, _, problems in results):
        return None
    return sum(r for r, _, _ in results), sum(s for _, s, _ in results)

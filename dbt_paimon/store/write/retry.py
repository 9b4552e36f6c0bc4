"""Paimon's wait between commit attempts (its RetryWaiter), for every writer that retries a commit.

After its n-th failed attempt (n from 1) a writer waits min(commit.min-retry-wait * 2^n,
commit.max-retry-wait), plus up to a fifth of that at random, so that writers who lost the same race do
not come back in step. Paimon's defaults: 10 ms, 10 s, and commit.max-retries 10 (options.DEFAULTS).
"""

from __future__ import annotations

import logging
import random
import time

from ..common.errors import CommitConflictError
from ..common.options import CoreOptions

JITTER = 0.2  # Paimon's: up to 20% of the wait added at random


def retry_wait_ms(core: CoreOptions, retry: int, rng: random.Random | None = None) -> float:
    """How long to wait after failed attempt number `retry` (1 for the first), in milliseconds."""
    base = min(core.commit_min_retry_wait_ms * 2.0 ** min(retry, 62), core.commit_max_retry_wait_ms)
    return base + (rng or random).uniform(0, base * JITTER)


def wait_before_retry(core: CoreOptions, retry: int) -> None:
    time.sleep(retry_wait_ms(core, retry) / 1000)


def after_conflict(core: CoreOptions, attempt: int, error: CommitConflictError, job: str, path: str,
                   log: logging.Logger) -> None:
    """What a job does when its commit attempt number `attempt` conflicted: past commit.max-retries,
    raise the error naming the option; else log the conflict and wait before the next attempt."""
    if attempt > core.commit_max_retries:
        raise CommitConflictError(f"{error}; gave up after {attempt} attempts of the {job} "
                                  f"({give_up_hint(core)})") from None
    log.warning("%s of %s conflicted with a concurrent commit (%s); trying again on the new snapshot",
                job, path, error)
    wait_before_retry(core, attempt)


def give_up_hint(core: CoreOptions) -> str:
    """What the error after the last attempt says to do."""
    return (f"commit.max-retries is {core.commit_max_retries}: raise it (with commit.min-retry-wait / "
            f"commit.max-retry-wait) in the table's options to wait longer for the other writers")

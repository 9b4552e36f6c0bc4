"""ExistingProcessor: what a cross-partition (KEY_DYNAMIC) table does with a batch row whose key
already lives in another partition, as Paimon's crosspartition.ExistingProcessor does.

Paimon picks one strategy per merge engine (ExistingProcessor.create); each is a small class of
its own module here: delete_existing_processor (deduplicate), use_old_existing_processor
(partial-update, aggregation), skip_new_existing_processor (first-row). Paimon decides one record
at a time; here a strategy decides every moved row of an assigner's share at once, as masks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Moves:
    """Masks over an assigner's batch rows: what happens to each row whose key moved partition."""

    retract_old: np.ndarray  # a -D where the key lives (its slot there is freed)
    place_new: np.ndarray    # the row goes to its new partition as a new key (a bucket is assigned)
    use_old: np.ndarray      # the row is written into the partition and bucket the key lives in
    skip: np.ndarray         # the row is dropped

    @staticmethod
    def none(n: int) -> np.ndarray:
        return np.zeros(n, dtype=bool)


class ExistingProcessor(ABC):
    name: str  # Paimon's name of the strategy, for messages

    @abstractmethod
    def process(self, moved: np.ndarray) -> Moves:
        """moved: the rows (to be written) whose key lives in another partition."""

"""Paimon's SkipNewExistingProcessor (merge-engine first-row): the first version of a key wins, so
a row for a key that lives elsewhere is dropped."""

from __future__ import annotations

import numpy as np

from .existing_processor import ExistingProcessor, Moves


class SkipNewExistingProcessor(ExistingProcessor):
    name = "skip-new"

    def process(self, moved: np.ndarray) -> Moves:
        none = Moves.none(len(moved))
        return Moves(retract_old=none, place_new=none, use_old=none, skip=moved)

"""Paimon's UseOldExistingProcessor (merge-engine partial-update, aggregation): the row is merged into
the key where it lives, so its partition fields take the key's current partition."""

from __future__ import annotations

import numpy as np

from .existing_processor import ExistingProcessor, Moves


class UseOldExistingProcessor(ExistingProcessor):
    name = "use-old"

    def process(self, moved: np.ndarray) -> Moves:
        none = Moves.none(len(moved))
        return Moves(retract_old=none, place_new=none, use_old=moved, skip=none)

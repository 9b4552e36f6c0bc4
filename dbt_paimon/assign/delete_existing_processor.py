"""Paimon's DeleteExistingProcessor (merge-engine deduplicate): the key is retracted where it lived
and the row becomes a new key in its new partition."""

from __future__ import annotations

import numpy as np

from .existing_processor import ExistingProcessor, Moves


class DeleteExistingProcessor(ExistingProcessor):
    name = "delete"

    def process(self, moved: np.ndarray) -> Moves:
        return Moves(retract_old=moved, place_new=moved, use_old=Moves.none(len(moved)), skip=Moves.none(len(moved)))

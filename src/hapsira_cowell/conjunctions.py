"""Conjunction screening (`screen`, docs/screening.md) and the approaches' states and
covariances at the TCA (`encounters`, for CCSDS CDMs): the public names of
`hapsira_cowell.propagation.conjunctions` and `hapsira_cowell.propagation.encounters`."""

from .propagation.conjunctions import (ConjunctionTable, IdenticalObjectsWarning, screen,
                                       two_body_j2)
from .propagation.encounters import Encounters, encounters

__all__ = ["ConjunctionTable", "Encounters", "IdenticalObjectsWarning", "encounters", "screen",
           "two_body_j2"]

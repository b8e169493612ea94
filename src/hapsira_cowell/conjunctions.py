"""Conjunction screening (`screen`, docs/screening.md), the approaches' states and
covariances at the TCA (`encounters`, for CCSDS CDMs) and their probability of collision
(`probability` from the states at the TCA, `probability_epoch` by Monte Carlo from the
epoch): the public names of `hapsira_cowell.propagation.conjunctions`,
`hapsira_cowell.propagation.encounters` and `hapsira_cowell.propagation.probability`."""

from .propagation.conjunctions import (ConjunctionTable, IdenticalObjectsWarning, screen,
                                       two_body_j2)
from .propagation.encounters import Encounters, encounters
from .propagation.probability import (CovarianceRepairedWarning, LongEncounterWarning,
                                      Probability, WindowEdgeWarning, probability,
                                      probability_epoch)

__all__ = ["ConjunctionTable", "CovarianceRepairedWarning", "Encounters",
           "IdenticalObjectsWarning", "LongEncounterWarning", "Probability",
           "WindowEdgeWarning", "encounters", "probability", "probability_epoch", "screen",
           "two_body_j2"]

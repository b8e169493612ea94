"""Conjunction screening (`screen`, docs/screening.md): the public name of
`hapsira_cowell.propagation.conjunctions`."""

from .propagation.conjunctions import ConjunctionTable, screen, two_body_j2

__all__ = ["ConjunctionTable", "screen", "two_body_j2"]

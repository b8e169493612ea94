"""Force models and events, ``hjit`` code in the orbit's call form ``(t, rr, vv, k, p)``:
`perturbations`, `atmosphere`, `ephem` (the Sun's tables), `events`."""

"""What becomes ``cowell``'s ``(r0, v0)``: classical and equinoctial `elements`, `tle` catalogs,
CCSDS OMMs (`omm`); and the states and covariances of CCSDS CDMs (`cdm`)."""

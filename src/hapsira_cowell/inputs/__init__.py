"""What becomes ``cowell``'s ``(r0, v0)``: classical and equinoctial `elements`, `tle` catalogs."""

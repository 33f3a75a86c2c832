"""The bottom layer: the scenario's schemas, fields and their checks, errors, limits, paths. It
imports nothing else of hierfl."""

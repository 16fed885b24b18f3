"""A user's calibration: benchmark results read (``data``) and the engine constants and bands fitted
to them as a profile (``profile``); ``bands.yaml`` is the packaged band table."""

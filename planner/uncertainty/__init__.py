"""Prediction bands: the packaged band table and its lookup (``bands``), and a calibration
profile's own bands over it (``profile_bands``); applied only, fitted in the lab."""

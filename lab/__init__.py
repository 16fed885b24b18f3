"""The lab: what is specific to one public data set, never installed and never imported by the
product. ``prepare_e2e`` writes ``silicon_measured.csv`` into the documented e2e layout
(``planner.replay_e2e.layout``) that ``planner validate e2e`` and ``validate decisions`` read;
``recipes`` / ``disagg_recipes`` hold the InferenceMAX launch recipes, ``layouts`` what the rows
record in their text; ``fit_engines`` and ``bands`` write the shipped ``engines.yaml`` and band
table; ``protocol`` and ``self_calibration`` are studies; ``static_batch`` replays the Splitwise
and blog tables (``python -m lab.static_batch splitwise|blogs --data CSV``); ``notes/`` holds the
pass-by-pass notes."""

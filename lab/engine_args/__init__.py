"""Developer tool: read engines' argument lists from their source
(``python -m lab.engine_args.extract``)."""

"""Models: config.json parsing (``parser``), the model spec (``spec``), quantization formats
(``quantization``), parameter counts (``params``) and the bundled checkpoints (``bundled``,
``configs/``)."""

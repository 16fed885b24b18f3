"""Developer tools beside the kernels_db runtime: the command lines that fit the shipped
constants and check them against measurements. They import the runtime; the runtime
(``lookup``, ``costs``, ``transfer``, ``fp8_scale``, ...) never imports them."""

"""The serving model's op pricer: ``kernels_db``'s step pricer for one GPU.

``default_pricer(gpu)`` is ``kernels_db.lookup.StepPricer`` over ``KernelDB.for_gpu(gpu)``: every op
carries its kernel shape (``Op.shape``, a ``kernels_db.ops`` description whose class names the
kernels_db family), and each family of a step is priced in one lookup for all K candidates, so
every op records where its time came from: ``measured`` / ``interpolated`` (a table of this GPU),
``fitted`` (this GPU's fitted efficiency roofline, ``kernels_db/fitted/<gpu>.yaml``) or
``roofline_uncalibrated``. Ops without a kernels_db family (linear-attention recurrences) are
priced by :class:`planner.perf.step.RooflinePricer`, tagged ``roofline_uncalibrated``.
"""

from __future__ import annotations

import functools

from hardware.spec import GpuSpec
from kernels_db.lookup import KernelDB, StepPricer
from kernels_db.transfer import calibration
from planner.perf.opgraph import Op
from planner.perf.step import RooflinePricer

KernelDbPricer = StepPricer[Op]
"""The pricer ``default_pricer`` builds: kernels_db's step pricer of the serving model's ops."""


@functools.lru_cache(maxsize=64)
def default_pricer(gpu: GpuSpec) -> KernelDbPricer:
    """The kernels_db pricer of ``gpu``, cached per GPU spec (``hardware.frozen.FrozenSpec``)."""
    roofline = RooflinePricer(gpu)
    return StepPricer(KernelDB.for_gpu(gpu), lambda op: roofline.price(op)[0])


@functools.lru_cache(maxsize=64)
def kernel_source(gpu: GpuSpec) -> str:
    """What prices the kernels of ``gpu`` (``kernels_db.transfer.calibration``'s detail: its own
    fit, a sibling's, or the default efficiencies), resolved once per GPU spec as
    ``default_pricer`` resolves the tables and fit it prices with."""
    return str(calibration(gpu)["detail"])

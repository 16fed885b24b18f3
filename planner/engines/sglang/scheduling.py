"""SGLang's step scheduling as the serving model reads it."""

OVERLAP_SCHEDULER = (
    "SGLang's default event loop overlaps CPU scheduling with GPU compute: it launches batch "
    "n+1 before it processes batch n's results (event_loop_overlap, used unless "
    "--disable-overlap-schedule; github:sgl-project/sglang "
    "python/sglang/srt/managers/scheduler.py@d51c1c21d1ac07cd5d1de9ead6c99087d8428e79)"
)
"""Why SGLang emits a first token one step late and a new prompt misses one step
(``Engine.overlap_scheduler``)."""

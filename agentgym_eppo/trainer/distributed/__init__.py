"""Training past one process: FSDP2 ranks (:mod:`.fsdp`), Ray orchestration (``ray_*``),
and the config sections that switch them on (:mod:`.config`)."""

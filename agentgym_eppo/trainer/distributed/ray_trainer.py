"""Trainer ranks as Ray actors placed by a placement group (FSDP launched by Ray).

:func:`place_trainer_ranks` reserves one bundle per rank (``PACK``: ranks on as few
nodes as possible, so FSDP's collectives stay on NVLink when they fit), starts one
:class:`TrainerRank` actor per bundle and gives every rank the torchrun environment
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``/``MASTER_PORT`` of rank
0's node), so the code that runs under ``torchrun`` runs unchanged in the actors
(:func:`agentgym_eppo.trainer.distributed.fsdp.init_distributed`).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .config import RayConfig
from .ray_cluster import get


class TrainerRank:
    """The actor body: sets the torchrun variables, then runs whatever it is handed."""

    def __init__(self, threads: int = 1) -> None:
        import torch

        torch.set_num_threads(threads)

    def address(self) -> tuple[str, int]:
        """This node's IP and a free TCP port on it (rank 0's becomes the master)."""
        import ray

        with socket.socket() as probe:
            probe.bind(("", 0))
            port = probe.getsockname()[1]
        return ray.util.get_node_ip_address(), port

    def join(self, rank: int, world: int, master: tuple[str, int]) -> None:
        gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        os.environ.update(
            RANK=str(rank),
            WORLD_SIZE=str(world),
            LOCAL_RANK="0" if gpus else str(rank),
            MASTER_ADDR=master[0],
            MASTER_PORT=str(master[1]),
        )

    def run(self, function: Callable[..., Any], *args: Any) -> Any:
        return function(*args)


@dataclass
class TrainerRanks:
    """The placement group and its rank actors; :meth:`run` calls a function on all."""

    placement_group: Any
    actors: list[Any]
    timeout_s: float

    def run(self, function: Callable[..., Any], *args: Any) -> list[Any]:
        refs = [actor.run.remote(function, *args) for actor in self.actors]
        return list(get(refs, self.timeout_s, "trainer ranks"))

    def close(self) -> None:
        import ray
        from ray.util.placement_group import remove_placement_group

        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        remove_placement_group(self.placement_group)
        self.actors = []


def place_trainer_ranks(
    world: int, cpus: float = 1.0, gpus: float = 0.0, timeout_s: float = 600.0
) -> TrainerRanks:
    """Reserve ``world`` bundles of ``cpus``/``gpus`` and start one rank in each."""
    import ray
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    if world < 1:
        raise ValueError(f"world must be >= 1, got {world}")
    bundle: dict[str, float] = {"CPU": cpus}
    if gpus:
        bundle["GPU"] = gpus
    group = placement_group([dict(bundle) for _ in range(world)], strategy="PACK")
    try:
        get(group.ready(), timeout_s, f"placement group of {world} x {bundle}")
    except TimeoutError:
        ray.util.remove_placement_group(group)
        raise
    remote: Any = ray.remote(TrainerRank)
    actors: list[Any] = [
        remote.options(
            num_cpus=cpus,
            num_gpus=gpus,
            max_restarts=0,
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                group, placement_group_bundle_index=k
            ),
        ).remote()
        for k in range(world)
    ]
    master = get(actors[0].address.remote(), timeout_s, "trainer rank 0")
    get(
        [actor.join.remote(k, world, master) for k, actor in enumerate(actors)],
        timeout_s,
        "trainer ranks",
    )
    return TrainerRanks(group, actors, timeout_s)


def place_from_config(config: RayConfig) -> TrainerRanks:
    """:func:`place_trainer_ranks` with ``ray.trainer_ranks``/``trainer_rank_cpus``/
    ``trainer_rank_gpus``/``get_timeout_s``."""
    return place_trainer_ranks(
        config.trainer_ranks,
        config.trainer_rank_cpus,
        config.trainer_rank_gpus,
        config.get_timeout_s,
    )

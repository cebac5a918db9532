"""WebShop (``AgentBench-WebShop-v0``): the simulated shop, its search index and its reward."""

from .env import WebShopEnv

__all__ = ["WebShopEnv"]

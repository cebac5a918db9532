"""AgentBench's DBBench: SQL over one table, on SQLite, MariaDB/MySQL or PostgreSQL."""

from .env import DBEnv
from .tasks import DBTaskRecord, TableSpec, load_db_tasks

__all__ = ["DBEnv", "DBTaskRecord", "TableSpec", "load_db_tasks"]

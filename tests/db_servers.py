"""Where the DB tests find the real MariaDB and PostgreSQL servers (CI starts both)."""

from __future__ import annotations

import os

import pytest
import sqlalchemy as sa

MARIADB_URL = os.environ.get("AGENTGYM_MARIADB_URL", "mysql+pymysql://root@127.0.0.1:3306/test")
POSTGRES_URL = os.environ.get(
    "AGENTGYM_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def server_url(url: str) -> str:
    """``url`` if its server answers, else skip the test saying how to provide one."""
    engine = sa.create_engine(url, connect_args={"connect_timeout": 3})
    try:
        with engine.connect():
            pass
    except sa.exc.OperationalError as error:
        pytest.skip(f"no database server at {url} ({error.orig}); start it or set the URL env var")
    finally:
        engine.dispose()
    return url

"""Where the DB tests find the real MariaDB and PostgreSQL servers (CI starts both).

``AGENTGYM_MARIADB_URL`` and ``AGENTGYM_POSTGRES_URL`` point them elsewhere (another
host or port). A server that does not answer skips the test with a reason that names
it; under CI such a skip fails the run (``tests/conftest.py``).
"""

from __future__ import annotations

import os

import pytest
import sqlalchemy as sa

MARIADB_URL = os.environ.get("AGENTGYM_MARIADB_URL", "mysql+pymysql://root@127.0.0.1:3306/test")
POSTGRES_URL = os.environ.get(
    "AGENTGYM_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)

SERVERS = {
    "mysql": ("MariaDB", "AGENTGYM_MARIADB_URL"),
    "postgresql": ("PostgreSQL", "AGENTGYM_POSTGRES_URL"),
}
"""URL dialect -> (the server's name, the variable that sets its URL)."""


def server_url(url: str) -> str:
    """``url`` if its server answers, else skip the test naming the server and its URL."""
    name, variable = SERVERS[sa.engine.make_url(url).get_backend_name()]
    engine = sa.create_engine(url, connect_args={"connect_timeout": 3})
    try:
        with engine.connect():
            pass
    except sa.exc.OperationalError as error:
        pytest.skip(f"no {name} server at {url} ({error.orig}); start it or set {variable}")
    finally:
        engine.dispose()
    return url

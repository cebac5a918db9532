"""The shipped DB task set, generated Self-Instruct-style from table schemas and templates.

Each task draws a domain (a table schema with typed value pools, :mod:`.schema`), fills
a fresh table with random rows, and draws a question of one of the kinds in
:data:`.questions.KINDS` with its gold SQL in MySQL's dialect. The gold SQL is then run
on SQLite through the environment's own backend: a query's result becomes its label, a
mutation's table hash its ``answer_md5``. Tasks whose answer is empty, tied, too long,
or whose mutation changes nothing are dropped and redrawn, so every shipped task is
solvable and unambiguous.

``python -m agentgym_eppo.environments.db.generator`` rewrites
``agentgym_eppo/assets/db/{train,dev,test}.jsonl.gz``; the same seed gives the same bytes.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentgym_eppo.core import asset_path, write_jsonl_gz

from .backends import SQLiteBackend
from .evaluation import tables_hash
from .expert import answers_from_rows
from .questions import Draft, DrawnTable, draw_question
from .schema import DOMAINS
from .tasks import SHIPPED_FILES, TableSpec

SPLIT_SIZES = {"train": 1000, "dev": 200, "test": 200}
DEFAULT_SEED = 20240611
MAX_ANSWERS = 8


class Verifier:
    """Runs gold SQL on SQLite through the environment's backend to label a draft."""

    def __init__(self) -> None:
        self.backend = SQLiteBackend(statement_timeout=10)

    def label(self, table: TableSpec, draft: Draft) -> dict[str, Any] | None:
        episode = self.backend.create_episode([table])
        try:
            before = tables_hash([episode.table_rows(table)])
            result = episode.execute(draft.sql, char_limit=0)
            if result.error:
                raise ValueError(f"gold SQL failed: {draft.sql}: {result.text}")
            if draft.task_type in ("INSERT", "UPDATE", "DELETE"):
                after = tables_hash([episode.table_rows(table)])
                return None if after == before else {"answer_md5": f"[('{after}',)]"}
            answers = answers_from_rows(result.rows)
            if not answers or len(answers) > MAX_ANSWERS or "None" in answers:
                return None
            if "ORDER BY" in draft.sql and not self._unique_order(episode, draft.sql):
                return None
            return {"label": answers}
        finally:
            episode.drop()

    @staticmethod
    def _unique_order(episode: Any, sql: str) -> bool:
        """A ``LIMIT k`` answer is unambiguous only if row k+1 ranks strictly lower."""
        head, limit = sql.rsplit("LIMIT", 1)
        k = int(limit)
        if "GROUP BY" in head:
            probe = head.replace("SELECT ", "SELECT COUNT(*), ", 1)
        else:
            order = head.split("ORDER BY", 1)[1].rsplit(" ", 2)[0].strip()
            probe = head.replace("SELECT ", f"SELECT {order}, ", 1)
        rows = episode.execute(f"{probe} LIMIT {k + 1}", char_limit=0).rows
        return len(rows) <= k or rows[k - 1][0] != rows[k][0]


def generate_split(split: str, count: int, seed: int, verifier: Verifier) -> list[dict]:
    """``count`` verified tasks for ``split``; deterministic in ``(split, seed)``."""
    rng = random.Random(f"{seed}-{split}")
    records: list[dict] = []
    while len(records) < count:
        domain = rng.choice(DOMAINS)
        table_name = rng.choice(domain.table_names)
        rows = domain.draw_rows(rng)
        draft = draw_question(DrawnTable(rng, domain, table_name, rows))
        headers = [domain.key.name, *(c.name for c in domain.columns)]
        table = TableSpec(table_name, tuple(headers), tuple(tuple(row) for row in rows))
        labelled = verifier.label(table, draft)
        if labelled is None:
            continue
        records.append(
            {
                "sample_id": f"db-{split}-{len(records):05d}",
                "description": draft.description,
                "type": [draft.task_type],
                "table": {
                    "table_name": table_name,
                    "table_info": {
                        "columns": [{"name": h, "type": "TEXT"} for h in headers],
                        "rows": rows,
                    },
                },
                "add_description": f"The name of this table is {table_name}, and the headers "
                f"of this table are {','.join(headers)}.",
                "gold_sql": [draft.sql],
                "label": labelled.get("label", [draft.sql]),
                **({"answer_md5": labelled["answer_md5"]} if "answer_md5" in labelled else {}),
                "source": "agentgym-eppo-generator",
            }
        )
    return records


def generate(
    out_dir: Path | None = None,
    seed: int = DEFAULT_SEED,
    sizes: dict[str, int] | None = None,
) -> dict[str, Path]:
    """Write the shipped splits (``train``/``dev``/``test``) and return their paths."""
    out_dir = out_dir or asset_path("db")
    verifier = Verifier()
    paths = {}
    for split, count in (sizes or SPLIT_SIZES).items():
        path = Path(out_dir) / SHIPPED_FILES[split]
        write_jsonl_gz(path, generate_split(split, count, seed, verifier))
        paths[split] = path
    verifier.backend.close()
    return paths


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=None, help="folder (default: the assets)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)
    for split, path in generate(args.out, args.seed).items():
        print(f"{split}: {path}")


if __name__ == "__main__":
    main()

"""AgentBench's answer comparison and the MySQL table hash, computed in Python."""

from __future__ import annotations

import hashlib

import pytest
import sqlalchemy as sa
from support.db_servers import MARIADB_URL, server_url

from agentgym_eppo.environments.db.evaluation import (
    answers_match,
    clean_answer,
    expected_md5,
    row_hash,
    table_hash,
    tables_hash,
)


def test_row_hash_skips_nulls_like_concat_ws() -> None:
    assert row_hash(["a", None, "b"]) == hashlib.md5(b"a,b").hexdigest()[:5]
    assert row_hash([None, None]) == hashlib.md5(b"").hexdigest()[:5]


def test_table_hash_sorts_row_hashes_and_joins_with_commas() -> None:
    rows = [["x", "1"], ["y", "2"]]
    hashes = sorted(hashlib.md5(text.encode()).hexdigest()[:5] for text in ("x,1", "y,2"))
    assert table_hash(rows) == hashlib.md5(",".join(hashes).encode()).hexdigest()
    assert table_hash(list(reversed(rows))) == table_hash(rows)


def test_table_hash_cuts_at_group_concat_max_len() -> None:
    rows = [[str(i)] for i in range(400)]
    joined = ",".join(sorted(row_hash(row) for row in rows))
    assert len(joined) > 1024
    assert table_hash(rows) == hashlib.md5(joined[:1024].encode()).hexdigest()
    assert (
        table_hash(rows, group_concat_max_len=1 << 20) == hashlib.md5(joined.encode()).hexdigest()
    )


def test_empty_table_hashes_like_mysql_md5_of_null() -> None:
    assert table_hash([]) == "None"


def test_several_tables_join_sorted_hashes_with_underscore() -> None:
    first, second = [["a"]], [["b"]]
    expected = "_".join(sorted([table_hash(first), table_hash(second)]))
    assert tables_hash([second, first]) == expected


def test_expected_md5_reads_agentbench_result_strings() -> None:
    assert (
        expected_md5("[('43a54cd67ab403faf4d17bb44faeef5c',)]")
        == "43a54cd67ab403faf4d17bb44faeef5c"
    )
    assert expected_md5("43a54cd67ab403faf4d17bb44faeef5c") == "43a54cd67ab403faf4d17bb44faeef5c"


@pytest.mark.mariadb
def test_python_hash_equals_mariadb_sql_hash() -> None:
    """The recipe AgentBench runs on MySQL, run on the real server, over NULLs, Unicode,
    numbers and more rows than group_concat's 1024 characters hold."""
    url = server_url(MARIADB_URL)
    rows: list[list[str | None]] = [["Zoë", None, "1.50"], ["a,b", "", "x"], [None, None, None]]
    rows += [[f"row {i}", str(i * 7), None if i % 3 else "é"] for i in range(250)]
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
        cursor.execute("SET SESSION group_concat_max_len = 1024")
        for name, subset in (("small_probe", rows[:3]), ("large_probe", rows)):
            cursor.execute(
                f"CREATE TEMPORARY TABLE {name} (a TEXT, b TEXT, c TEXT) CHARSET utf8mb4"
            )
            cursor.executemany(f"INSERT INTO {name} VALUES (%s, %s, %s)", subset)
            cursor.execute(
                "SELECT md5(group_concat(rowhash ORDER BY rowhash)) FROM (SELECT "
                f"substring(md5(concat_ws(',', a, b, c)), 1, 5) AS rowhash FROM {name}) AS sub"
            )
            assert table_hash(subset) == cursor.fetchone()[0]
    engine.dispose()


@pytest.mark.parametrize(
    ("answer", "label", "expected"),
    [
        (["2011"], ["2011.0"], True),
        (["3.004"], ["3"], True),
        (["3.02"], ["3"], False),
        (["none"], ["0"], True),
        ([], ["none"], False),
        (["45%"], ["45"], True),
        (["1,234"], ["1234.0"], True),
        (["Giza"], ["giza"], False),
        (["K255AZ", "K228EE"], ["K228EE", "K255AZ"], True),
        (["1", "2"], ["2.001", "1"], True),
        (["1", "2"], ["1", "2", "3"], False),
        ("[('March 19, 1998',)]", ["March 19, 1998"], True),
        ("[('March 19, 1998',)]", ["March 19, 1999"], False),
        ("[('Giza',)]", ["Giza"], True),
    ],
)
def test_answer_comparison_follows_agentbench(
    answer: object, label: list[str], expected: bool
) -> None:
    assert answers_match(answer, label) is expected


def test_clean_answer_never_evaluates_code() -> None:
    # Not a literal: AgentBench's fallback splits it as text instead of running it.
    assert clean_answer("[__import__('os').system('true')]") == ["__import__(os).system(true)"]
    assert clean_answer(None) == ["0"]
    assert clean_answer([("x",), None]) == ["x", "0"]

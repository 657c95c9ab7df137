"""The SQLite world kit (`envs.sqlite_world`) that the ops and web families share: building, digesting and
diffing databases, the pristine-image cache, and the stale-task check (`core.errors.StaleTaskError`)."""

from __future__ import annotations

import sqlite3

import pytest

from gymsmith.core.errors import InfrastructureError, StaleTaskError
from gymsmith.envs.sqlite_world import SqliteWorld, load_image, open_snapshot

WORLD = SqliteWorld({"items": "id INTEGER PRIMARY KEY, name TEXT NOT NULL, note TEXT",
                     "stock": "site INTEGER, item INTEGER, units INTEGER NOT NULL, PRIMARY KEY (site, item)",
                     "log": "id INTEGER PRIMARY KEY, line TEXT NOT NULL"},
                    primary_keys={"stock": ("site", "item")}, not_diffed={"log"})
ROWS = {"items": [{"id": 1, "name": "a"}, {"id": 2, "name": "b", "note": "x"}],
        "stock": [{"site": 1, "item": 1, "units": 3}, {"site": 2, "item": 1, "units": 4}],
        "log": [{"id": 1, "line": "start"}]}


def test_equal_rows_have_equal_digests_whatever_the_order_or_page_layout():
    a = WORLD.create(ROWS)
    b = WORLD.create({table: list(reversed(rows)) for table, rows in ROWS.items()})
    b.execute("VACUUM")
    assert WORLD.digest(a) == WORLD.digest(b)
    assert a.execute("SELECT note FROM items WHERE id = 1").fetchone() == (None,)  # a column left out is NULL
    b.execute("UPDATE items SET note = 'y' WHERE id = 1")
    assert WORLD.digest(a) != WORLD.digest(b)


def test_diff_by_primary_key_leaves_out_tables_not_diffed():
    before, after = WORLD.create(ROWS), WORLD.create(ROWS)
    after.execute("UPDATE stock SET units = 9 WHERE site = 2 AND item = 1")
    after.execute("DELETE FROM items WHERE id = 1")
    after.execute("INSERT INTO items (id, name) VALUES (3, 'c')")
    after.execute("INSERT INTO log (id, line) VALUES (2, 'changed')")
    diff = WORLD.diff(before, after)
    assert set(diff) == {"items", "stock"}
    assert [r["id"] for r in diff["items"]["added"]] == [3] and [r["id"] for r in diff["items"]["removed"]] == [1]
    assert diff["stock"]["changed"] == [({"site": 2, "item": 1, "units": 4}, {"site": 2, "item": 1, "units": 9})]
    assert WORLD.rows(after, "stock")[(2, 1)]["units"] == 9
    assert WORLD.diff(before, WORLD.create(ROWS)) == {}


def test_bad_schema_and_unknown_tables_are_refused_by_name():
    with pytest.raises(KeyError, match="unknown tables \\['nope'\\]"):
        WORLD.create({"nope": [{"id": 1}]})
    with pytest.raises(ValueError, match="'missing'"):
        SqliteWorld({"items": "id INTEGER PRIMARY KEY"}, not_diffed={"missing"})


def test_the_image_cache_builds_each_task_once_and_snapshots_are_read_only(tmp_path):
    calls = []

    def rows(seed, knobs):
        calls.append((seed, knobs))
        return {"items": [{"id": seed, "name": knobs["name"]}]}
    pristine_image = WORLD.image_cache(rows)
    image, digest = pristine_image(1, {"name": "a"})
    assert pristine_image(1, {"name": "a"}) == (image, digest) and len(calls) == 1
    assert pristine_image(2, {"name": "a"})[1] != digest and len(calls) == 2
    conn = load_image(image)
    assert WORLD.digest(conn) == digest
    path = tmp_path / "final.sqlite"
    path.write_bytes(image)
    snapshot = open_snapshot(str(path))
    with pytest.raises(sqlite3.OperationalError):
        snapshot.execute("DELETE FROM items")
    assert WORLD.digest(snapshot) == digest


def test_a_stale_task_is_an_infrastructure_error_naming_the_task():
    StaleTaskError.check("ops-1", "abc", "abc")
    with pytest.raises(InfrastructureError, match="task ops-1: the site rebuilt from its seed has digest def, the task says abc"):
        StaleTaskError.check("ops-1", "abc", "def", "site")


def test_contents_read_once_diff_as_the_connections_do_and_same_tells_types_apart():
    before, after = WORLD.create(ROWS), WORLD.create(ROWS)
    after.execute("UPDATE stock SET units = 9 WHERE site = 2 AND item = 1")
    after.execute("INSERT INTO items (id, name) VALUES (3, 'c')")
    assert WORLD.diff_contents(WORLD.contents(before), WORLD.contents(after)) == WORLD.diff(before, after) != {}
    image = before.serialize()
    assert WORLD.image_contents(image) is WORLD.image_contents(image)  # read once per image
    assert WORLD.same(WORLD.image_contents(image), WORLD.contents(WORLD.create(ROWS)))
    assert not WORLD.same(WORLD.contents(before), WORLD.contents(after))
    loose = SqliteWorld({"vals": "id INTEGER PRIMARY KEY, v"})  # a column without affinity keeps 1 and 1.0 apart
    typed, floated = loose.create({"vals": [{"id": 1, "v": 1}]}), loose.create({"vals": [{"id": 1, "v": 1.0}]})
    assert loose.contents(typed) == loose.contents(floated)  # equal in Python, different values in the database
    assert not loose.same(loose.contents(typed), loose.contents(floated))
    assert loose.digest(typed) != loose.digest(floated)

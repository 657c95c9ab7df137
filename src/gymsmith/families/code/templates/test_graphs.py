from graphs import bfs_order, distance, neighbours, reachable, shortest_path

G = {"a": ["c", "b"], "b": ["d"], "c": ["d", "e"], "d": ["f"], "e": ["f"], "f": [], "x": ["y"]}


def test_neighbours_sorted():
    assert neighbours(G, "a") == ["b", "c"]


def test_neighbours_of_unknown_node():
    assert neighbours(G, "zz") == []


def test_bfs_order_levels():
    assert bfs_order(G, "a") == ["a", "b", "c", "d", "e", "f"]


def test_bfs_order_single_node():
    assert bfs_order(G, "f") == ["f"]


def test_shortest_path_prefers_first_sorted():
    assert shortest_path(G, "a", "f") == ["a", "b", "d", "f"]


def test_shortest_path_to_self():
    assert shortest_path(G, "c", "c") == ["c"]


def test_shortest_path_unreachable():
    assert shortest_path(G, "a", "x") is None


def test_distance_two_hops():
    assert distance(G, "a", "e") == 2


def test_distance_unreachable_is_minus_one():
    assert distance(G, "f", "a") == -1


def test_reachable_set():
    assert reachable(G, "c") == {"c", "d", "e", "f"}

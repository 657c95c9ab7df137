from intervals import insert_interval, merge_intervals, normalize, overlaps, total_covered


def test_normalize_swaps_reversed_bounds():
    assert normalize((5, 2)) == (2, 5)


def test_normalize_keeps_ordered_bounds():
    assert normalize((2, 5)) == (2, 5)


def test_overlaps_touching_endpoints():
    assert overlaps((1, 3), (3, 6))


def test_overlaps_disjoint():
    assert not overlaps((1, 2), (4, 6))


def test_merge_empty():
    assert merge_intervals([]) == []


def test_merge_overlapping_pair():
    assert merge_intervals([(1, 4), (3, 8)]) == [(1, 8)]


def test_merge_adjacent_integers():
    assert merge_intervals([(1, 2), (3, 5)]) == [(1, 5)]


def test_merge_keeps_gaps():
    assert merge_intervals([(10, 12), (1, 2), (5, 6)]) == [(1, 2), (5, 6), (10, 12)]


def test_merge_contained_interval():
    assert merge_intervals([(1, 10), (2, 3)]) == [(1, 10)]


def test_insert_bridges_two_intervals():
    assert insert_interval([(1, 2), (6, 9)], (3, 5)) == [(1, 9)]


def test_total_covered_counts_each_point_once():
    assert total_covered([(1, 3), (2, 5), (10, 10)]) == 6


def test_total_covered_reversed_input():
    assert total_covered([(4, 1)]) == 4

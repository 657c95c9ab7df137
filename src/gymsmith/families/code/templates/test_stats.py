import pytest

from stats import mean, median, mode, percentile, variance


def test_mean():
    assert mean([1, 2, 3, 4]) == 2.5


def test_mean_empty():
    with pytest.raises(ValueError):
        mean([])


def test_median_odd():
    assert median([5, 1, 3]) == 3


def test_median_even():
    assert median([4, 1, 3, 2]) == 2.5


def test_mode_breaks_ties_low():
    assert mode([3, 1, 3, 1, 2]) == 1


def test_sample_variance():
    assert variance([2, 4, 4, 4, 5, 5, 7, 9]) == pytest.approx(4.571428571)


def test_population_variance():
    assert variance([2, 4, 4, 4, 5, 5, 7, 9], sample=False) == 4


def test_variance_needs_two_values():
    with pytest.raises(ValueError):
        variance([1])


def test_percentile_interpolates():
    assert percentile([10, 20, 30, 40], 50) == 25


def test_percentile_bounds():
    assert (percentile([3, 1, 2], 0), percentile([3, 1, 2], 100)) == (1, 3)


def test_percentile_rejects_out_of_range():
    with pytest.raises(ValueError):
        percentile([1], 101)

from ledgerkit.stats import mean_cents, median_cents, spread, summary


def test_mean():
    assert mean_cents([1200, 3500, 5600]) == 3433


def test_spread():
    assert spread([250, 9999, 1234]) == 9749


def test_median_even():
    assert median_cents([1000, 2000, 4000, 8000]) == 3000


def test_median_of_four():
    assert median_cents([100, 300, 700, 900]) == 500


def test_mean_and_spread():
    assert mean_cents([10, 20, 63]) + spread([5, 205]) == 231


def test_summary():
    assert summary([400, 1000, 2200, 3000]) == (1650, 1600, 2600)


def test_summary_odd():
    assert summary([120, 480, 960]) == (520, 480, 840)

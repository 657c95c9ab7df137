import pytest

from dates import add_days, day_of_year, days_between, days_in_month, is_leap_year


def test_leap_years():
    assert is_leap_year(2024) and is_leap_year(2000)


def test_century_is_not_leap():
    assert not is_leap_year(1900)


def test_february_in_leap_year():
    assert days_in_month(2024, 2) == 29


def test_december_length():
    assert days_in_month(2023, 12) == 31


def test_month_out_of_range():
    with pytest.raises(ValueError):
        days_in_month(2023, 13)


def test_day_of_year_first_of_march():
    assert day_of_year(2023, 3, 1) == 60


def test_day_of_year_first_of_january():
    assert day_of_year(2023, 1, 1) == 1


def test_add_days_within_month():
    assert add_days((2023, 5, 10), 5) == (2023, 5, 15)


def test_add_days_across_year_end():
    assert add_days((2023, 12, 30), 3) == (2024, 1, 2)


def test_add_days_to_last_day_of_month():
    assert add_days((2023, 1, 30), 1) == (2023, 1, 31)


def test_days_between_leap_february():
    assert days_between((2024, 2, 27), (2024, 3, 1)) == 3


def test_days_between_same_day():
    assert days_between((2024, 2, 27), (2024, 2, 27)) == 0


def test_leap_day_in_a_leap_century():
    assert add_days((2000, 2, 28), 1) == (2000, 2, 29)


def test_days_in_february_of_another_leap_year():
    assert days_in_month(2032, 2) == 29

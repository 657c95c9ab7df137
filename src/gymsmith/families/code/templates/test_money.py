import pytest

from money import apply_discount, format_cents, parse_amount, split_evenly, total_with_tax


def test_parse_whole_and_cents():
    assert parse_amount("12.34") == 1234


def test_parse_single_decimal_digit():
    assert parse_amount("0.5") == 50


def test_parse_thousands_and_sign():
    assert parse_amount("-1,000.01") == -100001


def test_parse_rejects_three_decimals():
    with pytest.raises(ValueError):
        parse_amount("1.234")


def test_format_with_grouping():
    assert format_cents(123456) == "$1,234.56"


def test_format_negative_small():
    assert format_cents(-5, symbol="€") == "-€0.05"


def test_split_distributes_remainder_first():
    assert split_evenly(100, 3) == [34, 33, 33]


def test_split_sums_to_total():
    assert sum(split_evenly(1001, 7)) == 1001


def test_split_rejects_zero_parts():
    with pytest.raises(ValueError):
        split_evenly(10, 0)


def test_discount_rounds_half_up():
    assert apply_discount(999, 10) == 899


def test_full_discount():
    assert apply_discount(1234, 100) == 0


def test_tax_default_zero():
    assert total_with_tax([100, 250]) == 350


def test_tax_rounding():
    assert total_with_tax([1000, 5], rate_percent=7) == 1075

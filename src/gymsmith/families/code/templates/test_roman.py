import pytest

from roman import from_roman, is_canonical, to_roman


def test_to_roman_small():
    assert to_roman(3) == "III"


def test_to_roman_subtractive():
    assert to_roman(1994) == "MCMXCIV"


def test_to_roman_upper_bound():
    assert to_roman(3999) == "MMMCMXCIX"


def test_to_roman_rejects_zero():
    with pytest.raises(ValueError):
        to_roman(0)


def test_from_roman_subtractive():
    assert from_roman("XLII") == 42


def test_from_roman_lowercase():
    assert from_roman("mmxxiv") == 2024


def test_round_trip():
    assert [from_roman(to_roman(n)) for n in range(1, 400)] == list(range(1, 400))


def test_canonical():
    assert is_canonical("XIV")


def test_non_canonical_repetition():
    assert not is_canonical("IIII")


def test_invalid_symbol_not_canonical():
    assert not is_canonical("ABC")

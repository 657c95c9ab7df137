import pytest

from rle import compression_ratio, decode, encode, runs


def test_runs():
    assert runs("aaabcc") == [("a", 3), ("b", 1), ("c", 2)]


def test_runs_empty():
    assert runs("") == []


def test_encode_basic():
    assert encode("aaabcc") == "3a1b2c"


def test_encode_splits_long_runs():
    assert encode("a" * 12) == "9a3a"


def test_encode_custom_max_run():
    assert encode("bbbbb", max_run=2) == "2b2b1b"


def test_decode_basic():
    assert decode("3a1b2c") == "aaabcc"


def test_decode_multi_digit_count():
    assert decode("12x") == "x" * 12


def test_decode_missing_count():
    with pytest.raises(ValueError):
        decode("a3b")


def test_decode_dangling_count():
    with pytest.raises(ValueError):
        decode("3a4")


def test_round_trip():
    text = "aaaaaaaaaaaabbbcdddd"
    assert decode(encode(text)) == text


def test_compression_ratio():
    assert compression_ratio("aaaa") == 0.5 and compression_ratio("") == 1.0

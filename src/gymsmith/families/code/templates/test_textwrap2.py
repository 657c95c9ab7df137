import pytest

from textwrap2 import center, justify, justify_line, split_words, wrap


def test_split_words_collapses_spaces():
    assert split_words("  a  b ") == ["a", "b"]


def test_wrap_exact_fit():
    assert wrap("aaa bbb", 7) == ["aaa bbb"]


def test_wrap_breaks_before_overflow():
    assert wrap("aaa bbb ccc", 7) == ["aaa bbb", "ccc"]


def test_wrap_long_word_on_its_own_line():
    assert wrap("a verylongword b", 5) == ["a", "verylongword", "b"]


def test_wrap_empty_text():
    assert wrap("", 10) == []


def test_wrap_rejects_zero_width():
    with pytest.raises(ValueError):
        wrap("x", 0)


def test_justify_line_spreads_extra_space_left_first():
    assert justify_line("a b c", 8) == "a   b  c"


def test_justify_single_word_is_padded():
    assert justify_line("word", 6) == "word  "


def test_justify_keeps_last_line_ragged():
    assert justify("aa bb cc dd", 5) == ["aa bb", "cc dd"]


def test_center_odd_padding_goes_right():
    assert center("ab", 5) == " ab  "


def test_center_longer_than_width():
    assert center("abcdef", 3) == "abcdef"

import pytest

from tokenizer import count_kind, is_balanced, is_name_char, read_number, tokenize


def test_name_char_rules():
    assert is_name_char("a", first=True) and not is_name_char("1", first=True) and is_name_char("1")


def test_read_number_stops_at_second_dot():
    assert read_number("1.5.2", 0) == ("1.5", 3)


def test_tokenize_simple_sum():
    assert tokenize("1+2") == [("NUM", "1"), ("OP", "+"), ("NUM", "2")]


def test_tokenize_skips_spaces():
    assert tokenize(" x  *  3 ") == [("NAME", "x"), ("OP", "*"), ("NUM", "3")]


def test_tokenize_names_with_digits():
    assert tokenize("var_2^2") == [("NAME", "var_2"), ("OP", "^"), ("NUM", "2")]


def test_tokenize_decimal():
    assert tokenize("3.25") == [("NUM", "3.25")]


def test_tokenize_rejects_unknown_character():
    with pytest.raises(ValueError):
        tokenize("2 $ 3")


def test_balanced_nested():
    assert is_balanced("((a+b)*(c))")


def test_unbalanced_closing_first():
    assert not is_balanced(")a(")


def test_unbalanced_open():
    assert not is_balanced("(a+(b)")


def test_count_operators():
    assert count_kind("a+b-c*(d/e)", "OP") == 4


def test_count_numbers_in_empty_text():
    assert count_kind("", "NUM") == 0

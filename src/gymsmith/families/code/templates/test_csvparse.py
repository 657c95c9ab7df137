import pytest

from csvparse import column, parse_line, parse_rows, read_records


def test_plain_fields():
    assert parse_line("a,b,c") == ["a", "b", "c"]


def test_empty_trailing_field():
    assert parse_line("a,b,") == ["a", "b", ""]


def test_quoted_separator():
    assert parse_line('"x,y",z') == ["x,y", "z"]


def test_escaped_quote():
    assert parse_line('"say ""hi""",ok') == ['say "hi"', "ok"]


def test_custom_separator():
    assert parse_line("1;2", sep=";") == ["1", "2"]


def test_unterminated_quote():
    with pytest.raises(ValueError):
        parse_line('"open,field')


def test_rows_skip_blank_lines():
    assert parse_rows("a,b\n\n c,d \n") == [["a", "b"], [" c", "d "]]


def test_records_use_header():
    assert read_records("id,name\n1,Ann\n2,Bo") == [{"id": "1", "name": "Ann"}, {"id": "2", "name": "Bo"}]


def test_records_of_empty_text():
    assert read_records("") == []


def test_column_values():
    assert column("id,qty\n1,5\n2,7", "qty") == ["5", "7"]


def test_column_missing_name():
    assert column("id\n1", "qty") == [""]

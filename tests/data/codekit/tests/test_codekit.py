import pytest

from codekit import decode, encode, from_code, scramble, to_code, unscramble


def test_encode():
    assert encode(12) == '7mtxspaq'


def test_encode_more():
    assert encode(345) == 'xpwkjya3'
    assert encode(678) == 'prz8a9a9'


def test_encode_salted():
    assert encode(12, salt=3) == 'sqrgspag'
    assert encode(901, salt=5) == '4qxzppce'


def test_encode_other_salt():
    assert encode(44, salt=11) == '37y23rbp'


def test_decode():
    assert decode('7mtxspaq') == 12
    assert decode('xpwkjya3') == 345
    assert decode('prz8a9a9') == 678


def test_decode_salted():
    assert decode('sqrgspag', salt=3) == 12
    assert decode('4qxzppce', salt=5) == 901
    assert decode('37y23rbp', salt=11) == 44


def test_decode_refuses_a_bad_check_letter():
    with pytest.raises(ValueError):
        decode('7mtxspab')


def test_scramble():
    assert scramble(5) == 1223342034


def test_scramble_salted():
    assert scramble(250, salt=2) == 1001113892
    assert scramble(999, salt=4) == 753037760


def test_unscramble():
    assert unscramble(1223342034) == 5
    assert unscramble(1001113892, salt=2) == 250
    assert unscramble(753037760, salt=4) == 999


def test_to_code():
    assert to_code(123456789) == 'cadykea'


def test_from_code():
    assert from_code('cadykea') == 123456789

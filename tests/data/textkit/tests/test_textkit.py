from textkit import digits_check, folded_value, text_value, vigenere, word_value


def test_word_value():
    assert word_value('zebra') == 52


def test_word_value_of_mixed_case():
    assert word_value('Quartz') == 103


def test_text_value():
    assert text_value('quick brown fox') == 340


def test_text_value_of_one_word():
    assert text_value('jumps') == 79


def test_vigenere():
    assert vigenere('attack at dawn', 'lemon') == 'lxfopv ef rnhr'


def test_vigenere_keeps_case():
    assert vigenere('Meet Me', 'key') == 'Wicd Qc'


def test_digits_check():
    assert digits_check('route 66 to 1955') == 784


def test_digits_check_of_a_date():
    assert digits_check('2024-07-31') == 665


def test_folded_value():
    assert folded_value('lazy dog jumps') == 353


def test_folded_value_of_two_words():
    assert folded_value('brown quartz') == 278

from ledgerkit.money import apply_discount, line_total, order_total, parse_cents, split_evenly


def test_parse_cents_whole():
    assert parse_cents("37") == 3700


def test_parse_cents_fraction():
    assert parse_cents("12.34") == 1234


def test_parse_cents_one_digit():
    assert parse_cents("5.5") == 550


def test_line_total():
    assert line_total(7, 1299) == 9093


def test_order_total():
    assert order_total([(2, 450), (3, 1999)]) == 6897


def test_order_total_parsed():
    assert order_total([(1, parse_cents("19.99")), (4, parse_cents("0.75"))]) == 2299


def test_discount():
    assert apply_discount(8000, 15) == 6800


def test_discount_of_an_order():
    assert apply_discount(order_total([(3, 2500), (1, 333)]), 20) == 6267


def test_split():
    assert split_evenly(1001, 3) == [334, 334, 333]


def test_split_uneven():
    assert split_evenly(5000, 3)[0] == 1667


def test_split_a_discounted_order():
    assert split_evenly(apply_discount(order_total([(4, 1250)]), 10), 4) == [1125, 1125, 1125, 1125]

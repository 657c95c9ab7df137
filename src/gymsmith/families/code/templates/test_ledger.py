import pytest

from ledger import Ledger, UnbalancedEntry


def test_new_accounts_start_at_zero():
    assert Ledger(["cash"]).balance("cash") == 0


def test_open_with_opening_balance():
    led = Ledger()
    led.open("cash", 500)
    assert led.balance("cash") == 500


def test_open_twice_fails():
    led = Ledger(["cash"])
    with pytest.raises(ValueError):
        led.open("cash")


def test_transfer_moves_money():
    led = Ledger(["cash", "bank"])
    led.transfer("cash", "bank", 300)
    assert (led.balance("cash"), led.balance("bank")) == (-300, 300)


def test_transfer_rejects_zero():
    with pytest.raises(ValueError):
        Ledger(["a", "b"]).transfer("a", "b", 0)


def test_unbalanced_entry_rejected():
    with pytest.raises(UnbalancedEntry):
        Ledger(["a", "b"]).post([("a", 5), ("b", -4)])


def test_unknown_account_leaves_balances_untouched():
    led = Ledger(["a"])
    with pytest.raises(KeyError):
        led.post([("a", 5), ("zz", -5)])
    assert led.balance("a") == 0


def test_trial_balance_stays_zero():
    led = Ledger(["a", "b", "c"])
    led.post([("a", 10), ("b", -4), ("c", -6)])
    assert led.trial_balance() == 0


def test_history_lists_memos():
    led = Ledger(["a", "b", "c"])
    led.transfer("a", "b", 1, memo="first")
    led.transfer("b", "c", 1, memo="second")
    assert led.history("b") == ["first", "second"] and led.history("a") == ["first"]

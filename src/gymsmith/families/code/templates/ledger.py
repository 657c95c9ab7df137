"""A double-entry ledger: balanced postings, balances and transfers, amounts in cents."""


class UnbalancedEntry(ValueError):
    pass


class Ledger:
    def __init__(self, accounts=()):
        self.balances = {name: 0 for name in accounts}
        self.entries = []

    def open(self, account, opening=0):
        if account in self.balances:
            raise ValueError(f"account exists: {account}")
        self.balances[account] = opening

    def post(self, lines, memo=""):
        if sum(amount for _, amount in lines) != 0:
            raise UnbalancedEntry(memo or "entry does not balance")
        for account, _ in lines:
            if account not in self.balances:
                raise KeyError(account)
        for account, amount in lines:
            self.balances[account] += amount
        self.entries.append((memo, tuple(lines)))

    def transfer(self, source, target, amount, memo=""):
        if amount <= 0:
            raise ValueError("amount must be positive")
        self.post([(source, -amount), (target, amount)], memo)

    def balance(self, account):
        return self.balances[account]

    def trial_balance(self):
        return sum(self.balances.values())

    def history(self, account):
        return [memo for memo, lines in self.entries if any(a == account for a, _ in lines)]

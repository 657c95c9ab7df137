"""A simulated customer on the line: seeded facts the agent must ask for, and a deterministic reply to each message.

A billing task with `user=customer` withholds who is calling: the goal gives only the customer's opening
words, and several customers have a real duplicate charge. The caller holds the facts (the e-mail address on
file, their name, the order, the amount) and discloses one only when the agent's message asks for it. The
store's policy, stated in the goal, says what the agent must obtain before it acts: the e-mail address on
file (always), and the customer's agreement to the exact amount (on some tasks).

Everything lives in the task's database: the facts in `caller` (no tool reads that table) and the talk in
`conversation`, written by the `message_user` tool inside the call's transaction, with the id of the call's
own `activity` row. A reply depends only on the facts and on how many messages came before it, so the
verifier's replay of the activity log rebuilds the conversation exactly, and the checks can tell, from the
final state alone, which facts the agent held before each of its calls.
"""

from __future__ import annotations

import random
import re
import sqlite3
from dataclasses import dataclass
from typing import Any

from gymsmith.families.ops.schema import money

# what the caller's reply disclosed: the checks read these names from `conversation.disclosed`
EMAIL, NAME, ORDER, AMOUNT, DATE, AGREEMENT = "email", "name", "order", "amount", "date", "agreement"

_ASKS = (  # (fact, what in the agent's message asks for it), on the message in lower case
    (EMAIL, re.compile(r"e-?\s?mail")),
    (NAME, re.compile(r"\bname\b")),
    (ORDER, re.compile(r"which order|order (?:number|no\b|id\b|#)|what did you (?:buy|order|purchase)|"
                       r"which (?:product|item)|what (?:product|item)")),
    (AMOUNT, re.compile(r"how much|what amount|which amount|amount were you|amount was")),
    (DATE, re.compile(r"\bwhen\b|\bdate\b|what day|which day")),
)
# a question: a sentence of the message that ends in "?" (a dot ends a sentence only before a space: "$81.00", "a.b@c")
_QUESTION = re.compile(r"(?:[^.?!\n]|\.(?=\S))*\?")
# an amount the agent states: "$12.34", "$1,234", "1234 cents"
_DOLLARS = re.compile(r"\$\s*(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d{1,2}))?")
_CENTS = re.compile(r"\b(\d+)\s*cents?\b")

_OPENINGS = ("Hi, I think I was charged twice for one of my orders. Can you sort it out?",
             "Hello. My card shows the same charge two times for one order. Please fix it.",
             "Hi there, I've been billed twice for something I bought. I'd like my money back for the extra charge.")
_ACKS = ("Sure.", "Of course.", "OK.", "Right.")
_CONFUSED = ("Sorry, I'm not sure what you need from me. I can give you my e-mail address or my name, or tell you "
             "about the order.",
             "I don't follow. Do you need my e-mail address, my name, or the order?")


@dataclass(frozen=True)
class Facts:
    """What the caller knows (one `caller` row)."""

    customer_id: int
    email: str
    name: str
    order_id: int
    product: str
    placed_date: str
    amount_cents: int
    knows_order: bool  # whether they have the order number, or only what they bought and when
    confirm: bool  # the store's policy: the customer agrees to the amount before a refund
    voice: str  # seeds the wording

    @property
    def opening(self) -> str:
        return random.Random(f"opening:{self.voice}").choice(_OPENINGS)

    def row(self) -> dict[str, Any]:
        return {"id": 1, "customer_id": self.customer_id, "email": self.email, "name": self.name,
                "order_id": self.order_id, "product": self.product, "placed_date": self.placed_date,
                "amount_cents": self.amount_cents, "knows_order": int(self.knows_order), "confirm": int(self.confirm),
                "voice": self.voice}


def facts(conn: sqlite3.Connection) -> Facts | None:
    """The caller of the task in `conn`, or None when no one is on the line."""
    cur = conn.execute("SELECT * FROM caller")
    row = cur.fetchone()
    if row is None:
        return None
    values = dict(zip([c[0] for c in cur.description], row))
    del values["id"]
    values["knows_order"], values["confirm"] = bool(values["knows_order"]), bool(values["confirm"])
    return Facts(**values)


def stated_amounts(text: str) -> set[int]:
    """Every amount, in cents, the text states in dollars ("$12.34", "$1,234") or in cents ("1234 cents")."""
    amounts = {int(whole.replace(",", "")) * 100 + int((cents or "0").ljust(2, "0")) for whole, cents in _DOLLARS.findall(text)}
    return amounts | {int(c) for c in _CENTS.findall(text)}


def answer(caller: Facts, text: str, turn: int) -> tuple[str, list[str], int | None]:
    """The caller's reply to the agent's `turn`-th message `text`: (reply, facts disclosed, amount agreed to).

    A fact is disclosed only when a question of the message (a sentence ending in "?") asks for it: a mention is
    no question ("no need for your e-mail" discloses nothing). An amount the message states is answered only when
    the message asks something: agreed to when it is the one amount stated and the amount charged twice (an
    announcement, "I am refunding $X now.", is no request for agreement), corrected when it is another (which tells
    the agent the amount); several at once get no agreement.
    """
    questions = " ".join(_QUESTION.findall(text.lower()))
    rng = random.Random(f"reply:{caller.voice}:{turn}")
    parts: list[str] = []
    disclosed: list[str] = []
    for fact, ask in _ASKS:
        if not ask.search(questions):
            continue
        disclosed.append(fact)
        if fact == EMAIL:
            parts.append(f"My e-mail address is {caller.email}.")
        elif fact == NAME:
            parts.append(f"My name is {caller.name}.")
        elif fact == ORDER:
            parts.append(f"It was order #{caller.order_id}, the {caller.product}." if caller.knows_order else
                         f"I don't have the order number to hand, sorry. It was the {caller.product} I bought on "
                         f"{caller.placed_date}.")
        elif fact == AMOUNT:
            parts.append(f"Each charge was {money(caller.amount_cents)}.")
        else:
            parts.append(f"I placed the order on {caller.placed_date}.")
    agreed = None
    amounts = stated_amounts(text)
    if len(amounts) > 1:
        parts.append("You mentioned several amounts; which one do you mean? Please tell me just one.")
    elif amounts and questions:
        if amounts == {caller.amount_cents}:
            agreed = caller.amount_cents
            disclosed.append(AGREEMENT)
            parts.append(f"Yes, {money(caller.amount_cents)} is right. Please go ahead.")
        else:
            if AMOUNT not in disclosed:
                disclosed.append(AMOUNT)
            parts.append(f"No, that's not it: I was charged {money(caller.amount_cents)} twice.")
    if not parts:
        return rng.choice(_CONFUSED), [], None
    return " ".join([rng.choice(_ACKS), *parts]), disclosed, agreed


def converse(conn: sqlite3.Connection, text: str) -> dict[str, Any]:
    """Record the agent's message and the caller's reply in `conversation` (inside the calling tool's
    transaction); return the reply. The caller must exist (`facts`)."""
    caller = facts(conn)
    assert caller is not None, "converse() needs a caller"
    turn = conn.execute("SELECT COUNT(*) FROM conversation WHERE sender = 'agent'").fetchone()[0]
    # the id the call's own activity row will get (`tools.call_tool` logs it right after the tool returns;
    # activity rows are never deleted, so the next rowid is max + 1)
    activity_id = conn.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM activity").fetchone()[0]
    reply, disclosed, agreed = answer(caller, text, turn)
    conn.execute("INSERT INTO conversation (activity_id, sender, text, disclosed, agreed_cents) VALUES (?, 'agent', ?, '', NULL)",
                 (activity_id, text))
    conn.execute("INSERT INTO conversation (activity_id, sender, text, disclosed, agreed_cents) VALUES (?, 'customer', ?, ?, ?)",
                 (activity_id, reply, ",".join(disclosed), agreed))
    return {"reply": reply}

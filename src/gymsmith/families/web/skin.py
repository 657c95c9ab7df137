"""Surface variation of the ShopDesk site: the same task's pages rendered with seeded differences that change nothing
the task means (the `variation` knob).

A policy trained on one site's markup learns that markup. A `Skin` is how one task's site looks: the words of its
links, buttons, field labels and messages (a synonym for each, or the canonical word), the order of its menu and
where the menu sits, the order of the sections of an order's page and of the columns of its lists, the rows per
page, and how it writes dates and money. `skin_of(seed, variation)` draws it from the task's seed: each feature
departs from the canonical site with probability `variation`, so at 0 every page is the canonical ShopDesk, byte for
byte, and at 1 every feature is drawn.

What a skin never changes: the database (the start state and its digest), the goal, the checks, the URLs and form
field names, the records' ids and values, and what a page offers to do. So the verifier's verdict on a final state
does not depend on the skin, and the oracle solves every skin through the UI: it is privileged in what it knows (the
skin, rebuilt from the seed as the site does), never in how it acts (`WebScriptedAgent.el` looks up the label the
page shows).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from datetime import date
from types import MappingProxyType
from typing import Mapping

# canonical text -> its synonyms. "{n}" stands for a number (an id). No two texts on one page may be shown alike:
# each synonym is distinct from every canonical text and every other synonym (`test_web_skin.py` checks it).
SYNONYMS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    # menu and navigation
    "Dashboard": ("Home", "Overview"),
    "Orders": ("Sales", "Order list"),
    "Tickets": ("Support", "Help desk"),
    "Log out": ("Sign out", "Leave"),
    "Next": ("Next page", "Older"),
    "Previous": ("Previous page", "Newer"),
    "Back to orders": ("All orders", "Return to orders"),
    "Back to tickets": ("All tickets", "Return to tickets"),
    "View orders": ("Open the order list", "See all orders"),
    "View open tickets": ("Open the ticket queue", "See open tickets"),
    "Go to the dashboard": ("Go home", "Return to the overview"),
    # buttons
    "Log in": ("Sign in", "Enter"),
    "Search": ("Find", "Look up"),
    "Filter": ("Apply filters", "Show tickets"),
    "Edit shipping address": ("Change delivery address", "Update the address"),
    "Save address": ("Save changes", "Store address"),
    "Refund charge #{n}": ("Refund payment #{n}", "Issue a refund for charge #{n}"),
    "Continue": ("Review refund", "Next step"),
    "Confirm refund": ("Yes, refund it", "Refund now"),
    "Send reply": ("Post reply", "Reply to customer"),
    "Close ticket": ("Resolve ticket", "Mark as closed"),
    "Confirm close": ("Yes, close it", "Close now"),
    "Cancel": ("Go back", "Abort"),
    # field labels
    "Search by customer or order number": ("Customer name or order number", "Find an order"),
    "Address line 1": ("Street and number", "Address"),
    "Address line 2": ("Apartment, suite (optional)", "Address (continued)"),
    "City": ("Town", "City / town"),
    "Postcode": ("Postal code", "ZIP / postcode"),
    "Country": ("Country / region", "Destination country"),
    "Reason": ("Refund reason", "Why"),
    "Tag": ("Category", "Topic"),
    "Status": ("State", "Current status"),  # the orders' column and the tickets' column and filter alike
    "Your reply": ("Message to the customer", "Reply text"),
    "Username": ("User name", "Account name"),
    "Password": ("Passphrase", "Your password"),
    # messages
    "Shipping address updated.": ("Delivery address saved.", "The address was changed."),
    "Shipping address unchanged.": ("Nothing to save: the address is the same.", "The address was already that."),
    "Reply sent.": ("Your reply was posted.", "Message sent to the customer."),
    "Ticket closed.": ("Ticket resolved.", "The ticket is now closed."),
    "Charge #{n} refunded.": ("Refund issued for charge #{n}.", "Charge #{n} was refunded."),
})
PAGE_SIZES = (5, 8, 15, 20, 25)  # rows per list page, besides the canonical 10
NAV = ("Dashboard", "Orders", "Tickets")
NAV_PLACES = ("header", "sidebar", "footer")
ORDER_SECTIONS = ("address", "items", "charges")
ORDER_COLUMNS = ("Order", "Customer", "Placed", "Total", "Status")
TICKET_COLUMNS = ("Ticket", "Subject", "Customer", "Tag", "Opened", "Status")
MONEY_STYLES = ("${units}.{cents}", "USD {units}.{cents}", "{units}.{cents} USD", "US$ {units}.{cents}")
DATE_STYLES = ("%Y-%m-%d", "%d %b %Y", "%b %d, %Y", "%d.%m.%Y", "%A %d %B %Y")
_NUMBERED = re.compile(r"(.*#)(\d+)(.*)", re.S)


@dataclass(frozen=True)
class Skin:
    """How one task's site looks. The canonical skin (`Skin()`) is ShopDesk as it has always been."""

    words: Mapping[str, str] = field(default_factory=dict)  # canonical text -> the text shown (only those varied)
    page_size: int = 10
    nav: tuple[str, ...] = NAV
    nav_place: str = "header"
    order_sections: tuple[str, ...] = ORDER_SECTIONS
    order_columns: tuple[str, ...] = ORDER_COLUMNS
    ticket_columns: tuple[str, ...] = TICKET_COLUMNS
    money_style: str = MONEY_STYLES[0]
    date_style: str = DATE_STYLES[0]

    def t(self, text: str, **fields: object) -> str:
        """The text shown for canonical `text` (a key of SYNONYMS or any other text, shown as it is), with `{n}`
        and any other field filled from `fields`."""
        shown = self.words.get(text, text)
        return shown.format(**fields) if fields else shown

    def shown(self, label: str) -> str:
        """The label shown for a canonical label as an agent spells it, with its number filled in ("Refund charge
        #12" -> "Refund payment #12"); a label no synonym covers is shown as it is."""
        if label in self.words:
            return self.words[label]
        numbered = _NUMBERED.fullmatch(label)
        if numbered is not None:
            key = f"{numbered[1]}{{n}}{numbered[3]}"
            if key in self.words:
                return self.words[key].format(n=numbered[2])
        return label

    def money(self, cents: int) -> str:
        sign, cents = ("-", -cents) if cents < 0 else ("", cents)
        return sign + self.money_style.format(units=f"{cents // 100:,}", cents=f"{cents % 100:02d}")

    def date(self, iso: str) -> str:
        """An ISO date (as the database holds it) as this site writes it; anything else as it is."""
        try:
            return date.fromisoformat(iso).strftime(self.date_style)
        except (TypeError, ValueError):
            return str(iso)


CANONICAL = Skin()


def skin_of(seed: int, variation: float) -> Skin:
    """The skin of task `seed`'s site at `variation` in [0, 1]: each feature (each text of SYNONYMS, the page size,
    the menu's order and place, the order page's sections, each list's columns, the money and date formats) differs
    from the canonical one with probability `variation`, drawn from the seed alone. Raises ValueError for a
    variation outside [0, 1]."""
    if not 0.0 <= variation <= 1.0:
        raise ValueError(f"variation: expected a number in [0, 1], got {variation!r}")
    rng = random.Random(f"web-skin:{seed}")

    def varies() -> bool:
        return rng.random() < variation  # drawn for every feature whatever the variation: features stay independent

    words = {}
    for text, synonyms in SYNONYMS.items():
        pick = rng.choice(synonyms)
        if varies():
            words[text] = pick
    page_size = rng.choice(PAGE_SIZES)
    return Skin(
        words=MappingProxyType(words),
        page_size=page_size if varies() else 10,
        nav=_shuffled(rng, NAV, varies()),
        nav_place=(rng.choice(NAV_PLACES[1:]), "header")[not varies()],
        order_sections=_shuffled(rng, ORDER_SECTIONS, varies()),
        order_columns=("Order", *_shuffled(rng, ORDER_COLUMNS[1:], varies())),  # the link to the order stays first
        ticket_columns=("Ticket", *_shuffled(rng, TICKET_COLUMNS[1:], varies())),
        money_style=(rng.choice(MONEY_STYLES[1:]), MONEY_STYLES[0])[not varies()],
        date_style=(rng.choice(DATE_STYLES[1:]), DATE_STYLES[0])[not varies()],
    )


def _shuffled(rng: random.Random, items: tuple[str, ...], vary: bool) -> tuple[str, ...]:
    order = list(items)
    rng.shuffle(order)  # drawn either way, so that the next feature's draw does not depend on this one's
    return tuple(order) if vary else items

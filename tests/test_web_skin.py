"""The web family's surface variation (`variation` knob, web/skin.py): pages that differ across seeds in everything
but what the task means. The oracle and exploits under varied skins are test_web_agents.py's work (its tasks span
difficulties 0 to 1, so variations 0 to 1)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import httpx
import pytest

from gymsmith.families.web.server import SiteServer
from gymsmith.families.web.site import Site
from gymsmith.families.web.skin import CANONICAL, SYNONYMS, skin_of
from gymsmith.families.web.world import AGENT_PASSWORD, AGENT_USER, generate_world, pristine_image
from gymsmith.registry import get_family

WEB = get_family("web")
PAGES = ("/", "/orders", "/orders?page=2", "/tickets?status=open", "/orders/{order}", "/orders/{order}/address",
         "/tickets/1")


class _Skeleton(HTMLParser):
    """A page's structure as an agent meets it: its tags in order and the words of its links, buttons, labels and
    headers, with numbers masked (the records' own values differ by seed whatever the skin)."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.open: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in ("tr", "td", "option"):
            return  # rows and options: how many is the records', not the skin's
        self.parts.append(tag)
        self.open.append(tag)

    def handle_endtag(self, tag):
        if self.open and self.open[-1] == tag:
            self.open.pop()

    def handle_data(self, data):
        if self.open and self.open[-1] in ("a", "button", "label", "th", "h1", "h2") and data.strip():
            word = re.sub(r"\d+", "#", data.strip())
            if not word.startswith("#"):  # a record's link (#1234) is the records'
                self.parts.append(word)


def _skeletons(seed: int, variation: float) -> tuple[str, ...]:
    task = WEB.generate(seed, difficulty=0.5, variation=variation, kind="address")
    site = Site()
    site.load(pristine_image(task.seed, task.knobs)[0], skin=skin_of(task.seed, task.knobs["variation"]))
    order = generate_world(task.seed, task.knobs).expected["order_id"]
    with SiteServer(site) as server, httpx.Client(base_url=server.origin) as client:
        client.post("/login", data={"username": AGENT_USER, "password": AGENT_PASSWORD, "next": "/"})
        pages = []
        for path in PAGES:
            parser = _Skeleton()
            parser.feed(client.get(path.format(order=order)).text)
            pages.append("|".join(parser.parts))
    return tuple(pages)


def test_variation_zero_is_the_canonical_site_and_each_feature_varies_at_one():
    """At 0 every seed's skin is the canonical ShopDesk; at 1 every text of SYNONYMS is a synonym and every other
    feature is drawn (the page size, the formats, the menu's place are never canonical)."""
    assert all(skin_of(seed, 0.0) == CANONICAL for seed in range(200))
    for seed in range(50):
        skin = skin_of(seed, 1.0)
        assert set(skin.words) == set(SYNONYMS) and all(skin.words[k] in SYNONYMS[k] for k in SYNONYMS)
        assert skin.page_size != 10 and skin.nav_place != "header"
        assert skin.money(123456) != CANONICAL.money(123456) and skin.date("2026-03-16") != "2026-03-16"
    halfway = [len(skin_of(seed, 0.5).words) / len(SYNONYMS) for seed in range(200)]
    assert 0.4 < sum(halfway) / len(halfway) < 0.6
    with pytest.raises(ValueError, match="variation"):
        skin_of(1, 1.5)


def test_no_two_texts_of_the_site_are_shown_alike():
    """A synonym that were another text's (canonical or synonym) would make two controls of a page one label."""
    shown = [text for text, synonyms in SYNONYMS.items() for text in (text, *synonyms)]
    assert len(shown) == len(set(shown))
    skin = skin_of(3, 1.0)
    assert skin.shown("Refund charge #12") == skin.words["Refund charge #{n}"].format(n=12)
    assert skin.shown("#12") == "#12" and skin.shown("Nothing like it") == "Nothing like it"


def test_a_skin_changes_how_the_site_looks_and_nothing_the_task_means():
    """Same seed, variation 0 and 1: the same start state (its digest), goal and expected outcome, so the checks
    judge the same final states the same way; the pages differ."""
    for seed, kind in [(1, "address"), (2, "refund"), (3, "tickets")]:
        plain = WEB.generate(seed, difficulty=0.6, variation=0.0, kind=kind)
        varied = WEB.generate(seed, difficulty=0.6, variation=1.0, kind=kind)
        assert plain.id != varied.id
        assert plain.start_state == varied.start_state and plain.goal == varied.goal
        assert generate_world(seed, plain.knobs).expected == generate_world(seed, varied.knobs).expected


def test_the_pages_an_agent_meets_differ_across_seeds_with_variation():
    """Served over HTTP by the site's own server: at variation 0 every seed shows the same structure on every page;
    at variation 1 almost every seed shows one of its own."""
    seeds = range(12)
    plain = {_skeletons(seed, 0.0) for seed in seeds}
    varied = {_skeletons(seed, 1.0) for seed in seeds}
    assert len(plain) == 1
    assert len(varied) >= 11

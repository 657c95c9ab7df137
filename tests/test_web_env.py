"""The web environment through its public API, in a real headless Chromium against the real ShopDesk server:
same seed, same site and same rollout; other origins blocked and recorded; bad actions as error
observations after which the rollout goes on; the site's own rules over real HTTP."""

from __future__ import annotations

import http.server
import importlib
import tempfile
import threading
import time
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from gymsmith.core.types import Action
from gymsmith.families.web.oracle import WebOracle, WebScriptedAgent
from gymsmith.families.web.server import SiteServer
from gymsmith.families.web.world import AGENT_PASSWORD, AGENT_USER, generate_world, pristine_image
from gymsmith.registry import get_family

FAMILY = get_family("web")


@pytest.fixture(scope="module")
def env():
    e = FAMILY.make_env()
    yield e
    e.close()


def rollout(env, task, agent, seed=0):
    obs = env.reset(task, seed=seed)
    agent.reset(task, obs, seed=seed)
    seen, done = [obs.text], False
    while not done and len(seen) < 200:
        result = env.step(agent.act(obs))
        obs, done = result.observation, result.done
        seen.append(obs.text)
    return seen, env.state_hash()


def test_same_seed_same_site_other_seed_other_site():
    a, b, c = (pristine_image(s, FAMILY.generate(s, difficulty=0.5).knobs) for s in (11, 11, 12))
    assert a == b and a[1] != c[1]
    assert FAMILY.generate(11, difficulty=0.5).id == FAMILY.generate(11, difficulty=0.5).id


@pytest.mark.parametrize("kind", ["refund", "address", "tickets"])
def test_an_id_says_nothing_of_which_record_the_goal_means(kind):
    """The goal's records were made first and held the first ids on every task (charge #5002 for a refund, order
    #1003 for an address, tickets from #301): a script that opened /orders/1001/charges/5002/refund without reading
    the goal was accepted on 9 of 9 tasks (a hundred-and-sixty-eighth attacker). They now sit at seeded places among
    the shop's records, and what the site holds still agrees with the goal."""
    targets = []
    for seed in range(30):
        task = FAMILY.generate(seed, kind=kind, difficulty=0.5)  # 160 orders
        world = generate_world(task.seed, task.knobs)
        x, rows = world.expected, {t: {r["id"]: r for r in world.rows[t]} for t in ("orders", "charges", "tickets")}
        if kind == "refund":
            kept, dup = rows["charges"][x["kept_charge_id"]], rows["charges"][x["charge_id"]]
            assert kept["order_id"] == dup["order_id"] == x["order_id"] and x["kept_charge_id"] < x["charge_id"]
            assert f"order #{x['order_id']}." in world.goal
            targets.append(x["charge_id"])
        elif kind == "address":
            assert rows["orders"][x["order_id"]]["placed_on"] == x["placed_on"]
            targets.append(x["order_id"])
        else:
            assert x["reply_to"] in x["close"] and all(rows["tickets"][t]["tag"] == x["tag"] for t in x["close"])
            targets.append(x["reply_to"])
    assert len(set(targets)) >= 15, sorted(targets)  # ids the goal meant: at most 4 distinct before


@pytest.mark.parametrize("seed", [21, 22, 23])  # one task of each kind
def test_two_rollouts_of_the_same_task_and_seed_are_identical(env, seed):
    task = FAMILY.generate(seed, difficulty=0.7)
    first, h1 = rollout(env, task, WebOracle())
    second, h2 = rollout(env, task, WebOracle())
    assert first == second and h1 == h2
    assert h1 != task.start_state.digest  # the oracle did change the site, the same way twice


def test_reset_restores_the_pristine_database(env):
    task = FAMILY.generate(31, difficulty=0.3)
    rollout(env, task, WebOracle())
    env.reset(task, seed=0)
    assert env.state_hash() == task.start_state.digest


class _Recorder(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self):  # noqa: N802 - the stdlib's name
        _Recorder.hits.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"reached")

    def log_message(self, *args):
        pass


def test_requests_to_other_origins_are_blocked_and_recorded(env):
    """The page's own tracking pixel, and a fetch to a real server on another loopback port, never leave the browser."""
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        env.reset(FAMILY.generate(41, difficulty=0.2), seed=0)
        blocked = [r["url"] for r in env.blocked.requests]
        assert any(u.startswith("https://metrics.shopdesk-analytics.example/") for u in blocked)
        url = f"http://127.0.0.1:{other.server_address[1]}/exfiltrate"
        outcome = env.page.evaluate(f"fetch('{url}').then(() => 'reached', () => 'refused')")
        assert outcome == "refused" and _Recorder.hits == []
        assert env.blocked.requests[-1]["url"] == url
        assert env.page.evaluate("fetch('/login').then(r => r.status)") == 200  # the site itself is reachable
    finally:
        other.shutdown()


@pytest.mark.parametrize("action, kind, says", [
    (Action(tool="click", arguments={"element": 999}), "not_found", "element 999 does not exist"),
    (Action(tool="type", arguments={"element": 3, "text": "x"}), "invalid_arguments", "type works on textbox elements only"),
    (Action(tool="select", arguments={"element": 1, "option": "x"}), "invalid_arguments", "select works on select elements only"),
    (Action(tool="goto", arguments={"path": "https://example.com/"}), "rule_violation", "outside the site"),
    (Action(tool="goto", arguments={"path": "file:///etc/passwd"}), "rule_violation", "outside the site"),
    (Action(tool="goto", arguments={"path": "//evil.example/x"}), "rule_violation", "outside the site"),
    (Action(tool="goto", arguments={"path": "javascript:alert(1)"}), "rule_violation", "outside the site"),
])
def test_bad_actions_are_error_observations_and_the_rollout_goes_on(env, action, kind, says):
    task = FAMILY.generate(51, difficulty=0.0)
    env.reset(task, seed=0)
    before = env.path()
    result = env.step(action)
    obs = result.observation
    assert obs.error is not None and obs.error.kind.value == kind and says in obs.error.message, obs.text[:300]
    assert not result.done and env.path() == before and "Log in" in obs.text  # the page is shown as it is
    ok = env.step(Action(tool="type", arguments={"element": env_element(obs, "username"), "text": AGENT_USER}))
    assert ok.observation.error is None and f'value="{AGENT_USER}"' in ok.observation.text


def env_element(obs, name):
    return next(e["id"] for e in obs.data["elements"] if e["name"] == name)


def test_observation_numbers_every_interactive_element(env):
    obs = env.reset(FAMILY.generate(61, difficulty=0.0), seed=0)
    assert obs.text.startswith("Goal: ") and "URL: /login" in obs.text
    ids = [e["id"] for e in obs.data["elements"]]
    assert ids == list(range(1, len(ids) + 1)) and all(f"[{i}]" in obs.text for i in ids)
    assert {e["role"] for e in obs.data["elements"]} >= {"textbox", "button"}


# -- the site's rules over real HTTP (an agent can only reach them through the browser; these prove the server holds) --

@pytest.fixture()
def site():
    task = FAMILY.generate(71, kind="refund", difficulty=0.5)
    with SiteServer() as server:
        server.site.load(pristine_image(task.seed, task.knobs)[0])
        with httpx.Client(base_url=server.origin, follow_redirects=False) as client:
            r = client.post("/login", data={"username": AGENT_USER, "password": AGENT_PASSWORD, "next": "/"})
            assert r.status_code == 303
            yield server, client, task


def test_a_refund_posted_without_its_confirmation_is_refused(site):
    server, client, task = site
    x = importlib.import_module("gymsmith.families.web.world").generate_world(task.seed, task.knobs).expected
    before = server.site.image()
    r = client.post(f"/orders/{x['order_id']}/charges/{x['charge_id']}/refund/confirm", data={"reason": "duplicate", "token": "guess"})
    assert r.status_code == 400 and "not confirmed" in r.text and server.site.image() == before
    # through the confirmation page it works: the token is one-time and bound to the session
    page = client.post(f"/orders/{x['order_id']}/charges/{x['charge_id']}/refund", data={"reason": "duplicate"})
    token = page.text.split('name="token" value="', 1)[1].split('"', 1)[0]
    ok = client.post(f"/orders/{x['order_id']}/charges/{x['charge_id']}/refund/confirm", data={"reason": "duplicate", "token": token})
    assert ok.status_code == 303 and server.site.image() != before


def test_invalid_forms_show_errors_and_change_nothing(site):
    server, client, task = site
    before = server.site.image()
    r = client.post("/orders/1001/address", data={"line1": "", "city": "Leeds", "postcode": "12345", "country": "United Kingdom"})
    assert r.status_code == 422 and "Address line 1 is required." in r.text and "looks like LS1 4AB" in r.text
    assert server.site.image() == before


def test_every_spelling_the_form_accepts_of_a_postcode_is_stored_as_one(site):
    """The form takes Dutch and British postcodes with or without their space (and in any case); it stored what was
    typed, and the checks compare the stated string, so a hundred-and-seventy-seventh attacker's honest address
    with "1234AB" for "1234 AB" was saved ("Shipping address updated.") and scored 0 on 6 of 6 tasks. Each accepted
    spelling is now stored as the canonical one."""
    server, client, _ = site
    order = server.site.one("SELECT id FROM orders LIMIT 1")[0]
    for country, typed, stored in (("Netherlands", "1234ab", "1234 AB"), ("Netherlands", "1234 AB", "1234 AB"),
                                   ("United Kingdom", "ls66dx", "LS6 6DX"), ("United Kingdom", "SW1A1AA", "SW1A 1AA"),
                                   ("United Kingdom", "LS6 6DX", "LS6 6DX"), ("Germany", "04109", "04109")):
        r = client.post(f"/orders/{order}/address", data={"line1": "1 Elm Street", "line2": "", "city": "Leeds",
                                                           "postcode": typed, "country": country})
        assert r.status_code == 303, (typed, r.text[-300:])
        assert server.site.one("SELECT ship_postcode FROM orders WHERE id = ?", order)[0] == stored, typed


def _held_post(server, path: str, sid: str, form: dict[str, str]):
    """A POST whose headers go now and whose body goes when the returned function is called (it returns the
    status line): a client holding its request open, as raw HTTP can."""
    import socket
    from urllib.parse import urlencode

    body = urlencode(form).encode()
    conn = socket.create_connection(("127.0.0.1", server.port))
    conn.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nCookie: sid={sid}\r\nContent-Type: application/x-www-form-"
                 f"urlencoded\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode())
    time.sleep(0.2)  # the server has the headers and waits for the body

    def finish() -> str:
        conn.sendall(body)
        reply = conn.recv(65536).split(b"\r\n", 1)[0].decode()
        conn.close()
        return reply

    return finish


ADDRESS = {"line1": "1 Park Row", "line2": "", "city": "Leeds", "postcode": "LS1 4AB", "country": "United Kingdom"}


def test_a_request_held_open_across_a_reset_changes_nothing_in_the_next_rollouts_site(site):
    """A red-team client sent a POST's headers in one rollout and its body after the environment was reset for the
    next: the write landed in the next rollout's fresh database, which a do-nothing agent then submitted and had
    accepted. A request changes only the site it was accepted in (the whole request, body included)."""
    server, client, task = site
    sid = client.cookies["sid"]
    finish = _held_post(server, "/orders/1001/address", sid, ADDRESS)
    before = server.site.image()
    assert finish().endswith("303 See Other") and server.site.image() != before  # held, same site: it is a change
    finish = _held_post(server, "/orders/1001/address", sid, ADDRESS)
    server.site.load(pristine_image(task.seed, task.knobs)[0])  # the next rollout
    loaded = server.site.image()
    finish()
    assert server.site.image() == loaded


def test_a_body_held_back_is_judged_on_the_state_when_it_arrives(site):
    """A reply whose body was held back until its ticket was closed was stored on the closed ticket: the handler had
    checked the ticket before it waited for the body. Handlers run only on whole requests."""
    server, client, _ = site
    tid = server.site.one("SELECT id FROM tickets WHERE status = 'open' ORDER BY id")["id"]
    finish = _held_post(server, f"/tickets/{tid}/reply", client.cookies["sid"], {"body": "Sorted, thanks."})
    page = client.get(f"/tickets/{tid}/close")
    token = page.text.split('name="token" value="', 1)[1].split('"', 1)[0]
    assert client.post(f"/tickets/{tid}/close", data={"token": token}).status_code == 303
    messages = server.site.one("SELECT COUNT(*) AS n FROM messages WHERE ticket_id = ?", tid)["n"]
    assert "409" in finish()
    assert server.site.one("SELECT COUNT(*) AS n FROM messages WHERE ticket_id = ?", tid)["n"] == messages


def test_once_the_episode_is_over_the_site_refuses_every_write(site):
    """`Site.freeze` (what `WebEnvironment.settle` ends with): a request that reaches the site after the final
    snapshot changes nothing, so the judged state is the one the site ends in; the next load opens it again."""
    server, client, task = site
    before = server.site.image()
    server.site.freeze()
    r = client.post("/orders/1001/address", data=ADDRESS)
    assert r.status_code >= 400 and server.site.image() == before
    server.site.load(pristine_image(task.seed, task.knobs)[0])
    client.post("/login", data={"username": AGENT_USER, "password": AGENT_PASSWORD, "next": "/"})
    assert client.post("/orders/1001/address", data=ADDRESS).status_code == 303


class _UndoAtTheLastKey(WebScriptedAgent):
    """An independent attacker's agent (43): the address goal done through the UI, then line 1 overwritten and the
    form sent with the keyboard (Tab to Save, Space), submitting right after. A key press returns before the form's
    POST is sent, so the write landed 20-65 ms after the final snapshot: accepted 12 of 12 with the goal undone."""

    name = "race:last_word_undo"
    submit_note = "done"

    def script(self):
        yield from self.login()
        yield from self.solve()
        x = self.world.expected
        yield from self.do("goto", path=f"/orders/{x['order_id']}/address")
        yield from self.type("line1", "x")
        for _ in range(5):  # line 2, city, postcode, country, Save
            yield from self.do("press", key="Tab")
        yield from self.do("press", key="Space")


def test_a_write_the_last_action_started_is_judged_not_left_to_land_after_the_snapshot():
    """`WebEnvironment.settle`: the episode waits for the page to be quiet, closes the browser, lets the server
    answer what reached it and freezes the site before the snapshot; the judged state is the site's last.

    The undo's form is sent within the quiet window or never (the browser is closed): which one depends on how
    busy the machine is, so the test asserts the property, not the timing: nothing lands after the snapshot (it
    did, 20-65 ms later, before `settle`), and the reward is the one of the state the site ends in: 0 when the undo
    landed, 1 when it was never sent."""
    import sqlite3

    from gymsmith.core.types import Split
    from gymsmith.runner.rollout import run_rollout
    from gymsmith.verifier.service import VerifierService

    env = FAMILY.make_env()
    try:
        with VerifierService() as verifier:
            for seed in (100, 101):
                task = FAMILY.generate(seed, kind="address", difficulty=0.5)
                t = run_rollout(env=env, agent=_UndoAtTheLastKey(), task=task, split=Split.TRAIN, seed=0, run_id="race",
                                verifier=verifier, policy="progress_gated", max_steps=80, time_limit_s=120)
                time.sleep(0.3)  # a write the browser had sent would have landed by now
                assert env.state_hash() == t.final_state_hash, seed  # nothing landed after the snapshot
                with tempfile.TemporaryDirectory() as d:
                    with closing(sqlite3.connect(env.final_state(Path(d)).path)) as db:
                        (line1,) = db.execute("SELECT ship_line1 FROM orders WHERE id = ?",
                                              (generate_world(task.seed, task.knobs).expected["order_id"],)).fetchone()
                undone = line1 == "x"
                assert t.reward is not None and t.reward.accepted is not undone, (seed, line1, t.reward)
                assert t.reward.value == (0.0 if undone else 1.0), (seed, line1, t.reward)
    finally:
        env.close()


def test_pages_need_a_login_and_the_admin_area_is_closed(site):
    server, client, _ = site
    with httpx.Client(base_url=server.origin) as anonymous:
        assert anonymous.get("/orders", follow_redirects=False).headers["location"].startswith("/login")
    assert client.get("/admin").status_code == 403 and client.get("/debug").status_code == 404


def _descendants() -> set[int]:
    import os

    children: dict[int, list[int]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                children.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(pid))
        except OSError:
            pass
    out, todo = set(), [os.getpid()]
    while todo:
        for c in children.get(todo.pop(), []):
            out.add(c)
            todo.append(c)
    return out


def test_closing_the_last_environment_stops_chromium_and_frees_the_thread():
    """Playwright's sync API holds an event loop in its thread while it runs: after the last environment of a
    thread closes, that thread must be able to run asyncio again, and none of its Chromium processes may be left."""
    import asyncio

    before, outcome = _descendants(), {}

    def worker():
        e = FAMILY.make_env()
        e.reset(FAMILY.generate(81, difficulty=0.0), seed=0)
        outcome["started"] = len(_descendants() - before)
        e.close()
        outcome["asyncio"] = asyncio.run(asyncio.sleep(0, result="ran"))

    t = threading.Thread(target=worker)
    t.start()
    t.join(120)
    assert outcome["started"] >= 2 and outcome["asyncio"] == "ran"  # a driver and Chromium's processes ran
    import time
    deadline = time.monotonic() + 10
    while _descendants() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _descendants() - before == set()


def test_a_call_from_another_thread_than_the_browsers_is_an_infrastructure_failure(env):
    """Playwright's sync API is bound to the thread that started the browser: a step or the end of an episode from
    another thread cannot run, and must not read as the agent's error observation (a harness that did that scored
    the agent 0; attacker 147, through the HTTP server)."""
    from concurrent.futures import ThreadPoolExecutor

    from gymsmith.core.errors import is_infrastructure
    from gymsmith.families.web.browser import BrowserUnavailable

    env.reset(FAMILY.generate(3, difficulty=0.2), seed=0)
    with ThreadPoolExecutor(1) as other:
        for call in (lambda: env.step(Action(tool="scroll", arguments={"direction": "down"})), env.settle):
            with pytest.raises(BrowserUnavailable, match="belongs to thread") as raised:
                other.submit(call).result()
            assert is_infrastructure(raised.value)
    result = env.step(Action(tool="scroll", arguments={"direction": "down"}))  # on its own thread it goes on
    assert result.observation.error is None and not result.done


def test_the_tickets_to_close_are_told_by_their_date_not_by_counting():
    """A hundred-and-seventy-first attacker closed the older half of the goal tag's open tickets without reading the
    goal's date (accepted 15 of 15): the newer open tickets of the tag were always as many as the goal's, and the tag
    never appeared elsewhere. Their number is now drawn apart, and the rest of the desk uses every tag; the goal's
    tickets are still exactly the tag's open tickets opened before the date."""
    right = 0
    for seed in range(100):
        task = FAMILY.generate(seed, kind="tickets", difficulty=(seed % 5) / 4)
        world = generate_world(task.seed, task.knobs)
        x, tickets = world.expected, world.rows["tickets"]
        tagged = sorted((t for t in tickets if t["tag"] == x["tag"] and t["status"] == "open"),
                        key=lambda t: (t["opened_on"], t["id"]))
        assert sorted(t["id"] for t in tagged if t["opened_on"] < x["cutoff"]) == x["close"]
        right += sorted(t["id"] for t in tagged[:len(tagged) // 2]) == x["close"]
    assert right <= 35, right  # 100 of 100 before


def test_the_address_goals_order_is_told_by_its_customers_name_not_by_its_history():
    """The look-alike customers ordered once, on the goal's day, and the goal's customer had orders on other days too:
    the one order of that day's look-alikes whose customer had a history was the goal's, and a hundred-and-seventy-first
    attacker's script reading only the new address was accepted on 12 of 12 tasks. Each look-alike now has a history
    of its own, so only the name tells them apart."""
    tried = 0
    for seed in range(40):
        task = FAMILY.generate(seed, kind="address", difficulty=0.5 + (seed % 3) / 4)
        world = generate_world(task.seed, task.knobs)
        x, orders = world.expected, world.rows["orders"]
        names = {c["id"]: c["name"] for c in world.rows["customers"]}
        that_day = {o["customer_id"] for o in orders if o["placed_on"] == x["placed_on"]}
        group = {n for n in names.values() if _one_letter_apart(n, x["customer"])}  # the goal's customer may be an edit
        alike = [c for c in that_day if names[c] != x["customer"] and (
            names[c] in group or any(_one_letter_apart(names[c], n) for n in group))]
        histories = {c: sum(o["customer_id"] == c for o in orders) for c in alike}
        tried += bool(alike)
        assert all(n >= 3 for n in histories.values()), (seed, histories)
    assert tried >= 20, tried


def _one_letter_apart(a: str, b: str) -> bool:
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b)) == 1
    short, long_ = sorted((a, b), key=len)
    return len(long_) == len(short) + 1 and any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


@pytest.mark.parametrize("kind", ["refund", "address"])
def test_the_goals_customer_is_not_told_by_the_shape_of_the_data(kind):
    """The goal's customer was the only one with look-alikes (names a letter away), and for a refund the only
    unrefunded duplicate on the day of the look-alikes' refunded ones: a script reading nothing of the goal named its
    order on 78 (refund) and 48 (address: the newest order of that customer) of 100 tasks by this test's reckoning.
    Two decoy customers now have the same shape (3.4.0), and none of what the site shows of a customer tells the
    goal's from theirs (3.5.0): the goal's customer had no other orders nor tickets, was the one name of its group
    spelled as in the name lists, and its order alone stood to the new address as the goal's must (a
    hundred-and-seventy-sixth attacker's script, reading nothing of the goal but the new address: 99 of 100 address
    and 86 of 100 refund tasks; this test's ranking by all of these: 77 and 62 before, 11 and 24 now). Each way of
    picking among the records of the goal's shape is right about one time in three or less."""
    from gymsmith.families.ops.names import FIRST, LAST

    listed = {f"{a} {b}" for a in FIRST for b in LAST}
    signals = ("any of them", "spelled as listed", "fewest orders", "no tickets", "newest",
               "stands to the new address as the goal's must", "all of these")
    right = dict.fromkeys(signals, 0.0)
    for seed in range(100):
        task = FAMILY.generate(seed, kind=kind, difficulty=(seed % 10) / 9)
        world = generate_world(task.seed, task.knobs)
        rows, x = world.rows, world.expected
        names = {c["id"]: c["name"] for c in rows["customers"]}
        orders = {o["id"]: o for o in rows["orders"]}
        if kind == "refund":
            charges: dict[int, list[dict]] = {}
            for c in rows["charges"]:
                charges.setdefault(c["order_id"], []).append(c)
            doubled = {o: [c["status"] for c in cs] for o, cs in charges.items() if len(cs) == 2}
            refunded_days = {orders[o]["placed_on"] for o, s in doubled.items() if s[1] == "refunded"}
            picks = [o for o, s in doubled.items() if s[1] == "captured" and orders[o]["placed_on"] in refunded_days]
        else:  # an order on a day when a customer a letter away ordered too
            on_day: dict[str, set[int]] = {}
            for o in orders.values():
                on_day.setdefault(o["placed_on"], set()).add(o["customer_id"])
            picks = [o["id"] for o in orders.values() if any(
                c != o["customer_id"] and _one_letter_apart(names[c], names[o["customer_id"]]) for c in on_day[o["placed_on"]])]
        if task.knobs["distractors"] < 1:
            continue
        assert len(picks) >= 3, (seed, picks)  # the goal's and two decoys'
        count = {c: sum(o["customer_id"] == c for o in orders.values()) for c in names}
        ticketed = {t["customer_id"] for t in rows["tickets"]}
        new = x.get("address", {})
        trap = task.knobs["validation_trap"]
        score = {"any of them": lambda o: 0, "spelled as listed": lambda o: names[o["customer_id"]] in listed,
                 "fewest orders": lambda o: -count[o["customer_id"]], "no tickets": lambda o: o["customer_id"] not in ticketed,
                 "newest": lambda o: o["placed_on"],
                 "stands to the new address as the goal's must": lambda o: (
                     bool(o["ship_line2"]) and o["ship_country"] != new.get("ship_country") if trap
                     else o["ship_country"] == new.get("ship_country"))}
        score["all of these"] = lambda o: tuple(score[k](o) for k in (  # the attacker's ranking, near enough
            "stands to the new address as the goal's must", "spelled as listed", "no tickets", "fewest orders"))
        for signal in signals:
            best = max(score[signal](orders[o]) for o in picks)
            tied = [o for o in picks if score[signal](orders[o]) == best]
            right[signal] += (x["order_id"] in tied) / len(tied)
    assert all(n <= 40 for n in right.values()), {k: round(v) for k, v in right.items()}


def test_the_goals_tag_is_told_by_the_goal_not_by_the_desk():
    """The goal's tag alone was built with tickets to close, newer open ones and older closed ones, and its tickets'
    customers marked it: a hundred-and-seventy-sixth attacker's script, reading neither the tag nor the date, closed
    the goal's tickets on 83 of 100 tasks (the tag with the most open tickets was the goal's on 59 of 100 alone); and
    as many tickets as the knob says, which the site's size tells, closed them reading the tag but not the date (200
    of 200). Every tag is now built alike with a date of its own, the goal's drawn after, and the number of tickets
    is one of three around the knob's. And the dates showed the cut: a date 10-30 days back, the tag's other tickets
    closed only before it (a hundred-and-seventy-seventh attacker's estimator, reading the tag but not the date: 86 of
    100); the open tickets are now opened on days drawn alike, the date anywhere between the last to close and the
    next, the rest of the desk closed."""
    right = {"most open": 0.0, "fewest closed": 0.0, "most open before a month ago": 0.0}
    counted = by_age = 0
    for seed in range(100):
        task = FAMILY.generate(seed, kind="tickets", difficulty=(seed % 5) / 4)
        world = generate_world(task.seed, task.knobs)
        x, tickets = world.expected, world.rows["tickets"]
        tags = sorted({t["tag"] for t in tickets})
        score = {"most open": lambda g: sum(t["tag"] == g and t["status"] == "open" for t in tickets),
                 "fewest closed": lambda g: -sum(t["tag"] == g and t["status"] == "closed" for t in tickets),
                 "most open before a month ago": lambda g: sum(t["tag"] == g and t["status"] == "open"
                                                               and t["opened_on"] < "2026-02-14" for t in tickets)}
        for signal, rank in score.items():
            best = max(rank(g) for g in tags)
            tied = [g for g in tags if rank(g) == best]
            right[signal] += (x["tag"] in tied) / len(tied)
        oldest = sorted((t for t in tickets if t["tag"] == x["tag"] and t["status"] == "open"),
                        key=lambda t: (t["opened_on"], t["id"]))[:task.knobs["n_tickets"]]
        counted += sorted(t["id"] for t in oldest) == x["close"]
        old_open = sorted(t["id"] for t in tickets if t["tag"] == x["tag"] and t["status"] == "open" and t["opened_on"] < "2026-02-24")
        by_age += old_open == x["close"]  # the tag's open tickets opened over three weeks back
    assert all(n <= 32 for n in right.values()), right  # chance is 20
    assert counted <= 45, counted  # 100 of 100 at 3.4.0, 47 at 3.5.0; 38 now (one of three counts)
    assert by_age <= 25, by_age  # 63 of 100 when the date was 10-30 days back and the tag closed before it only; 13 now

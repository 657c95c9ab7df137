"""ShopDesk: the site the browser family's agents work in - a shop back office with orders, refunds and a help desk.

A real FastAPI application with server-rendered Jinja2 pages over an in-memory SQLite database that the
environment swaps per rollout (`Site.load`). It has the friction of a real back office: a login,
search, pagination, forms that validate, confirmation pages for what cannot be undone, and an admin area
the agent's account may not use. State-changing requests are POSTs, and the irreversible ones need a
one-time token that only the confirmation page hands out, so a request that skips the confirmation is
refused.

Who did what: every change is written together with an `audit` row whose actor is the account of the
session that made it (`Site.change`); no form field can name the actor. Credentials: the agent's account
has the password its goal states; every other account (staff, admin) gets a password from the OS's
CSPRNG each time a database is loaded, held only in this process's memory and told to nobody, so none
follows from the seed, the task or anything on a page. Sessions and confirmation tokens are CSPRNG
tokens in memory too: the database holds business state only, the same for the same actions.
"""

from __future__ import annotations

import contextvars
import math
import re
import secrets
import sqlite3
import threading
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qs, urlencode

import jinja2
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from gymsmith.families.web.skin import CANONICAL, Skin
from gymsmith.families.web.world import AGENT_PASSWORD, AGENT_USER, COUNTRIES, TAGS, TODAY

SQLITE_INT = range(-2**63, 2**63)  # a path id outside it is no row (SQLite cannot even be asked: OverflowError, a 500)
REASONS = (("duplicate", "Duplicate charge"), ("customer_request", "Customer request"), ("fraud", "Fraud"))
POSTCODE = {"United States": (r"\d{5}", "12345"), "Germany": (r"\d{5}", "12345"), "France": (r"\d{5}", "12345"),
            "Netherlands": (r"\d{4} ?[A-Z]{2}", "1234 AB"), "United Kingdom": (r"[A-Z]{1,2}\d[A-Z\d]? ?\d[A-Z]{2}", "LS1 4AB")}
INWARD = {"Netherlands": 2, "United Kingdom": 3}  # a postcode's last part, after its one space


def canonical_postcode(country: str, postcode: str) -> str:
    """The one spelling a postcode is stored in: the form accepts Dutch and British postcodes with or without their
    space and stores them with it, so that every spelling it accepts of the stated value is that value (a
    hundred-and-seventy-seventh attacker's honest "1234AB" for "1234 AB" was saved and scored 0 on 6 of 6 tasks)."""
    if country not in INWARD:
        return postcode
    compact = postcode.replace(" ", "")
    return f"{compact[:-INWARD[country]]} {compact[-INWARD[country]:]}"


_TEMPLATES = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
                                autoescape=True, undefined=jinja2.ChainableUndefined)


MAX_BODY = 1 << 20  # bytes of a request body; no form of the site comes near it
# the site generation (`Site.load` count) a request was accepted in, set once its whole body has arrived
_GENERATION: contextvars.ContextVar[int | None] = contextvars.ContextVar("shopdesk_generation", default=None)


class StaleRequest(Exception):
    """A request accepted before the site was loaded again (the previous rollout's) tried to change this one."""


class Site:
    """The site's state: one database connection (swapped per rollout), passwords, sessions and confirmation tokens."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self.conn.row_factory = sqlite3.Row
        self.passwords: dict[str, str] = {}  # username -> password; nobody can log in before load()
        self.sessions: dict[str, str] = {}
        self.tokens: dict[str, tuple[str, str]] = {}  # token -> (session, what it confirms)
        self.generation = 0  # loads so far: a request may change only the database it was accepted in
        self.frozen = False  # the episode is over (`freeze`): no request changes anything until the next load
        self.skin = CANONICAL  # how the pages look (`skin.py`): the task's, set by `load`

    def load(self, image: bytes, known: dict[str, str] | None = None, skin: Skin = CANONICAL) -> None:
        """Replace the database with a pristine image, show it in `skin` and forget every session: a fresh site.

        `known` gives the accounts whose passwords someone is told (default: the agent's, as its goal states);
        every other account of the image gets a fresh 192-bit password from `secrets`, which nothing outside
        this process ever sees.
        """
        known = {AGENT_USER: AGENT_PASSWORD} if known is None else known
        with self.lock:
            self.generation += 1
            self.frozen = False
            self.conn.deserialize(image)
            self.skin = skin
            users = [r["username"] for r in self.conn.execute("SELECT username FROM users")]
            self.passwords = {u: known.get(u) or secrets.token_urlsafe(24) for u in users}
            self.sessions.clear()
            self.tokens.clear()

    def check_password(self, username: str, password: str) -> bool:
        expected = self.passwords.get(username)
        return expected is not None and secrets.compare_digest(expected.encode(), password.encode())

    def freeze(self) -> None:
        """End the episode: from now on until the next `load`, every write, session and token is refused. Taken under
        the lock, so a write in progress has committed (or not begun) when it returns."""
        with self.lock:
            self.frozen = True

    def _current(self) -> None:
        """Raise StaleRequest if the request being served was accepted before the last `load` (call under the lock):
        a client that held a request open across a reset must not write into the next rollout's site; nor may any
        request change the site once the episode is over (`freeze`)."""
        if self.frozen:
            raise StaleRequest("the episode is over; nothing was changed")
        accepted = _GENERATION.get()
        if accepted is not None and accepted != self.generation:
            raise StaleRequest("this request was made on an earlier session of the site; nothing was changed")

    def open_session(self, username: str) -> str:
        """A new session of `username`: its id."""
        with self.lock:
            self._current()
            sid = secrets.token_urlsafe(16)
            self.sessions[sid] = username
            return sid

    def issue_token(self, sid: str, what: str) -> str:
        """A one-time token confirming `what` for the session `sid`."""
        with self.lock:
            self._current()
            token = secrets.token_urlsafe(16)
            self.tokens[token] = (sid, what)
            return token

    def redeem(self, sid: str, token: str, what: str) -> bool:
        """Whether `token` confirms `what` for the session `sid` (it is used up either way)."""
        with self.lock:
            self._current()
            return self.tokens.pop(token, None) == (sid, what)

    def change(self, actor: str, action: str, target_id: int, *statements: tuple[str, tuple]) -> None:
        """Run `statements` and the audit row saying `actor` did `action` on `target_id`, as one transaction.
        Raises StaleRequest (changing nothing) if the request was accepted before the last `load`."""
        with self.lock:
            self._current()
            self.conn.execute("BEGIN")
            try:
                for sql, args in statements:
                    self.conn.execute(sql, args)
                self.conn.execute("INSERT INTO audit (actor, action, target_id, on_day) VALUES (?, ?, ?, ?)",
                                  (actor, action, target_id, TODAY.isoformat()))
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    def image(self) -> bytes:
        with self.lock:
            return self.conn.serialize()

    def q(self, sql: str, *args: Any) -> list[sqlite3.Row]:
        with self.lock:
            return self.conn.execute(sql, args).fetchall()

    def one(self, sql: str, *args: Any) -> sqlite3.Row | None:
        rows = self.q(sql, *args)
        return rows[0] if rows else None


class WholeRequests:
    """ASGI middleware: a handler runs only once its request's whole body has arrived, stamped with the site's
    generation at that moment. So no handler waits on its client between reading state and writing it (a body
    held back until a ticket was closed, or until the site was loaded for the next rollout, found its checks
    already passed), and `Site` refuses the writes of a request accepted before the last load."""

    def __init__(self, app: Any, site: Site) -> None:
        self.app, self.site = app, site

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # gone before its request was whole: nothing to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY:
                await send({"type": "http.response.start", "status": 413, "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"request body too large"})
                return
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        delivered = False

        async def replay() -> dict:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: the client's disconnect, if it comes

        with self.site.lock:
            token = _GENERATION.set(self.site.generation)
        try:
            await self.app(scope, replay, send)
        finally:
            _GENERATION.reset(token)


def create_app(site: Site) -> FastAPI:
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(WholeRequests, site=site)

    def render(request: Request, name: str, code: int = 200, **ctx: Any) -> HTMLResponse:
        user = site.sessions.get(request.cookies.get("sid", ""))
        flash = request.query_params.get("flash", "")
        skin = site.skin
        html = _TEMPLATES.get_template(name).render(user=user, flash=flash, skin=skin, tr=skin.t, money=skin.money, date=skin.date,
                                                    page_name=name.removesuffix(".html"), **ctx)
        return HTMLResponse(html, status_code=code)

    def error(request: Request, status: int, heading: str, message: str) -> HTMLResponse:
        return render(request, "error.html", code=status, status=status, heading=heading, message=message)

    def user_of(request: Request) -> sqlite3.Row | None:
        name = site.sessions.get(request.cookies.get("sid", ""))
        return site.one("SELECT * FROM users WHERE username = ?", name) if name else None

    def flashed(path: str, message: str) -> RedirectResponse:
        """To `path`, with `message` (canonical: shown in the site's words) at the top of the page."""
        return RedirectResponse(f"{path}?{urlencode({'flash': site.skin.t(message)})}", 303)

    def login_first(request: Request) -> RedirectResponse:
        return RedirectResponse("/login?" + urlencode({"next": request.url.path + (f"?{request.url.query}" if request.url.query else "")}), 303)

    async def form(request: Request) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs((await request.body()).decode(errors="replace"), keep_blank_values=True).items()}

    def issue_token(request: Request, what: str) -> str:
        return site.issue_token(request.cookies.get("sid", ""), what)

    def redeem(request: Request, token: str, what: str) -> bool:
        return site.redeem(request.cookies.get("sid", ""), token, what)

    def paginate(rows: list, page: int) -> tuple[list, int, int]:
        size = site.skin.page_size
        pages = max(1, math.ceil(len(rows) / size))
        page = min(max(page, 1), pages)
        return rows[(page - 1) * size: page * size], page, pages

    def page_number(request: Request) -> int:
        try:
            return int(request.query_params.get("page", "1"))
        except ValueError:
            return 1

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> HTMLResponse:
        heading = {404: "Page not found", 405: "Method not allowed"}.get(exc.status_code, "Error")
        return error(request, exc.status_code, heading, f"{request.method} {request.url.path} is not available here.")

    @app.exception_handler(StaleRequest)
    async def stale(request: Request, exc: StaleRequest) -> HTMLResponse:
        return error(request, 409, "Session ended", str(exc))

    @app.exception_handler(RequestValidationError)
    async def bad_path(request: Request, exc: RequestValidationError) -> HTMLResponse:  # e.g. /orders/abc: no such page
        return error(request, 404, "Page not found", f"{request.method} {request.url.path} is not available here.")

    # -- session ----------------------------------------------------------------------------------
    @app.get("/login")
    async def login_page(request: Request, next: str = "/") -> Response:
        return render(request, "login.html", next=next, username="")

    @app.post("/login")
    async def login(request: Request) -> Response:
        f = await form(request)
        row = site.one("SELECT * FROM users WHERE username = ?", f.get("username", ""))
        if row is None or not site.check_password(row["username"], f.get("password", "")):
            return render(request, "login.html", code=401, error="Invalid username or password.", next=f.get("next", "/"),
                          username=f.get("username", ""))
        sid = site.open_session(row["username"])
        target = f.get("next", "/")
        resp = RedirectResponse(target if target.startswith("/") and not target.startswith("//") else "/", 303)
        resp.set_cookie("sid", sid, httponly=True, samesite="strict")
        return resp

    @app.get("/logout")
    async def logout(request: Request) -> Response:
        site.sessions.pop(request.cookies.get("sid", ""), None)
        return RedirectResponse("/login", 303)

    # -- pages ------------------------------------------------------------------------------------
    @app.get("/")
    async def dashboard(request: Request) -> Response:
        if not user_of(request):
            return login_first(request)
        # a COUNT(*) query always has its row
        counts = {"orders": cast(sqlite3.Row, site.one("SELECT COUNT(*) FROM orders"))[0],
                  "paid": cast(sqlite3.Row, site.one("SELECT COUNT(*) FROM orders WHERE status = 'paid'"))[0],
                  "open_tickets": cast(sqlite3.Row, site.one("SELECT COUNT(*) FROM tickets WHERE status = 'open'"))[0]}
        return render(request, "dashboard.html", counts=counts, today=TODAY.isoformat())

    @app.get("/orders")
    async def orders(request: Request, q: str = "") -> Response:
        if not user_of(request):
            return login_first(request)
        term = q.strip()
        sql = "SELECT o.*, c.name FROM orders o JOIN customers c ON c.id = o.customer_id"
        if term:
            number = term.lstrip("#")
            rows = site.q(sql + " WHERE c.name LIKE ? OR CAST(o.id AS TEXT) = ? ORDER BY o.placed_on DESC, o.id DESC",
                          f"%{term}%", number)
        else:
            rows = site.q(sql + " ORDER BY o.placed_on DESC, o.id DESC")
        shown, page, pages = paginate(rows, page_number(request))
        return render(request, "orders.html", orders=shown, q=term, page=page, pages=pages, total=len(rows),
                      page_url=lambda p: "/orders?" + urlencode({**({"q": term} if term else {}), "page": p}))

    def order_row(oid: int) -> sqlite3.Row | None:
        if oid not in SQLITE_INT:
            return None
        return site.one("SELECT o.*, c.name, c.email FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.id = ?", oid)

    @app.get("/orders/{oid}")
    async def order(request: Request, oid: int) -> Response:
        if not user_of(request):
            return login_first(request)
        o = order_row(oid)
        if o is None:
            return error(request, 404, "Order not found", f"There is no order #{oid}.")
        return render(request, "order.html", o=o, items=site.q("SELECT * FROM order_items WHERE order_id = ? ORDER BY id", oid),
                      charges=site.q("SELECT * FROM charges WHERE order_id = ? ORDER BY id", oid))

    @app.get("/orders/{oid}/address")
    async def address_form(request: Request, oid: int) -> Response:
        if not user_of(request):
            return login_first(request)
        o = order_row(oid)
        if o is None:
            return error(request, 404, "Order not found", f"There is no order #{oid}.")
        return render(request, "address.html", oid=oid, f=dict(o), errors={}, countries=COUNTRIES)

    @app.post("/orders/{oid}/address")
    async def address_save(request: Request, oid: int) -> Response:
        user = user_of(request)
        if not user:
            return login_first(request)
        if order_row(oid) is None:
            return error(request, 404, "Order not found", f"There is no order #{oid}.")
        f = await form(request)
        new = {"ship_line1": f.get("line1", "").strip(), "ship_line2": f.get("line2", "").strip(), "ship_city": f.get("city", "").strip(),
               "ship_postcode": f.get("postcode", "").strip().upper(), "ship_country": f.get("country", "")}
        errors = {}
        if not new["ship_line1"]:
            errors["line1"] = "Address line 1 is required."
        if not new["ship_city"]:
            errors["city"] = "City is required."
        if new["ship_country"] not in POSTCODE:
            errors["country"] = "Choose a country from the list."
        else:
            pattern, example = POSTCODE[new["ship_country"]]
            if not re.fullmatch(pattern, new["ship_postcode"]):
                errors["postcode"] = f"A postcode in {new['ship_country']} looks like {example}."
            else:
                new["ship_postcode"] = canonical_postcode(new["ship_country"], new["ship_postcode"])
        if errors:
            return render(request, "address.html", code=422, oid=oid, f=new, errors=errors, countries=COUNTRIES)
        with site.lock:
            old = cast(sqlite3.Row, order_row(oid))  # the order exists (above)
            if all(old[k] == v for k, v in new.items()):
                return flashed(f"/orders/{oid}", "Shipping address unchanged.")
            site.change(user["username"], "order.address", oid,
                        ("UPDATE orders SET ship_line1 = ?, ship_line2 = ?, ship_city = ?, ship_postcode = ?, ship_country = ? WHERE id = ?",
                         (*new.values(), oid)))
        return flashed(f"/orders/{oid}", "Shipping address updated.")

    def charge_of(oid: int, cid: int) -> sqlite3.Row | None:
        if oid not in SQLITE_INT or cid not in SQLITE_INT:
            return None
        return site.one("SELECT * FROM charges WHERE id = ? AND order_id = ?", cid, oid)

    @app.get("/orders/{oid}/charges/{cid}/refund")
    async def refund_form(request: Request, oid: int, cid: int) -> Response:
        if not user_of(request):
            return login_first(request)
        c = charge_of(oid, cid)
        if c is None:
            return error(request, 404, "Charge not found", f"Order #{oid} has no charge #{cid}.")
        if c["status"] != "captured":
            return error(request, 409, "Already refunded", f"Charge #{cid} was already refunded.")
        return render(request, "refund.html", c=c, reasons=REASONS)

    @app.post("/orders/{oid}/charges/{cid}/refund")
    async def refund_review(request: Request, oid: int, cid: int) -> Response:
        if not user_of(request):
            return login_first(request)
        c = charge_of(oid, cid)
        if c is None or c["status"] != "captured":
            return error(request, 409, "Cannot refund", f"Charge #{cid} of order #{oid} cannot be refunded.")
        reason = (await form(request)).get("reason", "")
        if reason not in dict(REASONS):
            return render(request, "refund.html", code=422, c=c, reasons=REASONS, error="Choose a reason for the refund.")
        token = issue_token(request, f"refund:{cid}:{reason}")
        return render(request, "confirm.html", question=f"Refund {site.skin.money(c['amount_cents'])} on charge #{cid} ({dict(REASONS)[reason]})? This cannot be undone.",
                      action=f"/orders/{oid}/charges/{cid}/refund/confirm", token=token, hidden=[("reason", reason)],
                      confirm_label="Confirm refund", cancel=f"/orders/{oid}")

    @app.post("/orders/{oid}/charges/{cid}/refund/confirm")
    async def refund_confirm(request: Request, oid: int, cid: int) -> Response:
        user = user_of(request)
        if not user:
            return login_first(request)
        f = await form(request)
        if not redeem(request, f.get("token", ""), f"refund:{cid}:{f.get('reason', '')}"):
            return error(request, 400, "Not confirmed", "This refund was not confirmed: start again from the order page.")
        with site.lock:
            c = charge_of(oid, cid)
            if c is None or c["status"] != "captured":
                return error(request, 409, "Cannot refund", f"Charge #{cid} cannot be refunded.")
            site.change(user["username"], "charge.refund", cid, ("UPDATE charges SET status = 'refunded' WHERE id = ?", (cid,)),
                        ("INSERT INTO refunds (charge_id, amount_cents, reason, created_on, created_by) VALUES (?, ?, ?, ?, ?)",
                         (cid, c["amount_cents"], f["reason"], TODAY.isoformat(), user["username"])))
        return flashed(f"/orders/{oid}", site.skin.t("Charge #{n} refunded.", n=cid))

    @app.get("/tickets")
    async def tickets(request: Request, tag: str = "", status: str = "") -> Response:
        if not user_of(request):
            return login_first(request)
        args: list[Any]
        sql, args = "SELECT t.*, c.name FROM tickets t JOIN customers c ON c.id = t.customer_id WHERE 1=1", []
        if tag:
            sql, args = sql + " AND t.tag = ?", [*args, tag]
        if status:
            sql, args = sql + " AND t.status = ?", [*args, status]
        rows = site.q(sql + " ORDER BY t.opened_on DESC, t.id DESC", *args)
        shown, page, pages = paginate(rows, page_number(request))
        filters = {k: v for k, v in (("tag", tag), ("status", status)) if v}
        return render(request, "tickets.html", tickets=shown, tags=TAGS, tag=tag, status=status, page=page, pages=pages,
                      total=len(rows), page_url=lambda p: "/tickets?" + urlencode({**filters, "page": p}))

    def ticket_row(tid: int) -> sqlite3.Row | None:
        if tid not in SQLITE_INT:
            return None
        return site.one("SELECT t.*, c.name FROM tickets t JOIN customers c ON c.id = t.customer_id WHERE t.id = ?", tid)

    def ticket_page(request: Request, t: sqlite3.Row, status: int = 200, error_text: str = "") -> Response:
        return render(request, "ticket.html", code=status, t=t, error=error_text,
                      messages=site.q("SELECT * FROM messages WHERE ticket_id = ? ORDER BY id", t["id"]))

    @app.get("/tickets/{tid}")
    async def ticket(request: Request, tid: int) -> Response:
        if not user_of(request):
            return login_first(request)
        t = ticket_row(tid)
        return ticket_page(request, t) if t is not None else error(request, 404, "Ticket not found", f"There is no ticket #{tid}.")

    @app.post("/tickets/{tid}/reply")
    async def reply(request: Request, tid: int) -> Response:
        user = user_of(request)
        if not user:
            return login_first(request)
        t = ticket_row(tid)
        if t is None:
            return error(request, 404, "Ticket not found", f"There is no ticket #{tid}.")
        body = (await form(request)).get("body", "").strip()
        if t["status"] != "open":
            return ticket_page(request, t, 409, "This ticket is closed: replies are not possible.")
        if not body or len(body) > 2000:
            return ticket_page(request, t, 422, "A reply needs between 1 and 2000 characters.")
        site.change(user["username"], "ticket.reply", tid, ("INSERT INTO messages (ticket_id, author, body, sent_on) VALUES (?, ?, ?, ?)",
                                                            (tid, user["username"], body, TODAY.isoformat())))
        return flashed(f"/tickets/{tid}", "Reply sent.")

    @app.get("/tickets/{tid}/close")
    async def close_review(request: Request, tid: int) -> Response:
        if not user_of(request):
            return login_first(request)
        t = ticket_row(tid)
        if t is None or t["status"] != "open":
            return error(request, 409, "Cannot close", f"Ticket #{tid} is not open.")
        return render(request, "confirm.html", question=f"Close ticket #{tid} ({t['subject']})? The customer is notified.",
                      action=f"/tickets/{tid}/close", token=issue_token(request, f"close:{tid}"), hidden=[],
                      confirm_label="Confirm close", cancel=f"/tickets/{tid}")

    @app.post("/tickets/{tid}/close")
    async def close(request: Request, tid: int) -> Response:
        user = user_of(request)
        if not user:
            return login_first(request)
        if not redeem(request, (await form(request)).get("token", ""), f"close:{tid}"):
            return error(request, 400, "Not confirmed", "Closing was not confirmed: use the Close ticket button.")
        with site.lock:
            t = ticket_row(tid)
            if t is None or t["status"] != "open":
                return error(request, 409, "Cannot close", f"Ticket #{tid} is not open.")
            site.change(user["username"], "ticket.close", tid, ("UPDATE tickets SET status = 'closed' WHERE id = ?", (tid,)))
        return flashed(f"/tickets/{tid}", "Ticket closed.")

    # -- the admin area: real, unlinked, and closed to the support account ---------------------------
    @app.api_route("/admin", methods=["GET", "POST"])
    @app.api_route("/admin/{rest:path}", methods=["GET", "POST"])
    async def admin(request: Request, rest: str = "") -> Response:
        user = user_of(request)
        if not user:
            return login_first(request)
        if user["role"] != "admin":
            return error(request, 403, "Forbidden", "The admin area is for administrators only.")
        return error(request, 404, "Page not found", "Nothing here yet.")

    return app

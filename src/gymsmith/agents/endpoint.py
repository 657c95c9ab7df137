"""Checks on a model endpoint before a run spends anything on it: the URL's shape, then one request.

`validate_base_url` refuses a URL that cannot name an HTTP endpoint; `check_endpoint` asks the server which models
it serves (`GET /models`, falling back to a one-token chat completion where that route is missing) and raises
`EndpointCheckError` with one line saying what is wrong: nothing listening, no such route, a refused key, or a model
name the server does not serve. A dead endpoint fails in one connection attempt (`connect_timeout_s`), never
through the agent's retries.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from gymsmith.core.errors import GymsmithError

EXAMPLE_URL = "http://127.0.0.1:8000/v1"


class EndpointCheckError(GymsmithError):
    """The endpoint cannot serve the run (one line: what was tried and what to change)."""


def validate_base_url(url: str) -> str:
    """Return `url` without a trailing slash. Raises ValueError (one line) unless it is http(s)://HOST[:PORT][/PATH]
    with no query or fragment."""
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError as exc:
        raise ValueError(f"model URL {url!r}: {exc}; expected http(s)://HOST[:PORT]/PATH, e.g. {EXAMPLE_URL}") from None
    if parts.scheme not in ("http", "https"):
        got = f"scheme {parts.scheme!r}" if parts.scheme else "no scheme"
        raise ValueError(f"model URL {url!r} has {got}; expected http:// or https://, e.g. {EXAMPLE_URL}")
    if not parts.hostname:
        raise ValueError(f"model URL {url!r} has no host; expected http(s)://HOST[:PORT]/PATH, e.g. {EXAMPLE_URL}")
    if parts.query or parts.fragment:
        raise ValueError(f"model URL {url!r} has a query or fragment; expected the API root only, e.g. {EXAMPLE_URL}")
    return url.strip().rstrip("/")


def check_endpoint(base_url: str, model: str, *, api_key: str | None = None, connect_timeout_s: float = 1.5,
                   read_timeout_s: float = 10.0) -> list[str]:
    """Ask the endpoint at `base_url` whether it serves `model`; return the model names it lists ([] when it has
    no `/models` route but answered a chat completion for `model`).

    Raises EndpointCheckError when nothing accepts a connection within `connect_timeout_s`, the connection
    drops or a reply takes longer than `read_timeout_s`, the key is refused (401/403), neither `/models` nor
    `/chat/completions` exists there, or `model` is not among the served models (or the chat completion says it
    does not exist)."""
    import httpx  # imported here: every worker imports the agents, few of them talk to a model

    base = validate_base_url(base_url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    timeout = httpx.Timeout(read_timeout_s, connect=connect_timeout_s)
    with httpx.Client(base_url=base, timeout=timeout, headers=headers) as client:
        listed = _request(client, base, "GET", "/models")
        if listed.status_code == 200:
            served = _served_models(listed)
            if served is not None:
                if model not in served:
                    shown = ", ".join(served[:10]) + (f" and {len(served) - 10} more" if len(served) > 10 else "")
                    raise EndpointCheckError(f"model {model!r} is not served at {base}; it serves: {shown or 'none'} "
                                             "(--model-name)")
                return served
        _refused_key(listed, base)
        body = {"model": model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}
        reply = _request(client, base, "POST", "/chat/completions", json=body)
        _refused_key(reply, base)
        if reply.status_code == 200:
            return []
        text = " ".join(reply.text.split())[:200]
        if reply.status_code in (400, 404) and model in reply.text:
            raise EndpointCheckError(f"model {model!r} is not served at {base}: HTTP {reply.status_code}: {text} "
                                     "(--model-name)")
        if reply.status_code == 404:
            raise EndpointCheckError(f"no chat completions at {base}/chat/completions (HTTP 404); expected the API root "
                                     f"of an OpenAI-compatible server, e.g. {EXAMPLE_URL} (--model-url)")
        raise EndpointCheckError(f"{base}/chat/completions answered a one-token request with HTTP {reply.status_code}: "
                                 f"{text}")


def _request(client: Any, base: str, method: str, path: str, **kwargs: Any) -> Any:
    import httpx

    try:
        return client.request(method, path, **kwargs)
    except httpx.ConnectTimeout:
        raise EndpointCheckError(f"cannot reach the model endpoint {base}: no connection within "
                                 f"{client.timeout.connect:g} s (--model-url)") from None
    except httpx.ConnectError as exc:
        raise EndpointCheckError(f"cannot reach the model endpoint {base}: {_reason(exc)} (is the server running? "
                                 "--model-url)") from None
    except httpx.TimeoutException:
        raise EndpointCheckError(f"the model endpoint {base} accepted a connection but did not answer {method} {path} "
                                 f"within {client.timeout.read:g} s") from None
    except httpx.TransportError as exc:
        raise EndpointCheckError(f"the model endpoint {base} failed on {method} {path}: {type(exc).__name__}: "
                                 f"{_reason(exc)}") from None


def _reason(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text[:160] or type(exc).__name__


def _served_models(response: Any) -> list[str] | None:
    """The model ids of an OpenAI-style model list, or None if the body is not one."""
    try:
        data = response.json()["data"]
        return [str(m["id"]) for m in data]
    except (ValueError, KeyError, TypeError):
        return None


def _refused_key(response: Any, base: str) -> None:
    if response.status_code in (401, 403):
        raise EndpointCheckError(f"the model endpoint {base} refused the API key (HTTP {response.status_code}); set it "
                                 "in the variable --model-key-env names (default OPENAI_API_KEY)")

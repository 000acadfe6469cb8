"""Spec 001's ``search_engine`` tool: web search through a self-hosted SearxNG.

The tool exists only when an admin configures it, as a connection of kind ``tools``
(``POST /api/connections`` with ``{"kind": "tools", "provider": "searxng", "options":
{"base_url": ...}}``, or ``[connections.web]`` in ragline.toml); its ``api_key`` is a
secret, stored and never returned. A chat turn then lists it in the tool-decision
prompt under the name spec 001 uses, ``search_engine``.

What comes back is bounded and checked before a model sees it: the backend's answer is
read up to ``max_bytes`` within ``timeout_s`` (one total deadline), at most
``max_results`` results are kept, titles and snippets are cut to
:data:`TITLE_CHARS` / :data:`SNIPPET_CHARS`, and a result whose URL is not http(s) or
names an address the SSRF guard refuses (loopback, private, link-local, ... written as
an IP or ``localhost``) is dropped, so a poisoned index cannot steer the model's next
``fetch_url`` at the server's network. The backend's own address is checked by the same
guard unless ``allow_private`` (a SearxNG on the local network is the usual setup, and
the admin chose it).
"""

from __future__ import annotations

import ipaddress
import json
import time
from typing import Any, ClassVar

import anyio.to_thread
import httpx
from pydantic import Field, SecretStr, field_validator

from ragline.errors import InvalidInput
from ragline.ingest.netguard import refusal_reason, resolve_checked
from ragline.providers.base import Health, ProviderConfig, config_schema
from ragline.services.tools.base import ToolContext

TITLE_CHARS = 200
SNIPPET_CHARS = 500
USER_AGENT = "ragline-search/1 (+https://github.com/ragline)"


class SearxngConfig(ProviderConfig):
    base_url: str = Field(description="The SearxNG instance, e.g. http://searxng:8080 "
                          "(its JSON API, /search?format=json, must be enabled).")
    api_key: SecretStr | None = Field(None, description="Sent as 'Authorization: Bearer' "
                                      "(a SearxNG behind an authenticating proxy); "
                                      "write-only.")
    timeout_s: float = Field(10.0, gt=0, le=60, description="Total deadline of one search.")
    max_results: int = Field(5, ge=1, le=20, description="Results kept per search.")
    max_bytes: int = Field(1_000_000, ge=1024, le=20_000_000,
                           description="Largest answer read from the backend.")
    allow_private: bool = Field(False, description="Let the backend itself be on a "
                                "private or loopback address (results never may).")
    language: str | None = Field(None, max_length=16, description="SearxNG 'language'.")
    categories: str | None = Field(None, max_length=200,
                                   description="SearxNG 'categories', e.g. 'general,news'.")

    @field_validator("base_url")
    @classmethod
    def _http(cls, v: str) -> str:
        try:
            url = httpx.URL(v)
        except (httpx.InvalidURL, TypeError, ValueError):
            raise ValueError("must be an http(s) URL") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError("must be an http(s) URL")
        return v.rstrip("/")


def _allowed_result(url: str) -> bool:
    """A result URL the model may be shown: http(s), and not an address (IP literal or
    ``localhost``) that the SSRF guard refuses. Hostnames are not resolved here: a later
    ``fetch_url`` resolves and checks them again."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        return False
    host = parsed.host.strip("[]").lower()
    if parsed.scheme not in ("http", "https") or not host:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return False
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return True
    return refusal_reason(host) is None


def _text(value: Any, limit: int) -> str:
    return " ".join(str(value or "").split())[:limit]


class SearxngSearch:
    """The ``search_engine`` tool over SearxNG's JSON API."""

    name: ClassVar[str] = "search_engine"
    description: ClassVar[str] = (
        "Search the web for time-sensitive or public information (news, prices, recent "
        "events) and return result titles, URLs and snippets.")
    arguments: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to search the web for."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 20},
        },
        "required": ["query"],
    }
    CAPABILITIES: ClassVar[list[str]] = ["web_search"]
    Config: ClassVar[type[SearxngConfig]] = SearxngConfig

    def __init__(self, config: SearxngConfig,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.config = config
        self._transport = transport

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return config_schema(SearxngConfig)

    def capabilities(self) -> list[str]:
        return list(self.CAPABILITIES)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        query = str(args["query"])
        limit = args.get("limit")
        return await anyio.to_thread.run_sync(
            lambda: self.search(query, int(limit) if isinstance(limit, int) else None))

    def search(self, query: str, limit: int | None = None) -> dict[str, Any]:
        """The results, or ``{"error": ...}`` for the model to explain (never a URL with
        credentials or the backend's address)."""
        keep = min(limit or self.config.max_results, self.config.max_results)
        try:
            data = self._get(query)
        except InvalidInput as exc:
            return {"error": f"web search failed: {exc.message}"}
        raw = data.get("results") if isinstance(data, dict) else None
        if not isinstance(raw, list):
            return {"error": "web search failed: the backend answered no 'results' list"}
        results: list[dict[str, str]] = []
        dropped = 0
        for item in raw:
            if len(results) >= keep:
                break
            url = item.get("url") if isinstance(item, dict) else None
            if not isinstance(url, str) or not _allowed_result(url):
                dropped += 1
                continue
            results.append({"title": _text(item.get("title"), TITLE_CHARS),
                            "url": url[:2048],
                            "snippet": _text(item.get("content"), SNIPPET_CHARS)})
        return {"query": query, "results": results, "dropped": dropped}

    def _get(self, query: str) -> Any:
        c = self.config
        base = httpx.URL(c.base_url)
        port = base.port or (443 if base.scheme == "https" else 80)
        resolve_checked(base.host, port, allow_private=c.allow_private)  # InvalidInput
        params = {"q": query, "format": "json"}
        if c.language:
            params["language"] = c.language
        if c.categories:
            params["categories"] = c.categories
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if c.api_key is not None:
            headers["Authorization"] = f"Bearer {c.api_key.get_secret_value()}"
        deadline = time.monotonic() + c.timeout_s
        body = bytearray()
        try:
            with httpx.Client(timeout=c.timeout_s, follow_redirects=False, trust_env=False,
                              transport=self._transport) as client, \
                    client.stream("GET", f"{c.base_url}/search", params=params,
                                  headers=headers) as resp:
                if resp.status_code != 200:
                    raise InvalidInput(f"the backend answered HTTP {resp.status_code}")
                for piece in resp.iter_bytes():
                    body += piece
                    if len(body) > c.max_bytes:
                        raise InvalidInput(f"the answer exceeds {c.max_bytes} bytes")
                    if time.monotonic() > deadline:
                        raise InvalidInput(f"no complete answer within {c.timeout_s:g} s")
        except httpx.TimeoutException:
            raise InvalidInput(f"no answer within {c.timeout_s:g} s") from None
        except httpx.HTTPError as exc:
            raise InvalidInput(f"could not reach the backend ({type(exc).__name__})") from None
        try:
            return json.loads(bytes(body))
        except ValueError:
            raise InvalidInput("the backend's answer is not JSON (enable SearxNG's json "
                               "format)") from None

    def health(self) -> Health:
        out = self.search("ragline")
        if "error" in out:
            return Health.now("down", {"engine": "searxng"}, error=str(out["error"]))
        return Health.now("ok", {"engine": "searxng", "results": len(out["results"])})

"""A stand-in vendor: an HTTPS server in front of the reference service that answers like a
real vendor behind a commercial gateway might, one switchable behaviour at a time.

The reference service is not changed: the stand-in asks it for the truth (every page of a
polygon, with its own key) and rewrites the answer the client sees. Its own request log
(:attr:`StandInVendor.log`, one :class:`Arrival` per request that reached it) is the witness
for the calls a client spent; what it asked the reference service is not.

Behaviours (``vendor.set(**switches)``; ``vendor.reset()`` back to a vendor that answers like
the reference service):

==================  ============================================================================
switch              values
==================  ============================================================================
``base``            1 (pages 1..n) or 0 (pages 0..n-1)
``past_last``       ``"400"`` (our envelope), ``"last"`` (the last page again), ``"empty"``
                    (``data: []``) for a page past the last
``order``           ``"stable"`` or ``"shuffled"`` (each answer orders the result afresh)
``shrink_after``    after this many answers for one polygon, the result loses its last 100 ids
``numbers``         ``"int"`` or ``"str"`` (``"rows": "276"``)
``datarows``        ``True`` or ``False`` (no ``dataRows`` field)
``extra_fields``    ``True``: unknown fields added
``gzip``            ``True``: gzip-compressed with ``Content-Length`` (when asked)
``empty``           ``"ok"`` (rows 0), ``"404"`` or ``"200-error"`` (``No parcels found``)
``stage``           ``True``: only ``/prod/v1/...`` exists; elsewhere the gateway's 404 fault
``redirect``        ``None``, ``"slash"`` (301 to the same path with a trailing slash), ``"host"``
                    (301 to ``localhost``, another host), ``"http"`` (301 to ``http://``)
``fault``           a function ``Arrival -> str | None`` naming a gateway fault for that request:
                    ``"quota429"``, ``"quota403"``, ``"spike"``, ``"auth401"``, ``"html502"``,
                    ``"html503"``, ``"html504"``, ``"refuse400"`` (one polygon refused),
                    ``"garbled"`` (a 200 whose counts cannot be read), ``"gone410"`` (a
                    retired endpoint: 410 with a ``Sunset`` header), ``"maint200"`` (a 200
                    carrying an HTML maintenance page), ``"wait429"`` (spike arrest with
                    ``Retry-After:`` ``retry_after`` seconds)
``ids``             ``"hex"`` (as the reference service: 17 lowercase hex), ``"upper"`` (the
                    same upper-case), ``"opaque"`` (``PCL-`` and upper case: other length)
``trickle``         a function ``Arrival -> bool``: that answer's body is sent
                    ``trickle_bytes`` at a time, ``trickle_gap`` seconds apart
``retry_after``     seconds the ``"wait429"`` fault asks to wait
``page_size``       GroupIDs a page (100 as the reference service; 50 as some vendors)
``line_limit``      the longest request line (``GET … HTTP/1.1``, bytes) the gateway takes
                    (``None``: no limit); longer ones are refused as ``line_refusal`` says
``line_refusal``    ``"apigee"`` (414, fault ``protocol.http.TooBigLine``) or ``"iis"`` (an
                    HTML 404.15 "query string too long" page)
``window``          pages a search is served at most (``None``: every page); a deeper page is
                    refused with a 400 "Result window is too large … Narrow the searchPolygon"
``window_words``    ``"stated"`` (the refusal says how many results may be paged through, as
                    Elasticsearch does) or ``"bare"`` (it says only that the page is too deep)
``told_size``       the page size ``pages`` is counted with (``None``: ``page_size``; another:
                    an answer whose counts do not agree)
``quota_left``      calls the key has left (``None``: no quota told): each answer sends them in
                    ``quota_header`` after counting itself; once none is left, the quota fault
``quota_header``    ``"X-RateLimit-Remaining"`` (Apigee, Kong) or ``"RateLimit-Remaining"``
``slip``            ``True``: each page after the first begins with the previous page's last
                    id (offset paging over an order that shifted by one; counts unchanged)
==================  ============================================================================

Each :class:`Arrival` records when it came (``at``) and when its answer was sent
(``answered``), both ``time.monotonic()`` of this process, and whether the client hung up
before a trickled body was whole (``hung_up``).
"""

from __future__ import annotations

import gzip as gzip_module
import http.client
import json
import math
import random
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from parcelsearch import _wire

PAGE_SIZE = 100

QUOTA_FAULT = {
    "fault": {
        "faultstring": "Rate limit quota violation. Quota limit  exceeded. Identifier : _default",
        "detail": {"errorcode": "policies.ratelimit.QuotaViolation"},
    }
}
SPIKE_FAULT = {
    "fault": {
        "faultstring": "Spike arrest violation. Allowed rate : MessageRate{messagesPerPeriod=10, "
        "periodInMicroseconds=1000000, maxBurstMessageCount=1.0}",
        "detail": {"errorcode": "policies.ratelimit.SpikeArrestViolation"},
    }
}
KEY_FAULT = {
    "fault": {"faultstring": "Invalid ApiKey", "detail": {"errorcode": "oauth.v2.InvalidApiKey"}}
}
NO_PROXY_FAULT = {
    "fault": {
        "faultstring": "Unable to identify proxy for host: default and url: /v1/search",
        "detail": {"errorcode": "messaging.adaptors.http.flow.ApplicationNotFound"},
    }
}
HTML = (
    "<!DOCTYPE html><html><head><title>{status} {reason}</title></head><body>"
    "<h1>{reason}</h1><p>The server encountered a temporary error.</p></body></html>"
)
REASONS = {
    200: "OK",
    301: "Moved Permanently",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    410: "Gone",
    414: "URI Too Long",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


@dataclass
class Arrival:
    """One request as it reached the stand-in vendor."""

    number: int
    path: str
    polygon: str | None
    page: int | None
    host: str
    had_key: bool
    status: int = 0
    at: float = 0.0
    answered: float = 0.0
    hung_up: bool = False


Fault = Callable[[Arrival], "str | None"]


def fault_on(numbers: set[int] | None, name: str) -> Fault:
    """A fault for the arrivals numbered in ``numbers`` (``None``: every arrival)."""
    return lambda arrival: name if numbers is None or arrival.number in numbers else None


DEFAULTS: dict[str, Any] = {
    "base": 1,
    "past_last": "400",
    "order": "stable",
    "shrink_after": None,
    "numbers": "int",
    "datarows": True,
    "extra_fields": False,
    "gzip": False,
    "empty": "ok",
    "stage": False,
    "redirect": None,
    "fault": None,
    "ids": "hex",
    "trickle": None,
    "trickle_gap": 0.5,
    "trickle_bytes": 4,
    "retry_after": 3,
    "page_size": PAGE_SIZE,
    "told_size": None,
    "line_limit": None,
    "line_refusal": "apigee",
    "window": None,
    "window_words": "stated",
    "quota_left": None,
    "quota_header": "X-RateLimit-Remaining",
    "slip": False,
}

#: The retired endpoint's words and date (``"gone410"``).
GONE_WORDS = "API version v1 was retired on 2026-10-31; use /v2/search"
SUNSET = "Sat, 31 Oct 2026 23:59:59 GMT"
#: Apigee's refusal of a request line over its limit (``TooBigLine``).
TOO_BIG_LINE = {
    "fault": {
        "faultstring": "Request line is too long",
        "detail": {"errorcode": "protocol.http.TooBigLine"},
    }
}
#: IIS request filtering's refusal of a long query string (404.15).
IIS_404_15 = (
    "<!DOCTYPE html><html><head><title>IIS 10.0 Detailed Error - 404.15 - Not Found"
    "</title></head><body><h3>HTTP Error 404.15 - Not Found</h3><h4>The request "
    "filtering module is configured to deny a request where the query string is too "
    "long.</h4></body></html>"
)
MAINTENANCE = (
    "<!DOCTYPE html><html><head><title>Down for maintenance</title></head><body>"
    "<h1>We'll be back soon</h1><p>The service is down for scheduled maintenance."
    "</p></body></html>"
)


def shown_id(group_id: str, style: str) -> str:
    """A GroupID as the stand-in sends it under the ``ids`` switch ``style``."""
    if style == "upper":
        return group_id.upper()
    if style == "opaque":
        return f"PCL-{group_id.upper()}"
    return group_id


class StandInVendor:
    """The stand-in vendor on ``https://127.0.0.1:<port>``, asking ``upstream`` for the truth.

    Parameters
    ----------
    upstream
        The reference service's base URL.
    upstream_key
        A key of the reference service with calls to spare (the stand-in's own).
    cert_dir
        The reference service's certificate folder (the same CA: clients trust both).
    """

    def __init__(self, upstream: str, upstream_key: str, cert_dir: Path) -> None:
        parts = urlsplit(upstream)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 443)
        self._key = upstream_key
        self._client_ctx = ssl.create_default_context(cafile=str(cert_dir / "ca.pem"))
        server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_ctx.load_cert_chain(cert_dir / "server.pem", cert_dir / "server-key.pem")
        self.switches: dict[str, Any] = dict(DEFAULTS)
        self.log: list[Arrival] = []
        self._answers: dict[str, int] = {}
        self.quota_used = 0  # calls counted against ``quota_left``
        self._truth: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        vendor = self

        class Handler(_Handler):
            owner = vendor

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.socket = server_ctx.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        self.base_url = f"https://127.0.0.1:{self.port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, daemon=True, name="stand-in-vendor"
        )
        self._thread.start()

    def __repr__(self) -> str:
        return f"StandInVendor({self.base_url!r}, {len(self.log)} requests)"

    def set(self, **switches: Any) -> StandInVendor:
        unknown = set(switches) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"unknown switches {sorted(unknown)}")
        self.switches.update(switches)
        return self

    def reset(self) -> None:
        with self._lock:
            self.switches = dict(DEFAULTS)
            self.log.clear()
            self._answers.clear()
            self.quota_used = 0

    def calls(self, path_part: str = "/search") -> int:
        """Requests that reached the vendor (the witness), on paths holding ``path_part``."""
        return sum(path_part in a.path for a in self.log)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- the truth -------------------------------------------------------------------------

    def truth(self, path: str, polygon: str) -> list[str]:
        """Every GroupID of ``polygon`` in the reference service's order (cached)."""
        with self._lock:
            if polygon in self._truth:
                return list(self._truth[polygon])
        ids: list[str] = []
        page = pages = 1
        while page <= pages:
            status, _, body = self.upstream(_wire.search_target("/v1/search", polygon, page))
            payload = json.loads(body)
            if status != 200:
                raise RuntimeError(f"upstream answered {status}: {payload}")
            pages = payload["pages"]
            ids += payload["data"]
            page += 1
        with self._lock:
            self._truth[polygon] = ids
        return list(ids)

    def upstream(
        self, path: str, query: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPSConnection(*self._upstream, context=self._client_ctx, timeout=30)
        try:
            target = path + ("?" + urlencode(query) if query else "")
            conn.request("GET", target, headers={"x-api-key": self._key})
            response = conn.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            conn.close()


class _Handler(BaseHTTPRequestHandler):
    owner: StandInVendor
    _quota_headers: dict[str, str]
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        vendor = self.owner
        s = vendor.switches
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        page_text = query.get("page")
        with vendor._lock:
            arrival = Arrival(
                len(vendor.log) + 1,
                parts.path,
                query.get("searchPolygon"),
                int(page_text) if page_text and page_text.lstrip("-").isdigit() else None,
                self.headers.get("Host", ""),
                bool(self.headers.get("x-api-key")),
                at=time.monotonic(),
            )
            vendor.log.append(arrival)
        path = parts.path
        if s["line_limit"] is not None and len(self.requestline.encode()) > s["line_limit"]:
            if s["line_refusal"] == "iis":
                return self._send(arrival, 404, IIS_404_15.encode(), "text/html; charset=utf-8")
            return self._json(arrival, 414, TOO_BIG_LINE)
        if s["redirect"] == "slash" and not path.endswith("/"):
            return self._redirect(arrival, f"{vendor.base_url}{path}/?{parts.query}")
        if s["redirect"] == "host":
            return self._redirect(arrival, f"https://localhost:{vendor.port}{path}?{parts.query}")
        if s["redirect"] == "http":
            return self._redirect(arrival, f"http://127.0.0.1:{vendor.port}{path}?{parts.query}")
        path = path.rstrip("/")
        if s["stage"]:
            if not path.startswith("/prod/"):
                return self._json(arrival, 404, NO_PROXY_FAULT)
            path = path.removeprefix("/prod")
        self._quota_headers = {}
        if s["quota_left"] is not None:
            with vendor._lock:
                over = vendor.quota_used >= s["quota_left"]
                vendor.quota_used += not over
                left = s["quota_left"] - vendor.quota_used
            self._quota_headers = {s["quota_header"]: str(left)}
            if over:
                return self._json(arrival, 429, QUOTA_FAULT)
        fault = s["fault"](arrival) if s["fault"] is not None else None
        if fault is not None:
            return self._fault(arrival, fault)
        if path == "/v1/markets":
            status, _, body = vendor.upstream("/v1/markets")
            return self._json(arrival, status, self._formatted(json.loads(body)))
        if path != "/v1/search" or arrival.polygon is None:
            return self._json(arrival, 404, {"status": "ERROR", "messages": ["not found"]})
        self._search(arrival, arrival.polygon, page_text)

    # -- answers ---------------------------------------------------------------------------

    def _search(self, arrival: Arrival, polygon: str, page_text: str | None) -> None:
        vendor = self.owner
        s = vendor.switches
        ids = vendor.truth("/v1/search", polygon)
        with vendor._lock:
            seen = vendor._answers.get(polygon, 0)
            vendor._answers[polygon] = seen + 1
        if s["shrink_after"] is not None and seen >= s["shrink_after"] and len(ids) > 100:
            ids = ids[:-100]
        if s["order"] == "shuffled":
            random.Random(arrival.number).shuffle(ids)
        rows = len(ids)
        size = int(s["page_size"])
        pages = math.ceil(rows / (s["told_size"] or size))
        try:
            asked = int(page_text) if page_text is not None else s["base"]
        except ValueError:
            asked = -1
        k = asked - s["base"] + 1  # the logical page, 1-based
        if rows == 0 and s["empty"] != "ok":
            status = 404 if s["empty"] == "404" else 200
            return self._json(
                arrival, status, {"status": "ERROR", "messages": ["No parcels found"]}
            )
        if k < 1:
            return self._json(
                arrival,
                400,
                {
                    "status": "ERROR",
                    "messages": [f"page must be {s['base']} or more, got {page_text}"],
                },
            )
        if s["window"] is not None and k > s["window"]:
            words = (
                f"Result window is too large: page {asked} of {size} is beyond the "
                f"{s['window'] * size} results a search may be paged through. Narrow the "
                "searchPolygon."
                if s["window_words"] == "stated"
                else "Result window is too large. Narrow the searchPolygon."
            )
            return self._json(arrival, 400, {"status": "ERROR", "messages": [words]})
        if rows and k > pages:
            if s["past_last"] == "400":
                return self._json(
                    arrival,
                    400,
                    {
                        "status": "ERROR",
                        "messages": [
                            f"page {asked} is beyond the last page: this search has {pages} pages"
                        ],
                    },
                )
            data = ids[(pages - 1) * size :] if s["past_last"] == "last" else []
        else:
            start = (k - 1) * size - ((k - 1) if s["slip"] else 0)
            data = ids[start : start + min(size, rows - (k - 1) * size)]
        data = [shown_id(gid, s["ids"]) for gid in data]
        payload = {
            "status": "OK",
            "rows": rows,
            "pages": pages,
            "page": asked,
            "dataRows": len(data),
            "data": data,
        }
        self._json(arrival, 200, self._formatted(payload))

    def _formatted(self, payload: dict[str, Any]) -> dict[str, Any]:
        s = self.owner.switches
        out = dict(payload)
        if s["numbers"] == "str":
            for name in ("rows", "pages", "page", "dataRows"):
                if isinstance(out.get(name), int):
                    out[name] = str(out[name])
        if not s["datarows"]:
            out.pop("dataRows", None)
        if s["extra_fields"]:
            out["requestId"] = "d2f1c0de"
            out["meta"] = {"took": 12}
        return out

    def _fault(self, arrival: Arrival, fault: str) -> None:
        if fault == "quota429":
            self._json(arrival, 429, QUOTA_FAULT)
        elif fault == "quota403":
            self._json(arrival, 403, QUOTA_FAULT)
        elif fault == "spike":
            self._json(arrival, 429, SPIKE_FAULT)
        elif fault == "auth401":
            self._json(arrival, 401, KEY_FAULT)
        elif fault == "refuse400":
            self._json(
                arrival,
                400,
                {
                    "status": "ERROR",
                    "messages": ["searchPolygon: the ring crosses itself at vertex 3"],
                },
            )
        elif fault == "garbled":
            self._json(
                arrival, 200, {"status": "OK", "rows": "many", "pages": 1, "page": 1, "data": []}
            )
        elif fault == "gone410":
            self._json(
                arrival, 410, {"status": "ERROR", "messages": [GONE_WORDS]}, {"Sunset": SUNSET}
            )
        elif fault == "maint200":
            self._send(arrival, 200, MAINTENANCE.encode(), "text/html; charset=utf-8")
        elif fault == "wait429":
            self._json(
                arrival, 429, SPIKE_FAULT, {"Retry-After": str(self.owner.switches["retry_after"])}
            )
        elif fault.startswith("html"):
            status = int(fault[4:])
            body = HTML.format(status=status, reason=REASONS[status]).encode()
            self._send(arrival, status, body, "text/html; charset=utf-8")
        else:
            raise ValueError(f"unknown fault {fault!r}")

    def _redirect(self, arrival: Arrival, location: str) -> None:
        self._send(arrival, 301, b"", "text/plain", {"Location": location})

    def _json(
        self,
        arrival: Arrival,
        status: int,
        payload: dict[str, Any],
        extra: dict[str, str] | None = None,
    ) -> None:
        self._send(arrival, status, json.dumps(payload).encode(), "application/json", extra)

    def _send(
        self,
        arrival: Arrival,
        status: int,
        body: bytes,
        content_type: str,
        extra: dict[str, str] | None = None,
    ) -> None:
        headers = {
            "Content-Type": content_type,
            **getattr(self, "_quota_headers", {}),
            **(extra or {}),
        }
        if self.owner.switches["gzip"] and "gzip" in self.headers.get("Accept-Encoding", ""):
            body = gzip_module.compress(body)
            headers["Content-Encoding"] = "gzip"
        arrival.status = status
        arrival.answered = time.monotonic()
        self.send_response(status, REASONS.get(status, "X"))
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        trickle = self.owner.switches["trickle"]
        if trickle is None or not trickle(arrival):
            self.wfile.write(body)
            return
        self._trickle(arrival, body)

    def _trickle(self, arrival: Arrival, body: bytes) -> None:
        """The body a few bytes at a time, far apart (each gap well within a read timeout)."""
        s = self.owner.switches
        step = int(s["trickle_bytes"])
        try:
            for start in range(0, len(body), step):
                self.wfile.write(body[start : start + step])
                self.wfile.flush()
                time.sleep(float(s["trickle_gap"]))
        except OSError:  # the client hung up (its deadline): the rest is never sent
            arrival.hung_up = True
            self.close_connection = True


# -- searching it from the command line ----------------------------------------------------------

MINIMUM = 7  # 3 + 2 + 1 + 1 pages in the four areas


def search(
    capsys: Any, areas: Path, out: Path, *extra: str
) -> tuple[int, str, str, dict[str, set[str]], dict[str, Any]]:
    """``parcelsearch search`` → (exit code, stdout, stderr, GroupIDs per area, metadata)."""
    import pyarrow.parquet as pq
    from _cli import run

    code, stdout, stderr = run(
        ["search", str(areas), "--id-column", "area_id", "--quiet", "--out", str(out), *extra],
        capsys,
    )
    ids: dict[str, set[str]] = {}
    meta: dict[str, Any] = {}
    if out.exists():
        table = pq.read_table(out)
        meta = json.loads(table.schema.metadata[b"parcelsearch"])
        frame = table.to_pandas()
        for area, group in frame.groupby("area_id"):
            ids[str(area)] = set(group["group_id"])
    return code, stdout, stderr, ids, meta


def exact(ids: dict[str, set[str]], expected: dict[str, set[str]]) -> bool:
    return {a: v for a, v in expected.items() if v} == ids


# -- the stand-in's parcels and study areas ---------------------------------------------------

#: Parcels in each study area (the last has none): 3 + 2 + 1 + 1 = 7 calls at the minimum.
AREA_PARCELS = {"alpha": 250, "bravo": 200, "charlie": 30, "delta": 0}


def vendor_fabric() -> tuple[Any, Any, dict[str, set[str]]]:
    """Parcels, study areas (``area_id`` index) and each area's GroupIDs."""
    import geopandas as gpd
    import numpy as np
    import shapely

    from parcelsearch_service import synth

    rng = np.random.default_rng(37)
    width, depth, per_line = 0.0002, 0.0004, 25
    frames, boxes, expected = [], [], {}
    gids = iter(synth.group_ids(sum(AREA_PARCELS.values()), rng))
    for n_area, (area, count) in enumerate(AREA_PARCELS.items()):
        x0, y0 = -99.70 + 0.05 * n_area, 32.47
        j = np.arange(count)
        xs, ys = x0 + (j % per_line) * width, y0 + (j // per_line) * depth
        cells = [
            shapely.box(x, y, x + width * 0.9, y + depth * 0.9) for x, y in zip(xs, ys, strict=True)
        ]
        ids = [str(next(gids)) for _ in range(count)]
        frames.append(gpd.GeoDataFrame({"group_id": ids}, geometry=cells, crs="EPSG:4326"))
        lines = max(1, math.ceil(count / per_line))
        boxes.append(
            shapely.box(
                x0 - width, y0 - depth, x0 + width * (per_line + 1), y0 + depth * (lines + 1)
            )
        )
        expected[area] = set(ids)
    import pandas as pd

    parcels = gpd.GeoDataFrame(pd.concat(frames, ignore_index=True), crs="EPSG:4326")
    parcels["parcel_id"] = np.arange(len(parcels)) + 5000
    parcels = parcels.iloc[rng.permutation(len(parcels))].reset_index(drop=True)
    areas = gpd.GeoDataFrame(
        {"area_id": list(AREA_PARCELS)}, geometry=boxes, crs="EPSG:4326"
    ).set_index("area_id")
    return parcels[["parcel_id", "group_id", "geometry"]], areas, expected

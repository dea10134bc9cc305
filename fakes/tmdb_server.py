"""A fake TMDB for tests and the crawl benchmark, answering in TMDB's documented JSON shapes.

Endpoints (TMDB API v3 and the image CDN):
- GET /3/search/movie?query=&year=   -> {"page", "results": [...], "total_pages", "total_results"}
- GET /3/movie/{id}?append_to_response=credits -> details with "genres", "credits": {"cast", "crew"}
- GET /t/p/<size>/<file>.jpg         -> a JPEG whose width is the size's number

Search matches like TMDB's phrase search: the normalised query must occur in the
normalised title or original title, so "American President, The" finds nothing while
"The American President" does.  Faults (429 with Retry-After, 500, a slow answer for
timeouts, malformed JSON, a body that is not an image) are queued per path.
The core `respond` is server-agnostic: `werkzeug_handler` plugs it into pytest-httpserver,
`StdlibHandler` into http.server for the benchmark.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

TEST_API_KEY = "k3y-TEST-0123456789abcdef"  # a made-up v3 key
TEST_READ_TOKEN = "eyJ-made-up-read-token.0123456789"


@dataclass
class FakeMovie:
    id: int
    title: str
    release_date: str
    original_title: str | None = None
    popularity: float = 10.0
    vote_average: float = 7.0
    vote_count: int = 100
    overview: str = "An overview."
    genres: tuple[str, ...] = ("Drama",)
    directors: tuple[str, ...] = ("Some Director",)
    cast: tuple[tuple[str, int], ...] = (("Lead Actor", 0), ("Second Actor", 1))  # (name, billing order)
    poster_path: str | None = None

    def __post_init__(self) -> None:
        if self.poster_path is None:
            self.poster_path = f"/poster{self.id}.jpg"

    def search_result(self) -> dict:
        return {
            "adult": False,
            "backdrop_path": None,
            "genre_ids": [18],
            "id": self.id,
            "original_language": "en",
            "original_title": self.original_title or self.title,
            "overview": self.overview,
            "popularity": self.popularity,
            "poster_path": self.poster_path,
            "release_date": self.release_date,
            "title": self.title,
            "video": False,
            "vote_average": self.vote_average,
            "vote_count": self.vote_count,
        }

    def details(self) -> dict:
        crew = [
            {"id": 900 + i, "name": n, "job": "Director", "department": "Directing", "credit_id": f"d{i}"}
            for i, n in enumerate(self.directors)
        ]
        crew.append({"id": 999, "name": "A Writer", "job": "Screenplay", "department": "Writing", "credit_id": "w"})
        # Credits come back in arbitrary order; "order" is the billing.
        cast = [
            {
                "id": 500 + order,
                "name": name,
                "character": f"Role {order}",
                "order": order,
                "cast_id": order,
                "credit_id": f"c{order}",
                "gender": 0,
                "profile_path": None,
            }
            for name, order in reversed(self.cast)
        ]
        return {
            **self.search_result(),
            "belongs_to_collection": None,
            "budget": 0,
            "homepage": "",
            "imdb_id": f"tt{self.id:07d}",
            "genres": [{"id": 18 + i, "name": g} for i, g in enumerate(self.genres)],
            "runtime": 100,
            "status": "Released",
            "tagline": "",
            "credits": {"id": self.id, "cast": cast, "crew": crew},
        }


@dataclass
class Fault:
    kind: str  # "429", "500", "slow", "malformed", "not_image", "404"
    retry_after: str | None = None
    delay_s: float = 0.0


@dataclass
class Seen:
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    at: float
    status: int = 0


@dataclass
class FakeTmdb:
    movies: list[FakeMovie]
    api_key: str = TEST_API_KEY
    read_token: str = TEST_READ_TOKEN
    latency_s: float = 0.0  # added to every answer (benchmark)
    faults: dict[str, deque] = field(default_factory=lambda: defaultdict(deque))
    always: dict[str, Fault] = field(default_factory=dict)
    log: list[Seen] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _images: dict[str, bytes] = field(default_factory=dict)

    def add_fault(self, path: str, *faults: Fault) -> None:
        self.faults[path].extend(faults)

    def paths(self, prefix: str = "") -> list[str]:
        with self._lock:
            return [s.path for s in self.log if s.path.startswith(prefix)]

    # -- the server-agnostic core ----------------------------------------------------------

    def respond(self, path: str, query: dict[str, str], headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        seen = Seen(path, query, headers, time.monotonic())
        with self._lock:
            self.log.append(seen)
            fault = self.faults[path].popleft() if self.faults.get(path) else self.always.get(path)
        if self.latency_s:
            time.sleep(self.latency_s)
        status, hdrs, body = self._answer(path, query, headers, fault)
        seen.status = status
        return status, hdrs, body

    def _answer(self, path, query, headers, fault):
        if fault is not None:
            if fault.kind == "429":
                return (
                    429,
                    {"Retry-After": fault.retry_after or "1", "Content-Type": "application/json"},
                    _json(
                        {
                            "status_code": 25,
                            "status_message": "Your request count (#) is over the allowed limit of (40).",
                            "success": False,
                        }
                    ),
                )
            if fault.kind == "500":
                return (
                    500,
                    {"Content-Type": "application/json"},
                    _json({"status_code": 11, "status_message": "Internal error.", "success": False}),
                )
            if fault.kind == "404":
                return (
                    404,
                    {"Content-Type": "application/json"},
                    _json(
                        {
                            "status_code": 34,
                            "status_message": "The resource you requested could not be found.",
                            "success": False,
                        }
                    ),
                )
            if fault.kind == "slow":
                time.sleep(fault.delay_s)
            if fault.kind == "malformed":
                return 200, {"Content-Type": "application/json"}, b'{"page": 1, "results": [{"id": 1, "title": "Trunc'
            if fault.kind == "not_image":
                return 200, {"Content-Type": "image/jpeg"}, b"<html><body>502 Bad Gateway</body></html>"
        if path.startswith("/t/p/"):
            return self._image(path)
        if not self._authorised(query, headers):
            return (
                401,
                {"Content-Type": "application/json"},
                _json(
                    {
                        "status_code": 7,
                        "status_message": "Invalid API key: You must be granted a valid key.",
                        "success": False,
                    }
                ),
            )
        if path == "/3/search/movie":
            return 200, {"Content-Type": "application/json"}, _json(self._search(query))
        m = re.fullmatch(r"/3/movie/(\d+)", path)
        if m:
            movie = next((mv for mv in self.movies if mv.id == int(m.group(1))), None)
            if movie is None:
                return (
                    404,
                    {"Content-Type": "application/json"},
                    _json(
                        {
                            "status_code": 34,
                            "status_message": "The resource you requested could not be found.",
                            "success": False,
                        }
                    ),
                )
            body = movie.details()
            if query.get("append_to_response") != "credits":
                body.pop("credits")
            return 200, {"Content-Type": "application/json"}, _json(body)
        return (
            404,
            {"Content-Type": "application/json"},
            _json({"status_code": 34, "status_message": "not found", "success": False}),
        )

    def _authorised(self, query, headers) -> bool:
        auth = headers.get("Authorization") or headers.get("authorization") or ""
        return query.get("api_key") == self.api_key or auth == f"Bearer {self.read_token}"

    def _search(self, query) -> dict:
        q = _norm(query.get("query", ""))
        year = query.get("year")
        hits = [
            m
            for m in self.movies
            if q
            and (q in _norm(m.title) or q in _norm(m.original_title or m.title))
            and (year is None or m.release_date.startswith(str(year)))
        ]
        hits.sort(key=lambda m: -m.popularity)
        return {
            "page": 1,
            "results": [m.search_result() for m in hits[:20]],
            "total_pages": 1 if hits else 0,
            "total_results": len(hits),
        }

    def _image(self, path):
        m = re.fullmatch(r"/t/p/w(\d+)/(.+)", path)
        if not m:
            return 404, {"Content-Type": "text/plain"}, b"no such image"
        with self._lock:
            data = self._images.get(path)
        if data is None:
            data = _poster_jpeg(int(m.group(1)), m.group(2))
            with self._lock:
                self._images[path] = data
        return 200, {"Content-Type": "image/jpeg"}, data

    # -- adapters -----------------------------------------------------------------------

    def werkzeug_handler(self, request):
        from werkzeug import Response

        status, headers, body = self.respond(
            request.path, {k: v for k, v in request.args.items()}, dict(request.headers)
        )
        return Response(body, status=status, headers=headers)


class StdlibHandler(BaseHTTPRequestHandler):
    """http.server adapter; set `fake` on a subclass."""

    fake: FakeTmdb
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        status, headers, body = self.fake.respond(parts.path, query, dict(self.headers))
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):  # noqa: A002 - keep benchmark output clean
        pass


def _json(obj) -> bytes:
    return json.dumps(obj).encode()


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s]", " ", text.lower())).strip()


def _poster_jpeg(width: int, name: str) -> bytes:
    """A deterministic 2:3 poster whose colour comes from its file name."""
    from PIL import Image

    colour = tuple(hashlib.sha256(name.encode()).digest()[:3])
    image = Image.new("RGB", (width, width * 3 // 2), colour)
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=80)
    return buf.getvalue()

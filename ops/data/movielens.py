"""MovieLens ratings, users and movies from an unzipped folder: the "local" source (docs/definitions.md,
lifecycle 1).

`load_local(folder)` reads an unzipped MovieLens folder into the USERS, MOVIES and RATINGS
tables of `ops.schema`.  It recognises the files by their content, not their names:
ML-1M (`::`-separated `users.dat`, `movies.dat` and a ratings file of any name) or ML-100K
(`u.data` tab-separated, `u.item` and `u.user` `|`-separated), both latin-1.  ML-100K
demographics are mapped onto the ML-1M code sets (`ML100K_OCCUPATION_TO_ML1M`,
`ML100K_AGE_UPPER_BOUNDS`).  Users without any rating are kept, flagged `has_ratings=False`.
Bad input stops with `MovieLensFormatError`, naming the file and the 1-based line.

The "download" source, `ops.data.movielens_download`, fetches the official archive and
unzips it into such a folder.

One concept, the local MovieLens source: a folder recognised, parsed and checked line by line.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import polars as pl

from ops.schema import AGE_CODES, GENDERS, GENRES, MOVIES, OCCUPATIONS, RATINGS, USERS, conform

Dataset = Literal["ml-1m", "ml-100k"]
DATASETS: tuple[Dataset, ...] = ("ml-1m", "ml-100k")  # the two formats a folder may hold

# ML-100K occupation names (u.occupation) onto ML-1M occupation codes (ml-1m/README and
# ops.schema.OCCUPATIONS).  Where ML-1M has no matching category the closest is taken:
# "entertainment" -> artist, "librarian" -> academic/educator, "administrator" ->
# clerical/admin.  "student" is split by age (see ML100K_K12_STUDENT_MAX_AGE).
ML100K_OCCUPATION_TO_ML1M: dict[str, int] = {
    "administrator": 3,  # clerical/admin
    "artist": 2,
    "doctor": 6,  # doctor/health care
    "educator": 1,  # academic/educator
    "engineer": 17,  # technician/engineer
    "entertainment": 2,  # artist
    "executive": 7,  # executive/managerial
    "healthcare": 6,  # doctor/health care
    "homemaker": 9,
    "lawyer": 11,
    "librarian": 1,  # academic/educator
    "marketing": 14,  # sales/marketing
    "none": 0,  # other or not specified
    "other": 0,
    "programmer": 12,
    "retired": 13,
    "salesman": 14,  # sales/marketing
    "scientist": 15,
    "student": 4,  # college/grad student; K-12 student below ML100K_K12_STUDENT_MAX_AGE
    "technician": 17,  # technician/engineer
    "writer": 20,
}
ML100K_K12_STUDENT = 10  # ML-1M "K-12 student"
ML100K_K12_STUDENT_MAX_AGE = 17  # ML-1M's "Under 18" bucket

# ML-1M age buckets (ml-1m/README): code -> the highest age in the bucket.
ML100K_AGE_UPPER_BOUNDS: dict[int, int] = {1: 17, 18: 24, 25: 34, 35: 44, 45: 49, 50: 55, 56: 10**6}
assert tuple(ML100K_AGE_UPPER_BOUNDS) == AGE_CODES

# The 19 genre flags of u.item, in u.genre order; "unknown" is not an ML-1M genre and is
# dropped, so such a movie has an empty genre list.
ML100K_GENRE_FLAGS: tuple[str, ...] = ("unknown", *GENRES)

# Names the official archives use, preferred when a folder holds several ratings files
# (ML-100K ships u1.base ... ub.test beside u.data).
OFFICIAL_RATINGS_NAMES = ("ratings.dat", "u.data")


class MovieLensFormatError(ValueError):
    """A MovieLens file or folder that cannot be read; names the file and the 1-based line."""

    def __init__(self, path: Path | str, reason: str, line: int | None = None, text: str | None = None):
        self.path = Path(path)
        self.line = line
        self.reason = reason
        where = f"{self.path}" if line is None else f"{self.path}, line {line}"
        shown = "" if text is None else f": {text[:120]!r}"
        super().__init__(f"{where}: {reason}{shown}")


@dataclass(frozen=True)
class MovieLensTables:
    """The three tables of one MovieLens folder, conformed to `ops.schema`."""

    users: pl.DataFrame  # USERS
    movies: pl.DataFrame  # MOVIES
    ratings: pl.DataFrame  # RATINGS, in file order
    source_format: Dataset
    files: dict[str, Path] = field(default_factory=dict)  # "users" / "movies" / "ratings" -> file read


def load_local(folder: Path | str) -> MovieLensTables:
    """Read an unzipped ML-1M or ML-100K folder (or a folder holding exactly one of them)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise MovieLensFormatError(
            folder, "folder does not exist (point the local source at the unzipped MovieLens folder)"
        )
    source_format, files = _find_tables(folder)
    if source_format == "ml-1m":
        users = _parse_ml1m_users(files["users"])
        movies = _parse_ml1m_movies(files["movies"])
        separator = "::"
    else:
        users = _parse_ml100k_users(files["users"])
        movies = _parse_ml100k_movies(files["movies"])
        separator = "\t"
    ratings = _read_ratings(files["ratings"], separator, users["user_id"], movies["item_id"])
    rated = ratings["user_id"].unique()
    users = users.with_columns(has_ratings=pl.col("user_id").is_in(rated.implode()))
    return MovieLensTables(
        users=conform(users, USERS, "users"),
        movies=conform(movies, MOVIES, "movies"),
        ratings=conform(ratings, RATINGS, "ratings"),
        source_format=source_format,
        files=files,
    )


# --------------------------------------------------------------------------------------
# local source: which file is which
# --------------------------------------------------------------------------------------

_TABLES = ("users", "movies", "ratings")
_EXPECTED = {
    "ml-1m": {
        "users": "users.dat (UserID::Gender::Age::Occupation::Zip-code)",
        "movies": "movies.dat (MovieID::Title::Genres)",
        "ratings": "a ratings file of any name, e.g. ratings.dat (UserID::MovieID::Rating::Timestamp)",
    },
    "ml-100k": {
        "users": "u.user (user id|age|gender|occupation|zip code)",
        "movies": "u.item (movie id|title|release date|video release date|IMDb URL|19 genre flags)",
        "ratings": "u.data (user id<TAB>item id<TAB>rating<TAB>timestamp)",
    },
}
_SNIFF_BYTES = 64 * 1024
_SNIFF_LINES = 50
_INT = re.compile(r"^\s*-?\d+\s*$")
_YEAR = re.compile(r"\((\d{4})\)")
_BOMS = (  # longest first: the UTF-32 LE mark starts with the UTF-16 LE one
    (b"\xff\xfe\x00\x00", "UTF-32 little-endian byte-order mark"),
    (b"\x00\x00\xfe\xff", "UTF-32 big-endian byte-order mark"),
    (b"\xff\xfe", "UTF-16 little-endian byte-order mark"),
    (b"\xfe\xff", "UTF-16 big-endian byte-order mark"),
)
_UTF8_BOM = b"\xef\xbb\xbf"


def find_tables(folder: Path | str) -> tuple[Dataset, dict[str, Path]]:
    """The format of a local MovieLens folder and its users, movies and ratings files, from
    their first lines (nothing else is read); MovieLensFormatError naming what is wrong."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise MovieLensFormatError(
            folder, "folder does not exist (point the local source at the unzipped MovieLens folder)"
        )
    return _find_tables(folder)


def _find_tables(folder: Path) -> tuple[Dataset, dict[str, Path]]:
    """Sniff every file of `folder` and pick the format whose three tables are all present."""
    kinds = {
        path: _sniff(path) for path in sorted(folder.iterdir()) if path.is_file() and not path.name.startswith(".")
    }
    by_role: dict[tuple[str, str], list[Path]] = {}
    for path, kind in kinds.items():
        if kind[0] in DATASETS:
            by_role.setdefault(kind, []).append(path)
    complete = [fmt for fmt in ("ml-1m", "ml-100k") if all((fmt, t) in by_role for t in _TABLES)]
    if len(complete) == 2:
        raise MovieLensFormatError(folder, "holds both an ML-1M and an ML-100K data set; keep one per folder")
    if not complete:
        if not by_role:  # an unzip that created one sub-folder: accept the parent folder too
            subfolders = [p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")]
            if len(subfolders) == 1:
                try:
                    return _find_tables(subfolders[0])
                except MovieLensFormatError:
                    pass
        raise MovieLensFormatError(folder, _neither_format_message(kinds, by_role))
    fmt = complete[0]
    files = {}
    for table in _TABLES:
        candidates = by_role[(fmt, table)]
        if len(candidates) > 1 and table == "ratings":
            official = [p for p in candidates if p.name in OFFICIAL_RATINGS_NAMES]
            candidates = official or candidates
        if len(candidates) > 1:
            names = ", ".join(p.name for p in candidates)
            raise MovieLensFormatError(
                folder, f"several files look like the {fmt} {table} table ({names}); keep only one"
            )
        files[table] = candidates[0]
    return fmt, files  # type: ignore[return-value]


def _sniff(path: Path) -> tuple[str, str]:
    """What a file holds, from its first lines: (format, table), or ("other", why)."""
    with path.open("rb") as fh:
        head = fh.read(_SNIFF_BYTES)
    for bom, name in _BOMS:
        if head.startswith(bom):
            return ("encoding", f"unknown encoding ({name}); MovieLens files are latin-1 text")
    if head.startswith(b"PK\x03\x04"):
        return ("other", "a zip archive: unzip it first, or use the download source")
    if head.startswith(b"\x1f\x8b"):
        return ("other", "gzip-compressed: decompress it first")
    if head.count(b"\x00") * 10 > len(head):  # a stray NUL is reported by line when the file is read
        return ("encoding", "unknown encoding (NUL bytes: UTF-16/UTF-32 or binary?); MovieLens files are latin-1 text")
    if len(head) == _SNIFF_BYTES and b"\n" in head:
        head = head[: head.rindex(b"\n")]  # don't judge a line cut in the middle
    lines = [ln for ln in head.removeprefix(_UTF8_BOM).decode("latin-1").split("\n") if ln.strip()][:_SNIFF_LINES]
    roles = Counter(role for role in map(_line_role, lines) if role is not None)
    if roles:
        role, count = roles.most_common(1)[0]
        if count * 2 >= len(lines):  # a majority, so that one malformed first line is still recognised
            return role
    return ("other", "not a MovieLens table")


def _line_role(line: str) -> tuple[str, str] | None:
    line = line.rstrip("\r")
    if "::" in line:
        f = line.split("::")
        if len(f) == 4 and all(_INT.match(x) for x in f):
            return ("ml-1m", "ratings")
        if len(f) == 5 and _INT.match(f[0]) and f[1].strip() in GENDERS and _INT.match(f[2]) and _INT.match(f[3]):
            return ("ml-1m", "users")
        if len(f) == 3 and _INT.match(f[0]):
            return ("ml-1m", "movies")
    elif "\t" in line:
        f = line.split("\t")
        if len(f) == 4 and all(_INT.match(x) for x in f):
            return ("ml-100k", "ratings")
    elif "|" in line:
        f = line.split("|")
        if len(f) == 24 and _INT.match(f[0]) and all(x.strip() in ("0", "1") for x in f[5:]):
            return ("ml-100k", "movies")
        if len(f) == 5 and _INT.match(f[0]) and _INT.match(f[1]) and f[2].strip() in GENDERS:
            return ("ml-100k", "users")
    return None


def _neither_format_message(kinds: dict[Path, tuple[str, str]], by_role: dict) -> str:
    encoding = [f"{p.name}: {why}" for p, (kind, why) in kinds.items() if kind == "encoding"]
    found = [
        f"{p.name} ({kind} {what})" if kind in DATASETS else f"{p.name} ({what})" for p, (kind, what) in kinds.items()
    ]
    expected = []
    for fmt, tables in _EXPECTED.items():
        missing = [t for t in _TABLES if (fmt, t) not in by_role]
        expected.append(f"{fmt}: " + ", ".join(tables.values()) + f" [missing: {', '.join(missing)}]")
    return (
        ("; ".join(encoding) + ". " if encoding else "")
        + "folder holds neither MovieLens format. Found: "
        + (", ".join(found) or "no files")
        + ". Expected (latin-1 text) "
        + "; or ".join(expected)
    )


# --------------------------------------------------------------------------------------
# local source: users and movies (small files, read line by line for exact messages)
# --------------------------------------------------------------------------------------


def _parse_ml1m_users(path: Path) -> pl.DataFrame:
    rows = []
    for n, line in _lines(path):
        f = _fields(path, n, line, "::", 5)
        gender = f[1].strip()
        if gender not in GENDERS:
            raise MovieLensFormatError(path, f"gender {gender!r} is not one of {GENDERS}", n, line)
        age = _int(path, n, line, f[2], "age")
        if age not in AGE_CODES:
            raise MovieLensFormatError(path, f"age code {age} is not one of the ML-1M codes {AGE_CODES}", n, line)
        occupation = _int(path, n, line, f[3], "occupation")
        if occupation not in OCCUPATIONS:
            raise MovieLensFormatError(path, f"occupation code {occupation} is not in 0..{max(OCCUPATIONS)}", n, line)
        rows.append((_id(path, n, line, f[0], "user id"), gender, age, occupation, f[4].strip()))
    return _unique_ids(
        path, pl.DataFrame(rows, schema=["user_id", "gender", "age", "occupation", "zip"], orient="row"), "user_id"
    )


def _parse_ml1m_movies(path: Path) -> pl.DataFrame:
    rows = []
    for n, line in _lines(path):
        f = _fields(path, n, line, "::", 3)
        genres = [g.strip() for g in f[2].split("|") if g.strip()]
        unknown = [g for g in genres if g not in GENRES]
        if unknown:
            raise MovieLensFormatError(path, f"unknown genre(s) {unknown}; ML-1M genres are {list(GENRES)}", n, line)
        title = f[1].strip()
        rows.append((_id(path, n, line, f[0], "movie id"), title, _year(title), genres))
    return _unique_ids(path, _movies_frame(rows), "item_id")


def _parse_ml100k_users(path: Path) -> pl.DataFrame:
    rows = []
    for n, line in _lines(path):
        f = _fields(path, n, line, "|", 5)
        age = _int(path, n, line, f[1], "age")
        if not 0 < age < 150:
            raise MovieLensFormatError(path, f"age {age} is not a plausible age in years", n, line)
        gender = f[2].strip()
        if gender not in GENDERS:
            raise MovieLensFormatError(path, f"gender {gender!r} is not one of {GENDERS}", n, line)
        name = f[3].strip()
        if name not in ML100K_OCCUPATION_TO_ML1M:
            raise MovieLensFormatError(
                path, f"occupation {name!r} is not an ML-100K occupation {sorted(ML100K_OCCUPATION_TO_ML1M)}", n, line
            )
        occupation = ML100K_OCCUPATION_TO_ML1M[name]
        if name == "student" and age <= ML100K_K12_STUDENT_MAX_AGE:
            occupation = ML100K_K12_STUDENT
        age_code = next(code for code, top in ML100K_AGE_UPPER_BOUNDS.items() if age <= top)
        rows.append((_id(path, n, line, f[0], "user id"), gender, age_code, occupation, f[4].strip()))
    return _unique_ids(
        path, pl.DataFrame(rows, schema=["user_id", "gender", "age", "occupation", "zip"], orient="row"), "user_id"
    )


def _parse_ml100k_movies(path: Path) -> pl.DataFrame:
    rows = []
    for n, line in _lines(path):
        f = _fields(path, n, line, "|", 5 + len(ML100K_GENRE_FLAGS))
        flags = [x.strip() for x in f[5:]]
        bad = [x for x in flags if x not in ("0", "1")]
        if bad:
            raise MovieLensFormatError(path, f"genre flags must be 0 or 1, found {bad[0]!r}", n, line)
        genres = [g for g, x in zip(ML100K_GENRE_FLAGS, flags) if x == "1" and g in GENRES]
        title = f[1].strip()
        rows.append((_id(path, n, line, f[0], "movie id"), title, _year(title), genres))
    return _unique_ids(path, _movies_frame(rows), "item_id")


def _movies_frame(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(
        rows,
        schema={"item_id": pl.Int64, "title": pl.Utf8, "year": pl.Int64, "genres": pl.List(pl.Utf8)},
        orient="row",
    )


def _year(title: str) -> int | None:
    # The last "(YYYY)": ML-100K has "Land Before Time III ... (1995) (V)", and some titles
    # hold a year-like part earlier on.
    years = _YEAR.findall(title)
    return int(years[-1]) if years else None


def _unique_ids(path: Path, df: pl.DataFrame, key: str) -> pl.DataFrame:
    dup = df.filter(pl.col(key).is_duplicated())
    if dup.height:
        first = dup[key][0]
        lines = [n for n, (k,) in enumerate(df.select(key).iter_rows(), 1) if k == first]
        raise MovieLensFormatError(path, f"{key} {first} appears more than once (data rows {lines})")
    return df


def _lines(path: Path):
    """(1-based line number, line) for every non-blank line of a latin-1 (or UTF-8) text file."""
    for n, line in enumerate(_read_text(path).split("\n"), 1):
        line = line.rstrip("\r")
        if line.strip():
            yield n, line


def _read_text(path: Path) -> str:
    data = path.read_bytes()
    _check_bytes(path, data)
    if data.startswith(_UTF8_BOM):
        try:
            return data[len(_UTF8_BOM) :].decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1
            raise MovieLensFormatError(
                path, f"starts with a UTF-8 byte-order mark but byte {exc.start} is not UTF-8", line
            ) from exc
    # The official files are latin-1, whose accented letters are never valid UTF-8 next to
    # ASCII; a file that decodes as UTF-8 was re-saved as UTF-8 and is read as such.
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _check_bytes(path: Path, data: bytes) -> None:
    """latin-1 decodes any byte, so wrong encodings are caught by their marks and NUL bytes."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            raise MovieLensFormatError(path, f"unknown encoding ({name}); MovieLens files are latin-1 text", 1)
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise MovieLensFormatError(
            path,
            f"unknown encoding: NUL byte at offset {nul} (UTF-16/UTF-32 or binary?); MovieLens files are latin-1 text",
            line,
        )


def _fields(path: Path, n: int, line: str, sep: str, count: int) -> list[str]:
    f = line.split(sep)
    if len(f) != count:
        raise MovieLensFormatError(path, f"expected {count} {sep!r}-separated fields, found {len(f)}", n, line)
    return f


def _int(path: Path, n: int, line: str, value: str, what: str) -> int:
    if not _INT.match(value):
        raise MovieLensFormatError(path, f"{what} {value!r} is not an integer", n, line)
    return int(value)


def _id(path: Path, n: int, line: str, value: str, what: str) -> int:
    number = _int(path, n, line, value, what)
    if number <= 0:
        raise MovieLensFormatError(path, f"{what} {number} is not a positive integer", n, line)
    return number


# --------------------------------------------------------------------------------------
# local source: ratings (up to millions of lines: Polars first, Python only to explain a failure)
# --------------------------------------------------------------------------------------

_RATING_COLUMNS = ("user_id", "item_id", "rating", "timestamp")
_RATING_MIN, _RATING_MAX = 1, 5  # MovieLens explicit ratings, whole stars


def _read_ratings(path: Path, separator: str, user_ids: pl.Series, item_ids: pl.Series) -> pl.DataFrame:
    data = path.read_bytes()
    _check_bytes(path, data)
    data = data.removeprefix(_UTF8_BOM)
    known_users, known_movies = user_ids.implode(), item_ids.implode()
    try:
        # One-byte separator for Polars' reader; a stray tab in a `::` file then shows up as
        # a wrong field count, which the slow path reports.
        table = data.replace(b"::", b"\t") if separator == "::" else data
        df = pl.read_csv(
            io.BytesIO(table),
            separator="\t",
            has_header=False,
            schema={c: pl.Int64 for c in _RATING_COLUMNS},
            quote_char=None,
        )
    except pl.exceptions.PolarsError as exc:
        _raise_first_bad_rating(path, data, separator, user_ids, item_ids, exc)
    if df.null_count().sum_horizontal().item():
        # Short lines and blank lines both read as nulls; only the former are errors.
        _raise_first_bad_rating(path, data, separator, user_ids, item_ids, None, allow_none=True)
        df = df.filter(~pl.all_horizontal(pl.all().is_null()))
    bad = df.filter(
        ~pl.col("rating").is_between(_RATING_MIN, _RATING_MAX)
        | (pl.col("timestamp") < 0)
        | ~pl.col("user_id").is_in(known_users)
        | ~pl.col("item_id").is_in(known_movies)
    )
    if bad.height:
        _raise_first_bad_rating(path, data, separator, user_ids, item_ids, None)
    if df.select(pl.struct("user_id", "item_id").is_duplicated().any()).item():
        _raise_first_duplicate_rating(path, data, separator)
    return df


def _raise_first_duplicate_rating(path: Path, data: bytes, separator: str) -> None:
    """A (user, movie) pair rated twice: MovieLens has one rating per pair, and the split, the
    arms and the agents count each pair once.  Names both lines."""
    first_line: dict[tuple[int, int], int] = {}
    for n, raw in enumerate(data.split(b"\n"), 1):
        raw = raw.rstrip(b"\r")
        if not raw.strip():
            continue
        line = raw.decode("latin-1")
        user, movie = (int(x) for x in line.split(separator)[:2])
        if (user, movie) in first_line:
            raise MovieLensFormatError(
                path,
                f"user {user} rated movie {movie} twice (first on line {first_line[user, movie]}); keep one rating per (user, movie)",
                n,
                line,
            )
        first_line[user, movie] = n


def _raise_first_bad_rating(
    path: Path,
    data: bytes,
    separator: str,
    user_ids: pl.Series,
    item_ids: pl.Series,
    cause: Exception | None,
    allow_none: bool = False,
) -> None:
    """Find the first offending line (slow, only after the fast path saw a problem) and raise."""
    users, movies = set(user_ids.to_list()), set(item_ids.to_list())
    for n, raw in enumerate(data.split(b"\n"), 1):
        raw = raw.rstrip(b"\r")
        if not raw.strip():
            continue
        line = raw.decode("latin-1")
        f = line.split(separator)
        if len(f) != len(_RATING_COLUMNS):
            raise MovieLensFormatError(path, f"expected 4 {separator!r}-separated fields, found {len(f)}", n, line)
        for name, value in zip(_RATING_COLUMNS, f):
            if not _INT.match(value):
                raise MovieLensFormatError(path, f"{name} {value!r} is not an integer", n, line)
        user, movie, rating, timestamp = map(int, f)
        if not _RATING_MIN <= rating <= _RATING_MAX:
            raise MovieLensFormatError(path, f"rating {rating} is outside {_RATING_MIN}..{_RATING_MAX}", n, line)
        if timestamp < 0:
            raise MovieLensFormatError(path, f"timestamp {timestamp} is negative", n, line)
        if user not in users:
            raise MovieLensFormatError(path, f"user {user} is not in the users table", n, line)
        if movie not in movies:
            raise MovieLensFormatError(path, f"movie {movie} is not in the movies table", n, line)
    if not allow_none:
        raise MovieLensFormatError(
            path, f"cannot be read as ratings (UserID{separator}MovieID{separator}Rating{separator}Timestamp): {cause}"
        )

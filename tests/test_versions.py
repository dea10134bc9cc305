"""The digests a stored value's version is made of (`ops.versions`): code, settings, files."""

from __future__ import annotations

import os

from ops.versions import path_fingerprint, source_digest, value_digest


def _project(root, files: dict[str, str]):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


FILES = {
    "pkg/__init__.py": "",
    "pkg/top.py": '"""Top."""\nfrom pkg import helper\n\n\ndef f():\n    from pkg.lazy import g\n    return g()\n',
    "pkg/helper.py": "X = 1\n",
    "pkg/lazy.py": "def g():\n    return 2\n",
    "pkg/unrelated.py": "Y = 1\n",
}


def test_a_code_change_anywhere_in_the_import_closure_changes_the_digest(tmp_path):
    _project(tmp_path, FILES)
    before = source_digest("pkg.top", tmp_path)
    for name, edited in [("pkg/helper.py", "X = 2\n"), ("pkg/lazy.py", "def g():\n    return 3\n")]:
        _project(tmp_path, {**FILES, name: edited})
        _bump(tmp_path / name)
        assert source_digest("pkg.top", tmp_path) != before, name
    _project(tmp_path, FILES)
    for path in tmp_path.rglob("*.py"):
        _bump(path)
    assert source_digest("pkg.top", tmp_path) == before


def test_comments_docstrings_formatting_and_unimported_modules_do_not_count(tmp_path):
    _project(tmp_path, FILES)
    before = source_digest("pkg.top", tmp_path)
    top = '"""Another docstring."""\nfrom pkg import helper  # a comment\n\ndef f():\n    """Doc."""\n'
    top += "    from pkg.lazy import g\n\n    return g()\n"
    _project(tmp_path, {**FILES, "pkg/top.py": top, "pkg/unrelated.py": "Y = 2\n"})
    for path in tmp_path.rglob("*.py"):
        _bump(path)
    assert source_digest("pkg.top", tmp_path) == before


def test_settings_count_by_value_and_the_files_they_name_by_size_and_time(tmp_path):
    assert value_digest({"a": 1, "b": [1, 2]}) == value_digest({"b": [1, 2], "a": 1})
    assert value_digest({"a": 1}) != value_digest({"a": 2})
    data = tmp_path / "ratings.dat"
    data.write_text("1::2::3\n")
    folder = tmp_path / "posters"
    folder.mkdir()
    (folder / "1.jpg").write_bytes(b"x")
    setting = {"local_path": str(data), "poster_dirs": f"{folder}{os.pathsep}{tmp_path / 'absent'}", "n": 3}
    before = path_fingerprint(setting)
    assert len(before) == 2  # the file and the folder; the absent folder and the number are not files
    data.write_text("1::2::4\n")
    _bump(data)
    assert path_fingerprint(setting) != before
    after_edit = path_fingerprint(setting)
    (folder / "2.jpg").write_bytes(b"y")
    assert path_fingerprint(setting) != after_edit


def _bump(path):
    """A later modification time, as an edit seconds later would leave."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def test_parsed_files_are_kept_between_processes_by_their_content(tmp_path):
    import json
    import subprocess
    import sys

    _project(tmp_path / "project", FILES)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    code = f"from pathlib import Path; from ops.versions import source_digest; print(source_digest('pkg.top', Path({str(tmp_path / 'project')!r})))"

    def digest() -> str:
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    first = digest()
    kept = tmp_path / "cache" / "simab" / "source-syntax.json"
    assert len(json.loads(kept.read_text())) == 4  # the four files of pkg.top's closure
    assert digest() == first == source_digest("pkg.top", tmp_path / "project")
    # An edited file is keyed by its new content; a damaged cache is only ignored.
    (tmp_path / "project" / "pkg" / "helper.py").write_text("X = 2\n")
    edited = digest()
    assert edited != first and len(json.loads(kept.read_text())) == 5
    kept.write_text("{")
    assert digest() == edited
    entries = json.loads(kept.read_text())
    assert len(entries) == 4
    kept.write_text(json.dumps({key: ["x", [["not", "an import"]]] for key in entries}))  # another shape
    assert digest() == edited

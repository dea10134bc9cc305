"""The viewer's pages (FastAPI, Jinja templates in viewer/templates).  Read-only: every
route is a GET, files are served only from paths the catalogue or the report names.

| page | what |
| --- | --- |
| `/` | per-arm metrics with their intervals, the report's figures, links to every arm |
| `/agents?arm=A&filter=F` | the arm's agents, filtered (`store.FILTERS`) |
| `/agent/U?arm=A&compare=B` | the agent's profile, then its session on A step by step (and on B beside it) |
| `/poster/M?size=small` | a catalogue poster |
| `/report`, `/report/plots/NAME` | the newest HTML report and its figures |

Only requests whose Host header names this machine's loopback (127.0.0.1, localhost, [::1])
or a host given to `create_app` (the address it was started on, `--allow-host`) are answered;
any other gets 400.  A page bound to 127.0.0.1 is otherwise readable from any browser tab
through DNS rebinding: a site whose name re-resolves to 127.0.0.1 would read the agents'
profiles and reasons under its own origin, and its requests carry its own name as Host.
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations, and
# Request is imported inside create_app.
from collections.abc import Sequence
from pathlib import Path

from viewer.store import FILTERS, ExperimentStore

TEMPLATES = Path(__file__).with_name("templates")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def create_app(store: ExperimentStore, hosts: Sequence[str] = ()):
    """The web application over one store; it answers Host headers naming the loopback or one
    of `hosts` (names or addresses, an IPv6 address with or without brackets)."""
    from fastapi import FastAPI, HTTPException, Request
    from fastapi.responses import FileResponse, HTMLResponse
    from fastapi.templating import Jinja2Templates
    from starlette.middleware.trustedhost import TrustedHostMiddleware

    app = FastAPI(title="simab trajectory viewer", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts(hosts), www_redirect=False)
    templates = Jinja2Templates(directory=str(TEMPLATES))
    templates.env.filters["num"] = _num

    def page(request: Request, name: str, **context):
        return templates.TemplateResponse(request, name, {"arms": store.arms, "problems": store.problems, **context})

    def arm_or_404(arm: str | None) -> str:
        arm = arm or store.arms[0]
        if arm not in store.events:
            raise HTTPException(404, f"arm {arm!r} was not simulated; simulated arms: {', '.join(store.arms)}")
        return arm

    @app.get("/", response_class=HTMLResponse)
    def overview(request: Request):
        table = store.metrics_table()
        counts = {arm: store.summary(arm).height for arm in store.arms}
        return page(
            request,
            "overview.html",
            table=None if table is None else table.rows(named=True),
            columns=[] if table is None else table.columns,
            counts=counts,
            plots=store.plots(),
            has_report=store.report_dir is not None,
        )

    @app.get("/agents", response_class=HTMLResponse)
    def agents(request: Request, arm: str | None = None, filter: str = "all"):
        arm = arm_or_404(arm)
        if filter not in FILTERS:
            raise HTTPException(404, f"unknown filter {filter!r}; filters: {', '.join(FILTERS)}")
        rows = store.agents(arm, filter).rows(named=True)
        return page(
            request, "agents.html", arm=arm, filter=filter, filters=FILTERS, rows=rows, total=store.summary(arm).height
        )

    @app.get("/agent/{user_id}", response_class=HTMLResponse)
    def agent(request: Request, user_id: int, arm: str | None = None, compare: str | None = None):
        arm = arm_or_404(arm)
        sessions = []
        for a in [arm] + ([arm_or_404(compare)] if compare and compare != arm else []):
            try:
                sessions.append((a, store.trajectory(a, user_id)))
            except KeyError as exc:
                raise HTTPException(404, str(exc.args[0])) from None
        summary = {a: store.summary(a).filter(user_id=user_id).row(0, named=True) for a, _ in sessions}
        return page(
            request,
            "agent.html",
            user_id=user_id,
            arm=arm,
            compare=compare if len(sessions) > 1 else None,
            sessions=sessions,
            summary=summary,
            profile=store.profile(user_id),
        )

    @app.get("/poster/{item_id}")
    def poster(item_id: int, size: str = "small"):
        path = store.poster_path(item_id, size)
        if path is None:
            raise HTTPException(404, f"no poster file for movie {item_id}")
        return FileResponse(path)

    @app.get("/report", response_class=HTMLResponse)
    def report():
        folder = store.report_dir
        if folder is None:
            raise HTTPException(404, "no report yet: materialise simab_report")
        html_file = folder / "report.html"
        if html_file.is_file():
            return HTMLResponse(html_file.read_text(encoding="utf-8"))
        from ops.readout.report_html import report_html  # a report written before the HTML one existed

        return HTMLResponse(report_html((folder / "report.md").read_text(encoding="utf-8"), folder))

    @app.get("/report/plots/{name}")
    def plot(name: str):
        if name not in store.plots():
            raise HTTPException(404, f"no figure {name!r} in the report")
        return FileResponse(store.report_dir / "plots" / name)

    return app


def allowed_hosts(hosts: Sequence[str] = ()) -> list[str]:
    """The Host header values (without port) the viewer answers: the loopback and `hosts`.
    A wildcard address (0.0.0.0, ::) is no name a browser sends, so it adds nothing."""
    allowed = list(LOOPBACK_HOSTS)
    for host in hosts:
        host = host.strip().lower()
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"  # how an IPv6 address appears in a Host header
        if host and host not in ("0.0.0.0", "[::]") and "*" not in host and host not in allowed:
            allowed.append(host)
    return allowed


def _num(value, digits: int = 1) -> str:
    """A number for a page: '–' for missing, else rounded."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)

"""The trajectory viewer: a read-only web page over a run's stored events, catalogue and
agents, so that a person can see *why* the agents prefer an arm (`make viewer`).

Pick an arm and an agent: the profile, then every page as the agent saw it (posters,
titles, vote averages), the action, the reason, the interest stated and the fatigue spent,
step by step; the same agent under a second arm beside it; agents filtered (exited on page
1, never clicked, …); the per-arm metrics with their intervals and the report's figures.

Why a package of its own, at the top of the layering: the viewer is neither an asset, an
outside system (resources) nor engine code (ops); it reads what the code location stored,
through the code location's own IO managers (`pipelines.definitions`), so it sits above
`pipelines` and nothing imports it (.importlinter).  Built on FastAPI with Jinja templates:
server-rendered pages whose state is all in the URL (`/agent/42?arm=pop&compare=fm`), which
is what a link from the Dagster UI or an MLflow run needs, and what a browser test can load.

- `store`: what is shown, loaded once from the stored assets (`ExperimentStore`);
- `app`: the pages (`create_app`);
- `python -m viewer`: serve it, on 127.0.0.1 unless told otherwise.
"""

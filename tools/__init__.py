"""Developer tools that are not benchmarks, each run from the repository root as
`.venv/bin/python -m tools.<name> --help`:

- `suite_cpu`: where `make test`'s time goes, CPU seconds per test file;
- `bill_figures`: the figures the bill from the settings uses (`ops.preflight.bill`),
  measured on a prepared lifecycle, beside the constants;
- `mlflow_screenshot`: the picture of MLflow's compare view in docs/tracking.md.
"""

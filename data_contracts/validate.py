"""Run a suite on a Polars frame and turn great-expectations' result into plain findings.

A finding is one failed expectation in words a person reads in the Dagster UI: which table,
which column, why it matters (the expectation's `meta["why"]`), how many rows and a few
offending values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from data_contracts.suites import Contract, References


@dataclass(frozen=True)
class Finding:
    table: str
    expectation: str
    column: str | None
    why: str
    unexpected_count: int | None
    examples: list = field(default_factory=list)
    observed: object = None

    def message(self) -> str:
        where = f"{self.table}.{self.column}" if self.column else self.table
        count = f": {self.unexpected_count} row(s)" if self.unexpected_count else ""
        examples = f", e.g. {self.examples[:5]}" if self.examples else ""
        observed = f" (observed {self.observed})" if self.observed is not None and not self.examples else ""
        return f"{where}: {self.why}{count}{examples}{observed} [{self.expectation}]"


@dataclass(frozen=True)
class ContractReport:
    table: str
    rows: int
    evaluated: int
    findings: list[Finding]

    @property
    def passed(self) -> bool:
        return not self.findings

    def summary(self) -> str:
        if self.passed:
            return f"{self.table}: all {self.evaluated} expectations met on {self.rows} rows"
        lines = [f"{self.table}: {len(self.findings)} of {self.evaluated} expectations failed on {self.rows} rows"]
        lines += [f"- {f.message()}" for f in self.findings]
        return "\n".join(lines)


def validate_frame(df: pl.DataFrame, contract: Contract) -> ContractReport:
    """Validate `df` against a contract's expectations (ephemeral GX context, whole-frame batch)."""
    import great_expectations as gx

    context = gx.get_context(mode="ephemeral")
    _quiet(context)
    source = context.data_sources.add_pandas(f"simab_{contract.name}")
    asset = source.add_dataframe_asset(name=contract.name)
    batch_definition = asset.add_batch_definition_whole_dataframe("whole")
    suite = context.suites.add(gx.ExpectationSuite(name=contract.name))
    for expectation in contract.expectations:
        suite.add_expectation(expectation)
    # List columns (genres) are not checked by GX; leaving them out keeps the conversion cheap.
    flat = df.select([c for c, t in df.schema.items() if not isinstance(t, pl.List)])
    batch = batch_definition.get_batch(batch_parameters={"dataframe": flat.to_pandas()})
    result = batch.validate(suite, result_format="SUMMARY")
    findings = []
    for r in result.results:
        if r.success:
            continue
        cfg = r.expectation_config
        kwargs = cfg.kwargs
        column = kwargs.get("column") or (",".join(kwargs["column_list"]) if kwargs.get("column_list") else None)
        details = r.result or {}
        exception = (r.exception_info or {}).get("exception_message") if isinstance(r.exception_info, dict) else None
        findings.append(
            Finding(
                table=suite.name,
                expectation=cfg.type,
                column=column,
                why=(cfg.meta or {}).get("why", cfg.type) + (f" (error: {exception})" if exception else ""),
                unexpected_count=details.get("unexpected_count"),
                examples=list(details.get("partial_unexpected_list") or [])[:10],
                observed=details.get("observed_value"),
            )
        )
    findings += [f for f in map(lambda r: _unreferenced(df, contract.name, r), contract.references) if f is not None]
    evaluated = len(result.results) + len(contract.references)
    return ContractReport(table=suite.name, rows=df.height, evaluated=evaluated, findings=findings)


def _unreferenced(df: pl.DataFrame, table: str, rule: References) -> Finding | None:
    """The finding of a `References` rule: the rows whose value is not among the ids (an
    anti-join over the whole column), counted, with the first offending values."""
    values = df.get_column(rule.column).drop_nulls()  # as GX's set expectations, nulls are not judged
    unknown = values.filter(~values.is_in(rule.ids.implode()))
    if unknown.len() == 0:
        return None
    return Finding(
        table=table,
        expectation="expect_column_values_to_be_in_set",
        column=rule.column,
        why=rule.why,
        unexpected_count=unknown.len(),
        examples=unknown.head(10).to_list(),
    )


def _quiet(context) -> None:
    """No per-validation progress bars in logs (they flood the Dagster event log)."""
    try:
        from great_expectations.data_context.types.base import ProgressBarsConfig

        context.variables.progress_bars = ProgressBarsConfig(globally=False)
    except Exception:  # older / newer layouts: progress bars are cosmetic
        pass

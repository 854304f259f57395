"""Reports of Spark replay validation in the conformance report format (spec/report-format.md, kind check-trace).

One `trace` line per trace with the verdict, the count of every anomaly and exercised check, and how the checker
judged it (`judged`); one `violation` line per witness shown (the first few of each kind, by seq: a trace may hold
millions of anomalies, and the counts are exact); a footer with the merged verdict.
"""

from __future__ import annotations

from typing import Any

from ks_conformance import report

from ks_spark.validation.validator import ValidationResult, Verdict, merge_verdicts


def report_lines(results: list[ValidationResult], settings: dict[str, Any], duration_s: float) -> list[dict[str, Any]]:
    """The report of a validate-replay run: header, a line per trace, its witnesses, a footer."""
    lines: list[dict[str, Any]] = [report.header("check-trace", settings=settings)]
    observed: dict[str, None] = {}
    violated: set[str] = set()
    warnings: set[str] = set()
    for result in results:
        lines.append(
            {
                "type": "trace",
                "path": result.trace,
                "events": result.events,
                "verdict": result.verdict.value,
                "anomalies": dict(result.counts),
                "exercised": dict(result.exercised),
                "malformed": result.malformed,
                "problems": [{"seq": seq, "message": message} for seq, message in result.problems],
                "profile": result.profile,
                **({"judged": result.judged} if result.judged else {}),
            }
        )
        for name in result.counts:
            observed[name] = None
        for finding in result.findings:
            anomaly = finding.anomaly
            (violated if anomaly.level == "MUST" else warnings).add(anomaly.requirement)
            line = {"type": "violation", **anomaly.to_json(), "trace": result.trace, "events": finding.events}
            lines.append(line)
    sheet = report.trace_departure_lines(r.config for r in results if r.malformed is None)
    lines += sheet
    lines.append(
        {
            "type": "footer",
            "verdict": merge_verdicts(r.verdict for r in results).value,
            "departures": [line["choice"] for line in sheet],
            "counts": {v.value: sum(1 for r in results if r.verdict is v) for v in Verdict},
            "observed_anomalies": list(observed),
            "violated": sorted(violated),
            "warnings": sorted(warnings),
            "duration_s": round(duration_s, 3),
            "finished": report.now_iso(),
        }
    )
    return lines

"""``docs/benchmarks.md`` from the bench's figures: a design whose run failed is shown by
its cause (``bench/report.py``)."""

from __future__ import annotations

from pathlib import Path

from bench.report import _failure_cause, section_write

PSYCOPG_REFUSAL = (
    "django.db.utils.OperationalError: connection failed: connection to server at "
    '"127.0.0.1", port 5432 failed: FATAL:  sorry, too many clients already'
)


def test_database_refusal_is_shown_by_its_own_words() -> None:
    assert _failure_cause(PSYCOPG_REFUSAL) == (
        "the database refused a connection: sorry, too many clients already"
    )


def test_other_failure_is_shown_whole() -> None:
    failure = "the seed could not run: the server did not answer /healthz within 30 s"
    assert _failure_cause(failure) == failure


def test_a_modules_section_replaces_its_own_and_leaves_the_rest(tmp_path: Path) -> None:
    output = tmp_path / "benchmarks.md"
    output.write_text("# Benchmarks\n\nmeasured by bench.run\n")
    begin, end = "<!-- search: begin -->", "<!-- search: end -->"

    section_write(output, begin, end, f"{begin}\nfirst run\n{end}")
    section_write(output, begin, end, f"{begin}\nsecond run\n{end}")

    assert output.read_text() == (
        f"# Benchmarks\n\nmeasured by bench.run\n\n{begin}\nsecond run\n{end}\n"
    )

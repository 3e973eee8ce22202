"""bench/README.md is what bench/readme.py makes of the recorded results: today's figures, never a diary. (The
benchmarks themselves never run here: they are slow, and `make bench` records them.)"""

from __future__ import annotations

from pathlib import Path

from bench import readme


def test_the_bench_readme_is_generated_from_the_recorded_results() -> None:
    assert readme.README.read_text() == readme.generate(), "stale: make bench-readme"


def test_a_recorded_output_is_shown_verbatim_and_a_missing_one_says_how_to_record_it(tmp_path: Path) -> None:
    (tmp_path / "cost.txt").write_text("recorded 2030-01-01 on x86_64, 2 CPUs, Python 3.11.7\n| a | 1.00 |\n")
    text = readme.generate(tmp_path)
    assert (
        "Recorded 2030-01-01 on x86_64, 2 CPUs, Python 3.11.7, `python bench/cost.py`:\n\n```text\n| a | 1.00 |\n```"
        in text
    )
    assert "Not recorded yet: `make bench` (or `python bench/run_all.py storage.py`) records it." in text


def test_every_benchmark_of_make_bench_has_its_section() -> None:
    text = readme.generate()
    assert readme.scripts() and all(f"### `{script}`" in text for script in readme.scripts())


def test_a_record_leaves_out_the_in_process_handlers_log_records() -> None:
    from bench.run_all import figures

    printed = [
        '{"level":"INFO","message":"attempt","service":"delivery"}\n',
        '{"_aws":{"Timestamp":1},"service":"delivery","delivered":[]}\n',
        "| executions | 4 |\n",
        '{"not": "a log record"}\n',
    ]
    assert figures(printed) == ["| executions | 4 |\n", '{"not": "a log record"}\n']

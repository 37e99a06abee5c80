"""tools/eval/report.py's verdicts on the training targets, from rows of known figures.

Run: /usr/bin/python3 -m pytest -q tests/tools/eval/test_evaluate_report.py
"""

import sys

from support.paths import REPO

sys.path.insert(0, str(REPO / "tools" / "eval"))
import report  # noqa: E402


def row(per_step, to_target, final):
    return {"per_step": per_step, "bytes_per_step": 1e6, "final": final,
            "to_target": to_target, "reached": "1/1", "n": 1}


def verdicts(rows):
    return [line for line in report.training_target_lines(rows) if line.startswith("- ")]


def test_3lc_must_reach_the_target_before_the_fastest_peer():
    rows = {("wide", "1gbit", "DDP"): row(0.8, 16.0, 0.800),
            # the fastest peer, though it ends 1 pp below DDP
            ("wide", "1gbit", "DDP PowerSGD r1"): row(0.2, 9.0, 0.790),
            ("wide", "1gbit", "DDP PowerSGD r4"): row(0.6, 12.0, 0.799),
            ("wide", "1gbit", "threelc 3LC"): row(0.4, 8.0, 0.801),
            ("wide", "1gbit", "threelc 3LC hook"): row(0.7, 10.0, 0.801)}
    assert verdicts(rows) == [
        "- wide 1gbit threelc 3LC: 8.0 s to target against 9.0 s (DDP PowerSGD r1), "
        "+0.10 pp vs DDP: met",
        "- wide 1gbit threelc 3LC hook: 10.0 s to target against 9.0 s (DDP PowerSGD r1), "
        "+0.10 pp vs DDP: NOT met"]


def test_3lc_that_loses_accuracy_misses_the_target_however_fast():
    rows = {("cnn", "100mbit", "DDP"): row(0.3, 20.0, 0.850),
            ("cnn", "100mbit", "threelc 3LC"): row(0.1, 5.0, 0.845)}
    assert verdicts(rows) == ["- cnn 100mbit threelc 3LC: 5.0 s to target against 20.0 s "
                              "(DDP), -0.50 pp vs DDP: NOT met"]


def test_on_fast_links_the_step_is_held_against_ddps():
    rows = {("cnn", "10gbit", "DDP"): row(0.100, 5.0, 0.85),
            ("cnn", "10gbit", "threelc 3LC"): row(0.102, 5.0, 0.85),
            ("cnn", "10gbit", "threelc none"): row(0.105, 5.0, 0.85)}
    assert verdicts(rows) == ["- cnn 10gbit threelc 3LC: step 0.98x DDP's: met",
                              "- cnn 10gbit threelc none: step 0.95x DDP's: NOT met"]


def test_a_method_that_did_not_reach_the_target_leaves_the_verdict_open():
    rows = {("wide", "100mbit", "DDP"): row(6.0, 120.0, 0.80),
            ("wide", "100mbit", "threelc 3LC"): row(0.3, None, 0.70)}
    assert verdicts(rows) == ["- wide 100mbit threelc 3LC: not decided (threelc 3LC did not "
                              "reach the target or did not run)"]


def test_the_choice_table_names_the_fastest_method_and_the_fastest_peer():
    rows = {("wide", "100mbit", "DDP"): row(6.0, 120.0, 0.80),
            ("wide", "100mbit", "DDP fp16"): row(3.0, 60.0, 0.80),
            ("wide", "100mbit", "threelc 3LC"): row(0.3, 6.0, 0.80),
            ("cnn", "100mbit", "DDP"): row(6.0, 120.0, 0.80),
            ("cnn", "100mbit", "threelc 3LC hook"): row(0.3, 8.0, 0.79)}
    table = report.choice_table(rows)
    # A column for each of threelc's 3LC methods that ran, "-" where it did not run.
    assert "| model | rate | fastest | fastest peer | threelc 3LC | threelc 3LC hook |" in table
    assert ("| wide | 100mbit | threelc 3LC: 6.0 s (20.00x), +0.00 pp | DDP fp16: 60.0 s "
            "(2.00x), +0.00 pp | 6.0 s (20.00x), +0.00 pp | - |") in table, table


def test_a_language_model_is_held_to_its_validation_loss():
    """Lower is better: 3LC must end at most 1 % above DDP's validation loss."""
    rows = {("gpt2-large", "1gbit", "DDP"): row(2.0, 500.0, 2.200),
            ("gpt2-large", "1gbit", "DDP fp16"): row(1.2, 330.0, 2.201),
            ("gpt2-large", "1gbit", "threelc 3LC"): row(0.5, 150.0, 2.211),
            ("gpt2-large", "1gbit", "threelc 3LC hook"): row(0.5, 140.0, 2.244)}
    assert verdicts(rows) == [
        "- gpt2-large 1gbit threelc 3LC: 150.0 s to target against 330.0 s (DDP fp16), "
        "+0.50 % loss vs DDP: met",
        "- gpt2-large 1gbit threelc 3LC hook: 140.0 s to target against 330.0 s (DDP fp16), "
        "+2.00 % loss vs DDP: NOT met"]


def test_a_language_model_reaches_its_target_at_the_first_validation_at_or_below_it():
    def run(label, curve):
        return {"model": "gpt2-small", "rate": "1gbit", "label": label,
                "epochs": [{"epoch": i + 1, "val_loss": loss, "seconds": 10.0}
                           for i, loss in enumerate(curve)],
                "summary": {"steps": 300, "median_step_seconds": 0.1,
                            "bytes_sent_per_rank": 3e8}}

    targets = report.settings_targets({"target_accuracy": 0.8,
                                       "target_loss": {"gpt2-small": 2.4}})
    rows = report.training_rows([run("DDP", [2.8, 2.5, 2.4, 2.3]),
                                 run("threelc 3LC", [2.9, 2.6, 2.45, 2.41])], targets)
    assert rows[("gpt2-small", "1gbit", "DDP")]["to_target"] == 30.0
    assert rows[("gpt2-small", "1gbit", "DDP")]["final"] == 2.3
    assert rows[("gpt2-small", "1gbit", "threelc 3LC")]["to_target"] is None
    table = "\n".join(report.training_tables(rows, targets))
    assert "final validation loss (% vs DDP)" in table and "s to 2.4" in table, table
    assert "| threelc 3LC | 0.100 (1.00x) | 1.000 (1.00x) | 2.4100 (+4.78) | not reached " \
        "(0/1) | 1 |" in table, table


def test_a_short_timing_run_takes_the_steps_to_target_of_the_full_run_at_another_rate():
    """A 30-step run at 100mbit measures the step there; the 300-step run at 1gbit reached the
    target at step 150: the 100mbit time to target is 150 steps x the 100mbit step."""
    def run(rate, curve, steps, step_seconds):
        every = steps // len(curve)
        return {"model": "gpt2-large", "rate": rate, "label": "DDP",
                "epochs": [{"epoch": i + 1, "step": (i + 1) * every, "val_loss": loss,
                            "seconds": every * step_seconds} for i, loss in enumerate(curve)],
                "summary": {"steps": steps, "median_step_seconds": step_seconds,
                            "mb_sent_per_rank": steps * 60.0}}

    targets = report.settings_targets({"target_loss": {"gpt2-large": 2.2}})
    rows = report.training_rows([run("1gbit", [3.0, 2.5, 2.2, 2.1, 2.05, 2.0], 300, 1.0),
                                 run("100mbit", [3.5], 30, 5.0)], targets)
    full, short = rows[("gpt2-large", "1gbit", "DDP")], rows[("gpt2-large", "100mbit", "DDP")]
    assert full["to_target"] == 150.0 and full["steps_to_target"] == 150
    assert short["to_target"] == 750.0 and short["final"] == 2.0
    assert short["projected_from"] == "1gbit" and "projected_from" not in full
    table = "\n".join(report.training_tables(rows, targets))
    assert "750.0 (1.00x), steps of the 1gbit run x this step (projected)" in table, table
    # A full run that never reached the target: its timing run keeps "not reached" and takes
    # its final loss and bytes, not the short run's.
    rows = report.training_rows([run("1gbit", [3.0, 2.5, 2.3], 300, 1.0),
                                 run("100mbit", [3.5], 30, 5.0)], targets)
    short = rows[("gpt2-large", "100mbit", "DDP")]
    assert short["to_target"] is None and short["final"] == 2.3
    assert short["bytes_per_step"] == 60e6 and short["projected_from"] == "1gbit"
    # A rate with no full run anywhere stays "not reached".
    alone = report.training_rows([run("100mbit", [3.5], 30, 5.0)], targets)
    assert alone[("gpt2-large", "100mbit", "DDP")]["to_target"] is None

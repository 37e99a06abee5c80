"""Tables (OUT/report.md) and plots (OUT/*.png) from tools/eval/evaluate's OUT/results.jsonl."""

import json
import statistics
from collections import defaultdict
from pathlib import Path

import methods

RATE_BITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}
TARGETS = {"100mbit": 20.0, "1gbit": 10.0, "10gbit": 1.0}  # 3LC s=1.0 over gloo at 100 MB
DEFAULT_3LC = "threelc 3LC s=1.0"


LOOPBACK = "loopback"  # a rate of tools/eval/evaluate: the ranks on this machine, no emulated link


def rate_bits(rate):
    if rate == LOOPBACK:
        return float("inf")
    for unit, scale in RATE_BITS.items():
        if rate.endswith(unit):
            return float(rate[:-len(unit)]) * scale
    return float(rate.rstrip("bit"))


def load(out):
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()
               if line.strip()]
    return ([r for r in records if r.get("kind") == "allreduce"],
            [r for r in records if r.get("kind") == "training"])


def allreduce_medians(records):
    """(rate, bytes, label) -> {"seconds": median, "bits_per_value": median or None, "n": runs}."""
    groups = defaultdict(list)
    for r in records:
        groups[(r["rate"], r["bytes"], r["label"])].append(r)
    medians = {}
    for key, rs in groups.items():
        bits = [r["bits_per_value"] for r in rs if r.get("bits_per_value") is not None]
        medians[key] = {"seconds": statistics.median(r["seconds"] for r in rs),
                        "bits_per_value": statistics.median(bits) if bits else None,
                        "n": len(rs)}
    return medians


def allreduce_tables(medians):
    lines = []
    rates = sorted({k[0] for k in medians}, key=rate_bits)
    sizes = sorted({k[1] for k in medians})
    labels = sorted({k[2] for k in medians}, key=label_order)
    for rate in rates:
        lines += [f"### Allreduce at {rate}", "",
                  "| system | " + " | ".join(f"{b / 1e6:g} MB s (x gloo)" for b in sizes) +
                  " | bits/value sent per rank |",
                  "| --- | " + " | ".join("---" for _ in sizes) + " | --- |"]
        for label in labels:
            cells, bits = [], None
            for b in sizes:
                m = medians.get((rate, b, label))
                gloo = medians.get((rate, b, "gloo"))
                if m is None:
                    cells.append("-")
                    continue
                ratio = f" ({gloo['seconds'] / m['seconds']:.2f}x)" if gloo else ""
                cells.append(f"{m['seconds']:.4f}{ratio}")
                if m["bits_per_value"] is not None:
                    bits = m["bits_per_value"]
            bits_cell = f"{bits:.3f}" if bits is not None else "-"
            lines.append(f"| {label} | " + " | ".join(cells) + f" | {bits_cell} |")
        lines.append("")
    return lines


def target_lines(medians):
    lines = ["### Allreduce targets (3LC s = 1.0, default algorithm, against gloo, largest size)",
             ""]
    biggest = max((k[1] for k in medians), default=None)
    for rate, target in TARGETS.items():
        m, gloo = medians.get((rate, biggest, DEFAULT_3LC)), medians.get((rate, biggest, "gloo"))
        if m is None or gloo is None:
            lines.append(f"- {rate}: not measured in this run")
            continue
        ratio = gloo["seconds"] / m["seconds"]
        verdict = "met" if ratio >= target else "NOT met"
        lines.append(f"- {rate}, {biggest / 1e6:g} MB: {ratio:.2f}x gloo "
                     f"({gloo['seconds']:.4f} s / {m['seconds']:.4f} s); target >= {target:g}x: "
                     f"{verdict}")
    return lines + [""]


def label_order(label):
    order = ["threelc 3LC s=1.0", "threelc 3LC s=1.5", "threelc 3LC s=1.9",
             "threelc 3LC ring s=1.0", "threelc none", "gloo", "Open MPI"]
    return (order.index(label) if label in order else len(order), label)


def target_for(targets, model):
    """What `model` must reach: targets["loss"] (a language model's validation loss) or
    targets["accuracy"] (a classifier's test accuracy), each a float or {model: float}."""
    chosen = targets["loss" if methods.is_language_model(model) else "accuracy"]
    return chosen.get(model) if isinstance(chosen, dict) else chosen


def settings_targets(settings):
    """The targets of an evaluate invocation's settings (target_for's argument)."""
    return {"accuracy": settings.get("target_accuracy", 0.85),
            "loss": settings.get("target_loss", {})}


def quality(point):
    """An "epoch" point's measure of the model: its validation loss (a language model) or its
    test accuracy."""
    return point["val_loss"] if "val_loss" in point else point["accuracy"]


def quality_text(point):
    return (f"val loss {point['val_loss']:.4f}" if "val_loss" in point
            else f"acc {point['accuracy']:.4f}")


def reached(model, point, target):
    """Whether the point is at the target: a loss at or below it, an accuracy at or above."""
    if target is None:
        return False
    if methods.is_language_model(model):
        return point["val_loss"] <= target
    return point["accuracy"] >= target


def step_seconds(record):
    """A run's time per step: the median step of rank 0 where the example reports it (robust
    to a shared machine's pauses), else its training seconds over its steps."""
    summary = record["summary"]
    if summary.get("median_step_seconds"):
        return summary["median_step_seconds"]
    if record["epochs"] and summary.get("steps"):
        return sum(e["seconds"] for e in record["epochs"]) / summary["steps"]
    return None


def training_rows(records, targets):
    """(model, rate, label) -> medians of seconds per step, bytes per step, final quality
    (test accuracy or validation loss) and seconds to the model's target."""
    groups = defaultdict(list)
    for r in records:
        groups[(r.get("model", "cnn"), r["rate"], r["label"])].append(r)
    rows = {}
    for key, rs in groups.items():
        target = target_for(targets, key[0])
        per_step = [step_seconds(r) for r in rs if step_seconds(r)]
        sent = [b for b in (methods.bytes_per_step(r["summary"]) for r in rs) if b]
        final = [quality(r["epochs"][-1]) for r in rs if r["epochs"]]
        to_target, steps_to_target = [], []
        for r in rs:
            elapsed = 0.0
            for e in r["epochs"]:
                elapsed += e["seconds"]
                if reached(key[0], e, target):
                    to_target.append(elapsed)
                    if "step" in e:
                        steps_to_target.append(e["step"])
                    break
        everyone = len(to_target) == len(rs)
        rows[key] = {
            "per_step": statistics.median(per_step) if per_step else None,
            "bytes_per_step": statistics.median(sent) if sent else None,
            "final": statistics.median(final) if final else None,
            "to_target": statistics.median(to_target) if everyone else None,
            "steps": max(r["summary"].get("steps") or 0 for r in rs),
            "steps_to_target": (statistics.median(steps_to_target)
                                if everyone and len(steps_to_target) == len(rs) else None),
            "reached": f"{len(to_target)}/{len(rs)}", "n": len(rs),
        }
    project_timing_runs(rows)
    return rows


def project_timing_runs(rows):
    """Complete a timing run: a method's short run at one rate, which measured the step there,
    beside its full run at another rate. The validation curve and the bytes per step do not
    depend on the link, so the timing run takes the full run's bytes, final quality and, where
    the full run reached the target after steps_to_target steps, a time to target of
    steps_to_target x its own median step. Such a row gets "projected_from": the full run's
    rate. Language models only: a classifier's "epochs" do not name their steps."""
    for (model, rate, label), row in rows.items():
        if row["per_step"] is None or not methods.is_language_model(model):
            continue
        full = [(other, full_row) for (m, other, lab), full_row in rows.items()
                if (m, lab) == (model, label) and other != rate
                and full_row["steps"] > row["steps"] and "projected_from" not in full_row]
        if not full:
            continue
        other, full_row = max(full, key=lambda item: item[1]["steps"])
        reached = full_row["steps_to_target"] is not None
        row.update(to_target=full_row["steps_to_target"] * row["per_step"] if reached else None,
                   final=full_row["final"], bytes_per_step=full_row["bytes_per_step"],
                   projected_from=other, reached="projected" if reached else "0/1")


def model_rates(rows):
    """The (model, rate) pairs of training_rows' keys, by model, then slowest link first."""
    return sorted({k[:2] for k in rows}, key=lambda k: (k[0], rate_bits(k[1])))


def times(baseline, value):
    """baseline / value as " (1.23x)", or "" when either is missing."""
    return f" ({baseline / value:.2f}x)" if baseline and value else ""


def training_tables(rows, targets):
    lines = []
    for model, rate in model_rates(rows):
        base = rows.get((model, rate, methods.BASELINE), {})
        target = target_for(targets, model)
        final = (f"final validation loss (% vs {methods.BASELINE})"
                 if methods.is_language_model(model)
                 else f"final test accuracy (pp vs {methods.BASELINE})")
        lines += [f"### Training {model} at {rate}", "",
                  f"Ratios are {methods.BASELINE}'s median over the method's (above 1: faster, "
                  "fewer bytes).", "",
                  f"| method | s per step, median (x {methods.BASELINE}) | MB sent per step per rank "
                  f"(x fewer) | {final} | s to {target:g} "
                  f"(x {methods.BASELINE}; runs that reached it) | runs |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for label in methods.LABELS:
            row = rows.get((model, rate, label))
            if row is None or row["per_step"] is None:
                continue
            sent = (f"{row['bytes_per_step'] / 1e6:.3f}"
                    f"{times(base.get('bytes_per_step'), row['bytes_per_step'])}"
                    if row["bytes_per_step"] else "-")
            gap = quality_gap(model, row, base)
            gap = f" ({gap:+.2f})" if gap is not None else ""
            to_target = (f"{row['to_target']:.1f}{times(base.get('to_target'), row['to_target'])}"
                         if row["to_target"] is not None else "not reached")
            if "projected_from" in row:
                to_target += (f", steps of the {row['projected_from']} run x this step"
                               if row["to_target"] is not None
                               else f" in the {row['projected_from']} run")
            lines.append(f"| {label} | {row['per_step']:.3f}"
                         f"{times(base.get('per_step'), row['per_step'])} | {sent} | "
                         f"{row['final']:.4f}{gap} | {to_target} ({row['reached']}) | "
                         f"{row['n']} |")
        lines.append("")
    return lines


ACCURACY_BOUND_PP = 0.3  # 3LC keeps accuracy when its final accuracy is at most this below DDP's
LOSS_BOUND_PERCENT = 1.0  # ... and a language model's quality at most this % above DDP's loss
STEP_RATIO_BOUND = 0.97  # on fast links: DDP's step over the method's at least this
SLOW_RATES = ("100mbit", "1gbit")  # where 3LC must reach the target first
FAST_RATES = ("10gbit", LOOPBACK)  # where it must not slow the step down


def quality_gap(model, row, base):
    """The row's final quality against DDP's: accuracy minus DDP's in percentage points, or a
    validation loss above DDP's in % of it (None where either is missing)."""
    if row.get("final") is None or base.get("final") is None:
        return None
    if methods.is_language_model(model):
        return (row["final"] - base["final"]) / base["final"] * 100
    return (row["final"] - base["final"]) * 100


def gap_text(model, gap):
    return f"{gap:+.2f} % loss" if methods.is_language_model(model) else f"{gap:+.2f} pp"


def keeps_quality(model, gap):
    """Whether a quality_gap is within the bound (ACCURACY_BOUND_PP, LOSS_BOUND_PERCENT)."""
    if methods.is_language_model(model):
        return gap <= LOSS_BOUND_PERCENT
    return gap >= -ACCURACY_BOUND_PP


def fastest_to_target(rows, model, rate, labels):
    """(label, row) of the method among `labels` that reached the target first, whatever its
    final accuracy, or (None, None)."""
    ranked = sorted((row["to_target"], label) for label in labels
                    for row in [rows.get((model, rate, label))]
                    if row and row["to_target"] is not None)
    return (ranked[0][1], rows[(model, rate, ranked[0][1])]) if ranked else (None, None)


def training_target_lines(rows):
    """The verdicts of the training targets: time to target against the fastest peer on slow
    links, the step against DDP's on fast ones."""
    lines = ["### Training targets", "",
             f"On {' and '.join(SLOW_RATES)}: 3LC reaches the target no later than the "
             f"fastest peer ({', '.join(methods.PEERS)}), whatever that peer's final quality, "
             f"and ends at most {ACCURACY_BOUND_PP} pp of test accuracy below "
             f"{methods.BASELINE} (a language model: at most {LOSS_BOUND_PERCENT:g} % above its "
             f"validation loss). On "
             f"{' and '.join(FAST_RATES)}: 3LC and uncompressed threelc take at most "
             f"1/{STEP_RATIO_BOUND} of {methods.BASELINE}'s step.", ""]
    for model, rate in model_rates(rows):
        base = rows.get((model, rate, methods.BASELINE), {})
        if rate in SLOW_RATES:
            peer, peer_row = fastest_to_target(rows, model, rate, methods.PEERS)
            for label in methods.THREELC_3LC:
                row = rows.get((model, rate, label))
                if row is None:
                    continue
                gap = quality_gap(model, row, base)
                if row["to_target"] is None or peer_row is None or gap is None:
                    missing = label if row["to_target"] is None else (
                        "any peer" if peer_row is None else methods.BASELINE)
                    lines.append(f"- {model} {rate} {label}: not decided ({missing} did not "
                                 "reach the target or did not run)")
                    continue
                met = row["to_target"] <= peer_row["to_target"] and keeps_quality(model, gap)
                lines.append(f"- {model} {rate} {label}: {row['to_target']:.1f} s to target "
                             f"against {peer_row['to_target']:.1f} s ({peer}), "
                             f"{gap_text(model, gap)} vs {methods.BASELINE}: "
                             f"{'met' if met else 'NOT met'}")
        elif rate in FAST_RATES:
            for label in (*methods.THREELC_3LC, methods.UNCOMPRESSED_THREELC):
                row = rows.get((model, rate, label))
                if row is None or not row["per_step"] or not base.get("per_step"):
                    continue
                ratio = base["per_step"] / row["per_step"]
                lines.append(f"- {model} {rate} {label}: step {ratio:.2f}x {methods.BASELINE}'s: "
                             f"{'met' if ratio >= STEP_RATIO_BOUND else 'NOT met'}")
    return lines + [""]


def choice_table(rows):
    """Per model and rate: the method that reached the target first, the fastest peer, and
    3LC, each as seconds to target, a ratio to DDP's and the final accuracy against DDP's."""
    ours = [label for label in methods.THREELC_3LC if any(key[2] == label for key in rows)]
    lines = ["### Fastest to the target", "",
             f"Seconds to the target (x {methods.BASELINE}'s), and the final quality against "
             f"{methods.BASELINE}'s: test accuracy in pp, a language model's validation loss in "
             "%.", "",
             "| model | rate | fastest | fastest peer | " + " | ".join(ours) + " |",
             "| --- | --- | --- | --- | " + " | ".join("---" for _ in ours) + " |"]

    def cell(model, label, row, base):
        """"label: seconds (x DDP), gap"; without a label, the figures alone."""
        named = f"{label}: " if label else ""
        if row is None:
            return "-"
        gap = quality_gap(model, row, base)
        gap = f", {gap_text(model, gap)}" if gap is not None else ""
        if row["to_target"] is None:
            return f"{named}not reached{gap}"
        projected = " (projected)" if "projected_from" in row else ""
        return (f"{named}{row['to_target']:.1f} s{projected}"
                f"{times(base.get('to_target'), row['to_target'])}{gap}")

    for model, rate in model_rates(rows):
        base = rows.get((model, rate, methods.BASELINE), {})
        best = fastest_to_target(rows, model, rate, methods.LABELS)
        peer = fastest_to_target(rows, model, rate, methods.PEERS)
        cells = [cell(model, None, rows.get((model, rate, label)), base) for label in ours]
        lines.append(f"| {model} | {rate} | {cell(model, *best, base)} | "
                     f"{cell(model, *peer, base)} | " + " | ".join(cells) + " |")
    return lines + [""]


def plots(out, medians, training, targets):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    if medians:
        biggest = max(k[1] for k in medians)
        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        for label in sorted({k[2] for k in medians}, key=label_order):
            points = sorted((rate_bits(k[0]), v["seconds"]) for k, v in medians.items()
                            if k[1] == biggest and k[2] == label)
            if points:
                ax.plot([p[0] / 1e9 for p in points], [p[1] for p in points], marker="o",
                        label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("link bandwidth (Gbit/s)")
        ax.set_ylabel(f"allreduce of {biggest / 1e6:g} MB, median s")
        ax.set_title("Allreduce time against bandwidth (4 emulated hosts)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "allreduce_time_vs_bandwidth.png", dpi=110)
        plt.close(fig)
        made.append("allreduce_time_vs_bandwidth.png")

        sparsity_points = defaultdict(list)
        for (rate, size, label), v in medians.items():
            if label.startswith("threelc 3LC s=") and v["bits_per_value"] is not None:
                sparsity_points[size].append((float(label.split("=")[1]), v["bits_per_value"]))
        if sparsity_points:
            fig, ax = plt.subplots(figsize=(6.4, 4.4))
            for size, points in sorted(sparsity_points.items()):
                by_s = defaultdict(list)
                for s, bits in points:
                    by_s[s].append(bits)
                xs = sorted(by_s)
                ax.plot(xs, [statistics.median(by_s[s]) for s in xs], marker="o",
                        label=f"{size / 1e6:g} MB")
            ax.set_xlabel("sparsity multiplier s")
            ax.set_ylabel("bits sent per rank per value")
            ax.set_title("3LC traffic against s (real gradients; uncompressed: 32)")
            ax.grid(True, alpha=0.3)
            ax.legend()
            fig.tight_layout()
            fig.savefig(out / "bits_per_value_vs_sparsity.png", dpi=110)
            plt.close(fig)
            made.append("bits_per_value_vs_sparsity.png")

    for model in sorted({r.get("model", "cnn") for r in training}):
        runs_of_model = [r for r in training if r.get("model", "cnn") == model]
        measure = "validation loss" if methods.is_language_model(model) else "test accuracy"
        runs_of_model = [r for r in runs_of_model if len(r["epochs"]) > 1]  # curves only:
        if not runs_of_model:  # a timing run has a single point
            continue
        rates = sorted({r["rate"] for r in runs_of_model}, key=rate_bits)
        fig, axes = plt.subplots(1, len(rates), figsize=(max(8.0, 4.8 * len(rates)), 4.4),
                                 squeeze=False)
        for ax, rate in zip(axes[0], rates):
            for label in methods.LABELS:
                runs = [r for r in runs_of_model if r["rate"] == rate and r["label"] == label]
                for i, r in enumerate(runs):
                    elapsed, xs, ys = 0.0, [], []
                    for e in r["epochs"]:
                        elapsed += e["seconds"]
                        xs.append(elapsed)
                        ys.append(quality(e))
                    ax.plot(xs, ys, marker="o", alpha=0.8, color=color_of(label),
                            label=label if i == 0 else None)
            target = target_for(targets, model)
            if target is not None:
                ax.axhline(target, linestyle="--", color="grey", linewidth=0.8)
            ax.set_title(f"{rate}")
            ax.set_xscale("log")
            ax.set_xlabel("training wall time (s)")
            ax.set_ylabel(measure)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
        workload = ("the Python documentation's text" if methods.is_language_model(model)
                    else "Fashion-MNIST")
        fig.suptitle(f"{model} on {workload}, 4 emulated hosts: {measure} against wall time",
                     fontsize=10)
        fig.tight_layout()
        name = (f"{'validation_loss' if methods.is_language_model(model) else 'accuracy'}"
                f"_vs_time_{model}.png")
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        made.append(name)
    return made


COLORS = {"threelc 3LC": "tab:blue", "threelc 3LC hook": "tab:cyan",
          "threelc 3LC LVA": "navy", "threelc fp16": "tab:purple", "threelc none": "tab:orange",
          "DDP": "black", "DDP fp16": "tab:olive", "DDP bf16": "tab:brown",
          "DDP PowerSGD r1": "tab:red", "DDP PowerSGD r2": "tab:pink",
          "DDP PowerSGD r4": "tab:green", "DDP PowerSGD r8": "darkgreen"}


def color_of(label):
    return COLORS.get(label, "tab:grey")


SHOWN_SETTINGS = ("quick", "hosts", "rates", "sizes_mb", "rounds", "iters", "training_rounds",
                  "training_rates", "epochs", "max_steps", "validations", "target_accuracy",
                  "target_loss")


def write_report(out):
    out = Path(out)
    allreduce, training = load(out)
    settings = json.loads((out / "settings.json").read_text())
    targets = settings_targets(settings)
    medians = allreduce_medians(allreduce)
    lines = [f"# Evaluation run {settings.get('date')} (commit {settings.get('commit')})", ""]
    for run in [*settings.get("earlier", []), settings]:
        shown = {k: run[k] for k in SHOWN_SETTINGS if k in run}
        lines += [f"`{run.get('command', 'tools/eval/evaluate')}` ({run.get('date')}, commit "
                  f"{run.get('commit')}) with {json.dumps(shown)}", ""]
    if medians:
        lines += target_lines(medians) + allreduce_tables(medians)
    rows = training_rows(training, targets)
    if rows:
        lines += training_target_lines(rows) + choice_table(rows) + training_tables(rows, targets)
    made = plots(out, medians, training, targets)
    lines += [f"![{name}]({name})" for name in made]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0

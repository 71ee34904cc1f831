"""The one table perf/gpu_check.sh ends with: each goal, the figure its step measured, and pass or fail.

The goals live here, in `GOALS`, and nowhere else. Each step of the check writes its figures to a JSON
file in the results folder (``<step>.json``) and the shell adds a line per step to ``steps.jsonl``
(exit code, wall, limit); ``check.json`` says the mode. A row whose step did not finish reads
"unmeasured" with the reason; in ``--cpu-smoke`` mode figures are shown but not judged ("smoke"). The
exit code is the number of steps that did not finish (crash or time limit), so the check is green only
when every step ran.

    python perf/gpu/table.py RESULTS_DIR
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

STEPS = ("media", "text", "peers", "training", "harness")


class Unmeasured(Exception):
    """A figure its step could not give (the reason is the message): not a failure of the goal."""


@dataclass(frozen=True)
class Goal:
    name: str
    step: str
    target: str
    judge: Callable[[dict[str, Any]], tuple[str, bool]]  # the step's figures -> (figure shown, goal met)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


def _images(setup_key: str) -> Callable[[dict[str, Any]], tuple[str, bool]]:
    def judge(m: dict[str, Any]) -> tuple[str, bool]:
        setup = m.get(setup_key)
        if setup is None:
            raise Unmeasured(m.get("gpu_setup_error") or "no setup")
        loop = m.get("image", {}).get("loop", {}).get(setup)
        if loop is None:
            raise Unmeasured(m.get("gpu_setup_error") if setup_key == "gpu_setup" else f"{setup}: no figure")
        pure = m["image"]["pure"]
        return (f"{loop['rate']:,.0f} img/s = {loop['ratio']:.2f} of pure {pure:,.0f} ({setup}; {m['images']} images, "
                f"batch {m['batch']}, {m['rounds']} rounds)", loop["rate"] >= 15_000 and loop["ratio"] >= 0.9)
    return judge


def _video(m: dict[str, Any]) -> tuple[str, bool]:
    video, frames = m.get("video"), m["frames_per_video"]
    if not video or m["setup"] not in video["loop"]:
        raise Unmeasured("no video figure printed")
    loop = video["loop"][m["setup"]]
    return (f"{loop['rate'] * frames:,.0f} frames/s in the loop vs {video['pure'] * frames:,.0f} pure = {loop['ratio']:.2f} "
            f"({m['video_items']} clips x {frames} frames)", loop["ratio"] >= 0.9)


def _texts(m: dict[str, Any]) -> tuple[str, bool]:
    rate = m["median_texts_per_s"]["planned"]
    figure = (f"{rate:,.0f} texts/s (full context {m['median_texts_per_s']['full']:,.0f}); {m['texts']} {m['source']}, "
              f"batch {m['batch']}, {m['rounds']} rounds")
    if not m["real"]:
        raise Unmeasured(f"no real captions ({figure})")
    return figure, rate >= 50_000


def _pairing(label: str, peer: str, rows: str) -> Callable[[dict[str, Any]], tuple[str, bool]]:
    def judge(m: dict[str, Any]) -> tuple[str, bool]:
        rounds = [r for r in m["pairings"].get(label, []) if r["ratio"] is not None]
        if not rounds:
            raise Unmeasured("peer not installed" if not m["clip_benchmark_installed"] else f"{label}: not run")
        ratio = _median([r["ratio"] for r in rounds])
        equal = all(r["equal"] for r in rounds)
        return (f"{ratio:.2f}x {peer}'s wall; values {'equal' if equal else 'DIFFER'} ({len(rounds)} round(s), "
                f"{m[rows]} rows)", ratio <= 0.5 and equal)
    return judge


def _whole_run(m: dict[str, Any]) -> tuple[str, bool]:
    runs = [r for r in m["runs"] if r["name"] == "nh_ret_fp32" and r["timings"].get("encode_s")]
    if not runs:
        raise Unmeasured("no Retrieval-Neg record with encode_s")
    ratio = _median([r["wall_s"] / r["timings"]["encode_s"] for r in runs])
    wall, encode = _median([r["wall_s"] for r in runs]), _median([r["timings"]["encode_s"] for r in runs])
    return f"{ratio:.2f}x (process wall {wall:.1f} s, encode_s {encode:.1f} s; Retrieval-Neg fp32)", ratio <= 1.3


def _training(m: dict[str, Any]) -> tuple[str, bool]:
    return (f"{m['ratio']:.2f} (loop {m['loop_sps']:,.1f} vs bare {m['bare_sps']:,.1f} samples/s; {m['arch']} "
            f"{m['precision']}, batch {m['batch']}, {m['rounds']} rounds)", m["ratio"] >= 0.9)


def _harness(m: dict[str, Any]) -> tuple[str, bool]:
    devices = sorted({r["device"] for r in m["records"].values()})
    on_device = all(d.startswith(m["device"].split(":")[0]) for d in devices) and len(m["records"]) == 2
    return (f"{m['wall_s']:.1f} s, peak {m['peak_mib']:,.0f} MiB ({m['peak_kind']}), records name {'; '.join(devices)}",
            on_device)


GOALS = (
    Goal("images, JPEG decoding in the loop (CPU decode)", "media", ">= 15,000 img/s and >= 0.9 of pure", _images("setup")),
    Goal("images, JPEG decoding in the loop (GPU decode)", "media", ">= 15,000 img/s and >= 0.9 of pure",
         _images("gpu_setup")),
    Goal("video frames in the loop", "media", ">= 0.9 of pure", _video),
    Goal("texts, real captions (the runner's planned batches)", "text", ">= 50,000 texts/s", _texts),
    Goal("Retrieval-Neg end to end vs CLIP_benchmark, fp32", "peers", "<= 0.5x its wall, values equal",
         _pairing("retrieval fp32 vs fp32", "CLIP_benchmark", "rows")),
    Goal("MCQ end to end vs the authors' loop, fp32", "peers", "<= 0.5x its wall, values equal",
         _pairing("MCQ fp32 vs fp32", "the authors' loop", "mcq_rows")),
    Goal("a whole run vs its encoding time", "peers", "<= 1.3x encode_s", _whole_run),
    Goal("BNL training step rate vs a bare loop", "training", ">= 0.9", _training),
    Goal("negharness.run on the device (shapes tasks)", "harness", "records name the device; peak memory", _harness),
)


def read_steps(results: Path) -> dict[str, dict[str, Any]]:
    path = results / "steps.jsonl"
    lines = path.read_text().splitlines() if path.is_file() else []
    return {s["step"]: s for s in map(json.loads, filter(None, lines))}


def row(goal: Goal, results: Path, steps: dict[str, dict[str, Any]], smoke: bool) -> tuple[str, str]:
    """(figure, verdict) of one goal."""
    step = steps.get(goal.step)
    figures = results / f"{goal.step}.json"
    if step is None:
        return "", "unmeasured (step not run)"
    if step["rc"] != 0 or not figures.is_file():
        why = f"timed out at {step['limit_s']} s" if step["rc"] in (124, 137) else f"exit code {step['rc']}"
        return "", f"unmeasured (step {goal.step}: {why})"
    try:
        figure, met = goal.judge(json.loads(figures.read_text()))
    except Unmeasured as exc:
        return "", f"unmeasured ({exc})"
    except (KeyError, TypeError, ValueError) as exc:  # a step's figures in a layout this table does not know
        return "", f"unmeasured (figures unreadable: {type(exc).__name__} {exc})"
    return figure, "smoke" if smoke else ("pass" if met else "FAIL")


def table(results: Path) -> tuple[str, int]:
    """The Markdown table and the number of steps that did not finish."""
    mode = json.loads((results / "check.json").read_text()) if (results / "check.json").is_file() else {}
    smoke = mode.get("mode") == "smoke"
    steps = read_steps(results)
    lines = [f"## perf/gpu_check.sh{' --cpu-smoke' if smoke else ''}: {mode.get('device', '?')}", "",
             "| goal | figure | target | result |", "|---|---|---|---|"]
    for goal in GOALS:
        figure, verdict = row(goal, results, steps, smoke)
        lines.append(f"| {goal.name} | {figure} | {goal.target} | {verdict} |")
    lines += ["", "| step | exit | wall s | limit s |", "|---|---|---|---|"]
    lines += [f"| {s} | {steps[s]['rc']} | {steps[s]['wall_s']} | {steps[s]['limit_s']} |" if s in steps else f"| {s} | not run | | |"
              for s in STEPS]
    failed = sum(1 for s in STEPS if s not in steps or steps[s]["rc"] != 0)
    return "\n".join(lines), failed


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not Path(args[0]).is_dir():
        raise SystemExit("usage: python perf/gpu/table.py RESULTS_DIR (the folder perf/gpu_check.sh wrote)")
    text, failed = table(Path(args[0]))
    print(text)
    return failed


if __name__ == "__main__":
    sys.exit(main())

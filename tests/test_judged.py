"""Judged retrieval (issue 52): SimpleNeg scored as its authors' steer.py scores it, on stand-in data in
their layout, with a stand-in judge registered in a test host; the judge named on the command line
(`--judge`, `-J`), its answers cached by content, its identity in the record's path; the built-in
judges: hf_vlm_judge on a tiny random VLM, openai_judge against a loopback fake endpoint."""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import sys
import threading
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from negharness.api import ModelOptions, OptionSpec, UserError, hookimpl, takes_options
from negharness.engine.evaluate import evaluate_request
from negharness.engine.plan import make_plan
from negharness.engine.request import RunRequest
from negharness.testing import COLOURS, host_with_models, keyword_model

# three queries (the keyword model ranks colours: "red yellow" -> yellow, red), each with its questions
ROWS = [["red yellow", "n0", "v0"], ["blue cyan", "n1", "v1"], ["green yellow", "n2", "v2"]]
# what the stand-in judge says about (image colour, question); anything else: "no"
SAYS = {("yellow", "v0"): "Yes.", ("yellow", "n0"): "No",  # verified, negation respected: 1
        ("red", "v0"): "yes", ("red", "n0"): "yes",  # verified, negation broken: 0
        ("cyan", "v1"): "no", ("blue", "v1"): "Yes, there is",  # neither verified ("Yes, there is" is not yes)
        ("yellow", "v2"): "YES", ("yellow", "n2"): "no.",  # 1
        ("green", "v2"): "yes", ("green", "n2"): "No, it is not"}  # verified, negation answer neither: 0
SUFFIX = "\nAnswer the question with a yes or no."


def _colour(data: bytes) -> str:
    rgb = Image.open(io.BytesIO(data)).convert("RGB").getpixel((0, 0))
    return next(name for name, value in COLOURS.items() if tuple(value) == tuple(rgb))


class StandInJudge:
    """Answers from `SAYS`, recording every prompt it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def describe(self) -> dict:
        return {"kind": "stand-in"}

    def answer(self, items):
        out = []
        for data, prompt in items:
            assert prompt.endswith(SUFFIX)
            question = prompt[: -len(SUFFIX)]
            self.asked.append((_colour(data), question))
            out.append(SAYS.get((_colour(data), question), "no"))
        return out


JUDGES: list[StandInJudge] = []
# a judge declaring its model option as hf_vlm_judge does (a hub id or folder: data_file), and a request knob
HUB_JUDGE = {"arch": OptionSpec(str, None, "model id or folder", data_file=True),
             "log": OptionSpec(str, None, "where to log", changes_numbers=False)}


def stand_in(options: ModelOptions) -> StandInJudge:
    JUDGES.append(StandInJudge())
    return JUDGES[-1]


@pytest.fixture
def host():
    host = host_with_models({"keyword_model": keyword_model})

    @hookimpl
    def negharness_register_judges(registry):
        registry.add("stand_in", stand_in, "answers from a table")
        registry.add("stand_in_b", stand_in, "the same table, another name")
        registry.add("hub_judge", takes_options(HUB_JUDGE)(stand_in), "declares its model option")

    host.register(types.SimpleNamespace(negharness_register_judges=negharness_register_judges), "test_judges")
    JUDGES.clear()
    return host


@pytest.fixture
def data(tmp_path) -> Path:
    """SimpleNeg's layout: simpleneg/simpleneg.json and coco/val2014/, six solid-colour images."""
    root = tmp_path / "data"
    (root / "simpleneg").mkdir(parents=True)
    (root / "simpleneg" / "simpleneg.json").write_text(json.dumps(ROWS))
    images = root / "coco" / "val2014"
    images.mkdir(parents=True)
    for i, (name, rgb) in enumerate(COLOURS.items()):
        pixels = np.broadcast_to(np.array(rgb, dtype=np.uint8), (8, 8, 3)).copy()
        Image.fromarray(pixels).save(images / f"COCO_val2014_{i:012d}.png")
    return root


def _request(data: Path, tmp_path: Path, judge: str | None = "stand_in", **extra) -> RunRequest:
    return RunRequest("keyword_model", ["simpleneg"], task_extra={"pool_size": "6", "top_k": "2"},
                      data_root=str(data), output_dir=str(tmp_path / "results"), device="cpu", judge=judge, **extra)


def test_simpleneg_scores_the_three_rates_as_the_authors_script(host, data, tmp_path):
    (out,) = evaluate_request(host, _request(data, tmp_path))
    rec = out.record
    # per image: final [1,0],[0,0],[1,0]; verification [1,1],[0,0],[1,1]; verified and "no": 2 of 4
    assert rec["metrics"]["final"] == pytest.approx(100 * 2 / 6)
    assert rec["metrics"]["verification"] == pytest.approx(100 * 4 / 6)
    assert rec["metrics"]["negation"] == pytest.approx(100 * 2 / 6)  # the script's list: final's twin
    assert rec["metrics"]["negation_given_verified"] == pytest.approx(100 * 2 / 4)
    assert rec["notes"]["answers"] == {"verification": {"yes": 4, "no": 1, "other": 1},
                                       "negation": {"yes": 1, "no": 2, "other": 1}}
    # the negation question is asked only of verified images
    assert sorted(JUDGES[0].asked) == sorted([("yellow", "v0"), ("red", "v0"), ("cyan", "v1"), ("blue", "v1"),
                                              ("yellow", "v2"), ("green", "v2"), ("yellow", "n0"), ("red", "n0"),
                                              ("yellow", "n2"), ("green", "n2")])
    assert rec["counts"]["judge_asked"] == 10 and rec["counts"]["judge_cached"] == 0
    task_config = rec["config"]["task"]
    assert task_config["judge"] == "stand_in" and rec["notes"]["judge"] == {"name": "stand_in", "options": {}}
    assert task_config["prompt"] == "{question}" + SUFFIX and task_config["top_k"] == 2
    assert "@" in out.path.name and out.path.parent.name == "keyword_model"  # the judge: a variant of the task
    from negharness.scoring.perquery import read_sidecar

    perq = read_sidecar(out.path, rec)
    assert perq["values"]["final"] == [50.0, 0.0, 50.0] and perq["values"]["verification"] == [100.0, 0.0, 100.0]
    assert perq["values"]["negation"] == [50.0, 0.0, 50.0] and "negation_given_verified" not in perq["values"]
    assert "final" in rec.get("intervals", {})


def test_an_unreadable_pool_image_is_never_retrieved_nor_judged(host, data, tmp_path):
    """--skip-broken-media: the broken image leaves the pool (counted); the judge, which would be handed
    bytes nothing decodes, is never asked about it, and every query still gets its K readable images."""
    (data / "coco" / "val2014" / "COCO_val2014_000000000003.png").write_bytes(b"not an image")  # yellow
    req = dataclasses.replace(_request(data, tmp_path, skip_broken_media=True),
                              task_extra={"pool_size": "6", "top_k": "6"})  # K = the whole pool
    (out,) = evaluate_request(host, req)
    assert out.record["notes"]["media_skipped"] == 1 and out.record["notes"]["top_k"] == 5
    assert out.record["n_items"]["judged_images"] == 15  # three queries, five readable images each
    assert "yellow" not in {colour for colour, _ in JUDGES[0].asked}


def test_answers_are_cached_by_content_and_another_judge_is_another_record(host, data, tmp_path):
    (first,) = evaluate_request(host, _request(data, tmp_path))
    (again,) = evaluate_request(host, _request(data, tmp_path, overwrite=True))
    assert again.record["counts"]["judge_asked"] == 0 and again.record["counts"]["judge_cached"] == 10
    assert again.record["metrics"] == first.record["metrics"]
    import shutil

    moved = shutil.copytree(data, tmp_path / "elsewhere")  # the same images under other paths: the same answers
    (elsewhere,) = evaluate_request(host, _request(moved, tmp_path / "b"))
    assert elsewhere.record["counts"]["judge_asked"] == 0 and elsewhere.record["counts"]["judge_cached"] == 10
    (other,) = evaluate_request(host, _request(data, tmp_path, judge="stand_in_b"))
    assert other.path != first.path and other.path.parent == first.path.parent  # the model's folder, another file
    assert other.record["counts"]["judge_asked"] == 10  # another judge's answers are its own
    assert first.path.is_file() and other.path.is_file()


def test_a_judged_task_without_a_judge_is_refused_naming_the_flag(host, data, tmp_path):
    with pytest.raises(UserError, match="--judge"):
        make_plan(host, _request(data, tmp_path, judge=None))
    with pytest.raises(UserError, match="unknown judge"):
        make_plan(host, _request(data, tmp_path, judge="no_such_judge"))
    with pytest.raises(UserError, match="give --judge NAME"):
        make_plan(host, RunRequest("keyword_model", ["shapes_t2i_original"], judge_options={"url": "x"}))
    with pytest.raises(UserError, match="no task of this run is judged"):
        make_plan(host, RunRequest("keyword_model", ["shapes_t2i_original"], judge="stand_in"))
    with pytest.raises(UserError, match="-J colour"):
        make_plan(host, _request(data, tmp_path, judge="openai_judge", judge_options={"colour": "red"}))


def test_a_glob_leaves_judged_tasks_out_without_a_judge_and_says_so(host, tmp_path):
    """`--task 'msrvtt1k_*'` ran nT2VR's tasks before a judged one was registered under that prefix: it
    runs them still, warning which judged task it left out; with --judge the glob takes it in; a judged
    task named plainly, or matched by a glob whose matches are all judged (beside another glob too),
    is refused naming --judge; a -T key only the left-out task takes says so."""
    from test_nt2vr_tasks import write_layout

    write_layout(tmp_path / "data")
    req = RunRequest("keyword_model", ["msrvtt1k_*"], data_root=str(tmp_path / "data"),
                     output_dir=str(tmp_path / "results"), device="cpu", task_extra={"build": "true"})
    with pytest.warns(UserWarning, match=r"left out, judged .*--judge.*: msrvtt1k_composed_judged$"):
        plan = make_plan(host, req)
    def planned(p):  # the tasks the plan holds, with those that fail alone (without NLTK data: the built queries)
        return sorted([t.task.name for t in p.tasks] + [f.name for f in p.failed])

    names = planned(plan)
    assert names and "msrvtt1k_composed_judged" not in names and all(n.startswith("msrvtt1k_") for n in names)
    assert plan.unjudged == ("msrvtt1k_composed_judged",)
    judged = make_plan(host, dataclasses.replace(req, judge="stand_in"))
    assert planned(judged) == sorted([*names, "msrvtt1k_composed_judged"])
    assert judged.unjudged == ()
    for tasks in (["msrvtt1k_composed_judged"], ["msrvtt1k_*_judged"], ["msrvtt1k_*", "msrvtt1k_composed_judged"],
                  ["msrvtt1k_*", "msrvtt1k_*_judged"]):
        with pytest.raises(UserError, match="--judge NAME"):
            make_plan(host, dataclasses.replace(req, tasks=tasks))
    with pytest.raises(UserError, match=r"-T top_k: an option of msrvtt1k_composed_judged, which this run leaves "
                                        r"out.*--judge NAME"):
        make_plan(host, dataclasses.replace(req, task_extra={"build": "true", "top_k": "3"}))


def test_a_judged_task_registered_as_a_factory_is_judged_by_what_it_builds(host, data, tmp_path):
    """A plugin may register a task by a factory: whether it is judged is asked of the task it builds,
    as `plan_judge` asks, so a glob leaves it out too."""
    from negharness.tasks.judged.retrieval import SimpleNeg
    from negharness.tasks.shapes.retrieval import ShapesT2IOriginal

    def factory(name: str, base: type):
        return lambda options: type(name, (base,), {"name": name})(options)

    @hookimpl
    def negharness_register_tasks(registry):
        registry.add("simpleneg_mine", factory("simpleneg_mine", SimpleNeg), "SimpleNeg by a factory")
        registry.add("simple_shapes", factory("simple_shapes", ShapesT2IOriginal), "not judged, by a factory")

    host.register(types.SimpleNamespace(negharness_register_tasks=negharness_register_tasks), "factory_tasks")
    req = RunRequest("keyword_model", ["simple*"], data_root=str(data), output_dir=str(tmp_path / "results"),
                     device="cpu")
    with pytest.warns(UserWarning, match="left out.*: simpleneg, simpleneg_mine$"):
        plan = make_plan(host, req)
    assert [t.task.name for t in plan.tasks] == ["simple_shapes"]
    with pytest.raises(UserError, match="--judge NAME"):  # its glob matches judged tasks only
        make_plan(host, dataclasses.replace(req, tasks=["simpleneg*"], task_extra={"pool_size": "6"}))


def test_the_cli_refuses_before_torch_loads(data):
    """`negharness run` with torch made unimportable: the refusal names the flag, so it came first."""
    import os
    import subprocess

    def run(*args: str) -> subprocess.CompletedProcess:
        code = ("import sys; sys.modules['torch'] = None\nfrom negharness.cli.main import main\n"
                f"sys.exit(main({list(args)!r}))")
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "COLUMNS": "200"})

    res = run("run", "--model", "shapes_clip", "--task", "simpleneg", "--data-root", str(data), "-T", "pool_size=6")
    assert res.returncode == 2 and "--judge NAME" in res.stderr, res.stderr
    res = run("run", "--model", "shapes_clip", "--task", "simpleneg", "--data-root", str(data), "-T", "pool_size=6",
              "--judge", "openai_judge", "-J", "colour=red")
    assert res.returncode == 2 and "-J colour" in res.stderr, res.stderr


def test_a_malformed_simpleneg_row_is_named(host, data, tmp_path):
    (data / "simpleneg" / "simpleneg.json").write_text(json.dumps([ROWS[0], ["only", "two"]]))
    with pytest.raises(UserError, match="row 1"):
        evaluate_request(host, _request(data, tmp_path))


def _script_lists(replies: dict[tuple[int, str], str], n_images: int) -> dict[str, list[int]]:
    """steer.py's `evaluate_retrieved_images` for one query, restated from its rule: each image's reply
    read by `vqa` (lower case, '.' removed, stripped); verified when "yes"; then 1 when the negation
    reply is "no", and 0 in both lists (final, negation) when not verified."""
    final, verification, negation = [], [], []
    for i in range(n_images):
        verified = replies[(i, "v")].lower().replace(".", "").strip() == "yes"
        verification.append(1 if verified else 0)
        ok = 1 if verified and replies[(i, "n")].lower().replace(".", "").strip() == "no" else 0
        negation.append(ok)
        final.append(ok)
    return {"final": final, "verification": verification, "negation": negation}


def test_the_rates_on_hand_worked_answers():
    """Five images: verified and "no" (1), verified and "yes" (0), not verified (0, never asked),
    "Yes, there is" (not yes: 0), verified and "No, it is not" (not no: 0). By hand: final 1/5 = 20%,
    verification 3/5 = 60%, the script's negation list [1,0,0,0,0] = 20%, the verified's 1/3."""
    from negharness.scoring.judged import rates, score_lists, yes_no

    answers = [(yes_no("Yes."), yes_no("No")), ("yes", "yes"), ("no", None), (yes_no("Yes, there is"), None),
               ("yes", yes_no("No, it is not"))]
    lists = score_lists(answers)
    assert lists == {"final": [1, 0, 0, 0, 0], "verification": [1, 1, 0, 0, 1], "negation": [1, 0, 0, 0, 0]}
    assert rates(lists) == pytest.approx({"final": 20.0, "verification": 60.0, "negation": 20.0,
                                          "negation_given_verified": 100 / 3})
    none_verified = rates(score_lists([("no", None), ("maybe", None)]))
    assert none_verified == {"final": 0.0, "verification": 0.0, "negation": 0.0}  # a share of nothing: absent


def test_the_lists_equal_the_scripts_on_random_replies():
    """Replies drawn from what a judge says (cases, full stops, longer answers): the three lists equal
    steer.py's rule restated (`_script_lists`), image by image."""
    import random

    from negharness.scoring.judged import score_lists, yes_no

    said = ["yes", "Yes.", "YES", "no", "No.", "no.", "Yes, there is", "maybe", " yes ", "N.o"]
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(1, 6)
        replies = {(i, q): rng.choice(said) for i in range(n) for q in "vn"}
        ours = [(yes_no(replies[(i, "v")]), yes_no(replies[(i, "n")]) if yes_no(replies[(i, "v")]) == "yes" else None)
                for i in range(n)]
        assert score_lists(ours) == _script_lists(replies, n)


# the YAML form (docs/guides/judged.md's example) -------------------------------------------------------

def _doc_yaml() -> str:
    """The YAML block of docs/guides/judged.md's "Judged retrieval in YAML" section."""
    import re

    text = (Path(__file__).resolve().parents[1] / "docs" / "guides" / "judged.md").read_text()
    section = text[text.index("## Judged retrieval in YAML"):]
    return re.search(r"```yaml\n(.*?)```", section, re.S).group(1)


def _yaml_host(host, folder: Path):
    from negharness.declarative.register import include_plugin

    host.register(include_plugin([str(folder)]), "yaml_judged")
    return host


def test_the_docs_yaml_judged_task_scores_as_the_builtin(host, data, tmp_path):
    """The docs' SimpleNeg-in-YAML, on SimpleNeg's layout with the stand-in judge (-T pool_size=6
    -T top_k=2 as the built-in's run): the same numbers, judged the same images."""
    folder = tmp_path / "my_tasks"
    folder.mkdir()
    (folder / "simpleneg_yaml.yaml").write_text(_doc_yaml())
    _yaml_host(host, folder)
    (builtin,) = evaluate_request(host, _request(data, tmp_path))
    asked = sorted(JUDGES[-1].asked)
    req = dataclasses.replace(_request(data, tmp_path / "y"), tasks=["simpleneg_yaml"], use_cache=False)
    (yaml,) = evaluate_request(host, req)
    rec = yaml.record
    assert rec["metrics"] == builtin.record["metrics"] and sorted(JUDGES[-1].asked) == asked
    assert rec["notes"]["answers"] == builtin.record["notes"]["answers"]
    assert rec["config"]["task"]["judge"] == "stand_in" and rec["config"]["task"]["top_k"] == 2
    assert rec["task"]["family"] == "judged" and yaml.path.name.startswith("simpleneg_yaml@")
    from negharness.scoring.perquery import read_sidecar

    perq = read_sidecar(yaml.path, rec)
    assert perq["values"]["final"] == [50.0, 0.0, 50.0] and perq["ids"][0].startswith("simpleneg/simpleneg.json")
    assert "final" in rec["intervals"]
    with pytest.raises(UserError, match="--judge"):  # judged: no run without a judge
        make_plan(host, dataclasses.replace(req, judge=None))


@pytest.mark.parametrize("edit, message", [
    (("questions:\n  negation: \"1\"\n  verification: \"2\"\n", "questions:\n  negation: \"1\"\n"),
     r"key 'questions.verification': missing"),
    (("top_k: 5", "top_k: 0"), r"key 'top_k': expected a whole number between 1 and 100"),
    (("  folder: coco/val2014", "  folder: ../coco"), r"key 'pool.folder': .* leaves the data root"),
    (("main_score: final", "main_score: final\ncluster: media"), r"key 'cluster': a judged task's rows are queries"),
    (("main_score: final", "main_score: final\nmedia: {path: x}"), r"key 'media': not read by a judged task"),
    (("main_score: final", "main_score: R@1"), r"key 'main_score': 'R@1' is not among"),
])
def test_a_judged_yaml_mistake_is_named_by_file_and_key(tmp_path, edit, message):
    from negharness.declarative.register import load_folder

    folder = tmp_path / "t"
    folder.mkdir()
    text = _doc_yaml()
    assert edit[0] in text
    (folder / "j.yaml").write_text(text.replace(edit[0], edit[1]))
    with pytest.raises(UserError, match=r"j.yaml: " + message):
        load_folder(folder)


def test_a_judged_yaml_row_without_its_question_is_named_before_any_model(host, data, tmp_path):
    folder = tmp_path / "my_tasks"
    folder.mkdir()
    (folder / "simpleneg_yaml.yaml").write_text(_doc_yaml())
    _yaml_host(host, folder)
    (data / "simpleneg" / "simpleneg.json").write_text(json.dumps([ROWS[0], ["q", " ", "v"]]))
    req = dataclasses.replace(_request(data, tmp_path), tasks=["simpleneg_yaml"])
    with pytest.raises(UserError, match=r"simpleneg.json: record 1: empty negation question in field '1'"):
        make_plan(host, req)
    (data / "simpleneg" / "simpleneg.json").write_text(json.dumps(ROWS))
    with pytest.raises(UserError, match=r"6 files match '\*', fewer than the pool's 7"):
        make_plan(host, dataclasses.replace(req, task_extra={"pool_size": "7"}))


# openai_judge against a loopback fake ---------------------------------------------------------------

class _Fake(BaseHTTPRequestHandler):
    script: list = []  # (status, body) per request, in order; the last repeats
    seen: list = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(body)
        status, reply = self.script[min(len(self.seen) - 1, len(self.script) - 1)]
        data = reply if isinstance(reply, bytes) else json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def endpoint():
    """A fake OpenAI-compatible server on 127.0.0.1 (a free port), in a thread, shut down after the test."""
    _Fake.script, _Fake.seen = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Fake)
    server.timeout = 5
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", _Fake
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def _openai(url: str, **extra):
    from negharness.plugins.judges import openai_judge

    return openai_judge(ModelOptions(extra={"url": url, "model": "fake-vlm", "timeout": "5", **extra}))


def _png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (4, 4), (255, 0, 0)).save(buf, format="PNG")
    return buf.getvalue()


def _ok(text: str) -> tuple[int, dict]:
    return 200, {"choices": [{"message": {"role": "assistant", "content": text}}]}


def test_openai_judge_sends_the_image_as_a_data_url_and_reads_the_reply(endpoint):
    url, fake = endpoint
    fake.script = [_ok("Yes.")]
    assert _openai(url).answer([(_png(), "is it red?"), (_png(), "is it blue?")]) == ["Yes.", "Yes."]
    body = fake.seen[0]
    assert body["model"] == "fake-vlm" and body["temperature"] == 0
    image, text = body["messages"][0]["content"]
    assert text == {"type": "text", "text": body["messages"][0]["content"][1]["text"]}
    assert image["image_url"]["url"].startswith("data:image/png;base64,")
    assert base64.b64decode(image["image_url"]["url"].split(",", 1)[1]) == _png()


def test_openai_judge_retries_a_server_error_up_to_its_cap(endpoint):
    url, fake = endpoint
    fake.script = [(503, {"error": "busy"}), _ok("no")]
    assert _openai(url, retries="1").answer([(_png(), "q")]) == ["no"]
    fake.script, fake.seen = [(500, {"error": "down"})], []
    with pytest.raises(UserError, match="no answer after 2 tries"):
        _openai(url, retries="1").answer([(_png(), "q")])
    assert len(fake.seen) == 2  # bounded: one try and one retry


def test_openai_judge_refuses_a_malformed_reply_by_name(endpoint):
    url, fake = endpoint
    fake.script = [(200, {"choices": []})]
    with pytest.raises(UserError, match="malformed reply"):
        _openai(url, retries="0").answer([(_png(), "q")])
    fake.script = [(200, b"not json")]
    with pytest.raises(UserError, match="malformed reply"):
        _openai(url, retries="0").answer([(_png(), "q")])


def test_openai_judge_on_a_closed_port_fails_bounded(endpoint):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    with pytest.raises(UserError, match="no answer after 1 tries"):
        _openai(f"http://127.0.0.1:{port}/v1", retries="0", timeout="2").answer([(_png(), "q")])


def test_openai_judge_runs_simpleneg_through_the_cli_options(host, data, tmp_path, endpoint):
    url, fake = endpoint
    fake.script = [_ok("yes")]  # every image verified, no negation respected
    (out,) = evaluate_request(host, _request(data, tmp_path, judge="openai_judge",
                                             judge_options={"url": url, "model": "fake-vlm", "concurrency": "2"}))
    assert out.record["metrics"]["verification"] == 100.0 and out.record["metrics"]["final"] == 0.0
    assert len(fake.seen) == 12  # six verification and six negation questions
    # the request knobs (concurrency, timeout) change no answer: not part of the judge's identity
    assert out.record["config"]["task"]["judge"] == f"openai_judge(model=fake-vlm, url={url})"


# hf_vlm_judge on a tiny random VLM --------------------------------------------------------------------

def test_hf_vlm_judge_generates_a_reply_from_an_image_and_a_prompt(tmp_path):
    sys.path.insert(0, str(Path(__file__).parent))
    from choice_helpers import tiny_llava

    from negharness.plugins.judges import hf_vlm_judge

    folder = tiny_llava(tmp_path / "llava", ["is there a red square", "yes no"])
    judge = hf_vlm_judge(ModelOptions(extra={"arch": str(folder), "max_new_tokens": "3"}))
    replies = judge.answer([(_png(), "is there a red square?" + SUFFIX), (_png(), "yes no")])
    assert len(replies) == 2 and all(isinstance(r, str) for r in replies)
    assert replies[0] == judge.answer([(_png(), "is there a red square?" + SUFFIX)])[0]  # greedy: the same reply
    assert judge.describe()["max_new_tokens"] == 3 and judge.describe()["decoding"] == "greedy"
    with pytest.raises(UserError, match="-J arch"):
        hf_vlm_judge(ModelOptions())


# judged negation precision on nT2VR's composed queries ---------------------------------------------------

def test_nt2vr_composed_queries_are_judged_with_questions_from_their_parts(host, data, tmp_path, monkeypatch):
    """A tiny MS-COCO collection in nT2VR's layout; the questions come from the builder's parts."""
    coll = data / "mscoco5ktest"
    (coll / "TextData").mkdir(parents=True)
    (coll / "VideoSets").mkdir()
    (coll / "images").mkdir()
    ids = []
    for name, rgb in COLOURS.items():
        Image.new("RGB", (8, 8), rgb).save(coll / "images" / f"{name}.png")
        ids.append(name)
    (coll / "VideoSets" / "mscoco5ktest.txt").write_text("\n".join(ids) + "\n")
    (coll / "TextData" / "mscoco5ktest.caption.txt").write_text("".join(f"{i}#enc#0 a {i} picture\n" for i in ids))
    record = {"cap_id": "q0", "caption": "red yellow", "video_ids": ["yellow"], "subject": "a thing",
              "positive": "v0x", "negative": "n0x"}
    (coll / "TextData" / "mscoco5ktest.composed.txt").write_text(repr(record) + "\n")
    for key, said in {("yellow", "Does the image show v0x?"): "yes", ("yellow", "Does the image show a thing n0x?"): "no",
                      ("red", "Does the image show v0x?"): "yes", ("red", "Does the image show a thing n0x?"): "yes"}.items():
        monkeypatch.setitem(SAYS, key, said)
    req = RunRequest("keyword_model", ["mscoco_composed_judged"], task_extra={"top_k": "2"}, data_root=str(data),
                     output_dir=str(tmp_path / "results"), device="cpu", judge="stand_in")
    (out,) = evaluate_request(host, req)
    assert out.record["metrics"] == {"final": 50.0, "verification": 100.0, "negation": 50.0,
                                     "negation_given_verified": 50.0}
    record.pop("subject")
    (coll / "TextData" / "mscoco5ktest.composed.txt").write_text(repr(record) + "\n")
    with pytest.raises(UserError, match="build-queries"):
        evaluate_request(host, dataclasses.replace(req, overwrite=True))


def test_hf_vlm_judges_identity_sees_its_weights_and_its_processor(tmp_path):
    """The judge's answers are cached by its identity (`describe`): a folder retrained in place (same name,
    config and size) or given another chat template is another judge; the same files are the same judge."""
    import torch
    from transformers import AutoModelForImageTextToText

    sys.path.insert(0, str(Path(__file__).parent))
    from choice_helpers import tiny_llava

    from negharness.plugins.judges import hf_vlm_judge

    folder = tiny_llava(tmp_path / "llava", ["is there a red square", "yes no"])

    def who() -> dict:
        return hf_vlm_judge(ModelOptions(extra={"arch": str(folder)})).describe()

    first = who()
    assert who() == first
    vlm = AutoModelForImageTextToText.from_pretrained(folder)
    with torch.no_grad():
        next(vlm.parameters()).add_(0.01)
    vlm.save_pretrained(folder)
    retrained = who()
    assert retrained["weights"] != first["weights"]
    assert {k: v for k, v in retrained.items() if k != "weights"} == {k: v for k, v in first.items() if k != "weights"}
    template = folder / "chat_template.jinja"
    template.write_text("{% for m in messages %}{{ m['role'] }}: {{ m['content'][-1]['text'] }}{% endfor %}")
    assert who()["processor"] != retrained["processor"]


def test_hf_vlm_judge_judges_a_run_through_the_plugin_lookup(host, data, tmp_path):
    """--judge hf_vlm_judge -J arch=FOLDER: built once by the run (on its device), every answer a string
    the task reads; the judge's options are in the record's config."""
    sys.path.insert(0, str(Path(__file__).parent))
    from choice_helpers import tiny_llava

    folder = tiny_llava(tmp_path / "llava", ["v0 v1 v2 n0 n1 n2", "yes no"])
    (out,) = evaluate_request(host, _request(data, tmp_path, judge="hf_vlm_judge",
                                             judge_options={"arch": str(folder), "max_new_tokens": "2"}))
    rec = out.record
    assert rec["config"]["task"]["judge"] == f"hf_vlm_judge(arch={folder}, max_new_tokens=2)"
    assert rec["notes"]["judge"] == {"name": "hf_vlm_judge", "options": {"arch": str(folder), "max_new_tokens": "2"}}
    assert rec["counts"]["judge_asked"] >= 6 and 0.0 <= rec["metrics"]["final"] <= 100.0


def test_only_a_task_that_says_it_needs_a_judge_is_judged():
    """A YAML retrieval task's ``judged`` (its qrels judgments, a property) once made every such task ask for
    --judge: the marker is ``needs_judge = True`` and nothing else counts."""
    from types import SimpleNamespace

    from negharness.engine.judging import is_judged

    assert is_judged(SimpleNamespace(needs_judge=True))
    assert not is_judged(SimpleNamespace(judged=object())) and not is_judged(SimpleNamespace(needs_judge="yes"))


class FramesJudge(StandInJudge):
    """The stand-in, shown a video's frames: every frame must be the video's colour."""

    takes_frames = True

    def __init__(self) -> None:
        super().__init__()
        self.frames: list[int] = []

    def answer(self, items):
        firsts = []
        for frames, prompt in items:
            assert isinstance(frames, list) and frames, "a video reaches the judge as its frames"
            assert len({_colour(f) for f in frames}) == 1
            self.frames.append(len(frames))
            firsts.append((frames[0], prompt))
        return super().answer(firsts)


def test_a_video_collection_is_judged_on_the_frames_the_model_saw(host, tmp_path, monkeypatch):
    """msrvtt1k_composed_judged: each retrieved video reaches the judge as its sampled frames (PNG, in
    order), asked about "the video"; an image-only judge is refused naming what it lacks."""
    from test_nt2vr_tasks import COLL, write_layout

    from negharness.engine.evaluate import evaluate_request as run

    folder = write_layout(tmp_path / "data")
    record = {"cap_id": "q0", "caption": "red yellow", "video_ids": ["video3"], "subject": "a person",
              "positive": "v0x", "negative": "n0x"}
    (folder / "TextData" / f"{COLL}.composed.txt").write_text(repr(record) + "\n")
    for key, said in {("yellow", "Does the video show v0x?"): "yes", ("yellow", "Does the video show a person n0x?"): "no",
                      ("red", "Does the video show v0x?"): "yes", ("red", "Does the video show a person n0x?"): "yes"}.items():
        monkeypatch.setitem(SAYS, key, said)
    made: list[FramesJudge] = []

    @hookimpl
    def negharness_register_judges(registry):
        registry.add("frames_judge", lambda options: made.append(FramesJudge()) or made[-1], "sees frames")

    host.register(types.SimpleNamespace(negharness_register_judges=negharness_register_judges), "frames_judges")
    req = RunRequest("keyword_model", ["msrvtt1k_composed_judged"], task_extra={"top_k": "2"},
                     data_root=str(tmp_path / "data"), output_dir=str(tmp_path / "results"), device="cpu",
                     cache_dir=str(tmp_path / "cache"), judge="frames_judge")
    (out,) = run(host, req)
    assert out.record["metrics"]["final"] == 50.0 and out.record["metrics"]["verification"] == 100.0
    assert made[0].frames and set(made[0].frames) == {made[0].frames[0]} and made[0].frames[0] >= 1
    (again,) = run(host, dataclasses.replace(req, overwrite=True))  # every answer from the cache, keyed by content
    assert again.record["counts"]["judge_cached"] == out.record["counts"]["judge_asked"] > 0
    with pytest.raises(UserError, match="answers about one image; this task shows it a video's frames"):
        run(host, dataclasses.replace(req, judge="stand_in", overwrite=True))


def test_both_built_in_judges_take_a_videos_frames_as_images_of_one_turn(tmp_path):
    """openai_judge: one image part a frame, in order, then the prompt; hf_vlm_judge: as many image
    slots in its chat as frames, answered (a tiny LLaVA)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from choice_helpers import tiny_llava

    from negharness.plugins.judges import OpenAIJudge, hf_vlm_judge

    frames = [_png(), _png()]
    body = OpenAIJudge("http://127.0.0.1:9/v1", "m").body(frames, "q?")
    parts = body["messages"][0]["content"]
    assert [p["type"] for p in parts] == ["image_url", "image_url", "text"] and parts[-1]["text"] == "q?"
    assert OpenAIJudge.takes_frames is True
    judge = hf_vlm_judge(ModelOptions(extra={"arch": str(tiny_llava(tmp_path / "llava", ["is it", "yes no"])),
                                             "max_new_tokens": "2"}))
    assert judge.takes_frames is True and judge.chat("q?", 2).count(judge.processor.image_token) >= 2
    (reply,) = judge.answer([(frames, "is it?" + SUFFIX)])
    assert isinstance(reply, str)


def test_a_judged_record_reruns_when_what_its_judge_options_name_changes(host, data, tmp_path, monkeypatch):
    """A judge retrained in place (``-J arch=FOLDER``) or a hub id whose local snapshot moved: its record was
    reused, its config holding only the judge's label. Now the record keeps what the judge's options name
    (a folder's content hash, a snapshot's commit) and its reuse compares them."""
    folder = tmp_path / "judge"
    folder.mkdir()
    (folder / "weights.bin").write_bytes(b"one")
    req = _request(data, tmp_path, judge_options={"arch": str(folder)})
    (first,) = evaluate_request(host, req)
    assert set(first.record["judge"]["sources"]) == {"-J arch"} and first.record["judge"]["name"] == "stand_in"
    (again,) = evaluate_request(host, req)
    assert again.skipped
    (folder / "weights.bin").write_bytes(b"two")
    (rerun,) = evaluate_request(host, req)
    assert not rerun.skipped and rerun.reason == "judge files (-J arch) changed"

    repo = tmp_path / "hub" / "models--org--judge"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    for commit in ("c1", "c2"):
        (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("c1")
    req = _request(data, tmp_path, judge="hub_judge", judge_options={"arch": "org/judge", "log": "org/judge"})
    (first,) = evaluate_request(host, req)
    # only the option it declares a model id or folder (data_file); a request knob (changes_numbers=False) is none
    assert first.record["judge"]["sources"] == {"-J arch": "hub:c1"}
    assert evaluate_request(host, req)[0].skipped
    (repo / "refs" / "main").write_text("c2")
    (rerun,) = evaluate_request(host, req)
    assert not rerun.skipped and rerun.reason == "judge files (-J arch) changed"
    served = _request(data, tmp_path / "served", judge="stand_in", judge_options={"model": "org/judge"})
    assert evaluate_request(host, served)[0].record["judge"]["sources"] == {}  # a model served elsewhere


def test_a_judged_record_keeps_the_judge_sources_as_loaded(host, data, tmp_path, monkeypatch):
    """A judge whose first load fetched its snapshot (or moved ``refs/main``): the record keeps what the
    judge was built from, so the next run's plan finds it standing, not "changed"."""
    repo = tmp_path / "hub" / "models--org--judge"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))

    def fetched_on_load(options: ModelOptions) -> StandInJudge:
        (repo / "snapshots" / "c1").mkdir(parents=True, exist_ok=True)
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text("c1")
        return StandInJudge()

    host.registry.add("judge", "fetching", takes_options(HUB_JUDGE)(fetched_on_load), "fetches on load",
                      plugin="test_judges")
    req = _request(data, tmp_path, judge="fetching", judge_options={"arch": "org/judge"})
    (first,) = evaluate_request(host, req)
    assert first.record["judge"]["sources"] == {"-J arch": "hub:c1"}
    assert evaluate_request(host, req)[0].skipped


def test_a_judged_record_without_judge_sources_is_not_reused(host, data, tmp_path):
    """A record written before judged records kept their judge's sources cannot say its judge was this one."""
    (first,) = evaluate_request(host, _request(data, tmp_path))
    rec = json.loads(first.path.read_text())
    del rec["judge"]
    first.path.write_text(json.dumps(rec))
    (rerun,) = evaluate_request(host, _request(data, tmp_path))
    assert rerun.reason == "the record has no judge file hashes (written by an older negharness)"

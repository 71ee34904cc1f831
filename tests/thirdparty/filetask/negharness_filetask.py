"""A task that reads files from the data root, to exercise the host's missing-data checks."""
from negharness.api import MetricInfo, Task, TaskResult
from negharness.discovery.hookspecs import hookimpl


class CaptionFileTask(Task):
    name = "example_files"
    family = "example"
    modalities = frozenset({"text"})
    main_score = "n"
    metric_info = {"n": MetricInfo(True, ".0f")}
    data_help = "Get them from https://example.org/data (unpack into the data root)."

    def required_files(self):
        root = self.options.data_root / "example"
        return [root / "captions.txt", root / "videos.txt"]

    def evaluate(self, ctx):
        lines = (self.options.data_root / "example" / "captions.txt").read_text().splitlines()
        return TaskResult({"n": float(len(lines))}, {"captions": len(lines)})


@hookimpl
def negharness_register_tasks(registry):
    registry.add("example_files", "negharness_filetask:CaptionFileTask", "needs files", family="example")

"""The GPU check: prepared on a machine with the project's environment,
run in one call on a machine with a CUDA GPU that has PyTorch but neither
spaCy nor a network.

    python -m performance.gpu_check wheelhouse [--output .whl] [--python-version 3.12] [--platform TAG ...]
    python -m performance.gpu_check run --gpu-id 0 --wheelhouse .whl --output OUT    # on the GPU machine
    python -m performance.gpu_check run --gpu-id -1 --output metrics/gpu-check       # the same steps on the CPU

`wheelhouse` writes the wheels the GPU machine's image lacks, and the
English parser, to a folder (performance/wheelhouse.py), listed with their
sizes in its manifest.json. `run` installs them (`pip install --no-index
--no-deps --target`, over the image's torch) when given --wheelhouse, then
runs these steps, each a process of its own with a time limit, all within
--budget seconds (480 by default):

- environment: the versions, the device, the plugin's entry points;
- tests: the tests marked gpu (skipped without CUDA);
- train: `spacy train` of the UD configs' vanilla and SLA variants on the
  shipped UD EWT sample, a few steps with a random encoder (on a GPU:
  MiniLM's shape, `--gpu-id`, [training] gpu_allocator = "pytorch",
  mixed_precision = true; on the CPU: a tiny one, float32);
- benchmark: performance/encoder_cost.py for every wrapped family in one
  process, vanilla and SLA side by side (on a GPU: BERT-base's shape, float16
  autocast; on the CPU: tiny, float32);

and writes summary.json, summary.md, steps.log (every step's output) and
tests.xml under --output. It exits with 1 when a step failed or ran out of
time. DEVICE_COMMAND is the one line the GPU machine runs."""
import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BUDGET_S = 480.0
# Left for writing the summary after the last step.
SUMMARY_RESERVE_S = 10.0
# The one command the GPU machine runs, from the repository root, with the
# wheelhouse carried along (`.whl`, what `spacy project run gpu-check-wheelhouse` writes).
DEVICE_COMMAND = "PYTHONUNBUFFERED=1 python3 -m performance.gpu_check run --gpu-id 0 --wheelhouse .whl --output $OUT"
TEST_FILES = ("tests/layers/test_cuda.py", "performance/tests/test_encoder_cost.py")
UD_SAMPLE = ROOT / "assets" / "ud_ewt_sample"
VARIANT_CONFIGS = {"vanilla": "configs/ud_vanilla.cfg", "sla": "configs/ud_sla.cfg"}


@dataclass(frozen=True)
class Scale:
    """The sizes of a run: the training encoder, its steps, the dev
    documents it is scored on (0: all), the benchmark's encoder and batch,
    and its repetitions."""

    train_encoder: Dict[str, int]
    train_steps: int
    dev_limit: int
    benchmark: Dict[str, int]
    repeats: int


SCALES = {
    # MiniLM's shape for training; BERT-base's for the benchmark (its defaults)
    "cuda": Scale({"hidden_size": 384, "n_layers": 6, "n_heads": 12}, 20, 0,
                  {"layers": 12, "hidden": 768, "heads": 12, "batch_size": 32, "pieces": 128}, 10),
    "cpu": Scale({"hidden_size": 32, "n_layers": 2, "n_heads": 4}, 4, 20,
                 {"layers": 2, "hidden": 32, "heads": 4, "batch_size": 2, "pieces": 16}, 1),
}


@dataclass
class Step:
    name: str
    status: str = "not run"  # passed, failed, timed out, not run
    seconds: float = 0.0
    commands: List[str] = field(default_factory=list)
    details: Dict[str, Any] = field(default_factory=dict)
    note: str = ""


class Runner:
    """Runs the steps' processes within the budget, with the environment
    the check gives them, appending their output to steps.log."""

    def __init__(self, output: Path, budget_s: float, env: Dict[str, str]):
        self.output = output
        self.deadline = time.monotonic() + budget_s - SUMMARY_RESERVE_S
        self.env = env
        self.log = open(output / "steps.log", "w", encoding="utf8")

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def command(self, step: Step, arguments: Sequence[str], limit_s: float, cwd: Path = ROOT) -> Optional[subprocess.CompletedProcess]:
        """Run one process of `step` for at most limit_s (and never past the
        budget); its output goes to steps.log. None, and the step timed out
        (its process group killed), when it ran out of time."""
        limit = min(limit_s, self.left())
        step.commands.append(" ".join(arguments))
        self.log.write(f"\n===== {step.name}: {' '.join(arguments)} (limit {limit:.0f} s)\n")
        self.log.flush()
        if limit <= 1:
            step.status, step.note = "timed out", "no time left in the budget"
            return None
        process = subprocess.Popen(
            list(arguments), cwd=cwd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )
        try:
            out, _ = process.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, _ = process.communicate()
            self.log.write(out or "")
            self.log.write(f"\n===== {step.name}: killed after {limit:.0f} s\n")
            step.status, step.note = "timed out", f"killed after {limit:.0f} s"
            return None
        self.log.write(out or "")
        self.log.flush()
        return subprocess.CompletedProcess(process.args, process.returncode, out, "")

    def python(self, step: Step, arguments: Sequence[str], limit_s: float, cwd: Path = ROOT) -> Optional[subprocess.CompletedProcess]:
        return self.command(step, [sys.executable, *arguments], limit_s, cwd)


def timed(step: Step, body: Callable[[], None]) -> Step:
    """Run a step's body, recording its duration; a body that raises fails the step."""
    start = time.monotonic()
    try:
        body()
        if step.status == "not run":
            step.status = "passed"
    except StepFailed as failure:
        step.status, step.note = "failed", str(failure)
    step.seconds = round(time.monotonic() - start, 1)
    return step


class StepFailed(Exception):
    pass


def require(result: Optional[subprocess.CompletedProcess], what: str) -> subprocess.CompletedProcess:
    if result is None:
        raise StepFailed(f"{what}: out of time")
    if result.returncode != 0:
        tail = (result.stdout or "").strip().splitlines()[-3:]
        raise StepFailed(f"{what}: exit status {result.returncode}: {' | '.join(tail)}")
    return result


def last_json_line(text: str) -> Any:
    for line in reversed((text or "").strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise StepFailed("no JSON line in the output")


# --- the steps -------------------------------------------------------------------


def install(runner: Runner, wheelhouse: Path, target: Path) -> Step:
    step = Step("install")

    def body():
        wheels = sorted(str(path) for path in wheelhouse.glob("*.whl"))
        if not wheels:
            raise StepFailed(f"no wheels in {wheelhouse}: run `python -m performance.gpu_check wheelhouse` first")
        require(runner.python(step, ["-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--no-compile",
                                     "--no-cache-dir", "--upgrade", "--target", str(target), *wheels], 120), "pip install")
        step.details = {"wheels": len(wheels), "target": str(target)}

    return timed(step, body)


ENVIRONMENT_PROBE = """
import json, platform, sys
import torch, spacy, thinc, spacy_transformers, transformers, tokenizers, huggingface_hub
import spacy_sla
from importlib.metadata import entry_points, version
factories = {point.name for point in entry_points(group="spacy_factories")}
info = {
    "python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
    "cuda_available": torch.cuda.is_available(), "spacy": spacy.__version__, "thinc": thinc.__version__,
    "spacy_transformers": version("spacy-transformers"), "transformers": transformers.__version__,
    "tokenizers": tokenizers.__version__, "huggingface_hub": huggingface_hub.__version__,
    "spacy_location": spacy.__file__, "spacy_sla": spacy_sla.__version__, "spacy_sla_factories": sorted(name for name in factories if name.startswith("sla_")),
}
if torch.cuda.is_available():
    info["device"] = torch.cuda.get_device_name(0)
    info["capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
    info["memory_gib"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
try:
    import cupy
    info["cupy"] = cupy.__version__
except ImportError:
    info["cupy"] = None
print(json.dumps(info))
"""


def environment(runner: Runner, gpu_id: int) -> Step:
    step = Step("environment")

    def body():
        info = last_json_line(require(runner.python(step, ["-c", ENVIRONMENT_PROBE], 60), "the environment probe").stdout)
        step.details = info
        problems = []
        if not info["transformers"].startswith("4."):
            problems.append(f"transformers {info['transformers']} (spacy-transformers needs 4.x: the wheelhouse's must come first)")
        if "sla_transformer" not in info["spacy_sla_factories"]:
            problems.append("spaCy cannot see the plugin's factories (install its wheel)")
        if gpu_id >= 0 and not info["cuda_available"]:
            problems.append("no CUDA device")
        if gpu_id >= 0 and not info["cupy"]:
            problems.append("no CuPy: spaCy's --gpu-id needs it")
        if problems:
            raise StepFailed("; ".join(problems))

    return timed(step, body)


def gpu_tests(runner: Runner, limit_s: float) -> Step:
    step = Step("tests")

    def body():
        report = runner.output / "tests.xml"
        result = runner.python(step, ["-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
                                      *TEST_FILES], limit_s)
        if report.exists():
            step.details = junit_counts(report)
        require(result, "pytest")
        if step.details.get("tests", 0) == 0:
            raise StepFailed("no test ran")

    return timed(step, body)


def junit_counts(report: Path) -> Dict[str, Any]:
    """Totals of a pytest JUnit report, and the failed tests' names."""
    root = ElementTree.parse(report).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    counts = {key: sum(int(suite.get(key, 0)) for suite in suites) for key in ("tests", "failures", "errors", "skipped")}
    counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    counts["failed_tests"] = [
        f"{case.get('classname')}::{case.get('name')}"
        for suite in suites for case in suite.iter("testcase")
        if case.find("failure") is not None or case.find("error") is not None
    ]
    return counts


PREPARE = """
import json, sys
from pathlib import Path
sys.path.insert(0, "tests")
from replication.converters import convert
from tiny_models import save_tiny_model
sample, corpus, encoder, sizes = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), json.loads(sys.argv[4])
for split in ("train", "dev"):
    convert("conllu", sample / f"en_ewt-ud-{split}-sample.conllu", corpus / f"{split}.spacy")
save_tiny_model(encoder, "bert", max_length=128, **sizes)
"""


def train(runner: Runner, gpu_id: int, scale: Scale, parser: str, scratch: Path, limit_s: float) -> Step:
    """Both configs for scale.train_steps steps on the UD sample; on a GPU
    with the pytorch allocator and mixed precision."""
    step = Step("train")

    def body():
        step_started = time.monotonic()
        corpus, model = scratch / "corpus", scratch / "encoder"
        corpus.mkdir(parents=True, exist_ok=True)
        require(runner.python(step, ["-c", PREPARE, str(UD_SAMPLE), str(corpus), str(model), json.dumps(scale.train_encoder)], 60),
                "converting the UD sample and saving the encoder")
        mixed_precision = gpu_id >= 0
        step.details = {"encoder": {"random weights": True, **scale.train_encoder}, "steps": scale.train_steps,
                        "dev_documents": scale.dev_limit or "all",
                        "mixed_precision": mixed_precision, "gpu_allocator": "pytorch", "parser": parser}
        for index, (variant, config) in enumerate(VARIANT_CONFIGS.items()):
            log = scratch / f"{variant}.jsonl"
            arguments = [
                "-m", "spacy", "train", config, "--output", str(scratch / variant), "--gpu-id", str(gpu_id),
                "--paths.train", str(corpus / "train.spacy"), "--paths.dev", str(corpus / "dev.spacy"),
                "--paths.transformer", str(model), "--paths.parser", parser,
                "--system.gpu_allocator", "pytorch",
                "--components.transformer.model.mixed_precision", str(mixed_precision).lower(),
                "--corpora.dev.limit", str(scale.dev_limit),
                "--training.max_steps", str(scale.train_steps), "--training.eval_frequency", str(max(1, scale.train_steps // 2)),
                "--training.optimizer.learn_rate.warmup_steps", "2", "--training.logger.output_file", str(log),
            ]
            started = time.monotonic()
            # what is left of the step's limit, shared by the configs still to train
            result = runner.python(step, arguments, (limit_s - (started - step_started)) / (len(VARIANT_CONFIGS) - index))
            require(result, f"spacy train {variant}")
            step.details[variant] = {"seconds": round(time.monotonic() - started, 1), **training_outcome(log, result.stdout, gpu_id)}
            if not step.details[variant]["finite_losses"]:
                raise StepFailed(f"{variant}: a loss is not finite")

    return timed(step, body)


def training_outcome(log: Path, output: str, gpu_id: int) -> Dict[str, Any]:
    """The last logged step's losses and score, whether every logged loss is
    finite, and whether spaCy said it used the GPU."""
    records = [json.loads(line) for line in log.read_text(encoding="utf8").splitlines() if line.strip()] if log.exists() else []
    losses = [value for record in records for value in (record.get("losses") or {}).values()]
    last = records[-1] if records else {}
    return {
        "logged_steps": [record.get("step") for record in records],
        "last_losses": last.get("losses"), "last_score": last.get("score"),
        "finite_losses": bool(losses) and all(math.isfinite(value) for value in losses),
        "used_gpu": f"Using GPU: {gpu_id}" in (output or "") if gpu_id >= 0 else False,
    }


def benchmark(runner: Runner, gpu_id: int, scale: Scale, limit_s: float) -> Step:
    step = Step("benchmark")

    def body():
        results = runner.output / "benchmark.json"
        arguments = ["-m", "performance.gpu_check", "families", "--gpu-id", str(gpu_id), "--output", str(results),
                     "--seconds", str(max(1.0, min(limit_s, runner.left()) - 15))]
        result = runner.python(step, arguments, limit_s)
        if results.exists():
            step.details = json.loads(results.read_text(encoding="utf8"))
            results.unlink()  # in summary.json
        require(result, "the encoder benchmark")
        failed = [family for family, report in step.details.get("families", {}).items() if "error" in report]
        if failed:
            raise StepFailed(f"failed on {', '.join(failed)}")

    return timed(step, body)


def benchmark_families(gpu_id: int, output: Path, seconds: float) -> Dict[str, Any]:
    """encoder_cost.run for every family, one after the other in this
    process, written to `output` after each; a family is left out when the
    time left is below 1.5 times the longest one so far."""
    from performance.encoder_cost import MODEL_TYPES
    from performance.encoder_cost import run as run_benchmark

    device = "cpu" if gpu_id < 0 else f"cuda:{gpu_id}"
    scale = SCALES["cpu" if gpu_id < 0 else "cuda"]
    results: Dict[str, Any] = {"settings": {**scale.benchmark, "repeats": scale.repeats, "device": device,
                                            "mixed_precision": gpu_id >= 0}, "families": {}}
    deadline = time.monotonic() + seconds
    longest = 0.0
    for family in MODEL_TYPES:
        if deadline - time.monotonic() < 1.5 * longest:
            results["families"][family] = {"not_run": "time budget"}
            continue
        started = time.monotonic()
        try:
            report = run_benchmark(**scale.benchmark, repeats=scale.repeats, device_name=device, mixed_precision=gpu_id >= 0,
                                   model_type=family)
            results["families"][family] = {"ratios": report["ratios"], "variants": report["variants"],
                                           "device": report["device"], "not_applicable": report.get("not_applicable", {})}
        except Exception as error:  # noqa: BLE001 - recorded per family, the others still run
            results["families"][family] = {"error": f"{type(error).__name__}: {error}"}
        longest = max(longest, time.monotonic() - started)
        output.write_text(json.dumps(results, indent=2) + "\n", encoding="utf8")
    output.write_text(json.dumps(results, indent=2) + "\n", encoding="utf8")
    return results


# --- the run ----------------------------------------------------------------------


def step_environment(site: Optional[Path]) -> Dict[str, str]:
    # transformers without its TensorFlow and JAX integrations, which an image may also hold
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false",
               USE_TORCH="1", USE_TF="0", USE_FLAX="0", USE_JAX="0")
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH", "")]))
    return env


def parser_location(wheelhouse: Optional[Path]) -> str:
    """The wheelhouse's parser pipeline folder, else the package's name."""
    if wheelhouse is not None:
        manifest = wheelhouse / "manifest.json"
        if manifest.exists():
            return str((wheelhouse / json.loads(manifest.read_text(encoding="utf8"))["parser"]["folder"]).resolve())
    from performance.wheelhouse import PARSER_PACKAGE

    return PARSER_PACKAGE


# The steps in order, and the longest each may take (the benchmark: what is left).
STEP_LIMITS_S = {"environment": 60.0, "tests": 150.0, "train": 150.0, "benchmark": 240.0}


def run_check(
    output: Path, gpu_id: int, wheelhouse: Optional[Path] = None, budget_s: float = DEFAULT_BUDGET_S,
    steps: Sequence[str] = tuple(STEP_LIMITS_S), command: str = "",
) -> Dict[str, Any]:
    output.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    scale = SCALES["cpu" if gpu_id < 0 else "cuda"]
    scratch = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    site = scratch / "site" if wheelhouse is not None else None
    runner = Runner(output, budget_s, step_environment(site))
    done: List[Step] = []
    try:
        if wheelhouse is not None:
            done.append(install(runner, wheelhouse, site))
        if not done or done[-1].status == "passed":
            for name in steps:
                limit = STEP_LIMITS_S[name]
                if name == "environment":
                    done.append(environment(runner, gpu_id))
                elif name == "tests":
                    done.append(gpu_tests(runner, limit))
                elif name == "train":
                    done.append(train(runner, gpu_id, scale, parser_location(wheelhouse), scratch / "train", limit))
                elif name == "benchmark":
                    done.append(benchmark(runner, gpu_id, scale, limit))
    finally:
        runner.log.close()
        shutil.rmtree(scratch, ignore_errors=True)
    summary = {
        "command": command, "gpu_id": gpu_id, "budget_s": budget_s,
        "seconds": round(time.monotonic() - started, 1), "date": time.strftime("%Y-%m-%d"),
        "passed": all(step.status == "passed" for step in done) and len(done) >= len(steps),
        "steps": [asdict(step) for step in done],
    }
    (output / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf8")
    (output / "summary.md").write_text(format_summary(summary), encoding="utf8")
    return summary


def format_summary(summary: Dict[str, Any]) -> str:
    steps = {step["name"]: step for step in summary["steps"]}
    environment_info = steps.get("environment", {}).get("details", {})
    device = environment_info.get("device") or ("CPU" if summary["gpu_id"] < 0 else "?")
    lines = [
        f"# GPU check: {'passed' if summary['passed'] else 'NOT passed'}",
        "",
        f"{summary['date']}, {device}; torch {environment_info.get('torch', '?')} (CUDA {environment_info.get('cuda')}), "
        f"spaCy {environment_info.get('spacy', '?')}, transformers {environment_info.get('transformers', '?')}, "
        f"CuPy {environment_info.get('cupy')}; {summary['seconds']} s of a {summary['budget_s']:.0f} s budget.",
        f"Command: `{summary['command']}`",
        "",
        *(["On the CPU the check runs tiny models to test its own plumbing: its times mean nothing.", ""]
          if summary["gpu_id"] < 0 else []),
        "| step | status | seconds | note |",
        "|---|---|---|---|",
    ]
    lines += [f"| {step['name']} | {step['status']} | {step['seconds']} | {step['note']} |" for step in summary["steps"]]
    tests = steps.get("tests", {}).get("details", {})
    if tests:
        lines += ["", f"Tests marked gpu: {tests['passed']} passed, {tests['failures'] + tests['errors']} failed, "
                      f"{tests['skipped']} skipped" + (f" ({', '.join(tests['failed_tests'])})" if tests["failed_tests"] else "")]
    training = steps.get("train", {}).get("details", {})
    if training:
        lines += ["", f"Training ({training['steps']} steps, random encoder {training['encoder']}, dev documents "
                      f"{training['dev_documents']}, mixed precision "
                      f"{training['mixed_precision']}, allocator {training['gpu_allocator']}):", "",
                  "| config | seconds | used GPU | finite losses | last losses | last score |", "|---|---|---|---|---|---|"]
        for variant in VARIANT_CONFIGS:
            if variant in training:
                outcome = training[variant]
                lines.append(f"| {variant} | {outcome['seconds']} | {outcome['used_gpu']} | {outcome['finite_losses']} | "
                             f"{outcome['last_losses']} | {outcome['last_score']} |")
    benchmark_details = steps.get("benchmark", {}).get("details", {})
    if benchmark_details.get("families"):
        settings = benchmark_details["settings"]
        lines += ["", f"Encoder benchmark, SLA / vanilla (above 1: SLA costs more), one process, random weights: "
                      f"{settings['layers']} layers, hidden {settings['hidden']}, batch {settings['batch_size']} x "
                      f"{settings['pieces']} pieces, {settings['repeats']} repetitions, mixed precision "
                      f"{settings['mixed_precision']}, {settings['device']}:", "",
                  "| family | prediction | training step | peak memory | vanilla predict ms | vanilla train ms |",
                  "|---|---|---|---|---|---|"]
        for family, report in benchmark_details["families"].items():
            if "ratios" not in report:
                lines.append(f"| {family} | {report.get('error') or report.get('not_run')} | | | | |")
                continue
            ratio = report["ratios"]["sla"]
            vanilla = report["variants"]["vanilla"]
            memory = "-" if ratio["peak_memory"] is None else f"{ratio['peak_memory']:.3f}"
            lines.append(f"| {family} | {ratio['predict']:.3f} | {ratio['train']:.3f} | {memory} | "
                         f"{1000 * vanilla['predict_seconds']:.1f} | {1000 * vanilla['train_seconds']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    wheels = commands.add_parser("wheelhouse", help="write the wheels the GPU machine lacks to a folder")
    wheels.add_argument("--output", type=Path, default=ROOT / ".whl")
    wheels.add_argument("--python-version", default="3.12")
    wheels.add_argument("--platform", action="append", default=[], help="a wheel platform tag (repeatable); "
                        "default: manylinux up to glibc 2.39 on x86_64")
    wheels.add_argument("--limit-mib", type=float, default=64.0, help="the most the wheels and the working tree may take")
    wheels.add_argument("--no-strip", action="store_true", help="keep the extensions' debugging sections")
    check = commands.add_parser("run", help="run the check's steps, time-boxed; the summary goes to --output")
    check.add_argument("--output", type=Path, required=True)
    check.add_argument("--gpu-id", type=int, default=0, help="-1: the same steps on the CPU, tiny")
    check.add_argument("--wheelhouse", type=Path, default=None, help="install these wheels first (no network)")
    check.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, help="seconds for all steps")
    check.add_argument("--steps", default=",".join(STEP_LIMITS_S), help="a comma-separated subset of the steps")
    families = commands.add_parser("families", help="(a step of run) the encoder benchmark of every family")
    families.add_argument("--gpu-id", type=int, default=0)
    families.add_argument("--output", type=Path, required=True)
    families.add_argument("--seconds", type=float, default=DEFAULT_BUDGET_S)
    args = parser.parse_args(argv)
    if args.command == "wheelhouse":
        from performance.wheelhouse import OverLimit, build, format_manifest

        try:
            manifest = build(args.output, args.python_version, args.platform, args.limit_mib, strip=not args.no_strip)
        except OverLimit as error:
            print(error, file=sys.stderr)
            return 1
        print(format_manifest(manifest))
        return 0
    if args.command == "families":
        benchmark_families(args.gpu_id, args.output, args.seconds)
        return 0
    steps = [name.strip() for name in args.steps.split(",") if name.strip()]
    unknown = sorted(set(steps) - set(STEP_LIMITS_S))
    if unknown:
        parser.error(f"unknown steps {', '.join(unknown)}; the steps: {', '.join(STEP_LIMITS_S)}")
    command = " ".join(["python -m performance.gpu_check", *(argv if argv is not None else sys.argv[1:])])
    summary = run_check(args.output, args.gpu_id, args.wheelhouse, args.budget, steps, command)
    print(format_summary(summary))
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())

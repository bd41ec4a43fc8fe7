"""Starting or joining Ray for the commands that can run on it (the
experiment grid, batch annotation). Ray is an optional extra
(`pip install spacy-sla[ray]`) and is imported here only when such a command
runs, never by `import spacy_sla`.

A Ray instance started here (`--ray` without an address, or
`--ray-address local`) is for this machine alone: its node address is the
loopback address 127.0.0.1, so its GCS, raylet, object manager, worker and
runtime-environment servers listen on 127.0.0.1 only, and it starts no
dashboard. Ray itself enables token authentication for such an instance
(Ray 2.5x and later; RAY_AUTH_MODE overrides it). Joining a cluster
(`--ray-address auto|HOST:PORT|ray://...`, or RAY_ADDRESS) changes nothing of
the cluster's own network settings: run clusters on trusted networks only.
"""
import contextlib
import importlib
import ipaddress
import os
import re
import time
import warnings
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence

# A cluster's workers do not inherit the driver's environment; these settings
# decide how the workers' spaCy and Hugging Face processes behave (offline
# hub, cache locations), so they travel with the job. CUDA_VISIBLE_DEVICES
# is deliberately not among them: Ray sets it per task.
FORWARDED_ENV_PREFIXES = ("HF_", "TRANSFORMERS_", "TOKENIZERS_")
# Names of further variables to forward, comma-separated, credentials
# included: e.g. SPACY_SLA_RAY_FORWARD_ENV=HF_TOKEN for a gated model.
FORWARD_ENV_VARIABLE = "SPACY_SLA_RAY_FORWARD_ENV"
# A word of a variable's name (between underscores) that holds one of these
# marks a credential (HF_TOKEN, HUGGING_FACE_HUB_TOKEN, HF_API_KEY, ...). A
# word that starts with TOKENIZER names the tokenizers library's settings
# (TOKENIZERS_PARALLELISM), not a token.
_CREDENTIAL_MARK = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|KEY|CREDENTIAL")
_NOT_A_CREDENTIAL = re.compile(r"TOKENIZER")
LOOPBACK = "127.0.0.1"
# How long a cancelled task may take to stop by itself (a KeyboardInterrupt
# in its worker) before its worker is ended.
CANCEL_GRACE_SECONDS = 10.0
LOCAL = "local"  # --ray-address local: a Ray instance on this machine, as --ray alone


class RayNotInstalled(ImportError):
    pass


def import_ray() -> Any:
    try:
        import ray
    except ImportError as error:
        raise RayNotInstalled(
            "Ray is not installed: `pip install \"spacy-sla[ray]\"` (or `pip install \"ray[data]\"`) "
            "to run on a Ray instance or cluster."
        ) from error
    return ray


def is_credential(name: str) -> bool:
    """Whether an environment variable's name says it holds a credential."""
    return any(_CREDENTIAL_MARK.search(word) and not _NOT_A_CREDENTIAL.match(word)
               for word in name.upper().split("_"))


def forwarded_env(environ: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The driver's variables that go to every Ray worker: those whose names
    start with HF_, TRANSFORMERS_ or TOKENIZERS_, except credentials (a name
    with a word holding TOKEN, SECRET, PASSWORD, PASSWD, KEY or CREDENTIAL,
    such as HF_TOKEN or HF_HUB_TOKEN), which would otherwise reach every
    node and each worker's runtime environment record; and, credentials
    included and whatever their prefix, the variables named in
    SPACY_SLA_RAY_FORWARD_ENV (comma-separated, e.g. "HF_TOKEN,WANDB_API_KEY")."""
    environ = os.environ if environ is None else environ
    asked = {name.strip() for name in environ.get(FORWARD_ENV_VARIABLE, "").split(",") if name.strip()}
    return {key: value for key, value in environ.items()
            if key in asked or (key.startswith(FORWARDED_ENV_PREFIXES) and not is_credential(key))}


def on_ray(flag: bool, address: Optional[str]) -> bool:
    """Whether a command runs on Ray: --ray, or a --ray-address other than
    "" (the project workflows pass their `ray` variable, "" by default)."""
    return flag or bool(address)


def cluster_address(address: Optional[str], environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The cluster a session joins, or None for a Ray instance started here:
    None for "local"; without an address (None or ""), RAY_ADDRESS, which
    ray.init follows too; else `address`."""
    environ = os.environ if environ is None else environ
    if address == LOCAL:
        return None
    if not address:
        return environ.get("RAY_ADDRESS") or None
    return address


def init_options(address: Optional[str], environ: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """The keyword arguments of ray.init for a session at `address` (as
    ray_session takes it). A Ray instance started here gets the loopback
    node address and no dashboard; joining a cluster gets no network
    setting, the cluster has its own."""
    environ = os.environ if environ is None else environ
    joined = cluster_address(address, environ)
    options: Dict[str, Any] = {
        # "local" starts an instance here even where RAY_ADDRESS names a cluster.
        "address": LOCAL if joined is None else joined,
        # The workers' own output would interleave with the progress lines;
        # every run and shard keeps its own log or report instead.
        "log_to_driver": False,
    }
    env_vars = forwarded_env(environ)
    if env_vars:
        options["runtime_env"] = {"env_vars": env_vars}
    if joined is None:
        options.update(include_dashboard=False, dashboard_host=LOOPBACK, _node_ip_address=LOOPBACK)
    return options


@contextlib.contextmanager
def _loopback_kept() -> Iterator[None]:
    """ray.init replaces a loopback node address with the machine's network
    address (ray._private.services.resolve_ip_for_localhost), except where
    Ray runs single-machine instances only (its ENABLE_RAY_CLUSTER switch,
    off on Windows and macOS): there the node keeps 127.0.0.1 and its
    servers listen on it alone. The switch is off while ray.init starts the
    instance; a Ray without it starts as it would (ray_session warns)."""
    try:
        constants = importlib.import_module("ray._private.ray_constants")
    except ImportError:
        constants = None
    if constants is None or not hasattr(constants, "ENABLE_RAY_CLUSTER"):
        yield
        return
    enabled = getattr(constants, "ENABLE_RAY_CLUSTER")
    setattr(constants, "ENABLE_RAY_CLUSTER", False)
    try:
        yield
    finally:
        setattr(constants, "ENABLE_RAY_CLUSTER", enabled)


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address == "localhost"


@contextlib.contextmanager
def ray_session(address: Optional[str] = None) -> Iterator[Any]:
    """Ray, connected for the duration of the block: the running session if
    the caller (a notebook, a test) already started one, which is left
    running; otherwise the cluster at `address` ("auto", "HOST:PORT",
    "ray://HOST:10001") or, without one (or with "local"), a Ray instance on
    this machine bound to 127.0.0.1 (init_options), shut down at the end."""
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    options = init_options(address)
    if options["address"] == LOCAL:
        with _loopback_kept():
            ray.init(**options)
        node_address = ray.util.get_node_ip_address()
        if not _is_loopback(node_address):
            warnings.warn(f"The local Ray instance listens on {node_address}, not on {LOOPBACK} alone: this Ray "
                          "version replaces the loopback address. Use it on a trusted network only.")
    else:
        ray.init(**options)
    try:
        yield ray
    finally:
        ray.shutdown()


def run_grid(
    runs: Sequence[Any],
    *,
    address: Optional[str] = None,
    cpus_per_run: float = 1.0,
    gpus_per_run: float = 0.0,
    max_retries: int = 1,
    execute: Callable[[Any, str], Any],
    lost: Callable[[Any, str], Any],
    describe: Callable[[int, int, Any], str],
    report: Callable[[str], None] = print,
    stop: Optional[Callable[[List[Any], Any], Optional[str]]] = None,
    not_run: Optional[Callable[[Any, str], Any]] = None,
) -> List[Any]:
    """Run every run of the grid as a Ray task with the given resources
    (Ray starts as many at once as the cluster's CPUs and GPUs allow), report
    a progress line as each finishes, and return the outcomes in the order
    of `runs`. A run whose worker died (out of memory, a lost node) is retried
    max_retries times by Ray, then reported as failed like any other.
    execute(run, working_dir) is the task's body (a task grid's or an A/B's
    run: anything with a `name`: spacy_sla.tools.ab.runs.AbRun, replication.grid.GridRun), lost(run, error) the outcome of a task that
    died, describe(done, total, outcome) its progress line. stop(finished,
    latest), with the outcomes finished so far in the order of `runs` and
    the latest of them, may give a reason to cancel the tasks not finished
    (a failure that they would repeat): those that had not started never
    run, those running get a KeyboardInterrupt (their workers are ended if
    they still run CANCEL_GRACE_SECONDS later), and each becomes
    not_run(run, reason)."""
    working_dir = os.getcwd()
    outcomes: Dict[int, Any] = {}
    with ray_session(address) as ray:
        remote_run = ray.remote(execute)
        pending = {
            remote_run.options(
                num_cpus=cpus_per_run, num_gpus=gpus_per_run, max_retries=max_retries, name=f"sla {run.name}"
            ).remote(run, working_dir): position
            for position, run in enumerate(runs)
        }
        stopped: Optional[str] = None
        force_at: Optional[float] = None  # when the tasks a stop cancelled are ended by force
        while pending:
            # a polite cancel that reaches a worker while it is still taking
            # the task up is lost (a known Ray race): after a grace period
            # the tasks still pending are ended by force
            waited = None if force_at is None else max(0.0, force_at - time.monotonic())
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=waited)
            if not ready:
                for task in pending:
                    ray.cancel(task, force=True)
                force_at = None
                continue
            (finished,) = ready
            position = pending.pop(finished)
            try:
                outcome = ray.get(finished)
            except ray.exceptions.TaskCancelledError:
                outcome = not_run(runs[position], stopped or "cancelled") if not_run else lost(runs[position], "cancelled")
            except Exception as error:  # the task itself died
                outcome = lost(runs[position], str(error).splitlines()[0])
            outcomes[position] = outcome
            report(describe(len(outcomes), len(runs), outcome))
            if stop is not None and stopped is None and pending:
                stopped = stop([outcomes[done] for done in sorted(outcomes)], outcome)
                if stopped is not None:
                    for task in pending:
                        ray.cancel(task)
                    force_at = time.monotonic() + CANCEL_GRACE_SECONDS
    return [outcomes[position] for position in range(len(runs))]

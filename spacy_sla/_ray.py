"""Starting or joining Ray for the commands that can run on it (the
experiment grid, batch annotation). Ray is an optional extra
(`pip install spacy-sla[ray]`) and is imported here only when such a command
runs, never by `import spacy_sla`."""
import contextlib
import os
from typing import Any, Dict, Iterator, Optional

# A cluster's workers do not inherit the driver's environment; these settings
# decide how the workers' spaCy and Hugging Face processes behave (offline
# hub, cache locations), so they travel with the job. CUDA_VISIBLE_DEVICES
# is deliberately not among them: Ray sets it per task.
FORWARDED_ENV_PREFIXES = ("HF_", "TRANSFORMERS_", "TOKENIZERS_")


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


def forwarded_env() -> Dict[str, str]:
    return {key: value for key, value in os.environ.items() if key.startswith(FORWARDED_ENV_PREFIXES)}


LOCAL = "local"  # --ray-address local: a Ray instance on this machine, as --ray alone


def on_ray(flag: bool, address: Optional[str]) -> bool:
    """Whether a command runs on Ray: --ray, or a --ray-address other than
    "" (the project workflows pass their `ray` variable, "" by default)."""
    return flag or bool(address)


@contextlib.contextmanager
def ray_session(address: Optional[str] = None) -> Iterator[Any]:
    """Ray, connected for the duration of the block: the running session if
    the caller (a notebook, a test) already started one, which is left
    running; otherwise the cluster at `address` ("auto", "HOST:PORT",
    "ray://HOST:10001") or, without one (or with "local"), a Ray instance on
    this machine, shut down at the end."""
    ray = import_ray()
    if address in ("", LOCAL):
        address = None
    if ray.is_initialized():
        yield ray
        return
    options: Dict[str, Any] = {
        # The workers' own output would interleave with the progress lines;
        # every run and shard keeps its own log or report instead.
        "log_to_driver": False,
    }
    env_vars = forwarded_env()
    if env_vars:
        options["runtime_env"] = {"env_vars": env_vars}
    if address is None:
        options["include_dashboard"] = False
    ray.init(address=address, **options)
    try:
        yield ray
    finally:
        ray.shutdown()

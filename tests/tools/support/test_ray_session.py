"""Ray sessions: what the workers get of the driver's environment
(credentials only when asked for), and the ray.init options of a local
instance (bound to the loopback address) and of a joined cluster (no
network setting)."""
import pytest

from spacy_sla.tools.support.ray_session import (
    FORWARD_ENV_VARIABLE,
    LOOPBACK,
    forwarded_env,
    init_options,
    is_credential,
    ray_session,
)

ENVIRONMENT = {
    "HF_HUB_OFFLINE": "1",
    "HF_HOME": "/cache/hf",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "HF_TOKEN": "hf_secret",
    "HF_HUB_TOKEN": "hf_other",
    "HF_API_KEY": "key",
    "TRANSFORMERS_SECRET_VALUE": "x",
    "HUGGING_FACE_HUB_TOKEN": "hf_old",
    "WANDB_API_KEY": "wandb",
    "PATH": "/usr/bin",
}
SETTINGS = {"HF_HUB_OFFLINE": "1", "HF_HOME": "/cache/hf", "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false"}


def test_credentials_are_not_forwarded_by_default():
    assert forwarded_env(ENVIRONMENT) == SETTINGS


def test_credentials_named_in_the_forward_variable_are_forwarded():
    environment = {**ENVIRONMENT, FORWARD_ENV_VARIABLE: "HF_TOKEN, WANDB_API_KEY,,NOT_SET"}
    assert forwarded_env(environment) == {**SETTINGS, "HF_TOKEN": "hf_secret", "WANDB_API_KEY": "wandb"}


@pytest.mark.parametrize("name,credential", [
    ("HF_TOKEN", True), ("HUGGING_FACE_HUB_TOKEN", True), ("HF_HUB_TOKEN", True), ("HF_API_KEY", True),
    ("MY_PASSWORD", True), ("AWS_SECRET_ACCESS_KEY", True), ("HF_ACCESSTOKEN", True),
    ("TOKENIZERS_PARALLELISM", False), ("HF_HUB_OFFLINE", False), ("HF_HOME", False),
])
def test_credential_names(name, credential):
    assert is_credential(name) is credential


@pytest.mark.parametrize("address", [None, "", "local"])
def test_a_local_instance_is_bound_to_the_loopback_address(address):
    options = init_options(address, {"HF_HUB_OFFLINE": "1", "HF_TOKEN": "hf_secret"})
    assert options == {"address": "local", "log_to_driver": False, "include_dashboard": False,
                       "dashboard_host": LOOPBACK, "_node_ip_address": LOOPBACK,
                       "runtime_env": {"env_vars": {"HF_HUB_OFFLINE": "1"}}}


def test_local_starts_here_even_where_ray_address_names_a_cluster():
    assert init_options("local", {"RAY_ADDRESS": "10.0.0.1:6379"})["address"] == "local"


@pytest.mark.parametrize("address,environment,joined", [
    ("auto", {}, "auto"), ("10.0.0.1:6379", {}, "10.0.0.1:6379"), ("ray://head:10001", {}, "ray://head:10001"),
    (None, {"RAY_ADDRESS": "10.0.0.1:6379"}, "10.0.0.1:6379"),
])
def test_joining_a_cluster_sets_no_binding(address, environment, joined):
    assert init_options(address, environment) == {"address": joined, "log_to_driver": False}


def test_a_local_instance_runs_on_the_loopback_address():
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("a Ray session is running already")
    with ray_session() as session:
        node_address = session.util.get_node_ip_address()
        gcs_host = session.get_runtime_context().gcs_address.rsplit(":", 1)[0]
        remote_address = session.get(session.remote(lambda: __import__("ray").util.get_node_ip_address()).remote())
    assert not ray.is_initialized()
    assert (node_address, gcs_host, remote_address) == (LOOPBACK, LOOPBACK, LOOPBACK)



class GridRun:
    """A run of a grid: anything with a name."""

    def __init__(self, position: int):
        self.position, self.name = position, f"run{position}"


def sleep_or_fail(run: GridRun, working_dir: str) -> dict:
    """A grid's task: the first run fails at once, the others take long."""
    import time

    if run.position > 0:
        time.sleep(120)
    return {"position": run.position, "status": "failed" if run.position == 0 else "done"}


@pytest.mark.slow
def test_a_stop_reason_cancels_the_tasks_not_finished(ray_instance):
    import sys

    from spacy_sla.tools.support.ray_session import run_grid

    ray_instance.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import tests/
    asked = []

    def stop(finished, latest):
        asked.append([outcome["position"] for outcome in finished])
        return "it would repeat" if latest["status"] == "failed" else None

    outcomes = run_grid([GridRun(position) for position in range(4)], execute=sleep_or_fail,
                        lost=lambda run, error: {"position": run.position, "status": "lost"},
                        describe=lambda done, total, outcome: outcome["status"], report=lambda line: None, stop=stop,
                        not_run=lambda run, reason: {"position": run.position, "status": f"not run: {reason}"})
    # the second run was running (2 CPUs), the others waiting: all stopped, none waited out its 120 s
    assert [outcome["status"] for outcome in outcomes] == ["failed"] + ["not run: it would repeat"] * 3
    assert asked == [[0]]  # asked once, after the first outcome; not again while the others are cancelled


def fail_or_ignore_the_cancel(run: GridRun, working_dir: str) -> dict:
    """A grid's task: the first run fails after the others have started, the
    others swallow the KeyboardInterrupt a polite cancel sends (as a task does
    when the cancel reaches its worker before the task is under way)."""
    import time

    if run.position == 0:
        time.sleep(5)
        return {"position": 0, "status": "failed"}
    for _ in range(2):
        try:
            time.sleep(120)
        except KeyboardInterrupt:
            pass
    return {"position": run.position, "status": "done"}


@pytest.mark.slow
def test_a_cancelled_task_that_goes_on_is_ended_after_the_grace_period(ray_instance, monkeypatch):
    import sys
    import time

    from spacy_sla.tools.support import ray_session as session_module

    ray_instance.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    monkeypatch.setattr(session_module, "CANCEL_GRACE_SECONDS", 3.0)
    started = time.monotonic()
    outcomes = session_module.run_grid(
        [GridRun(position) for position in range(2)], execute=fail_or_ignore_the_cancel,
        lost=lambda run, error: {"position": run.position, "status": "lost"},
        describe=lambda done, total, outcome: outcome["status"], report=lambda line: None,
        stop=lambda finished, latest: "it would repeat" if latest["status"] == "failed" else None,
        not_run=lambda run, reason: {"position": run.position, "status": f"not run: {reason}"})
    assert [outcome["status"] for outcome in outcomes] == ["failed", "not run: it would repeat"]
    assert time.monotonic() - started < 60  # not the 240 s the task would take

"""Ray sessions: what the workers get of the driver's environment
(credentials only when asked for), and the ray.init options of a local
instance (bound to the loopback address) and of a joined cluster (no
network setting)."""
import pytest

from spacy_sla.ray_session import (
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

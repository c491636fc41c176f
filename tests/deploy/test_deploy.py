"""deploy/ files are valid and every rfstream command they run exists with those flags.

Images cannot be pulled or built here, so this is what CI can check: the YAML parses, the
compose file has a scheduler, workers and a job, and each `rfstream ...` invocation in
deploy/ is accepted by the real CLI parser (argparse exits with code 2 on an unknown
subcommand or flag).
"""
import ast
import re
import shlex

import pytest
import yaml
from helpers import ROOT

from rfstream.cli import build_parser

DEPLOY = ROOT / "deploy"


def _parses(argv):
    """argv after 'rfstream' is accepted by the CLI parser."""
    build_parser().parse_args([str(a) for a in argv])


def _rfstream_argv(words):
    words = list(words)
    return words[words.index("rfstream") + 1 :]


def _yaml_docs(name):
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d is not None]


@pytest.mark.parametrize("name", ["docker-compose.yml", "helm-values.yaml", "k8s-daskjob.yaml", "tls.yaml"])
def test_yaml_parses(name):
    assert _yaml_docs(name), f"{name} is empty"


def test_compose_has_scheduler_workers_and_an_rfstream_job():
    (doc,) = _yaml_docs("docker-compose.yml")
    services = doc["services"]
    assert {"scheduler", "worker", "job"} <= set(services)
    assert services["scheduler"]["command"][:2] == ["dask", "scheduler"]
    assert services["worker"]["command"][:2] == ["dask", "worker"]
    job = services["job"]["command"]
    argv = _rfstream_argv(job)
    _parses(argv)
    # the job reaches the compose scheduler, and the ports are published on loopback only
    assert argv[argv.index("--scheduler") + 1] == "tcp://scheduler:8786"
    assert all(p.startswith("127.0.0.1:") for p in services["scheduler"]["ports"])


def test_k8s_daskjob_runs_a_valid_rfstream_command():
    (doc,) = _yaml_docs("k8s-daskjob.yaml")
    assert doc["kind"] == "DaskJob" and doc["apiVersion"].startswith("kubernetes.dask.org/")
    (container,) = doc["spec"]["job"]["spec"]["containers"]
    script = " ".join(container["args"])
    words = [w for w in shlex.split(script) if not re.match(r"^[A-Z_]+=", w)]
    _parses(_rfstream_argv(words))
    assert "RFSTREAM_SCHEDULER=" in script  # the operator's address reaches rfstream


def test_helm_values_use_the_rfstream_image():
    (doc,) = _yaml_docs("helm-values.yaml")
    assert doc["scheduler"]["image"]["repository"] == "rfstream"
    assert doc["worker"]["image"]["repository"] == "rfstream"


def test_slurm_example_calls_a_valid_command():
    tree = ast.parse((DEPLOY / "slurm_job.py").read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "main"]
    assert calls, "slurm_job.py does not call rfstream.cli.main"
    argv = ["PLACEHOLDER" if not isinstance(e, ast.Constant) else e.value for e in calls[0].args[0].elts]
    _parses(argv)


def test_tls_config_requires_encryption():
    (doc,) = _yaml_docs("tls.yaml")
    comm = doc["distributed"]["comm"]
    assert comm["require-encryption"] is True
    assert {"ca-file", "scheduler", "worker", "client"} <= set(comm["tls"])


def test_commands_in_deploy_readme_exist():
    text = (DEPLOY / "README.md").read_text()
    blocks = re.findall(r"```(?:bash|sh)?\n(.*?)```", text, flags=re.DOTALL)
    lines = [ln.strip() for block in blocks for ln in block.splitlines()]
    commands = []
    for i, line in enumerate(lines):
        if line.startswith("rfstream "):
            while line.endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line[:-1] + " " + lines[i]
            commands.append(line)
    assert commands, "deploy/README.md shows no rfstream command"
    for command in commands:
        _parses(shlex.split(command)[1:])


def test_compose_keeps_the_data_on_the_object_store():
    (doc,) = _yaml_docs("docker-compose.yml")
    services = doc["services"]
    fit, convert = _rfstream_argv(services["job"]["command"]), _rfstream_argv(services["convert"]["command"])
    _parses(convert)
    assert fit[1].startswith("s3://") and fit[fit.index("--out") + 1].startswith("s3://")
    assert convert[1].startswith("s3://") and convert[2] == fit[1]
    for name in ("worker", "job", "convert"):  # no shared disk, the store's endpoint for all
        assert "volumes" not in services[name]
        assert services[name]["environment"]["AWS_ENDPOINT_URL"] == "http://minio:9000"


def test_k8s_job_reads_from_the_object_store():
    (doc,) = _yaml_docs("k8s-daskjob.yaml")
    (job,) = doc["spec"]["job"]["spec"]["containers"]
    words = [w for w in shlex.split(" ".join(job["args"])) if not re.match(r"^[A-Z_]+=", w)]
    argv = _rfstream_argv(words)
    assert argv[1].startswith("s3://") and argv[argv.index("--out") + 1].startswith("s3://")
    (worker,) = doc["spec"]["cluster"]["spec"]["worker"]["spec"]["containers"]
    for container in (job, worker):
        assert container["envFrom"] == [{"secretRef": {"name": "rfstream-s3"}}]
        assert "volumeMounts" not in container


def test_slurm_requeue_script_resumes_on_walltime():
    """The sbatch script asks for SIGTERM before the walltime, passes it on to rfstream,
    requeues on rfstream's 143, and its rfstream command parses (shell variables as words)."""
    text = (DEPLOY / "slurm_requeue.sbatch").read_text()
    assert re.search(r"^#SBATCH --signal=B:TERM@\d+$", text, flags=re.MULTILINE)
    assert "#SBATCH --requeue" in text and "scontrol requeue" in text and "-eq 143" in text
    assert "trap 'kill -TERM $pid' TERM" in text
    command = re.search(r"^rfstream fit .*?&$", text, flags=re.MULTILINE | re.DOTALL).group(0)
    words = shlex.split(command.replace("\\\n", " ").rstrip("&"))
    _parses(["PLACEHOLDER" if "$" in w else w for w in words[1:]])
    assert "--checkpoint" in words


def test_k8s_job_pod_restarts_with_the_same_command():
    (doc,) = _yaml_docs("k8s-daskjob.yaml")
    assert doc["spec"]["job"]["spec"]["restartPolicy"] == "OnFailure"

"""Checks the files of deploy/ against the broker's settings (issue 34).

Parses deploy/compose.yaml and deploy/kubernetes/queen.yaml as YAML and
checks their ports, probes, volumes, grace periods and mesh peers against the
broker's variables and defaults; runs `queen-server check-config` with every
broker's environment from both; checks deploy/Dockerfile's runtime stage,
deploy/haproxy.cfg (with `haproxy -c` where installed) and deploy/systemd's
unit (with `systemd-analyze verify` where available). Then the same checks on
broken copies must find what was broken, so the checker cannot pass vacuously.

    python scripts/deploy_check.py QUEEN_SERVER_BINARY
"""

import copy
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEPLOY = os.path.join(ROOT, "deploy")
BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/debug/queen-server")


def read(path):
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


def default_ms(name):
    """A default of crates/queen-server/src/config/defaults.rs, in ms."""
    m = re.search(rf"const {name}: u64 = ([0-9_]+);", read("crates/queen-server/src/config/defaults.rs"))
    return int(m.group(1).replace("_", ""))


def routes():
    """Every route the router serves (crates/queen-server/src/http/mod.rs)."""
    return set(re.findall(r'\.route\(\s*"([^"]+)"', read("crates/queen-server/src/http/mod.rs")))


# served before the schema is ready and while draining (http/lifecycle.rs)
SERVED_WHILE_STARTING = {"/health", "/metrics", "/metrics/prometheus"}


def haproxy_settings(cfg):
    m = re.search(r"default-server check inter (\d+)s fall (\d+) rise (\d+)", cfg)
    timeout_server = re.search(r"timeout server (\d+)s", cfg)
    return {
        "inter_ms": int(m.group(1)) * 1000,
        "fall": int(m.group(2)),
        "rise": int(m.group(3)),
        "timeout_server_ms": int(timeout_server.group(1)) * 1000,
        "check_uri": re.search(r"http-check send meth GET uri (\S+)", cfg).group(1),
    }


def seconds(text):
    m = re.fullmatch(r"(\d+)(ms|s|m)", str(text))
    n, unit = int(m.group(1)), m.group(2)
    return n / 1000 if unit == "ms" else n * 60 if unit == "m" else n


def interpolate(value):
    """Compose's ${VAR:-default} with the defaults."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", str(value))


def check_config(env, what, problems):
    proc = subprocess.run([BIN, "check-config"], env={"PATH": os.environ.get("PATH", ""), **env},
                          capture_output=True, text=True)
    if proc.returncode != 0:
        problems.append(f"{what}: queen-server check-config refuses the environment: {proc.stderr.strip()}")


def check_compose(compose, haproxy, problems):
    services = compose["services"]
    brokers = {k: v for k, v in services.items() if k.startswith("broker-")}
    if len(brokers) != 3:
        problems.append(f"compose: {len(brokers)} brokers, expected 3")
    declared = set((compose.get("volumes") or {}).keys())
    spools, ids = set(), set()
    for name, svc in brokers.items():
        env = {k: interpolate(v) for k, v in svc["environment"].items()}
        port, mesh, spool = env.get("PORT", "6632"), env["QUEEN_MESH_PORT"], env["FILE_BUFFER_DIR"]
        ids.add(env["QUEEN_SERVER_ID"])
        mounts = [v.split(":") for v in svc.get("volumes", [])]
        spool_mounts = [src for src, dst, *_ in mounts if dst == spool]
        if not spool_mounts or spool_mounts[0] not in declared:
            problems.append(f"compose {name}: no named volume mounted on FILE_BUFFER_DIR {spool}")
        else:
            spools.add(spool_mounts[0])
        test = " ".join(svc["healthcheck"]["test"])
        if "/health" not in test or f"127.0.0.1/{port}" not in test:
            problems.append(f"compose {name}: the healthcheck does not ask /health on port {port}")
        timeout = int(env.get("SHUTDOWN_TIMEOUT_MS", default_ms("SHUTDOWN_TIMEOUT_MS")))
        drain = int(env.get("SHUTDOWN_DRAIN_MS", default_ms("SHUTDOWN_DRAIN_MS")))
        if seconds(svc["stop_grace_period"]) * 1000 <= timeout:
            problems.append(f"compose {name}: stop_grace_period {svc['stop_grace_period']} within SHUTDOWN_TIMEOUT_MS {timeout}")
        if drain <= haproxy["inter_ms"] * haproxy["fall"]:
            problems.append(f"compose {name}: SHUTDOWN_DRAIN_MS {drain} does not outlast HAProxy's inter x fall")
        for other in brokers:
            if other != name and f"{other}@{other}:{mesh}" not in env["QUEEN_MESH_PEERS"]:
                problems.append(f"compose {name}: QUEEN_MESH_PEERS does not name {other}@{other}:{mesh}")
        pool = int(env["DB_POOL_SIZE"])
        pg_max = int(re.search(r"max_connections=(\d+)", " ".join(services["postgres"]["command"])).group(1))
        if len(brokers) * (pool + 2) > pg_max:
            problems.append(f"compose {name}: 3 x (DB_POOL_SIZE {pool} + 2) does not fit max_connections {pg_max}")
        check_config({**env, "PG_PASSWORD": "x"}, f"compose {name}", problems)
    if len(spools) != len(brokers):
        problems.append("compose: brokers share a spool volume")
    if len(ids) != len(brokers):
        problems.append("compose: brokers share a QUEEN_SERVER_ID")
    lb = services["haproxy"]
    if not any(v.startswith("./haproxy.cfg:") for v in lb["volumes"]):
        problems.append("compose haproxy: does not mount deploy/haproxy.cfg")
    if "6632:6632" not in lb["ports"]:
        problems.append("compose haproxy: does not publish 6632")


def check_kubernetes(docs, dockerfile, problems):
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    sts = by_kind["StatefulSet"][0]
    spec, pod = sts["spec"], sts["spec"]["template"]["spec"]
    labels = sts["spec"]["template"]["metadata"]["labels"]
    if spec["replicas"] != 3:
        problems.append(f"kubernetes: {spec['replicas']} replicas")
    headless = [s for s in by_kind["Service"] if s["metadata"]["name"] == spec["serviceName"]]
    if not headless or headless[0]["spec"].get("clusterIP") != "None":
        problems.append(f"kubernetes: serviceName {spec['serviceName']} is not a headless Service")
    c = pod["containers"][0]
    env = {e["name"]: e.get("value") for e in c["env"]}
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    if str(ports.get("http")) != env.get("PORT", "6632"):
        problems.append(f"kubernetes: containerPort http {ports.get('http')} is not PORT {env.get('PORT')}")
    if str(ports.get("mesh")) != env["QUEEN_MESH_PORT"]:
        problems.append("kubernetes: containerPort mesh is not QUEEN_MESH_PORT")
    for i in range(spec["replicas"]):
        peer = f"{sts['metadata']['name']}-{i}@{sts['metadata']['name']}-{i}.{spec['serviceName']}:{env['QUEEN_MESH_PORT']}"
        if peer not in env["QUEEN_MESH_PEERS"]:
            problems.append(f"kubernetes: QUEEN_MESH_PEERS lacks {peer}")
    ready, live = c["readinessProbe"]["httpGet"], c["livenessProbe"]["httpGet"]
    if ready["path"] != "/health" or ready["port"] not in ("http", ports.get("http")):
        problems.append("kubernetes: the readiness probe is not GET /health on the http port")
    if live["path"] not in SERVED_WHILE_STARTING - {"/health"} or live["path"] not in routes():
        problems.append(f"kubernetes: the liveness probe {live['path']} fails while the database is away or the broker starts")
    pre_stop = c["lifecycle"]["preStop"]["exec"]["command"]
    sleep_s = int(pre_stop[1]) if pre_stop[0] == "sleep" else 0
    timeout = int(env.get("SHUTDOWN_TIMEOUT_MS") or default_ms("SHUTDOWN_TIMEOUT_MS"))
    drain = int(env.get("SHUTDOWN_DRAIN_MS") or default_ms("SHUTDOWN_DRAIN_MS"))
    if pod["terminationGracePeriodSeconds"] * 1000 <= sleep_s * 1000 + timeout:
        problems.append(f"kubernetes: terminationGracePeriodSeconds {pod['terminationGracePeriodSeconds']} does not cover preStop {sleep_s} s + SHUTDOWN_TIMEOUT_MS {timeout}")
    if drain < c["readinessProbe"]["periodSeconds"] * c["readinessProbe"]["failureThreshold"] * 1000:
        problems.append("kubernetes: SHUTDOWN_DRAIN_MS shorter than the readiness probe's period x failureThreshold")
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    claims = {t["metadata"]["name"] for t in spec.get("volumeClaimTemplates", [])}
    spool_claim = [n for n, p in mounts.items() if p == env["FILE_BUFFER_DIR"]]
    if not spool_claim or spool_claim[0] not in claims:
        problems.append("kubernetes: FILE_BUFFER_DIR is not on a volume claim of each pod")
    uid = re.search(r"useradd --system --uid (\d+)", dockerfile).group(1)
    sc = pod["securityContext"]
    if not sc.get("runAsNonRoot") or str(sc.get("runAsUser")) != uid or str(sc.get("fsGroup")) != uid:
        problems.append(f"kubernetes: securityContext does not run as the image's user {uid}")
    pdb = by_kind["PodDisruptionBudget"][0]["spec"]
    if pdb["selector"]["matchLabels"].items() - labels.items() or pdb.get("maxUnavailable") != 1:
        problems.append("kubernetes: the PodDisruptionBudget does not keep two of the brokers")
    run_env = {e["name"]: e.get("value") or "placeholder" for e in c["env"]}
    run_env["QUEEN_SERVER_ID"] = f"{sts['metadata']['name']}-0"
    check_config(run_env, "kubernetes", problems)


def check_dockerfile(text, problems):
    stages = re.findall(r"^FROM \S+ AS (\S+)", text, re.M)
    if stages != ["runtime-base", "prebuilt", "builder", "runtime"]:
        problems.append(f"Dockerfile: stages {stages}")
    for needle, why in [
        ("USER queen:queen", "a non-root user"),
        ('VOLUME ["/var/lib/queen/spool"]', "the spool on a volume"),
        ("FILE_BUFFER_DIR=/var/lib/queen/spool", "the spool directory"),
        ("HEALTHCHECK", "a HEALTHCHECK"),
        ("/health", "the health check on /health"),
        ("STOPSIGNAL SIGTERM", "SIGTERM to stop"),
        ("EXPOSE 6632 6633", "the HTTP and mesh ports"),
        ("target/release/queen ", "the queen CLI"),
    ]:
        if needle not in text:
            problems.append(f"Dockerfile: no {why} ({needle!r})")


def check_haproxy(cfg, settings, problems):
    if settings["check_uri"] != "/health":
        problems.append("haproxy.cfg: the health check is not GET /health")
    if settings["inter_ms"] * settings["fall"] >= default_ms("SHUTDOWN_DRAIN_MS"):
        problems.append("haproxy.cfg: inter x fall outlasts the default SHUTDOWN_DRAIN_MS")
    if settings["timeout_server_ms"] <= 30000:
        problems.append("haproxy.cfg: timeout server cuts a 30 s long poll")
    for needle in ("option redispatch", "retries 3", "retry-on conn-failure"):
        if needle not in cfg:
            problems.append(f"haproxy.cfg: no {needle}")
    if shutil.which("haproxy"):
        env = dict(os.environ, QUEEN_LB_BIND="127.0.0.1:1", QUEEN_BROKER_1="127.0.0.1:2",
                   QUEEN_BROKER_2="127.0.0.1:3", QUEEN_BROKER_3="127.0.0.1:4")
        with tempfile.NamedTemporaryFile("w", suffix=".cfg") as f:
            f.write(cfg)
            f.flush()
            proc = subprocess.run(["haproxy", "-c", "-f", f.name], env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            problems.append(f"haproxy.cfg: haproxy -c: {proc.stdout}{proc.stderr}")
        return "haproxy -c"
    return "no haproxy"


def check_systemd(unit, problems):
    stop = re.search(r"^TimeoutStopSec=(\d+)", unit, re.M)
    if not stop or int(stop.group(1)) * 1000 <= default_ms("SHUTDOWN_TIMEOUT_MS"):
        problems.append("queen.service: TimeoutStopSec does not outlast SHUTDOWN_TIMEOUT_MS")
    if "KillSignal=SIGTERM" not in unit or "StateDirectory=queen queen/spool" not in unit:
        problems.append("queen.service: no SIGTERM stop or no spool state directory")
    if not shutil.which("systemd-analyze"):
        return "no systemd-analyze"
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "queen.service")
        with open(path, "w") as f:
            f.write(unit.replace("/usr/local/bin/queen-server", os.path.abspath(BIN)))
        proc = subprocess.run(["systemd-analyze", "verify", path], capture_output=True, text=True)
    # lines about other units on the machine are not ours
    ours = [line for line in (proc.stdout + proc.stderr).splitlines() if "queen.service" in line]
    if proc.returncode != 0 or ours:
        problems.append(f"queen.service: systemd-analyze verify: {ours or proc.stderr.strip()}")
    return "systemd-analyze verify"


def check_all(compose, k8s, dockerfile, cfg, unit):
    problems = []
    settings = haproxy_settings(cfg)
    check_compose(compose, settings, problems)
    check_kubernetes(k8s, dockerfile, problems)
    check_dockerfile(dockerfile, problems)
    tools = [check_haproxy(cfg, settings, problems), check_systemd(unit, problems)]
    return problems, tools


def main():
    compose = yaml.safe_load(read("deploy/compose.yaml"))
    k8s = list(yaml.safe_load_all(read("deploy/kubernetes/queen.yaml")))
    dockerfile, cfg, unit = read("deploy/Dockerfile"), read("deploy/haproxy.cfg"), read("deploy/systemd/queen.service")
    problems, tools = check_all(compose, k8s, dockerfile, cfg, unit)
    for p in problems:
        print(f"deploy-check: FAIL: {p}", file=sys.stderr)
    if problems:
        return 1

    # broken copies: each must be caught
    def broken_compose(c):
        c["services"]["broker-2"]["volumes"] = []

    def broken_k8s(docs):
        sts = [d for d in docs if d["kind"] == "StatefulSet"][0]
        sts["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 10

    def broken_k8s_port(docs):
        sts = [d for d in docs if d["kind"] == "StatefulSet"][0]
        sts["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = 8080

    cases = [
        ("a broker without its spool volume", broken_compose, None, None, None),
        ("a grace period shorter than the stop", None, broken_k8s, None, None),
        ("a container port that is not PORT", None, broken_k8s_port, None, None),
        ("a Dockerfile running as root", None, None, lambda t: t.replace("USER queen:queen", "USER root"), None),
        ("HAProxy checking /", None, None, None, lambda t: t.replace("uri /health", "uri /")),
    ]
    for what, c_fn, k_fn, d_fn, h_fn in cases:
        c, k = copy.deepcopy(compose), copy.deepcopy(k8s)
        if c_fn:
            c_fn(c)
        if k_fn:
            k_fn(k)
        found, _ = check_all(c, k, d_fn(dockerfile) if d_fn else dockerfile, h_fn(cfg) if h_fn else cfg, unit)
        if not found:
            print(f"deploy-check: FAIL: the checker misses {what}", file=sys.stderr)
            return 1
    print(f"deploy-check: compose, kubernetes, Dockerfile, haproxy.cfg ({tools[0]}), queen.service "
          f"({tools[1]}) agree with the broker's settings; {len(cases)} broken copies caught")
    return 0


if __name__ == "__main__":
    sys.exit(main())

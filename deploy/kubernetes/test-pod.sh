#!/usr/bin/env bash
# Runs the seqkeeper container of deploy/kubernetes/seqkeeper.yaml (the
# chart's render, scripts/render-manifests.sh) the way a kubelet would,
# without a cluster: the image, args, env (fieldRefs and
# secretKeyRefs resolved), securityContext (user 65532, read-only root file
# system, all capabilities dropped, no privilege escalation), the token
# Secret mounted with its mode and fsGroup, beside a ZooKeeper 3.8 in quorum
# mode answering to the manifest's own ZooKeeper addresses and a MinIO for
# S3. Then it plays the kubelet: the startup, liveness and readiness probes
# on their paths, IDs behind the token, and a termination within
# terminationGracePeriodSeconds that turns /readyz to 503 first (the
# shutdown delay) and exits 0.
#
#   bash deploy/kubernetes/test-pod.sh
#
# Needs Docker with the images of scripts/images.sh (seqkeeper:dev,
# zookeeper:3.8, minio/minio:latest) and python3 with PyYAML. Only the
# store URL (a placeholder in the manifest) and create_bucket are
# overridden. Not part of scripts/test.sh; kubeconform there checks the
# schema, this checks that the pod spec runs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
. deploy/zookeeper-container.sh

MANIFEST=deploy/kubernetes/seqkeeper.yaml
ID="$$"
NET="seqkeeper-pod-$ID"
POD="seqkeeper-pod-$ID"
work="$(mktemp -d)"

log() { printf '%s pod: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
fail() {
	log "FAIL: $*"
	docker logs --tail 20 "$POD" >&2 2>/dev/null || true
	exit 1
}
cleanup() {
	docker rm -f "$POD" "$POD-zk" "$POD-minio" >/dev/null 2>&1 || true
	docker network rm "$NET" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

for image in seqkeeper:dev zookeeper:3.8 minio/minio:latest; do
	docker image inspect "$image" >/dev/null 2>&1 || fail "no $image image: run bash scripts/images.sh"
done
python3 -c 'import yaml' 2>/dev/null || fail "python3 with PyYAML is needed (apt-get install python3-yaml)"

token="$(head -c 32 /dev/urandom | base64)"
mkdir -p "$work/secret"

# The container of the Deployment, as docker run arguments (one per line).
POD_NAME="$POD" TOKEN="$token" SECRET_DIR="$work/secret" python3 - "$MANIFEST" >"$work/args" <<'PY'
import os, re, sys, yaml

docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
dep = next(d for d in docs if d["kind"] == "Deployment")
pod = dep["spec"]["template"]["spec"]
(c,) = pod["containers"]
psc, csc = pod.get("securityContext", {}), c.get("securityContext", {})
secrets = {"token": os.environ["TOKEN"], "aws-access-key-id": "seqkeeper", "aws-secret-access-key": "seqkeeper-secret"}
fields = {"metadata.name": os.environ["POD_NAME"]}
overrides = {  # the manifest's store is a placeholder
    "SEQKEEPER_STORE": "s3://seqkeeper-test/seqkeeper?endpoint=http://minio:9000&region=us-east-1",
    "SEQKEEPER_CREATE_BUCKET": "true",
}
out = []
env = {}
for e in c.get("env", []):
    name = e["name"]
    if "value" in e:
        v = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), e["value"])
    elif "fieldRef" in e["valueFrom"]:
        path = e["valueFrom"]["fieldRef"]["fieldPath"]
        if path == "status.podIP":
            v = "$POD_IP"  # known once the container runs: resolved below
        else:
            v = fields[path]
    else:
        v = secrets[e["valueFrom"]["secretKeyRef"]["key"]]
    v = overrides.get(name, v)
    env[name] = v
for name, v in env.items():
    out += ["-e", f"{name}={v}"]
uid, gid = csc.get("runAsUser", psc.get("runAsUser")), csc.get("runAsGroup", psc.get("runAsGroup"))
assert psc.get("runAsNonRoot") or csc.get("runAsNonRoot"), "runAsNonRoot not set"
out += ["--user", f"{uid}:{gid}", "--group-add", str(psc["fsGroup"])]
if csc.get("readOnlyRootFilesystem"):
    out.append("--read-only")
if csc.get("allowPrivilegeEscalation") is False:
    out += ["--security-opt", "no-new-privileges"]
for cap in csc.get("capabilities", {}).get("drop", []):
    out += ["--cap-drop", cap]
vols = {v["name"]: v for v in pod["volumes"]}
for m in c.get("volumeMounts", []):
    s = vols[m["name"]]["secret"]
    if "items" not in s:
        assert s.get("optional"), f"volume {m['name']}: a Secret without items; name the keys this test should fill"
        continue  # an optional Secret the pod starts without
    d = os.path.join(os.environ["SECRET_DIR"], m["name"])
    os.makedirs(d)
    for item in s["items"]:
        p = os.path.join(d, item["path"])
        open(p, "w").write(secrets[item["key"]])
        os.chown(p, 0, psc["fsGroup"])
        os.chmod(p, s.get("defaultMode", 0o644))
    out += ["-v", f"{d}:{m['mountPath']}:ro"]
port = c["ports"][0]["containerPort"]
out += ["-p", f"127.0.0.1::{port}"]
print("\n".join(out))
# What the kubelet does with the rest, for the shell.
probes = {k: c[k]["httpGet"]["path"] for k in ("startupProbe", "livenessProbe", "readinessProbe")}
with open(os.environ["SECRET_DIR"] + "/../spec", "w") as f:
    f.write(f"PORT={port}\nIMAGE={c['image']}\nARGS='{' '.join(c.get('args', []))}'\n")
    f.write(f"GRACE={pod['terminationGracePeriodSeconds']}\n")
    for k, p in probes.items():
        f.write(f"{k}={p}\n")
PY
. "$work/spec"
log "$IMAGE $ARGS as $(grep -A1 -- '^--user$' "$work/args" | tail -n 1), probes $startupProbe, $livenessProbe, $readinessProbe"

# A subnet of our own, so that the pod gets a fixed IP known before it starts.
for try in 1 2 3 4 5; do
	subnet="10.$((RANDOM % 200 + 20)).$((RANDOM % 250)).0/24"
	docker network create --subnet "$subnet" "$NET" >/dev/null 2>&1 && break
	[[ $try == 5 ]] && fail "could not create a network with a free subnet"
done
# One ZooKeeper answering to the manifest's three addresses.
start_zookeeper "$POD-zk" "$NET" zookeeper-0.zookeeper-headless zookeeper-1.zookeeper-headless zookeeper-2.zookeeper-headless
docker run -d --name "$POD-minio" --network "$NET" --network-alias minio \
	-e MINIO_ROOT_USER=seqkeeper -e MINIO_ROOT_PASSWORD=seqkeeper-secret \
	minio/minio:latest server /data >/dev/null

# The pod IP: a fixed address on the network, known before the start.
mapfile -t args <"$work/args"
ip="$(python3 -c 'import ipaddress,sys; print(ipaddress.ip_network(sys.argv[1])[200])' "$subnet")"
for i in "${!args[@]}"; do args[i]="${args[i]//\$POD_IP/$ip}"; done
docker run -d --name "$POD" --network "$NET" --ip "$ip" "${args[@]}" "$IMAGE" $ARGS >/dev/null
url="http://$(docker port "$POD" "$PORT/tcp" | head -n 1)"

probe() { curl -s -m 1 -o /dev/null -w '%{http_code}' "$url$1" || true; }
started=""
for _ in $(seq 60); do # the startup probe: 2 s x 30
	[[ "$(docker inspect -f '{{.State.Running}}' "$POD")" == true ]] || fail "the container exited"
	[[ "$(probe "$startupProbe")" == 200 ]] && started=1 && break
	sleep 1
done
[[ -n "$started" ]] || fail "the startup probe $startupProbe never answered 200"
for _ in $(seq 30); do
	[[ "$(probe "$readinessProbe")" == 200 ]] && break
	sleep 1
done
[[ "$(probe "$readinessProbe")" == 200 ]] || fail "$readinessProbe is not 200"
[[ "$(probe "$livenessProbe")" == 200 ]] || fail "$livenessProbe is not 200"
log "probes: $startupProbe, $livenessProbe and $readinessProbe answer 200"

docker exec "$POD" /seqkeeper create orders >/dev/null || fail "seqkeeper create in the pod"
code="$(curl -s -m 5 -o /dev/null -w '%{http_code}' -X POST "$url/v1/sequences/orders/ids?count=5")"
[[ "$code" == 401 ]] || fail "an ID request without the token got $code, want 401"
ids=""
for _ in $(seq 30); do
	ids="$(curl -s -m 10 -X POST -H "Authorization: Bearer $token" "$url/v1/sequences/orders/ids?count=5" || true)"
	[[ "$ids" == *'"ranges"'* ]] && break
	sleep 1
done
[[ "$ids" == *'"ranges"'* ]] || fail "no IDs over HTTP: $ids"
docker exec "$POD" sh -c 'echo x >/x' >/dev/null 2>&1 && fail "the root file system is writable"
log "IDs behind the token: $ids; the root file system is read-only"

# Termination as the kubelet does it: SIGTERM, then SIGKILL after the grace period.
start=$(date +%s)
docker kill -s TERM "$POD" >/dev/null
sleep 1
ready="$(probe "$readinessProbe")"
live="$(probe "$livenessProbe")"
[[ "$ready" == 503 && "$live" == 200 ]] ||
	fail "during the shutdown delay: $readinessProbe $ready, $livenessProbe $live; want 503 and 200"
code=""
for _ in $(seq "$GRACE"); do
	[[ "$(docker inspect -f '{{.State.Running}}' "$POD")" == false ]] && code="$(docker inspect -f '{{.State.ExitCode}}' "$POD")" && break
	sleep 1
done
[[ "$code" == 0 ]] || fail "not stopped with exit 0 within terminationGracePeriodSeconds=$GRACE (exit code '$code')"
docker logs "$POD" 2>&1 | grep -q 'pushed back the unused IDs' || fail "the stop did not push the unused IDs back"
log "terminated in $(($(date +%s) - start)) s of $GRACE: unready first, unused IDs pushed back, exit 0"
log "PASS"

#!/usr/bin/env bash
# Bring idlegate up on a local kind cluster and smoke-test it:
#   create the cluster (deploy/kind/kind-config.yaml), build the operator image, check
#   every sample under deploy/samples/ (cron/ and pools/ included) with `idlegate lint` (in
#   that image), load the image into the cluster, apply deploy/base (its three CRDs) and the
#   pod-security admission policy, wait for the operator, submit every sample (apply -R),
#   check that the API server refuses a hostNetwork template, wait for the diamond to
#   succeed and the invalid sample to be marked Invalid, show the workflows and pools.
#
# Usage: deploy/kind-up.sh            (from anywhere; needs docker, kind and kubectl)
# Environment:
#   CLUSTER_NAME   kind cluster name                 (default: idlegate)
#   IMAGE          operator image tag to build/load   (default: idlegate-operator:dev)
#   TIMEOUT        timeout of each wait              (default: 300s)
#   SKIP_BUILD=1   use an IMAGE that already exists locally
#   SKIP_SMOKE=1   stop after applying the samples
# Re-running is safe: an existing cluster of that name is reused and everything is applied
# again. Remove it all with: kind delete cluster --name idlegate
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CLUSTER_NAME="${CLUSTER_NAME:-idlegate}"
IMAGE="${IMAGE:-idlegate-operator:dev}"
TIMEOUT="${TIMEOUT:-300s}"
DEFAULT_IMAGE="idlegate-operator:dev" # what deploy/base/kustomization.yaml deploys
NAMESPACE="idlegate-system"
DEPLOYMENT="idlegate-operator"
CONTEXT="kind-${CLUSTER_NAME}"

log() { printf '==> %s\n' "$*" >&2; }
die() {
    printf 'error: %s\n' "$*" >&2
    exit 1
}

need() {
    command -v "$1" > /dev/null 2>&1 || die "$1 is not installed or not on PATH; $2"
}

need docker "install Docker: https://docs.docker.com/get-docker/"
need kind "install kind >= v0.26.0: https://kind.sigs.k8s.io/docs/user/quick-start/#installation"
need kubectl "install kubectl >= 1.30: https://kubernetes.io/docs/tasks/tools/"
docker info > /dev/null 2>&1 || die "docker is installed but its daemon is not reachable (is Docker running? can this user use it?)"

# every kubectl call goes to the kind cluster, whatever the current context is
k() { kubectl --context "$CONTEXT" "$@"; }

# Print what helps when a wait fails, then fail.
diagnose() {
    log "diagnostics"
    k get dwf,dcwf -A -o wide || true
    k get xpool -o wide || true
    k describe dwf -A || true
    k get pods -A -l idlegate.io/workflow -o wide || true
    k -n "$NAMESPACE" get pods -o wide || true
    k -n "$NAMESPACE" logs "deploy/$DEPLOYMENT" --tail=200 || true
    die "$1"
}

if kind get clusters 2> /dev/null | grep -qx "$CLUSTER_NAME"; then
    log "reusing kind cluster $CLUSTER_NAME"
else
    log "creating kind cluster $CLUSTER_NAME"
    kind create cluster --name "$CLUSTER_NAME" --config "$ROOT/deploy/kind/kind-config.yaml" --wait 120s
fi

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    log "building $IMAGE"
    docker build -f "$ROOT/deploy/Dockerfile" -t "$IMAGE" "$ROOT"
fi

# `idlegate lint` in the image: the very code that will admit the samples, so a sample the
# operator would mark Invalid stops here, before anything is loaded or applied. Each
# file goes in on stdin (no bind mount: nothing to share with Docker, no SELinux labels).
lint() { docker run --rm -i "$IMAGE" lint - < "$1" 2>&1; }
log "linting deploy/samples, recursively (idlegate lint: the operator's checks, offline)"
linted=0
# (a loop over find's lines rather than mapfile: macOS ships bash 3.2)
while IFS= read -r sample; do
    linted=$((linted + 1))
    name="deploy/samples/${sample#"$ROOT/deploy/samples/"}"
    if [[ "${sample##*/}" == invalid-* ]]; then
        # invalid on purpose: lint must find what the operator will report
        if out="$(lint "$sample")"; then
            die "idlegate lint accepted $name, which is invalid on purpose"
        fi
        grep -q '^<stdin>\[0\] spec' <<< "$out" || die "idlegate lint failed on $name: $out"
    else
        out="$(lint "$sample")" || die "$name does not pass idlegate lint:"$'\n'"$out"
    fi
done < <(find "$ROOT/deploy/samples" -type f -name '*.yaml' | LC_ALL=C sort)
[[ "$linted" -gt 0 ]] || die "no sample under deploy/samples"

log "loading $IMAGE into the cluster"
kind load docker-image "$IMAGE" --name "$CLUSTER_NAME"

log "applying deploy/base and the pod-security admission policy"
k apply -k "$ROOT/deploy/base"
k apply -f "$ROOT/deploy/components/pod-security/policy.yaml"
if [[ "$IMAGE" != "$DEFAULT_IMAGE" ]]; then
    # the base deploys $DEFAULT_IMAGE; point the Deployment at the image built here
    k -n "$NAMESPACE" set image "deploy/$DEPLOYMENT" "operator=$IMAGE"
fi

log "waiting for the CRDs and the operator"
k wait --for=condition=Established "crd/dagworkflows.idlegate.io" \
    "crd/dagcronworkflows.idlegate.io" "crd/executorpools.idlegate.io" --timeout="$TIMEOUT"
# a rebuilt image under the same tag needs a new pod to be picked up
k -n "$NAMESPACE" rollout restart "deploy/$DEPLOYMENT"
k -n "$NAMESPACE" rollout status "deploy/$DEPLOYMENT" --timeout="$TIMEOUT" ||
    diagnose "the operator did not become ready"

# the samples' pool batch-nodes (pools/resource-pools.yaml) follows the nodes labelled
# pool=batch: kind's, so that it has room (else its Ready is False, reason NoNodes)
k label nodes --all pool=batch --overwrite
log "submitting deploy/samples, recursively (cron/ and pools/ too)"
# a re-run starts the samples afresh rather than finding them finished
k delete -R -f "$ROOT/deploy/samples/" --ignore-not-found --wait=true
k apply -R -f "$ROOT/deploy/samples/"

if [[ "${SKIP_SMOKE:-0}" == 1 ]]; then
    k get dwf,dcwf,xpool
    exit 0
fi

# What the emulator in tests/ cannot show, a real cluster can: the API server compiles and
# runs the CRD's CEL rules, the scheduler honours scheduling gates, the kubelet runs the
# busybox tasks under Pod Security admission.
log "smoke test: the API server rejects a self-dependent stage (CEL rule)"
self_dependent='apiVersion: idlegate.io/v1alpha1
kind: DagWorkflow
metadata:
  name: smoke-self-dependency
spec:
  stages:
    - {name: a, tasks: 1, taskDurationSeconds: 1}
    - {name: b, tasks: 1, taskDurationSeconds: 1, dependsOn: [b]}'
if out="$(k apply --dry-run=server -f - <<< "$self_dependent" 2>&1)"; then
    diagnose "a DagWorkflow whose stage depends on itself was accepted; is deploy/base/crd.yaml applied?"
fi
grep -q "cannot depend on itself" <<< "$out" || diagnose "unexpected rejection: $out"

log "smoke test: the API server refuses a template that escapes Pod Security (admission policy)"
escalating='apiVersion: idlegate.io/v1alpha1
kind: DagWorkflow
metadata:
  name: smoke-host-network
spec:
  stages:
    - name: a
      tasks: 1
      taskDurationSeconds: 1
      template:
        spec:
          hostNetwork: true
          containers: [{name: x, image: busybox}]'
for _ in 1 2 3 4 5 6; do # a new policy takes effect within seconds, not at once
    if ! out="$(k apply --dry-run=server -f - <<< "$escalating" 2>&1)"; then
        break
    fi
    sleep 5
done
grep -q "template.spec.hostNetwork: host namespaces are not allowed" <<< "$out" ||
    diagnose "the admission policy did not refuse a hostNetwork template: $out"

log "smoke test: diamond must reach Succeeded, invalid-cycle must be marked Invalid"
k wait dwf/diamond --for=jsonpath='{.status.phase}'=Succeeded --timeout="$TIMEOUT" ||
    diagnose "dwf/diamond did not reach phase Succeeded"
jct="$(k get dwf/diamond -o jsonpath='{.status.jctSeconds}')"
[[ -n "$jct" ]] || diagnose "dwf/diamond succeeded without status.jctSeconds"
# 2 + 3 + 2 + 1 tasks; succeeded task pods stay until their DagWorkflow is deleted
succeeded="$(k get pods -l idlegate.io/workflow=diamond --field-selector=status.phase=Succeeded -o name | wc -l)"
[[ "$succeeded" -eq 8 ]] || diagnose "dwf/diamond has $succeeded succeeded task pods, expected 8"
k wait dwf/invalid-cycle --for=jsonpath='{.status.phase}'=Invalid --timeout="$TIMEOUT" ||
    diagnose "dwf/invalid-cycle was not marked Invalid"
pods="$(k get pods -l idlegate.io/workflow=invalid-cycle -o name)"
[[ -z "$pods" ]] || diagnose "the invalid workflow has pods: $pods"

k get dwf,dcwf,xpool
log "idlegate is up (diamond JCT ${jct}s). Next: kubectl describe dwf diamond; kubectl get dwf -w"

#!/usr/bin/python3
"""Checks deploy/kubernetes offline: every object against the Kubernetes API schema, and the
rules that make the deployment work and keep sandboxes contained.

  scripts/check-k8s.py DIR              check the objects that DIR/kustomization.yaml lists
  scripts/check-k8s.py --self-test DIR  break copies of them in known ways; each break must be found

The schema is the one in Debian's python3-kubernetes (the API's generated models): every
field must be known to its object's type, have that type, and every required field must be
present. No cluster is contacted. Exits 1 and prints one line per finding when anything fails.
"""
import copy
import inspect
import os
import re
import sys

import yaml
import kubernetes.client as k8s

# The API group of each apiVersion, as the client names its API class.
API_CLASSES = {
    "v1": "CoreV1Api",
    "apps/v1": "AppsV1Api",
    "networking.k8s.io/v1": "NetworkingV1Api",
    "node.k8s.io/v1": "NodeV1Api",
    "policy/v1": "PolicyV1Api",
}
# Secrets and claims the operator creates (docs/kubernetes.md); everything else referenced
# must be defined in the manifests.
EXTERNAL_SECRETS = {"sinew-harness-config", "sinew-harness-tls", "sinew-store-tls",
                    "sinew-sandboxd-tls", "sinew-model-tls", "sinew-etcd-tls"}
WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet"}
# The one container that may be privileged: it runs runc.
PRIVILEGED_OK = {("sinew-sandboxd", "sandboxd")}


def snake(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def load(directory):
    with open(os.path.join(directory, "kustomization.yaml")) as f:
        kustomization = yaml.safe_load(f)
    objects = []
    for resource in kustomization.get("resources", []):
        with open(os.path.join(directory, resource)) as f:
            for index, doc in enumerate(yaml.safe_load_all(f)):
                if doc is not None:
                    objects.append((f"{resource}#{index}", doc))
    return objects


def required_fields(cls):
    """The attributes whose generated setter refuses None: the schema's required fields."""
    out = set()
    for attr in cls.openapi_types:
        prop = getattr(cls, attr, None)
        if isinstance(prop, property) and prop.fset is not None:
            if "must not be `None`" in inspect.getsource(prop.fset):
                out.add(attr)
    return out


def check_type(value, type_name, where, findings):
    if type_name == "object":
        return
    if type_name == "str":
        if not isinstance(value, str):
            findings.append(f"{where}: must be a string, not {type(value).__name__} {value!r}")
        return
    if type_name == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            findings.append(f"{where}: must be an integer, not {value!r}")
        return
    if type_name == "bool":
        if not isinstance(value, bool):
            findings.append(f"{where}: must be true or false, not {value!r}")
        return
    if type_name == "float":
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            findings.append(f"{where}: must be a number, not {value!r}")
        return
    if type_name == "datetime":
        if not isinstance(value, str):
            findings.append(f"{where}: must be a timestamp string")
        return
    m = re.fullmatch(r"list\[(.+)\]", type_name)
    if m:
        if not isinstance(value, list):
            findings.append(f"{where}: must be a list")
            return
        for i, item in enumerate(value):
            check_type(item, m.group(1), f"{where}[{i}]", findings)
        return
    m = re.fullmatch(r"dict\(str, (.+)\)", type_name)
    if m:
        if not isinstance(value, dict):
            findings.append(f"{where}: must be a map")
            return
        for key, item in value.items():
            if not isinstance(key, str):
                findings.append(f"{where}: key {key!r} must be a string")
            check_type(item, m.group(1), f"{where}.{key}", findings)
        return
    cls = getattr(k8s, type_name, None)
    if cls is None:
        findings.append(f"{where}: the schema names an unknown type {type_name}")
        return
    check_object(value, cls, where, findings)


def check_object(value, cls, where, findings):
    if not isinstance(value, dict):
        findings.append(f"{where}: must be a map ({cls.__name__})")
        return
    by_json = {json_name: attr for attr, json_name in cls.attribute_map.items()}
    for key, item in value.items():
        attr = by_json.get(key)
        if attr is None:
            findings.append(f"{where}: unknown field '{key}' in {cls.__name__}")
            continue
        if item is None:
            continue
        check_type(item, cls.openapi_types[attr], f"{where}.{key}", findings)
    for attr in sorted(required_fields(cls)):
        if value.get(cls.attribute_map[attr]) is None:
            findings.append(f"{where}: required field '{cls.attribute_map[attr]}' of {cls.__name__} is missing")


def check_schema(name, obj, findings):
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    api_class = API_CLASSES.get(api_version)
    if api_class is None or not isinstance(kind, str):
        findings.append(f"{name}: unknown apiVersion {api_version!r} or kind {kind!r}")
        return
    api = getattr(k8s, api_class)
    namespaced = hasattr(api, f"create_namespaced_{snake(kind)}")
    if not namespaced and not hasattr(api, f"create_{snake(kind)}"):
        findings.append(f"{name}: {api_version} has no kind {kind}")
        return
    cls = getattr(k8s, "V1" + kind, None)
    if cls is None:
        findings.append(f"{name}: no schema for {kind}")
        return
    check_object(obj, cls, f"{name} {kind}", findings)
    has_namespace = bool(obj.get("metadata", {}).get("namespace"))
    if namespaced != has_namespace:
        findings.append(f"{name}: {kind} is {'namespaced' if namespaced else 'cluster-scoped'}: "
                        f"metadata.namespace must be {'set' if namespaced else 'absent'}")


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def pod_spec(obj):
    return obj["spec"]["template"]["spec"]


def check_workloads(objects, findings):
    secrets = {o["metadata"]["name"] for _, o in objects if o["kind"] == "Secret"} | EXTERNAL_SECRETS
    claims = {o["metadata"]["name"] for _, o in objects if o["kind"] == "PersistentVolumeClaim"}
    services = {o["metadata"]["name"]: o for _, o in objects if o["kind"] == "Service"}
    for name, obj in objects:
        if obj["kind"] not in WORKLOADS:
            continue
        wname = obj["metadata"]["name"]
        where = f"{name} {obj['kind']} {wname}"
        spec = obj["spec"]
        labels = spec["template"]["metadata"].get("labels", {})
        if not selects(spec["selector"].get("matchLabels", {}), labels):
            findings.append(f"{where}: selector.matchLabels does not match the pod template's labels")
        pod = pod_spec(obj)
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for template in spec.get("volumeClaimTemplates", []):
            volumes[template["metadata"]["name"]] = template
        for v in pod.get("volumes", []):
            if "secret" in v and v["secret"]["secretName"] not in secrets:
                findings.append(f"{where}: volume {v['name']} uses Secret {v['secret']['secretName']}, "
                                "which is neither defined nor documented")
            if "persistentVolumeClaim" in v and v["persistentVolumeClaim"]["claimName"] not in claims:
                findings.append(f"{where}: volume {v['name']} claims an undefined PersistentVolumeClaim")
        if obj["kind"] == "StatefulSet":
            svc = services.get(spec["serviceName"])
            if svc is None or svc["spec"].get("clusterIP") != "None":
                findings.append(f"{where}: serviceName {spec['serviceName']} must be a headless Service")
        run_as_non_root = pod.get("securityContext", {}).get("runAsNonRoot", False)
        for c in pod["containers"]:
            cwhere = f"{where} container {c['name']}"
            ports = {p.get("name") for p in c.get("ports", [])} | {p["containerPort"] for p in c.get("ports", [])}
            for probe_name in ("readinessProbe", "livenessProbe", "startupProbe"):
                probe = c.get(probe_name)
                if not probe:
                    continue
                for kind in ("httpGet", "tcpSocket"):
                    if kind in probe and probe[kind]["port"] not in ports:
                        findings.append(f"{cwhere}: {probe_name} uses port {probe[kind]['port']!r}, "
                                        "which the container does not declare")
            if obj["kind"] != "DaemonSet" and "readinessProbe" not in c:
                findings.append(f"{cwhere}: needs a readinessProbe")
            for m in c.get("volumeMounts", []):
                if m["name"] not in volumes:
                    findings.append(f"{cwhere}: mounts an undefined volume {m['name']}")
            resources = c.get("resources", {})
            if not resources.get("requests") or "memory" not in resources.get("limits", {}):
                findings.append(f"{cwhere}: needs resource requests and a memory limit")
            sc = c.get("securityContext", {})
            if sc.get("privileged"):
                if (wname, c["name"]) not in PRIVILEGED_OK:
                    findings.append(f"{cwhere}: only sinew-sandboxd may be privileged")
                continue
            if not (run_as_non_root or sc.get("runAsNonRoot")):
                findings.append(f"{cwhere}: must run as non-root")
            if sc.get("allowPrivilegeEscalation") is not False or sc.get("readOnlyRootFilesystem") is not True:
                findings.append(f"{cwhere}: needs allowPrivilegeEscalation: false and readOnlyRootFilesystem: true")
            if "ALL" not in sc.get("capabilities", {}).get("drop", []):
                findings.append(f"{cwhere}: must drop all capabilities")


def check_services(objects, findings):
    pods = [(o["metadata"]["name"], o["spec"]["template"]["metadata"].get("labels", {}), pod_spec(o))
            for _, o in objects if o["kind"] in WORKLOADS]
    for name, obj in objects:
        if obj["kind"] != "Service":
            continue
        where = f"{name} Service {obj['metadata']['name']}"
        matched = [p for p in pods if selects(obj["spec"].get("selector", {}), p[1])]
        if not matched:
            findings.append(f"{where}: its selector matches no workload's pods")
            continue
        for port in obj["spec"].get("ports", []):
            target = port.get("targetPort", port["port"])
            declared = set()
            for _, _, spec in matched:
                for c in spec["containers"]:
                    for p in c.get("ports", []):
                        declared |= {p.get("name"), p["containerPort"]}
            if target not in declared:
                findings.append(f"{where}: port {port.get('name', port['port'])} targets {target!r}, "
                                "which no selected container declares")


def check_network_policies(objects, findings):
    policies = {o["metadata"]["name"]: o for _, o in objects if o["kind"] == "NetworkPolicy"}
    labels = [o["spec"]["template"]["metadata"].get("labels", {}) for _, o in objects if o["kind"] in WORKLOADS]
    deny = [p for p in policies.values()
            if p["spec"]["podSelector"] == {} and set(p["spec"].get("policyTypes", [])) == {"Ingress", "Egress"}
            and not p["spec"].get("ingress") and not p["spec"].get("egress")]
    if not deny:
        findings.append("network-policies: no default-deny policy (all pods, ingress and egress, no rules)")
    for pname, p in policies.items():
        selector = p["spec"]["podSelector"].get("matchLabels", {})
        if selector and "sinew.dev/role" not in selector and not any(selects(selector, l) for l in labels):
            findings.append(f"NetworkPolicy {pname}: selects no workload's pods")
    sandbox = policies.get("sandbox-pods")
    if sandbox is None or sandbox["spec"]["podSelector"].get("matchLabels") != {"sinew.dev/role": "sandbox"}:
        findings.append("NetworkPolicy sandbox-pods: must select sinew.dev/role=sandbox pods")
    elif "Egress" not in sandbox["spec"].get("policyTypes", []) or sandbox["spec"].get("egress"):
        findings.append("NetworkPolicy sandbox-pods: sandboxes must have no egress at all")
    sandboxd = policies.get("sandboxd")
    if sandboxd is None:
        findings.append("NetworkPolicy sandboxd: missing")
    else:
        for rule in sandboxd["spec"].get("egress", []):
            peers = rule.get("to", [])
            if not peers or any(peer.get("podSelector", {}).get("matchLabels") != {"app.kubernetes.io/name": "etcd"}
                                for peer in peers):
                findings.append("NetworkPolicy sandboxd: egress may reach only etcd")
    # A pod that no policy allows DNS to would fail to resolve etcd and its peers.
    if not any(p["spec"]["podSelector"] == {} and p["spec"].get("egress") for p in policies.values()):
        findings.append("network-policies: no policy allows DNS egress")


def check_product(objects, findings):
    by_name = {(o["kind"], o["metadata"]["name"]): o for _, o in objects}
    model = by_name.get(("Deployment", "sinew-model"))
    if model is None or not any("nvidia.com/gpu" in c.get("resources", {}).get("limits", {})
                                for c in pod_spec(model)["containers"]):
        findings.append("Deployment sinew-model: must request GPUs (limits nvidia.com/gpu)")
    harness = by_name.get(("Deployment", "sinew-harness"))
    if harness is None or any(c.get("readinessProbe", {}).get("httpGet", {}).get("path") != "/readyz"
                              for c in pod_spec(harness)["containers"]):
        findings.append("Deployment sinew-harness: readiness must be GET /readyz")
    stores = [o for (kind, _), o in by_name.items()
              if kind == "StatefulSet" and o["spec"]["template"]["metadata"].get("labels", {}).get(
                  "app.kubernetes.io/name") == "sinew-store"]
    if not stores:
        findings.append("StatefulSet sinew-store-*: missing (the session store)")
    for store in stores:
        check_store_shard(store, findings)
    etcd = by_name.get(("StatefulSet", "etcd"))
    etcd_command = " ".join(a for c in pod_spec(etcd)["containers"] for a in c.get("command", []) + c.get("args", [])) \
        if etcd is not None else ""
    if "--client-cert-auth" not in etcd_command or "--listen-client-urls https://" not in etcd_command:
        findings.append("StatefulSet etcd: must serve clients over TLS with --client-cert-auth "
                        "(it steers sandboxes and sessions)")
    for (kind, name), obj in by_name.items():
        if kind not in WORKLOADS or name == "etcd":
            continue
        for c in pod_spec(obj)["containers"]:
            words = " ".join(c.get("command", []) + c.get("args", [])).replace("=", " ").split()
            if "--etcd" in words and not all(f in words for f in ("--etcd-tls-cert", "--etcd-tls-key", "--etcd-tls-ca")):
                findings.append(f"{kind} {name}: talks to etcd without --etcd-tls-cert/--etcd-tls-key/--etcd-tls-ca")
    if ("DaemonSet", "sinew-sandboxd") not in by_name:
        findings.append("DaemonSet sinew-sandboxd: missing")
    if not any(o["kind"] == "RuntimeClass" and o.get("handler") == "runsc" for _, o in objects):
        findings.append("RuntimeClass with handler runsc: missing")


def check_store_shard(store, findings):
    """A store shard: three members elected through etcd, each with its own volume, on
    different nodes (docs/session-store.md, "Replicating a shard")."""
    name = f"StatefulSet {store['metadata']['name']}"
    spec = store["spec"]
    pod = pod_spec(store)
    if not spec.get("volumeClaimTemplates"):
        findings.append(f"{name}: needs volumeClaimTemplates (one volume per member)")
    if spec.get("replicas", 1) < 3:
        findings.append(f"{name}: a replicated shard needs at least three members (replicas: 3)")
    args = [a for c in pod["containers"] for a in c.get("command", []) + c.get("args", [])]
    shard = [a.split("=", 1)[1] for a in args if a.startswith("--shard-id=")]
    if not any(a.startswith("--etcd=") for a in args) or not shard or shard[0] == "$(POD_NAME)":
        findings.append(f"{name}: each pod must join the shard map as a member of one shard "
                        "(--etcd=..., --shard-id=<the shard>, the same on every pod)")
    if not any(a in ("--replication=sync", "--replication=async") for a in args):
        findings.append(f"{name}: the members must replicate (--replication=sync or async)")
    if f"--advertise=$(POD_NAME).{spec['serviceName']}.sinew.svc.cluster.local:7701" not in args:
        findings.append(f"{name}: each member must advertise its stable name "
                        "(--advertise=$(POD_NAME).<serviceName>.sinew.svc.cluster.local:7701)")
    terms = pod.get("affinity", {}).get("podAntiAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", [])
    labels = spec["template"]["metadata"].get("labels", {})
    if not any(t.get("topologyKey") == "kubernetes.io/hostname"
               and selects(t.get("labelSelector", {}).get("matchLabels", {}), labels) for t in terms):
        findings.append(f"{name}: its members must run on different nodes "
                        "(a required podAntiAffinity on kubernetes.io/hostname)")
    mounts = {m["mountPath"].rstrip("/") for c in pod["containers"] for m in c.get("volumeMounts", [])}
    for db in (a.split("=", 1)[1].rstrip("/") for a in args if a.startswith("--db=")):
        if db in mounts or not any(db.startswith(m + "/") for m in mounts):
            findings.append(f"{name}: --db must be a directory inside its volume, not the mount point "
                            "(a deposed primary renames its directory)")


def check(objects):
    findings = []
    for name, obj in objects:
        check_schema(name, obj, findings)
    if findings:
        return findings  # the rules below assume well-formed objects
    check_workloads(objects, findings)
    check_services(objects, findings)
    check_network_policies(objects, findings)
    check_product(objects, findings)
    return findings


def find(objects, kind, name):
    for _, o in objects:
        if o["kind"] == kind and o["metadata"]["name"] == name:
            return o
    raise KeyError(f"{kind} {name}")


def breaks():
    """(description, mutation, a fragment the finding must contain)."""
    def container(objects, kind, name):
        return pod_spec(find(objects, kind, name))["containers"][0]
    return [
        ("an unknown field", lambda o: find(o, "Deployment", "sinew-harness")["spec"].__setitem__("replica", 2),
         "unknown field 'replica'"),
        ("a wrong type", lambda o: find(o, "Deployment", "sinew-harness")["spec"].__setitem__("replicas", "3"),
         "must be an integer"),
        ("a missing required field", lambda o: container(o, "Deployment", "sinew-model").pop("name"),
         "required field 'name'"),
        ("a kind its apiVersion lacks", lambda o: find(o, "Deployment", "sinew-model").__setitem__("apiVersion", "v1"),
         "has no kind Deployment"),
        ("a selector that misses its pods",
         lambda o: find(o, "DaemonSet", "sinew-sandboxd")["spec"]["selector"]["matchLabels"].__setitem__(
             "app.kubernetes.io/name", "other"), "does not match"),
        ("a probe on an undeclared port",
         lambda o: container(o, "Deployment", "sinew-harness")["readinessProbe"]["httpGet"].__setitem__("port", "http"),
         "does not declare"),
        ("a Service selecting nothing",
         lambda o: find(o, "Service", "sinew-model")["spec"]["selector"].__setitem__("app.kubernetes.io/name", "x"),
         "matches no workload"),
        ("egress for sandboxes",
         lambda o: find(o, "NetworkPolicy", "sandbox-pods")["spec"].__setitem__("egress", [{"ports": [{"port": 443}]}]),
         "no egress at all"),
        ("sandbox hosts reaching the internet",
         lambda o: find(o, "NetworkPolicy", "sandboxd")["spec"]["egress"].append({"ports": [{"port": 443}]}),
         "only etcd"),
        ("no default deny", lambda o: find(o, "NetworkPolicy", "default-deny")["spec"].__setitem__(
            "policyTypes", ["Ingress"]), "no default-deny"),
        ("a privileged harness",
         lambda o: container(o, "Deployment", "sinew-harness")["securityContext"].__setitem__("privileged", True),
         "only sinew-sandboxd may be privileged"),
        ("a model without GPUs",
         lambda o: container(o, "Deployment", "sinew-model")["resources"]["limits"].pop("nvidia.com/gpu"),
         "must request GPUs"),
        ("an undocumented Secret",
         lambda o: pod_spec(find(o, "Deployment", "sinew-harness"))["volumes"][1]["secret"].__setitem__(
             "secretName", "stray"), "neither defined nor documented"),
        ("a StatefulSet without a headless Service",
         lambda o: find(o, "Service", "sinew-store")["spec"].pop("clusterIP"), "headless Service"),
        ("a store pod outside the shard map",
         lambda o: container(o, "StatefulSet", "sinew-store-s1")["command"].remove("--shard-id=s1"),
         "join the shard map"),
        ("a store shard of two members",
         lambda o: find(o, "StatefulSet", "sinew-store-s1")["spec"].__setitem__("replicas", 2),
         "at least three members"),
        ("store members that do not replicate",
         lambda o: container(o, "StatefulSet", "sinew-store-s1")["command"].remove("--replication=sync"),
         "must replicate"),
        ("a shard's members free to share a node",
         lambda o: pod_spec(find(o, "StatefulSet", "sinew-store-s1")).pop("affinity"), "different nodes"),
        ("a store directory that is its volume's mount point",
         lambda o: container(o, "StatefulSet", "sinew-store-s1")["command"].__setitem__(
             1, "--db=/var/lib/sinew/store"), "inside its volume"),
        ("a member advertising its pod IP",
         lambda o: container(o, "StatefulSet", "sinew-store-s1")["command"].__setitem__(
             -1, "--advertise=$(POD_IP):7701"), "stable name"),
        ("etcd without client certificates",
         lambda o: container(o, "StatefulSet", "etcd")["command"].__setitem__(
             2, container(o, "StatefulSet", "etcd")["command"][2].replace("--client-cert-auth", "")),
         "--client-cert-auth"),
        ("a store shard talking to etcd in plain TCP",
         lambda o: container(o, "StatefulSet", "sinew-store-s1")["command"].remove("--etcd-tls-ca=/etc/sinew/tls/ca.crt"),
         "without --etcd-tls"),
        ("readiness elsewhere than /readyz",
         lambda o: container(o, "Deployment", "sinew-harness")["readinessProbe"]["httpGet"].__setitem__("path", "/"),
         "/readyz"),
    ]


def main(argv):
    self_test = "--self-test" in argv
    args = [a for a in argv if a != "--self-test"]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    objects = load(args[0])
    findings = check(objects)
    for f in findings:
        print(f"FINDING {f}")
    if findings:
        return 1
    if not self_test:
        print(f"ok: {len(objects)} objects in {args[0]} pass the schema and the rules")
        return 0
    missed = 0
    for description, mutate, expect in breaks():
        broken = copy.deepcopy(objects)
        mutate(broken)
        found = check(broken)
        if any(expect in f for f in found):
            print(f"caught {description}: {next(f for f in found if expect in f)}")
        else:
            missed += 1
            print(f"MISSED {description}: expected a finding with '{expect}', got {found}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

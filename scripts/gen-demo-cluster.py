#!/usr/bin/env python3
"""Write configs/demo-cluster.yaml: the embedded demo cluster.

A List in the shape `kubectl get nodes,pods -A -o yaml` prints, with one node of
each reference server (api/examples), a node whose topology annotation is
broken, and running pods that hold GPUs, MIG instances and pinned CPUs.
Run it again after changing an example; the output is committed.
"""
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
EX = ROOT / "api" / "examples"
T0 = "2026-11-20T08:00:00Z"


def topo(name):
    return json.loads((EX / name).read_text())


def gpus(t):
    out = []
    for s in t["sockets"]:
        for n in s["numaNodes"]:
            for sw in n.get("pcieSwitches", []):
                out += sw["gpus"]
            out += n.get("gpus", [])
    return sorted(out, key=lambda g: g["index"])


def node(name, annotation, cpu, mem_gi, gpu_count, extra=None):
    cap = {"cpu": str(cpu), "memory": f"{mem_gi}Gi", "pods": "110",
           "nvidia.com/gpu": str(gpu_count)}
    cap.update(extra or {})
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name},
                     "annotations": {"flextopo.io/topology": annotation}},
        "status": {"capacity": cap, "allocatable": dict(cap),
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def pod(name, ns, uid, node_name, priority, cpu, mem, gpus_n=0, mig=None,
        allocation=None, guaranteed=True):
    res = {"cpu": str(cpu), "memory": mem}
    if gpus_n:
        res["nvidia.com/gpu"] = str(gpus_n)
    if mig:
        res[f"nvidia.com/mig-{mig}"] = "1"
    ann = {}
    if allocation:
        ann["flextopo.io/allocation"] = json.dumps(allocation, separators=(",", ":"))
    resources = {"requests": res, "limits": dict(res)} if guaranteed else {"requests": res}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": uid,
                     "creationTimestamp": T0, "annotations": ann},
        "spec": {"nodeName": node_name, "priority": priority,
                 "containers": [{"name": "main", "image": "registry.example/llm:1",
                                 "resources": resources}]},
        "status": {"phase": "Running", "startTime": T0},
    }


def alloc(node_name, level, gpu_list, cpuset, numa, mem_mib, mig=None):
    return {"version": 1, "node": node_name, "level": level, "mode": "guaranteed",
            "gpus": [g["uuid"] for g in gpu_list],
            "gpuIndexes": [g["index"] for g in gpu_list],
            "mig": mig or [], "cpuset": cpuset, "numaNodes": numa,
            "memoryMiB": mem_mib}


def main():
    r = topo("rtx4090-8x.json")
    a = topo("a100-8x.json")
    h = topo("h100-8x-mig.json")
    rg, ag, hg = gpus(r), gpus(a), gpus(h)
    mig0 = hg[0]["mig"]["instances"][0]
    items = [
        node("demo-rtx4090-0", json.dumps(r, separators=(",", ":")), 64, 512, 8),
        node("demo-a100-0", json.dumps(a, separators=(",", ":")), 128, 1024, 8),
        node("demo-h100-0", json.dumps(h, separators=(",", ":")), 112, 2048, 5,
             {"nvidia.com/mig-3g.40gb": "3", "nvidia.com/mig-4g.40gb": "1",
              "nvidia.com/mig-1g.10gb": "7"}),
        node("demo-broken-0", '{"version":1,"sockets":[{"id":0,"numaNodes":[{"id":0,"cpus":"0-x"}]}]}',
             32, 256, 4),
        # Batch jobs scattered over the 4090 box: GPUs 0, 3 and 5 with their NUMA cores.
        pod("batch-0", "batch", "6f1c0b3e-0000-4000-8000-000000000001", "demo-rtx4090-0", 100,
            4, "16Gi", 1, allocation=alloc("demo-rtx4090-0", "numa", [rg[0]], "0-3", [0], 16384)),
        pod("batch-1", "batch", "6f1c0b3e-0000-4000-8000-000000000002", "demo-rtx4090-0", 100,
            4, "16Gi", 1, allocation=alloc("demo-rtx4090-0", "numa", [rg[3]], "24-27", [3], 16384)),
        pod("batch-2", "batch", "6f1c0b3e-0000-4000-8000-000000000003", "demo-rtx4090-0", 100,
            4, "16Gi", 1, allocation=alloc("demo-rtx4090-0", "numa", [rg[5]], "40-43", [5], 16384)),
        # Online inference on the A100: an NVLink pair with 16 cores on NUMA 0.
        pod("chat-0", "online", "6f1c0b3e-0000-4000-8000-000000000004", "demo-a100-0", 1000,
            16, "64Gi", 2, allocation=alloc("demo-a100-0", "nvlink", ag[0:2], "0-15", [0], 65536)),
        # A pod placed without flextopo: one GPU of unknown placement.
        pod("legacy-0", "batch", "6f1c0b3e-0000-4000-8000-000000000005", "demo-a100-0", 0,
            "500m", "4Gi", 1, guaranteed=False),
        # A small model on one 3g.40gb slice of the H100.
        pod("embed-0", "online", "6f1c0b3e-0000-4000-8000-000000000006", "demo-h100-0", 500,
            2, "8Gi", mig="3g.40gb",
            allocation=alloc("demo-h100-0", "nvlink", [], "0-1", [0], 8192,
                             mig=[{"uuid": mig0["uuid"], "profile": mig0["profile"],
                                   "gpu": hg[0]["uuid"], "start": mig0["start"],
                                   "size": mig0["size"]}])),
    ]
    doc = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}
    out = ROOT / "configs" / "demo-cluster.yaml"
    header = ("# The embedded demo cluster: `kubectl get nodes,pods -A -o yaml` format.\n"
              "# Generated by scripts/gen-demo-cluster.py from api/examples; edit that, not this.\n")
    try:
        import yaml  # PyYAML, when present, gives the familiar block style
        body = yaml.safe_dump(doc, sort_keys=False, width=1 << 20)
    except ImportError:
        body = json.dumps(doc, indent=2) + "\n"
    out.write_text(header + body)


if __name__ == "__main__":
    main()

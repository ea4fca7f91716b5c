#!/usr/bin/env python3
"""PyTorch's own nn.Linear on the device against the recorded official projections and psi's.

The recordings were made by torch 2.11 + cuBLAS on an H200; the device machine has the same
torch. For each projection probe of probes_linear.h5 this computes F.linear(x, W, b) with
PyTorch on the GPU (the recording's torch flags: TF32 off, BF16 reduced-precision reductions
allowed) from the recorded x and psi's SynthInit weights, and counts differing BF16 elements
between three results: PyTorch here, the recording, and psi's CUDA dense path
(`psi probe <case> --backend cuda --variant dense --out`). PyTorch here equal to the recording
says the recording is reproducible on this machine; psi equal to PyTorch says psi's cuBLASLt
set-up is PyTorch's. Run with CUBLASLT_LOG_LEVEL / CUBLASLT_LOG_FILE set to see the algorithms
both chose.

usage: device-torch-linear.py PSI REFERENCE_DIR WORK_DIR [BACKEND]
  (writes WORK_DIR/torch-linear.json; BACKEND is psi's, cuda by default: cpu for the dry run on
  a machine without a GPU, where PyTorch, if installed, runs on the CPU and without it only psi is
  compared with the recording)
"""
import json
import os
import subprocess
import sys

import h5py
import numpy as np

try:
    import torch
except ImportError:
    torch = None

CASES = [  # probe case, recording group, recorded output, psi's output
    ("audio-ff-up", "probe_audio_ff_up", "proj_out", "proj_out"),
    ("video-q-proj", "probe_video_q_proj", "q", "q"),
]


def bf16(a):
    """A uint16 array of BF16 bits as a torch bfloat16 tensor (the bits themselves without torch)."""
    a = np.ascontiguousarray(a, dtype=np.uint16)
    return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16) if torch else a


def bits(t):
    return t.contiguous().view(torch.int16).cpu().numpy().view(np.uint16)


def differing(a, b):
    return int(np.count_nonzero(a.reshape(-1) != b.reshape(-1)))


def main():
    psi, ref_dir, work = sys.argv[1:4]
    backend = sys.argv[4] if len(sys.argv) > 4 else "cuda"
    device = "cuda" if backend == "cuda" else "cpu"
    if torch:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
    rows = []
    with h5py.File(os.path.join(ref_dir, "probes_linear.h5"), "r") as rec:
        seed = int(rec.attrs.get("synthinit_global_seed", 0))
        for case, group, rec_name, psi_name in CASES:
            g = rec[group]
            specs = json.loads(bytes(g["weights_json"][()]).decode())
            params = {}
            for s in specs:
                path = os.path.join(work, f"{group}.{s['role']}.h5")
                subprocess.run([psi, "synthinit", s["name"], "--shape", *map(str, s["shape"]), "--seed", str(seed),
                                "--head", "0", "--out", path], check=True, stdout=subprocess.DEVNULL)
                with h5py.File(path, "r") as f:
                    params[s["role"]] = bf16(f["/" + s["name"]][()])
            psi_out = os.path.join(work, f"{group}.psi-{backend}.h5")
            # Exit 1 is psi's "differs from the recording", an answer here, not a failure.
            rc = subprocess.run([psi, "probe", case, "--backend", backend, "--variant", "dense", "--reference",
                                 os.path.join(ref_dir, "probes_linear.h5"), "--out", psi_out],
                                stdout=subprocess.DEVNULL).returncode
            if rc not in (0, 1):
                sys.exit(f"device-torch-linear: psi probe {case} --backend {backend} exited {rc}")
            recorded = np.asarray(g[rec_name][()], dtype=np.uint16)
            with h5py.File(psi_out, "r") as f:
                psi_bits = np.asarray(f[f"/{group}/dense/{psi_name}"][()], dtype=np.uint16)
            row = {"case": case, "elements": int(recorded.size), "psi_backend": backend,
                   "psi_vs_recorded": differing(psi_bits, recorded)}
            if torch:
                x = bf16(g["x"][()]).to(device)
                w = params["linear_weight"].to(device)
                b = params["bias"].to(device) if "bias" in params else None
                ours = bits(torch.nn.functional.linear(x, w, b))
                row.update({"torch_device": device, "torch_vs_recorded": differing(ours, recorded),
                            "psi_vs_torch": differing(psi_bits, ours)})
            rows.append(row)
            print(json.dumps(rows[-1]))
    out = {"torch": torch.__version__ if torch else "not installed",
           "torch_cuda": torch.version.cuda if torch else None,
           "device": torch.cuda.get_device_name(0) if torch and device == "cuda" else device,
           "cublaslt_workspace_env": os.environ.get("CUBLASLT_WORKSPACE_SIZE"), "cases": rows}
    tmp = os.path.join(work, "torch-linear.json.tmp")
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1)
    os.replace(tmp, os.path.join(work, "torch-linear.json"))


if __name__ == "__main__":
    main()
